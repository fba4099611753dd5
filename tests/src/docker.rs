//! A real Docker engine for the container tests: the daemon started when
//! none answers, an offline-built base image, and containers removed when
//! the test is done. No mock engine; no bridge network, no traffic off
//! loopback (`--bridge=none`, containers `--network none` or `host`).

use std::{
    fs::File,
    os::fd::AsRawFd,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// The base image the container tests run (Debian bookworm, minbase).
pub const BASE_IMAGE: &str = "agentsight-test-base:bookworm";

/// How long the daemon may take to answer once started.
const DAEMON_WAIT: Duration = Duration::from_secs(30);

/// True when a Docker daemon answers `docker info`.
fn daemon_answers() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// An exclusive lock on `path` (flock), held until the file is dropped: two
/// tests never start a daemon or build the image twice.
fn lock(path: &str) -> File {
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open lock {path}: {e}"));
    // Safety: flock on an fd we own.
    let r = unsafe { nix::libc::flock(f.as_raw_fd(), nix::libc::LOCK_EX) };
    assert_eq!(r, 0, "flock {path}");
    f
}

/// Starts `dockerd --bridge=none --iptables=false --ip-masq=false` in the
/// background when no daemon answers, and waits (≤ 30 s) until one does.
pub fn ensure_daemon() {
    if daemon_answers() {
        return;
    }
    let _lock = lock("/tmp/agentsight-test-dockerd.lock");
    if daemon_answers() {
        return;
    }
    let log = File::create("/tmp/agentsight-test-dockerd.log").expect("create dockerd log");
    let err = log.try_clone().expect("dup dockerd log");
    // The daemon outlives this test (later tests and runs reuse it), so it
    // is never waited for here.
    #[allow(clippy::zombie_processes)]
    let _daemon = Command::new("dockerd")
        .args(["--bridge=none", "--iptables=false", "--ip-masq=false"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .expect("start dockerd (cargo xtask setup installs docker.io)");
    let start = Instant::now();
    while !daemon_answers() {
        assert!(
            start.elapsed() < DAEMON_WAIT,
            "dockerd did not answer within 30 s (see /tmp/agentsight-test-dockerd.log)"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// True when the image exists locally.
fn image_exists(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", image])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Builds [`BASE_IMAGE`] when missing: `debootstrap --variant=minbase
/// bookworm` into a directory, then `docker import` (no registry is
/// contacted; cached by its tag).
pub fn ensure_base_image() {
    ensure_daemon();
    if image_exists(BASE_IMAGE) {
        return;
    }
    let _lock = lock("/tmp/agentsight-test-base-image.lock");
    if image_exists(BASE_IMAGE) {
        return;
    }
    let root = Path::new("/tmp/agentsight-test-base-rootfs");
    let _ = std::fs::remove_dir_all(root);
    let out = Command::new("debootstrap")
        .args(["--variant=minbase", "bookworm"])
        .arg(root)
        .stdin(Stdio::null())
        .output()
        .expect("run debootstrap (cargo xtask setup installs it)");
    assert!(
        out.status.success(),
        "debootstrap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let import = format!(
        "tar -C {} -c . | docker import - {BASE_IMAGE}",
        root.display()
    );
    let out = Command::new("sh")
        .args(["-c", &import])
        .output()
        .expect("run docker import");
    assert!(
        out.status.success(),
        "docker import failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(root);
}

/// An unprivileged user in the `docker` group (created once): what a
/// developer who drives Docker is, so `record --user` can run a `docker
/// exec` command as someone other than root. (Driving the daemon is root's
/// power all the same: docs/containers.md.)
pub const DOCKER_USER: &str = "agentsight-docker";

/// Creates [`DOCKER_USER`] when missing; returns its name.
pub fn docker_user() -> &'static str {
    let exists = |u: &str| nix::unistd::User::from_name(u).ok().flatten().is_some();
    if !exists(DOCKER_USER) {
        let out = Command::new("useradd")
            .args(["--create-home", "--shell", "/bin/sh", "--groups", "docker"])
            .arg(DOCKER_USER)
            .output()
            .expect("run useradd");
        assert!(
            out.status.success() || String::from_utf8_lossy(&out.stderr).contains("already exists"),
            "useradd {DOCKER_USER}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    DOCKER_USER
}

/// A running container, removed (`docker rm -f`) when dropped.
pub struct Container {
    pub name: String,
    /// The full id `docker run -d` printed.
    pub id: String,
}

impl Container {
    /// `docker run -d --network none --name NAME ARGS…` (ARGS: options,
    /// the image and its command).
    pub fn run(name: &str, args: &[&str]) -> Self {
        Self::run_on("none", name, args)
    }

    /// [`Container::run`] on `network`: `none`, or `host` (the host's
    /// network namespace, so only its loopback: the daemon has no bridge).
    pub fn run_on(network: &str, name: &str, args: &[&str]) -> Self {
        ensure_daemon();
        // A container left behind by an interrupted run of the same test.
        let _ = docker(&["rm", "-f", name]);
        let out = Command::new("docker")
            .args(["run", "-d", "--network", network, "--name", name])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run docker run");
        assert!(
            out.status.success(),
            "docker run {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Self {
            name: name.to_owned(),
            id,
        }
    }

    /// `docker exec NAME ARGS…`; its output.
    pub fn exec(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .arg("exec")
            .arg(&self.name)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run docker exec")
    }

    /// `docker inspect -f FORMAT NAME`, trimmed.
    pub fn inspect(&self, format: &str) -> String {
        let out = docker(&["inspect", "-f", format, &self.name]);
        assert!(
            out.status.success(),
            "docker inspect {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// Waits (≤ 15 s, polling every 50 ms) until the recorder writing `db`
/// has stored a process row for `pid` (the container's init, seeded from
/// /proc): its programs are attached by then.
pub fn wait_seeded(db: &Path, pid: u32) {
    let start = Instant::now();
    loop {
        let seeded =
            rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .and_then(|c| {
                    c.query_row(
                        "SELECT COUNT(*) FROM processes WHERE pid = ?1",
                        [pid],
                        |r| r.get::<_, i64>(0),
                    )
                })
                .unwrap_or(0);
        if seeded > 0 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the recorder did not seed pid {pid}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.name]);
    }
}

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run docker")
}
