//! Helpers for agentsight's end-to-end tests: find the binary, make sure we
//! are root, create the unprivileged test user, run `record`, read captures.

pub mod codex_container;
pub mod docker;
pub mod e2e;
pub mod e2e_check;
pub mod e2e_mcp;
pub mod files_net;
pub mod messaging;
pub mod process_tree;
pub mod python;

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

/// The agentsight binary under test: `AGENTSIGHT_BIN`, else the workspace's
/// release then debug build.
pub fn bin() -> PathBuf {
    if let Some(p) = std::env::var_os("AGENTSIGHT_BIN") {
        return PathBuf::from(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for profile in ["release", "debug"] {
        let p = root.join("target").join(profile).join("agentsight");
        if p.exists() {
            return p;
        }
    }
    panic!("agentsight binary not built: run `cargo xtask test` (or set AGENTSIGHT_BIN)");
}

/// Capture tests load real kernel programs: they need root. They fail (not
/// skip) otherwise, so a run that could not test the kernel is never green.
pub fn require_root() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the capture tests load kernel programs and must run as root (sudo cargo xtask test)"
    );
}

pub const TEST_USER: &str = "agentsight-test";

/// Creates (once) an unprivileged user for running recorded commands, with a
/// home directory. Returns (uid, gid).
pub fn test_user() -> (u32, u32) {
    // One creator at a time, across test threads and processes: a test
    // that found the user half made (no home yet) failed on a fresh machine.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/run/agentsight-test-user.lock")
        .expect("open the test user's lock");
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("lock the test user's lock");
    if nix::unistd::User::from_name(TEST_USER)
        .ok()
        .flatten()
        .is_none()
    {
        let out = Command::new("useradd")
            .args(["--create-home", "--shell", "/bin/sh", TEST_USER])
            .output()
            .expect("run useradd");
        // Another test may have created it concurrently.
        assert!(
            out.status.success() || String::from_utf8_lossy(&out.stderr).contains("already exists"),
            "useradd failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let u = nix::unistd::User::from_name(TEST_USER)
        .expect("lookup test user")
        .expect("test user exists");
    repair_home(&u);
    (u.uid.as_raw(), u.gid.as_raw())
}

/// A test user that was deleted and re-created (another uid) finds its old
/// home still owned by the old uid, and every test that writes there fails
/// with "Permission denied". The home is ours to fix: it is given back to
/// the user (once per test process); a home outside /home is refused.
fn repair_home(u: &nix::unistd::User) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use std::os::unix::fs::MetadataExt;
        let home = &u.dir;
        assert!(
            home.parent() == Some(Path::new("/home")),
            "the test user {TEST_USER} has the home {}, not /home/{TEST_USER}: remove the user (userdel {TEST_USER}) and run again",
            home.display()
        );
        let uid = u.uid.as_raw();
        match std::fs::symlink_metadata(home) {
            Ok(m) if m.is_dir() && m.uid() == uid => return,
            Ok(m) if !m.is_dir() => panic!(
                "the test user's home {} is not a directory: remove it and run again",
                home.display()
            ),
            Ok(_) => {}
            Err(_) => std::fs::create_dir_all(home).expect("create the test user's home"),
        }
        let owner = format!("{}:{}", uid, u.gid.as_raw());
        let st = Command::new("chown")
            .args(["-R", "--no-dereference", &owner])
            .arg(home)
            .status()
            .expect("run chown");
        assert!(st.success(), "chown -R {owner} {} failed", home.display());
    });
}

