//! Capture truth in `record --container` mode, on a real Docker engine: the
//! host suites' workloads of known ground truth run inside a container —
//! the process tree (`workloads/tree.sh`) as the container's init, the file
//! and network workload (`workloads/files_net.py`) and the kernel-paths
//! tricks (`workloads/kernel_paths.py`) in `docker exec`s started after
//! recording began — and their captures pass the host
//! suites' own checks (`agentsight_tests::process_tree`,
//! `agentsight_tests::files_net`), with every path as the container sees
//! it (the scratch directory is mounted at `/t`), the container on every
//! row, and a host process busy at the same time absent.
//!
//! The container shares the host's network namespace (`--network host`),
//! so the workload's loopback connects reach the listeners the test owns;
//! its Python is the host's (same Debian release), mounted read-only.

use std::{
    path::Path,
    process::{Command, Stdio},
};

use agentsight_tests::{
    docker::{BASE_IMAGE, Container, ensure_base_image, wait_seeded},
    files_net::{
        Setup, Unmount, assert_locked_open_denied, assert_network_matches,
        assert_tricks_name_kernel_files, assert_writes_aggregated, expected_sub_rows,
        make_path_tricks, rows, setup,
    },
    process_tree::{Tree, check_tree},
    *,
};

/// Where the container sees the test's scratch directory.
const SEEN_AT: &str = "/t";

/// The container's init: waits until the test says go (a FIFO: no exec
/// while it waits), then becomes the tree workload.
fn init_script() -> String {
    format!("read go < {SEEN_AT}/go; exec /bin/sh {SEEN_AT}/tree.sh {SEEN_AT}/work")
}

/// The host's Python, mounted read-only where the workloads call it.
fn python_mounts() -> Vec<String> {
    let real = |p: &str| std::fs::canonicalize(p).unwrap().display().to_string();
    vec![
        format!("{}:/usr/bin/python3:ro", real("/usr/bin/python3")),
        "/usr/lib/python3.11:/usr/lib/python3.11:ro".into(),
        format!(
            "{}:/usr/lib/x86_64-linux-gnu/libexpat.so.1:ro",
            real("/lib/x86_64-linux-gnu/libexpat.so.1")
        ),
    ]
}

/// Adds the tree workload beside the file workload's scratch files:
/// `tree.sh`, `work/sub` (the test user's) and the init's FIFO.
fn add_the_tree_workload(s: &Setup) {
    let (uid, gid) = test_user();
    let work = s.dir.join("work");
    std::fs::create_dir_all(work.join("sub")).unwrap();
    for p in [&work, &work.join("sub")] {
        nix::unistd::chown(p.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/tree.sh"),
        s.dir.join("tree.sh"),
    )
    .unwrap();
    let fifo = s.dir.join("go");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    nix::unistd::chown(&fifo, Some(uid.into()), Some(gid.into())).unwrap();
}

/// Adds the kernel-paths workload in `kp/` (its path tricks, the bind
/// mount included, made before the container starts so its mount
/// namespace gets them); the guard unmounts.
fn add_the_kernel_paths_workload(s: &Setup) -> Unmount {
    let (uid, gid) = test_user();
    let kp = s.dir.join("kp");
    std::fs::create_dir(&kp).unwrap();
    nix::unistd::chown(&kp, Some(uid.into()), Some(gid.into())).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/kernel_paths.py"),
        kp.join("kernel_paths.py"),
    )
    .unwrap();
    make_path_tricks(&kp)
}

/// Starts the container as the test user, the scratch directory at `/t`.
fn start_the_container(s: &Setup, name: &str) -> Container {
    let (uid, gid) = test_user();
    let user = format!("{uid}:{gid}");
    let scratch = format!("{}:{SEEN_AT}", s.dir.display());
    let mounts = python_mounts();
    let init = init_script();
    let mut args: Vec<&str> = vec!["--user", &user, "-w", SEEN_AT, "-v", &scratch];
    for m in &mounts {
        args.extend(["-v", m]);
    }
    args.extend([BASE_IMAGE, "sh", "-c", &init]);
    Container::run_on("host", name, &args)
}

/// A host process busy exec'ing and writing a host file the whole time.
fn start_a_host_loop(s: &Setup) -> std::process::Child {
    Command::new("/bin/sh")
        .args([
            "-c",
            &format!(
                "while :; do /bin/echo outside-marker > {}/host.txt; /bin/sleep 0.05; done",
                s.dir.display()
            ),
        ])
        .spawn()
        .unwrap()
}

