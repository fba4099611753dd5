//! Root tests: a capture that was not closed cleanly is read through a
//! private copy (issue 26, point 1). The attack: while the test user reads
//! their own `0600` capture, a second local user polls the temp dir for the
//! copy. They must get nothing, and no copy may outlive the reader — on a
//! normal exit, on SIGINT during the copy, or (swept by the next read) on
//! SIGKILL.

use std::{
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use agentsight_tests::*;

/// A second local user, who must never read the test user's capture.
const OTHER_USER: &str = "nobody";

/// A capture of the test user's, left as a killed recorder leaves it, with a
/// WAL large enough (~192 MiB of committed frames) that copying it takes a
/// while: the window the attacker aims at.
fn big_unclean_capture(dir: &Path) -> PathBuf {
    let db = dir.join("k.db");
    assert_exit_0(&record(&db, &[], &["/bin/sh", "-c", "/bin/echo hi"]));
    let py = "import sqlite3, os, sys\n\
c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
c.execute('PRAGMA journal_mode=WAL')\n\
c.execute('PRAGMA wal_autocheckpoint=0')\n\
c.execute('BEGIN')\n\
c.execute('CREATE TABLE padding (b BLOB)')\n\
for i in range(48):\n    c.execute('INSERT INTO padding VALUES (randomblob(4194304))')\n\
c.execute('COMMIT')\n\
os._exit(0)\n";
    let st = Command::new("/usr/bin/python3")
        .args(["-c", py])
        .arg(&db)
        .status()
        .unwrap();
    assert!(st.success());
    let (uid, gid) = test_user();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        nix::unistd::chown(Path::new(&p), Some(uid.into()), Some(gid.into())).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 150 << 20);
    db
}

/// `agentsight show --db DB` as the test user through sudo, with `TMPDIR`
/// (and optionally `XDG_RUNTIME_DIR`) set.
fn show(db: &Path, tmp: &Path, runtime: Option<&Path>) -> Child {
    let (uid, gid) = test_user();
    let mut c = Command::new(bin());
    c.args(["show", "--db"])
        .arg(db)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .env("TMPDIR", tmp)
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(r) = runtime {
        c.env("XDG_RUNTIME_DIR", r);
    }
    c.spawn().unwrap()
}

fn copies_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("agentsight-read-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every mode seen in copies under `dir` until `stop`: (directory or file
/// name, mode, owner uid).
fn watch_modes(
    dir: PathBuf,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(String, u32, u32)>> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            for d in copies_in(&dir) {
                if let Ok(m) = std::fs::symlink_metadata(&d) {
                    seen.push(("dir".to_string(), m.mode() & 0o7777, m.uid()));
                }
                for f in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                    if let Ok(m) = f.metadata() {
                        seen.push((
                            f.file_name().to_string_lossy().into_owned(),
                            m.mode() & 0o7777,
                            m.uid(),
                        ));
                    }
                }
            }
        }
        seen
    })
}