/// A scratch directory readable and writable by the test user.
pub fn scratch(name: &str) -> PathBuf {
    let (uid, gid) = test_user();
    let dir = std::env::temp_dir().join(format!("agentsight-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    nix::unistd::chown(&dir, Some(uid.into()), Some(gid.into())).expect("chown scratch");
    dir
}

/// Runs `agentsight record` as if invoked through sudo by the test user.
pub fn record(db: &Path, extra: &[&str], command: &[&str]) -> Output {
    record_env(db, extra, command, &[])
}

/// [`record`] with extra environment variables (the command inherits them).
pub fn record_env(db: &Path, extra: &[&str], command: &[&str], env: &[(&str, &str)]) -> Output {
    let (uid, gid) = test_user();
    Command::new(bin())
        .envs(env.iter().copied())
        .arg("record")
        .arg("--quiet")
        .arg("-o")
        .arg(db)
        .args(extra)
        .arg("--")
        .args(command)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .current_dir(db.parent().filter(|p| p.is_dir()).unwrap_or(Path::new("/")))
        .output()
        .expect("run agentsight record")
}

/// Asserts that a command exited 0, showing its stderr otherwise.
#[track_caller]
/// `agentsight export --db DB --format otlp-json -o OUT EXTRA…` (exit 0
/// asserted); the file's bytes.
pub fn export_otlp_json(db: &Path, out: &Path, extra: &[&str]) -> Vec<u8> {
    export_as(db, "otlp-json", out, extra)
}

#[track_caller]
/// `agentsight export --db DB --format FORMAT -o OUT EXTRA…` (exit 0
/// asserted); the file's bytes.
pub fn export_as(db: &Path, format: &str, out: &Path, extra: &[&str]) -> Vec<u8> {
    let _ = std::fs::remove_file(out);
    let o = Command::new(bin())
        .args(["export", "--db"])
        .arg(db)
        .args(["--format", format, "-o"])
        .arg(out)
        .args(extra)
        .output()
        .expect("run agentsight export");
    assert_exit_0(&o);
    std::fs::read(out).expect("read the export")
}

#[track_caller]
/// `agentsight report --db DB -o PAGE` (exit 0 asserted); the page.
pub fn report_html(db: &Path, page: &Path) -> String {
    let o = Command::new(bin())
        .args(["report", "--db"])
        .arg(db)
        .arg("-o")
        .arg(page)
        .output()
        .expect("run agentsight report");
    assert_exit_0(&o);
    std::fs::read_to_string(page).expect("read the report")
}

pub fn assert_exit_0(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn open(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open capture")
}

/// One row of the processes table, as the tests look at it.
#[derive(Debug, Clone)]
pub struct ProcRow {
    pub id: i64,
    pub pid: i64,
    pub parent_id: Option<i64>,
    pub origin: String,
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub exec_count: i64,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub uid: Option<i64>,
}

pub fn processes(conn: &rusqlite::Connection) -> Vec<ProcRow> {
    let mut st = conn
        .prepare("SELECT id, pid, parent_id, origin, argv, cwd, exec_count, exit_code, signal, uid FROM processes ORDER BY id")
        .expect("prepare");
    st.query_map([], |r| {
        let argv: Option<String> = r.get(4)?;
        Ok(ProcRow {
            id: r.get(0)?,
            pid: r.get(1)?,
            parent_id: r.get(2)?,
            origin: r.get(3)?,
            argv: argv
                .map(|a| serde_json::from_str(&a).expect("argv json"))
                .unwrap_or_default(),
            cwd: r.get(5)?,
            exec_count: r.get(6)?,
            exit_code: r.get(7)?,
            signal: r.get(8)?,
            uid: r.get(9)?,
        })
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

/// One exec event (successful or failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRow {
    pub kind: String,
    pub pid: i64,
    pub ppid: i64,
    pub uid: i64,
    pub process_id: i64,
    pub argv: Vec<String>,
    pub argc: Option<i64>,
    pub argv_truncated: bool,
    pub argv_incomplete: bool,
    pub filename: String,
    pub cwd: String,
    pub cwd_status: String,
    pub exe: Option<String>,
    pub errno: Option<String>,
}

pub fn execs(conn: &rusqlite::Connection) -> Vec<ExecRow> {
    let mut st = conn
        .prepare(
            "SELECT kind, pid, ppid, uid, process_id, argv, argc, argv_truncated, filename, cwd, cwd_status, exe, errno,
                    argv_incomplete
             FROM events WHERE kind IN ('exec', 'exec_failed') ORDER BY mono_ns",
        )
        .expect("prepare");
    st.query_map([], |r| {
        let argv: String = r.get(5)?;
        Ok(ExecRow {
            kind: r.get(0)?,
            pid: r.get(1)?,
            ppid: r.get(2)?,
            uid: r.get(3)?,
            process_id: r.get(4)?,
            argv: serde_json::from_str(&argv).expect("argv json"),
            argc: r.get(6)?,
            argv_truncated: r.get::<_, Option<bool>>(7)?.unwrap_or(false),
            argv_incomplete: r.get::<_, Option<bool>>(13)?.unwrap_or(false),
            filename: r.get(8)?,
            cwd: r.get(9)?,
            cwd_status: r.get(10)?,
            exe: r.get(11)?,
            errno: r.get(12)?,
        })
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

pub fn meta(conn: &rusqlite::Connection, key: &str) -> Option<String> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .ok()
}

/// Strings as owned argv.
pub fn sv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Builds a static program in `dir` that makes `n` failed opens of `n`
/// distinct paths (`/nonexistent-agentsight/f0`, `f1`, …): nothing folds
/// them, so the ground truth is exactly `n` stored-or-counted events.
pub fn static_distinct_open_flood(dir: &Path, n: u64) -> PathBuf {
    static_program(
        dir,
        "distinct",
        &format!(
            "#include <fcntl.h>\n#include <stdio.h>\nint main(void) {{ char p[64]; for (long i = 0; i < {n}; i++) {{ snprintf(p, sizeof p, \"/nonexistent-agentsight/f%ld\", i); openat(AT_FDCWD, p, O_RDONLY); }} return 0; }}\n"
        ),
    )
}

/// Builds a static program in `dir` that makes `n` failed
/// `openat(AT_FDCWD, path, O_RDONLY)` calls and exits 0. Static linking means
/// no dynamic loader: the flood is the program's only hooked syscall, so its
/// ground truth is exactly `n` events.
pub fn static_open_flood(dir: &Path, n: u64, path: &str) -> PathBuf {
    static_program(
        dir,
        "flood",
        &format!(
            "#include <fcntl.h>\nint main(void) {{ for (long i = 0; i < {n}; i++) openat(AT_FDCWD, \"{path}\", O_RDONLY); return 0; }}\n"
        ),
    )
}

/// Compiles C source `src` into a static binary `dir/name`.
fn static_program(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).expect("write the C source");
    let bin = dir.join(name);
    let cc = Command::new("gcc")
        .args(["-O2", "-static", "-o"])
        .arg(&bin)
        .arg(&c)
        .status()
        .expect("run gcc");
    assert!(cc.success(), "gcc -static failed");
    bin
}

/// Lets the test user run exactly the binary under test through sudo,
/// without a password, for the life of the returned guard.
pub struct SudoRule(std::path::PathBuf);

impl SudoRule {
    pub fn install() -> Self {
        assert!(
            Path::new("/usr/bin/sudo").exists(),
            "sudo is not installed: run `cargo xtask setup`"
        );
        let bin = std::fs::canonicalize(bin()).unwrap();
        let path = std::path::PathBuf::from(format!(
            "/etc/sudoers.d/agentsight-test-{}",
            std::process::id()
        ));
        std::fs::write(
            &path,
            format!("{TEST_USER} ALL=(root) NOPASSWD: {}\n", bin.display()),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o440)).unwrap();
        SudoRule(path)
    }
}

impl Drop for SudoRule {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `sudo -n agentsight ARGS` typed by the test user in `cwd`.
pub fn real_sudo(cwd: &Path, args: &[&str]) -> Output {
    let bin = std::fs::canonicalize(bin()).unwrap();
    Command::new("runuser")
        .args(["-u", TEST_USER, "--", "sudo", "-n"])
        .arg(bin)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}