/// Records the container: once its init is seeded, the file workload runs
/// by `docker exec`, then the init is told to go; the recording ends by
/// itself when the container stops.
fn record_the_container(s: &Setup, c: &Container, db: &Path) {
    let rec = Command::new(bin())
        .args(["record", "--quiet", "--duration", "60s", "-o"])
        .arg(db)
        .args(["--container", &c.name])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let init_pid: u32 = c.inspect("{{.State.Pid}}").parse().unwrap();
    wait_seeded(db, init_pid);
    let (uid, gid) = test_user();
    let out = Command::new("docker")
        .args(["exec", "--user", &format!("{uid}:{gid}"), "-w", SEEN_AT])
        .arg(&c.name)
        .args(s.args_seen_at(SEEN_AT))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit_0(&out);
    // The workload prints the refused connect's result.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "111\n");
    let out = Command::new("docker")
        .args(["exec", "--user", &format!("{uid}:{gid}"), "-w", SEEN_AT])
        .arg(&c.name)
        .args([
            "/usr/bin/python3",
            &format!("{SEEN_AT}/kp/kernel_paths.py"),
            &format!("{SEEN_AT}/kp"),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit_0(&out);
    std::fs::write(s.dir.join("go"), "go\n").unwrap();
    let out = rec.wait_with_output().unwrap();
    assert_exit_0(&out);
}

/// Every process and every event is the container's.
fn check_every_row_is_the_containers(conn: &rusqlite::Connection, c: &Container) {
    assert_eq!(meta(conn, "complete").as_deref(), Some("true"));
    assert_eq!(
        meta(conn, "end_reason").as_deref(),
        Some("every container stopped")
    );
    let others: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM processes
             WHERE container_id IS NOT ?1 OR container_name IS NOT ?2 OR container_image IS NOT ?3",
            [&c.id, &c.name, BASE_IMAGE],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(others, 0, "process rows without the container");
    let (events, theirs): (i64, i64) = conn
        .query_row(
            "SELECT COUNT(*), COUNT(p.container_id) FROM events e
             JOIN processes p ON p.id = e.process_id WHERE p.container_id = ?1",
            [&c.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let all: i64 = conn
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert!(events > 0);
    assert_eq!((events, theirs), (all, all), "events outside the container");
}

/// The file workload's rows, its paths as the container sees them.
fn check_the_file_and_network_truth(conn: &rusqlite::Connection, s: &Setup) {
    let sub = format!("{SEEN_AT}/sub");
    assert_eq!(rows(conn, &sub), expected_sub_rows(&sub));
    assert_locked_open_denied(conn, SEEN_AT);
    assert_writes_aggregated(conn, &sub);
    assert_network_matches(conn, s, &format!("{SEEN_AT}/agent.sock"));
    // Nothing under the host's own path of the scratch directory: the host
    // loop's writes are not there, and the container's are not renamed.
    let host_paths: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM events WHERE path LIKE ?1 || '%' OR real_path LIKE ?1 || '%'",
            [s.dir.display().to_string()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(host_paths, 0);
    // The file the kernel opened is named as the container sees it too:
    // its dentry walk stops at the process's root, not the host's.
    let opened: Vec<(String, Option<String>, Option<String>)> = conn
        .prepare(
            "SELECT path, real_path, real_path_status FROM events
             WHERE kind = 'openat' AND result >= 0 AND path LIKE ?1 || '/sub%' ORDER BY mono_ns",
        )
        .unwrap()
        .query_map([SEEN_AT], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let sub = format!("{SEEN_AT}/sub");
    let complete = |p: &str| {
        (
            p.to_owned(),
            Some(p.to_owned()),
            Some("complete".to_owned()),
        )
    };
    assert_eq!(
        opened,
        vec![
            complete(&format!("{sub}/rel.txt")),
            complete(&sub),
            complete(&format!("{sub}/viadirfd.txt")),
        ]
    );
    // The workload's own exec: the `docker exec` process, as the container
    // sees its argv and cwd.
    let exec = execs(conn)
        .into_iter()
        .find(|e| e.argv.get(1).is_some_and(|a| a.ends_with("files_net.py")))
        .expect("the docker exec's exec");
    assert_eq!(exec.argv, s.args_seen_at(SEEN_AT));
    assert_eq!(exec.cwd, SEEN_AT);
}

#[test]
fn container_capture_passes_the_host_capture_truth() {
    require_root();
    ensure_base_image();
    let s = setup("ctruth");
    add_the_tree_workload(&s);
    let unmount = add_the_kernel_paths_workload(&s);
    let name = format!("agentsight-test-truth-{}", std::process::id());
    let c = start_the_container(&s, &name);
    let mut host = start_a_host_loop(&s);
    let db = s.dir.join("truth.db");
    record_the_container(&s, &c, &db);
    let _ = host.kill();
    let _ = host.wait();

    let conn = open(&db);
    check_every_row_is_the_containers(&conn, &c);
    check_the_file_and_network_truth(&conn, &s);
    assert_tricks_name_kernel_files(&conn, &s.dir.join("kp"), &format!("{SEEN_AT}/kp"));
    let (uid, _) = test_user();
    check_tree(
        &conn,
        &Tree {
            root_argv: sv(&[
                "/bin/sh",
                &format!("{SEEN_AT}/tree.sh"),
                &format!("{SEEN_AT}/work"),
            ]),
            root_cwd: SEEN_AT.to_owned(),
            work: format!("{SEEN_AT}/work"),
            uid,
            outside_pid: i64::from(host.id()),
        },
    );
    drop(conn);
    drop(c);
    drop(unmount);
    let _ = std::fs::remove_dir_all(&s.dir);
}