/// The second user polling `dir` for the copy, as the issue's attacker did:
/// prints how many bytes of any `agentsight-read-*` file it managed to read
/// and how many of those directories it saw.
fn attacker(dir: &Path, seconds: u32) -> Child {
    let py = r#"
import os, sys, time
d, end = sys.argv[1], time.time() + float(sys.argv[2])
got = seen = 0
while time.time() < end:
    for n in os.listdir(d):
        if not n.startswith('agentsight-read-'):
            continue
        seen += 1
        p = os.path.join(d, n)
        for f in ('capture.db', 'capture.db-wal', 'capture.db-shm'):
            try:
                with open(os.path.join(p, f), 'rb') as h:
                    got += len(h.read(65536))
            except OSError:
                pass
print(got, seen)
"#;
    Command::new("runuser")
        .args(["-u", OTHER_USER, "--", "/usr/bin/python3", "-c", py])
        .arg(dir)
        .arg(seconds.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for_copy(dir: &Path, limit: Duration) -> PathBuf {
    let t = Instant::now();
    loop {
        if let Some(p) = copies_in(dir).into_iter().next() {
            return p;
        }
        assert!(t.elapsed() < limit, "no private copy appeared in {dir:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A world-writable sticky directory, like /tmp, of this test's own.
fn shared_tmp(name: &str) -> PathBuf {
    let d = scratch(name);
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    d
}

#[test]
fn another_user_polling_tmp_gets_nothing_of_a_capture_being_read() {
    require_root();
    let dir = scratch("privread");
    let db = big_unclean_capture(&dir);
    let tmp = shared_tmp("privread-tmp");
    let stop = Arc::new(AtomicBool::new(false));
    let modes = watch_modes(tmp.clone(), stop.clone());
    let spy = attacker(&tmp, 12);
    // Several reads while the attacker polls.
    for _ in 0..3 {
        let out = show(&db, &tmp, None).wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(err.contains("was not closed cleanly"), "{err}");
        assert!(copies_in(&tmp).is_empty(), "a copy outlived its reader");
    }
    let spied = spy.wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    let seen = modes.join().unwrap();
    let report = String::from_utf8_lossy(&spied.stdout);
    let mut fields = report.split_whitespace();
    let got: u64 = fields
        .next()
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "the poller failed: {}",
                String::from_utf8_lossy(&spied.stderr)
            )
        });
    assert_eq!(got, 0, "the other user read {got} bytes of the capture");
    let spotted: u64 = fields.next().and_then(|f| f.parse().ok()).unwrap_or(0);
    assert!(
        spotted > 0,
        "the poller never saw a copy: the test missed the window"
    );
    // The copies were seen while they existed (the test aimed at the
    // window) and were always private.
    let (uid, _) = test_user();
    assert!(seen.iter().any(|(n, _, _)| n == "dir"), "{seen:?}");
    for (name, mode, owner) in &seen {
        let want = if name == "dir" { 0o700 } else { 0o600 };
        assert_eq!((*mode, *owner), (want, uid), "{name}: {mode:o} uid {owner}");
    }
    assert!(copies_in(&tmp).is_empty());
}

#[test]
fn the_copy_is_made_in_the_users_runtime_dir_when_it_is_private() {
    require_root();
    let dir = scratch("privread-rt");
    let db = big_unclean_capture(&dir);
    let tmp = shared_tmp("privread-rt-tmp");
    let runtime = scratch("privread-rt-run");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let child = show(&db, &tmp, Some(&runtime));
    wait_for_copy(&runtime, Duration::from_secs(20));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(copies_in(&tmp).is_empty());
    assert!(copies_in(&runtime).is_empty());
    // A runtime dir others may enter is not used.
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let child = show(&db, &tmp, Some(&runtime));
    wait_for_copy(&tmp, Duration::from_secs(20));
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(0));
    assert!(copies_in(&runtime).is_empty());
}

#[test]
fn sigint_during_the_copy_leaves_nothing_and_sigkill_leftovers_are_swept() {
    require_root();
    let dir = scratch("privread-sig");
    let db = big_unclean_capture(&dir);
    let tmp = shared_tmp("privread-sig-tmp");
    // SIGINT and SIGTERM while copying: the reader stops, nothing is left.
    for sig in [nix::sys::signal::SIGINT, nix::sys::signal::SIGTERM] {
        let child = show(&db, &tmp, None);
        wait_for_copy(&tmp, Duration::from_secs(20));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        let out = child.wait_with_output().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(sig as i32), "{sig}");
        assert!(copies_in(&tmp).is_empty(), "{sig} left a copy");
    }
    // SIGKILL cannot be caught: the copy stays, private, until the next
    // read of that user removes it.
    let child = show(&db, &tmp, None);
    let left = wait_for_copy(&tmp, Duration::from_secs(20));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::SIGKILL,
    )
    .unwrap();
    child.wait_with_output().unwrap();
    let m = std::fs::symlink_metadata(&left).unwrap();
    assert_eq!(m.mode() & 0o777, 0o700);
    let out = show(&db, &tmp, None).wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(!left.exists(), "the killed reader's copy was not swept");
    assert!(copies_in(&tmp).is_empty());
}

