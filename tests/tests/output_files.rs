//! Root tests of the files agentsight writes (issue 26): output files are
//! replaced, never written in place or through a link (items 8); a full
//! disk during `record` is said and fails the exit status (10); a failed
//! start leaves nothing behind (11). Each runs the real binary as root with
//! the variables sudo sets for the unprivileged test user.

use std::{
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use agentsight_tests::*;

/// `agentsight ARGS` as root under sudo for the test user, in `cwd`.
fn as_sudo(cwd: &Path, args: &[&str]) -> Output {
    let (uid, gid) = test_user();
    Command::new(bin())
        .args(args)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("run agentsight")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A file of the test user's with `text`, mode 0644.
fn users_file(path: &Path, text: &str) {
    let (uid, gid) = test_user();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    nix::unistd::chown(path, Some(uid.into()), Some(gid.into())).unwrap();
}

/// A small tmpfs mounted on a scratch directory (writable by all, as
/// /tmp is), unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size},mode=1777"))
            .arg("tmpfs")
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount: {}", stderr(&out));
        Self(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A small finished capture in `dir`.
fn capture(dir: &Path) -> PathBuf {
    let db = dir.join("c.db");
    assert_exit_0(&record(&db, &[], &["/bin/ls", "/usr/bin"]));
    db
}

const POLICY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/policy.toml");

// ---- item 8: output files ----

#[test]
fn every_output_replaces_an_existing_0644_file_with_a_new_0600_one() {
    require_root();
    let dir = scratch("out0644");
    let db = capture(&dir);
    let db = db.to_str().unwrap();
    let (uid, gid) = test_user();
    for (name, args) in [
        ("e.jsonl", vec!["export", "--db", db, "-o", "e.jsonl"]),
        ("r.html", vec!["report", "--db", db, "-o", "r.html"]),
        (
            "a.txt",
            vec!["audit", "--db", db, "--policy", POLICY, "-o", "a.txt"],
        ),
    ] {
        let target = dir.join(name);
        users_file(&target, "old content\n");
        let out = as_sudo(&dir, &args);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{name}: {}",
            stderr(&out)
        );
        let m = std::fs::metadata(&target).unwrap();
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o777, m.nlink()),
            (uid, gid, 0o600, 1),
            "{name}"
        );
        let text = std::fs::read_to_string(&target).unwrap();
        assert!(!text.is_empty() && !text.contains("old content"), "{name}");
    }
    // And `record --report/--audit-output`, the same way.
    users_file(&dir.join("rr.html"), "old\n");
    users_file(&dir.join("ra.txt"), "old\n");
    let out = record(
        &dir.join("r.db"),
        &[
            "--report",
            "rr.html",
            "--audit",
            POLICY,
            "--audit-output",
            "ra.txt",
        ],
        &["true"],
    );
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    for name in ["rr.html", "ra.txt"] {
        let m = std::fs::metadata(dir.join(name)).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (uid, 0o600), "{name}");
        assert_ne!(std::fs::read_to_string(dir.join(name)).unwrap(), "old\n");
    }
    let mut names = names_in(&dir);
    names.retain(|n| n.starts_with('.'));
    assert_eq!(names, Vec::<String>::new(), "temporary files left");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hard_linked_or_symlinked_target_is_refused_and_left_alone() {
    require_root();
    let dir = scratch("outlinks");
    let db = capture(&dir);
    let db = db.to_str().unwrap();
    let other = dir.join("other.txt");
    users_file(&other, "the other name's content\n");
    std::fs::hard_link(&other, dir.join("hard.txt")).unwrap();
    std::os::unix::fs::symlink(&other, dir.join("sym.txt")).unwrap();
    let before = names_in(&dir);
    for args in [
        vec!["export", "--db", db, "-o", "hard.txt"],
        vec!["report", "--db", db, "-o", "hard.txt"],
        vec!["audit", "--db", db, "--policy", POLICY, "-o", "hard.txt"],
    ] {
        let out = as_sudo(&dir, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            stderr(&out),
            "agentsight: error: hard.txt: has 2 hard links; refusing to replace a file that has other names\n",
            "{args:?}"
        );
    }
    for args in [
        vec!["export", "--db", db, "-o", "sym.txt"],
        vec!["report", "--db", db, "-o", "sym.txt"],
        vec!["audit", "--db", db, "--policy", POLICY, "-o", "sym.txt"],
    ] {
        let out = as_sudo(&dir, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            stderr(&out),
            "agentsight: error: sym.txt: is a symbolic link\n",
            "{args:?}"
        );
    }
    let out = record(&dir.join("r.db"), &["--report", "hard.txt"], &["true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&other).unwrap(),
        "the other name's content\n"
    );
    assert_eq!(std::fs::metadata(&other).unwrap().nlink(), 2);
    assert!(
        std::fs::symlink_metadata(dir.join("sym.txt"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(names_in(&dir), before, "something created or removed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_outputs_naming_one_file_are_refused_before_recording() {
    require_root();
    let dir = scratch("outsame");
    std::fs::create_dir(dir.join("sub")).unwrap();
    let (uid, gid) = test_user();
    nix::unistd::chown(&dir.join("sub"), Some(uid.into()), Some(gid.into())).unwrap();
    for (extra, said) in [
        (
            vec![
                "--report",
                "f.txt",
                "--audit",
                POLICY,
                "--audit-output",
                "f.txt",
            ],
            "--audit-output and --report name the same file (f.txt): give each its own",
        ),
        (
            vec![
                "--report",
                "sub/../f.txt",
                "--audit",
                POLICY,
                "--audit-output",
                "f.txt",
            ],
            "--audit-output and --report name the same file (f.txt): give each its own",
        ),
        (
            vec!["--report", "a.db"],
            "--report and -o name the same file (a.db): give each its own",
        ),
    ] {
        let out = record(&dir.join("a.db"), &extra, &["true"]);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert_eq!(stderr(&out), format!("agentsight: error: {said}\n"));
        assert_eq!(names_in(&dir), vec!["sub"], "{extra:?}: nothing recorded");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_export_that_fails_mid_write_leaves_the_old_file_and_no_temporary() {
    require_root();
    let dir = scratch("outfull");
    let db = capture(&dir);
    // The JSONL export is larger than what the small file system has left.
    let whole = Command::new(bin())
        .args(["export", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_exit_0(&whole);
    assert!(
        whole.stdout.len() > 16 << 10,
        "{} bytes",
        whole.stdout.len()
    );
    let fs = Tmpfs::mount(&dir.join("small"), "16k");
    let target = fs.0.join("e.jsonl");
    users_file(&target, "old export\n");
    let out = as_sudo(
        &fs.0,
        &["export", "--db", db.to_str().unwrap(), "-o", "e.jsonl"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("agentsight: error: ")
            && err.ends_with("No space left on device (os error 28)\n")
            && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old export\n");
    assert_eq!(names_in(&fs.0), vec!["e.jsonl"]);
    drop(fs);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- item 11: a failed start leaves nothing ----

#[test]
fn a_planted_sidecar_fails_the_start_leaves_nothing_and_the_retry_works() {
    require_root();
    let dir = scratch("plantside");
    let db = dir.join("x.db");
    // A -shm symbolic link, then a -journal directory.
    let shm = dir.join("x.db-shm");
    std::os::unix::fs::symlink("/etc/passwd", &shm).unwrap();
    let out = record(&db, &[], &["true"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "agentsight: error: {}: exists already (SQLite would take it as the new capture's own): remove it or choose another output\n",
            shm.display()
        )
    );
    assert_eq!(names_in(&dir), vec!["x.db-shm"]);
    std::fs::remove_file(&shm).unwrap();

    let journal = dir.join("x.db-journal");
    std::fs::create_dir(&journal).unwrap();
    let out = record(&db, &[], &["true"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "agentsight: error: {}: exists already (SQLite would take it as the new capture's own): remove it or choose another output\n",
            journal.display()
        )
    );
    assert_eq!(names_in(&dir), vec!["x.db-journal"]);
    std::fs::remove_dir(&journal).unwrap();

    assert_exit_0(&record(&db, &[], &["true"]));
    assert_eq!(names_in(&dir), vec!["x.db"]);
    assert_eq!(meta(&open(&db), "complete").as_deref(), Some("true"));
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- item 10: a full disk during record ----

/// A static program (no loader: its only hooked syscalls are its own) that
/// fills the file system holding `fill` (one open, then writes until
/// ENOSPC, never closed) and then makes `n` failed opens of distinct paths
/// (`/nonexistent-agentsight/f0`, …): exactly `n + 1` syscall events.
fn fill_then_flood(dir: &Path, fill: &Path, n: u64) -> PathBuf {
    let c = dir.join("fill-flood.c");
    std::fs::write(
        &c,
        format!(
            "#include <fcntl.h>\n#include <stdio.h>\n#include <unistd.h>\n\
             static char buf[65536];\n\
             int main(void) {{ int fd = open(\"{}\", O_WRONLY | O_CREAT | O_TRUNC, 0600); \
             while (write(fd, buf, sizeof buf) > 0) {{}} \
             char p[64]; for (long i = 0; i < {n}; i++) {{ snprintf(p, sizeof p, \"/nonexistent-agentsight/f%ld\", i); openat(AT_FDCWD, p, O_RDONLY); }} return 0; }}\n",
            fill.display()
        ),
    )
    .unwrap();
    let bin = dir.join("fill-flood");
    let cc = Command::new("gcc")
        .args(["-O2", "-static", "-o"])
        .arg(&bin)
        .arg(&c)
        .status()
        .expect("run gcc");
    assert!(cc.success(), "gcc -static failed");
    bin
}

/// The disk fills while recording: the capture is still finished, says
/// when storing stopped and how many events it did not store (counted as
/// loss, exactly: stored + lost + not stored = generated), stays readable,
/// and the exit status is not 0.
#[test]
fn a_full_disk_is_said_counted_and_fails_the_exit_status() {
    require_root();
    let dir = scratch("diskfull");
    const N: u64 = 100_000;
    // Room for the capture's start and its reserved room (8 MiB); the
    // command fills the rest, then floods.
    let fs = Tmpfs::mount(&dir.join("small"), "24m");
    let fill = fs.0.join("fill");
    let flood = fill_then_flood(&dir, &fill, N);
    let db = fs.0.join("full.db");
    let out = record(&db, &[], &[flood.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let conn = open(&db);
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    let stopped = meta(&conn, "storing_stopped").expect("storing_stopped");
    let not_stored = count(
        "SELECT COALESCE(SUM(lost), 0) FROM loss WHERE kind LIKE 'disk_full:%' AND kind != 'disk_full:seed'",
    );
    assert!(not_stored > 0, "{stopped}");
    let (at, tail) = stopped
        .strip_prefix("disk full at ")
        .and_then(|s| s.split_once(", "))
        .unwrap_or_else(|| panic!("{stopped}"));
    assert!(at.starts_with("20") && at.ends_with('Z'), "{stopped}");
    assert_eq!(tail, format!("{not_stored} events not stored"));
    assert!(
        err.contains(&format!("agentsight: storing stopped: {stopped}\n")),
        "{err}"
    );
    assert_eq!(meta(&conn, "complete").as_deref(), Some("true"));
    let stored = count(
        "SELECT COALESCE(SUM(COALESCE(repeat, 1)), 0) FROM events WHERE kind = 'openat' AND path_as_given LIKE '/nonexistent-agentsight/f%'",
    );
    let kernel_lost = count("SELECT COALESCE(SUM(lost), 0) FROM loss WHERE kind = 'syscall'");
    let fill_stored = count(&format!(
        "SELECT COUNT(*) FROM events WHERE kind = 'openat' AND path_as_given = '{}'",
        fill.display()
    ));
    let flood_not_stored =
        count("SELECT COALESCE(SUM(lost), 0) FROM loss WHERE kind = 'disk_full:syscall'");
    assert_eq!(
        fill_stored + stored + kernel_lost + flood_not_stored,
        N as i64 + 1,
        "stored {fill_stored} + {stored} + lost {kernel_lost} + not stored {flood_not_stored}"
    );
    drop(conn);
    // One finished file, readable by every view.
    assert_eq!(names_in(&fs.0), vec!["fill", "full.db"]);
    let show = Command::new(bin())
        .args(["show", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_exit_0(&show);
    let text = String::from_utf8_lossy(&show.stdout);
    let loss = text.lines().find(|l| l.starts_with("LOSS")).unwrap();
    assert!(
        loss.ends_with(&format!("; storing stopped: {stopped}")),
        "{loss}"
    );
    assert!(!text.contains("did not finish"), "{text}");
    eprintln!(
        "disk full: {N} events, {stored} stored, {kernel_lost} lost, {flood_not_stored} not stored"
    );
    drop(fs);
    let _ = std::fs::remove_dir_all(&dir);
}