// ---- point 2: a policy is read with the caller's rights (real sudo) ----

/// A root-only directory holding a policy whose values and key names are
/// secret.
fn root_only_policy(dir: &Path) -> PathBuf {
    let ro = dir.join("root-only");
    std::fs::create_dir(&ro).unwrap();
    let p = ro.join("policy.toml");
    std::fs::write(&p, "TOPSECRET_KEY_17 = \"TOPSECRET-VALUE-42\"\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o700)).unwrap();
    p
}

#[test]
fn sudo_record_reads_the_policy_with_the_callers_rights_and_bounded() {
    require_root();
    let _rule = SudoRule::install();
    let dir = scratch("policyread");
    let db = dir.join("p.db");
    let db_arg = db.to_str().unwrap();
    let secret = root_only_policy(&dir);
    // A root-only file: refused as the caller would be, nothing of it shown.
    let out = real_sudo(
        &dir,
        &[
            "record",
            "-q",
            "-o",
            db_arg,
            "--audit",
            secret.to_str().unwrap(),
            "--",
            "/bin/true",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert!(!err.contains("TOPSECRET"), "{err}");
    assert!(
        !db.exists(),
        "a capture was made before the policy was read"
    );
    // A FIFO fails at once (root would hang forever on it), and so do a
    // device, a link and a file over the bound.
    let fifo = dir.join("policy.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    let link = dir.join("policy-link.toml");
    std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
    let big = dir.join("big.toml");
    std::fs::write(&big, format!("# {}\n", "x".repeat(1024 * 1024))).unwrap();
    let (uid, gid) = test_user();
    nix::unistd::chown(&big, Some(uid.into()), Some(gid.into())).unwrap();
    for (policy, says) in [
        (fifo.to_str().unwrap(), "is a FIFO, not a regular file"),
        ("/dev/zero", "is a character device, not a regular file"),
        (link.to_str().unwrap(), "is a symbolic link"),
        (
            big.to_str().unwrap(),
            "larger than 1024 KiB, the most a policy may be",
        ),
    ] {
        let t = Instant::now();
        let out = real_sudo(
            &dir,
            &[
                "record",
                "-q",
                "-o",
                db_arg,
                "--audit",
                policy,
                "--",
                "/bin/true",
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{policy}: took {:?}",
            t.elapsed()
        );
        assert_eq!(out.status.code(), Some(2), "{policy}: {err}");
        assert!(err.contains(says), "{policy}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{policy}: {err}");
        assert!(!db.exists());
    }
    // The same for the read commands that take a policy, and for the
    // caller's own readable policy everything works.
    let own = dir.join("own.toml");
    std::fs::write(&own, "").unwrap();
    nix::unistd::chown(&own, Some(uid.into()), Some(gid.into())).unwrap();
    let out = real_sudo(
        &dir,
        &[
            "record",
            "-q",
            "-o",
            db_arg,
            "--audit",
            own.to_str().unwrap(),
            "--",
            "/bin/true",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = dir.join("r.html");
    for args in [
        vec![
            "audit",
            "--db",
            db_arg,
            "--policy",
            secret.to_str().unwrap(),
        ],
        vec![
            "report",
            "--db",
            db_arg,
            "-o",
            html.to_str().unwrap(),
            "--policy",
            secret.to_str().unwrap(),
        ],
    ] {
        let out = real_sudo(&dir, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("Permission denied") && !err.contains("TOPSECRET"),
            "{args:?}: {err}"
        );
    }
}
