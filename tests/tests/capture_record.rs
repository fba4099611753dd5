//! Root tests of `record` as a user meets it: privileges, exit status,
//! file ownership, stopping, adopting running trees, bad input.

use std::{
    os::unix::fs::{MetadataExt, PermissionsExt},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use agentsight_tests::*;

#[test]
fn command_runs_as_sudo_user_and_status_passes_through() {
    require_root();
    let (uid, gid) = test_user();
    let dir = scratch("user");
    let db = dir.join("user.db");
    let out = record(
        &db,
        &[],
        &[
            "/bin/sh",
            "-c",
            "/usr/bin/id -u > id.txt; /usr/bin/id -G > groups.txt; exit 5",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(5),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = std::fs::read_to_string(dir.join("id.txt")).unwrap();
    assert_eq!(id.trim(), uid.to_string());
    let groups = std::fs::read_to_string(dir.join("groups.txt")).unwrap();
    assert!(
        !groups.split_whitespace().any(|g| g == "0"),
        "root group leaked: {groups}"
    );
    assert!(groups.split_whitespace().any(|g| g == gid.to_string()));

    // The capture: 0600, owned by the invoking user, complete.
    let md = std::fs::metadata(&db).unwrap();
    assert_eq!(md.permissions().mode() & 0o777, 0o600);
    assert_eq!((md.uid(), md.gid()), (uid, gid));
    let conn = open(&db);
    assert_eq!(meta(&conn, "complete").as_deref(), Some("true"));
    assert_eq!(meta(&conn, "command_exit_status").as_deref(), Some("5"));
    let execs = execs(&conn);
    assert!(execs.iter().all(|e| e.uid == uid as i64));
    assert_eq!(
        execs.iter().map(|e| e.argv.clone()).collect::<Vec<_>>(),
        vec![
            sv(&[
                "/bin/sh",
                "-c",
                "/usr/bin/id -u > id.txt; /usr/bin/id -G > groups.txt; exit 5"
            ]),
            sv(&["/usr/bin/id", "-u"]),
            sv(&["/usr/bin/id", "-G"]),
        ]
    );
    // No WAL or journal left beside it: one self-contained file.
    assert!(!dir.join("user.db-wal").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn killed_command_status_is_128_plus_signal() {
    require_root();
    let dir = scratch("killed");
    let out = record(&dir.join("k.db"), &[], &["/bin/sh", "-c", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(128 + 15));
    let conn = open(&dir.join("k.db"));
    let procs = processes(&conn);
    let root = procs.iter().find(|p| p.origin == "root").unwrap();
    assert_eq!((root.exit_code, root.signal), (None, Some(15)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn refuses_to_run_the_command_as_root() {
    require_root();
    let dir = scratch("asroot");
    let out = Command::new(bin())
        .args(["record", "--quiet", "-o"])
        .arg(dir.join("r.db"))
        .args(["--", "/bin/true"])
        .env_remove("SUDO_UID")
        .env_remove("SUDO_USER")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to run the command as root"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!dir.join("r.db").exists(), "nothing should be created");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn not_root_is_a_clear_error() {
    require_root();
    test_user();
    let dir = scratch("notroot");
    let out = Command::new("runuser")
        .args(["-u", TEST_USER, "--"])
        .arg(bin())
        .args(["record", "-o"])
        .arg(dir.join("n.db"))
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("must run as root"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unwritable_output_fails_before_loading() {
    require_root();
    let out = record(
        std::path::Path::new("/nonexistent-dir/x.db"),
        &[],
        &["/bin/true"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent-dir/x.db"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn sigterm_stops_a_pid_recording_cleanly() {
    require_root();
    let dir = scratch("pid");
    // An existing tree: a shell with a child, both already running.
    let mut target = Command::new("/bin/sh")
        .args([
            "-c",
            "/bin/sleep 30 & while :; do /bin/echo tick >/dev/null; /bin/sleep 0.1; done",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let db = dir.join("pid.db");
    let mut rec = Command::new(bin())
        .args(["record", "--quiet", "-o"])
        .arg(&db)
        .args(["--pid", &target.id().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(rec.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let started = Instant::now();
    let status = rec.wait().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stop took too long"
    );
    assert_eq!(status.code(), Some(0));
    let _ = target.kill();
    let _ = target.wait();
    let _ = Command::new("pkill").args(["-f", "sleep 30"]).status();

    let conn = open(&db);
    assert_eq!(meta(&conn, "complete").as_deref(), Some("true"));
    assert_eq!(
        meta(&conn, "end_reason").as_deref(),
        Some("stopped by signal")
    );
    let procs = processes(&conn);
    // The running shell and its sleeping child were seeded from /proc.
    let seeded: Vec<&ProcRow> = procs.iter().filter(|p| p.origin == "seeded").collect();
    assert!(seeded.iter().any(|p| p.pid == target.id() as i64));
    assert!(seeded.iter().any(|p| p.argv == sv(&["/bin/sleep", "30"])));
    // Its new children were captured from the kernel.
    let ticks = execs(&conn)
        .iter()
        .filter(|e| e.argv == sv(&["/bin/echo", "tick"]))
        .count();
    assert!(ticks >= 5, "only {ticks} ticks captured");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn agent_mode_adopts_agents_started_later() {
    require_root();
    let dir = scratch("agent");
    let bin_dir = dir.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    // A stand-in "claude" CLI: recognised by its name in argv, not by comm.
    let fake = bin_dir.join("claude");
    std::fs::write(
        &fake,
        "#!/bin/sh\n/bin/sleep 0.8\nfor i in 1 2 3; do /bin/echo agent-work >/dev/null; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.join("agent.db");
    let mut rec = Command::new(bin())
        .args([
            "record",
            "--quiet",
            "--agent",
            "claude",
            "--duration",
            "3s",
            "-o",
        ])
        .arg(&db)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut agent = Command::new(&fake).spawn().unwrap();
    // An unrelated process doing the same work must not be picked up.
    let mut other = Command::new("/bin/sh")
        .args(["-c", "/bin/sleep 0.8; /bin/echo not-an-agent >/dev/null"])
        .spawn()
        .unwrap();
    agent.wait().unwrap();
    other.wait().unwrap();
    assert_eq!(rec.wait().unwrap().code(), Some(0));
    let conn = open(&db);
    assert_eq!(
        meta(&conn, "end_reason").as_deref(),
        Some("duration reached")
    );
    let execs = execs(&conn);
    let work = execs
        .iter()
        .filter(|e| e.argv == sv(&["/bin/echo", "agent-work"]))
        .count();
    assert_eq!(work, 3);
    assert!(
        !execs
            .iter()
            .any(|e| e.argv.iter().any(|a| a == "not-an-agent"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn full_disk_stops_storing_cleanly_and_keeps_what_was_written() {
    require_root();
    let dir = scratch("full");
    let mnt = dir.join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    // Room for the recorder's reserve (8 MiB kept for finishing) and the
    // first phase; the second phase fills the rest.
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(status.success(), "mount tmpfs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let (uid, gid) = test_user();
    nix::unistd::chown(&mnt, Some(uid.into()), Some(gid.into())).unwrap();
    let db = mnt.join("full.db");
    // 300 execs, a pause for the writer to commit them (it stores after
    // 200 ms without new events), then the command fills the file system
    // and goes on.
    let script = format!(
        "for i in $(/usr/bin/seq 1 300); do /bin/true $i; done; /bin/sleep 2; \
         /bin/dd if=/dev/zero of={}/fill bs=64k 2>/dev/null; \
         for i in $(/usr/bin/seq 1 300); do /bin/true after $i; done; exit 4",
        mnt.display()
    );
    let out = record(&db, &[], &["/bin/sh", "-c", &script]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // The agent is never harmed: it ran to the end and its status passes through.
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("storing stopped: disk full at ") && stderr.contains(" events not stored"),
        "{stderr}"
    );
    // What was committed before the disk filled stays readable.
    let shown = Command::new(bin())
        .arg("show")
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert_exit_0(&shown);
    assert!(text.contains("/bin/true 1  ["), "{text}");
    assert!(text.contains("/bin/true 300  ["), "{text}");
    assert!(text.contains("storing stopped: disk full at "), "{text}");
    let conn = open(&db);
    let trues: Vec<Vec<String>> = execs(&conn)
        .into_iter()
        .filter(|e| e.kind == "exec" && e.argv.first().map(String::as_str) == Some("/bin/true"))
        .map(|e| e.argv)
        .collect();
    // Every exec before the fill, in order; not all of those after it
    // (the batch in flight when the disk filled may still be stored).
    let before: Vec<Vec<String>> = (1..=300)
        .map(|i| vec!["/bin/true".to_string(), i.to_string()])
        .collect();
    assert_eq!(trues[..300], before[..]);
    let stored = trues.len();
    assert!((300..600).contains(&stored), "stored {stored}");
    drop(conn);
    drop(_unmount);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn program_stats_are_stored_on_request_only() {
    require_root();
    let dir = scratch("progstats");
    let db = dir.join("stats.db");
    let out = record(
        &db,
        &["--program-stats"],
        &["/bin/sh", "-c", "for i in 1 2 3 4 5; do /bin/true; done"],
    );
    assert_exit_0(&out);
    let conn = open(&db);
    let json = meta(&conn, "program_stats").expect("program_stats meta");
    let stats: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let mut names: Vec<&str> = stats.iter().map(|s| s["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            "inet_sock_set_state",
            "sched_process_exec",
            "sched_process_exit",
            "sched_process_fork",
            "sys_exit",
        ]
    );
    let runs = |name: &str| {
        let s = stats.iter().find(|s| s["name"] == name).unwrap();
        (s["runs"].as_u64().unwrap(), s["run_ns"].as_u64().unwrap())
    };
    // Counted for every process on the machine: at least what the workload
    // did (the shell and five /bin/true execs, five forks).
    assert!(runs("sched_process_exec").0 >= 6, "{json}");
    assert!(runs("sched_process_fork").0 >= 5, "{json}");
    assert!(runs("sys_exit").0 > 0 && runs("sys_exit").1 > 0, "{json}");
    drop(conn);

    // Off by default.
    let plain = dir.join("plain.db");
    let out = record(&plain, &[], &["/bin/true"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(meta(&open(&plain), "program_stats"), None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A SIGKILLed recorder: what it had stored more than ~1 s before the kill is
/// there, and the capture never reads as loss-free (`show` says from when
/// the rest is unknown, `export` warns, no process is "still running").
#[test]
fn sigkilled_recorder_says_what_is_unknown_and_loses_at_most_a_second() {
    require_root();
    let dir = scratch("sigkill");
    let (uid, gid) = test_user();
    let db = dir.join("killed.db");
    let work = dir.display().to_string();
    // One new file every 20 ms, for longer than the test lets it run.
    let script = "import os, sys, time\nfor i in range(2000):\n    open(os.path.join(sys.argv[1], f'f{i}'), 'w').close()\n    time.sleep(0.02)\n";
    let mut rec = Command::new(bin())
        .args(["record", "--quiet", "-o"])
        .arg(&db)
        .args(["--", "/usr/bin/python3", "-c", script, &work])
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(4000));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(rec.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let killed_at = std::time::SystemTime::now();
    let _ = rec.wait();
    let _ = Command::new("pkill")
        .args(["-KILL", "-f", "for i in range\\(2000\\)"])
        .status();
    // Every file made more than 1.5 s before the kill (by its mtime) is in
    // the capture: at most ~1 s is held, plus a margin for the writer.
    let bound = killed_at - Duration::from_millis(1500);
    let mut early: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with('f'))
        .filter(|e| e.metadata().unwrap().modified().unwrap() < bound)
        .map(|e| e.path().display().to_string())
        .collect();
    early.sort();
    assert!(early.len() >= 50, "only {} early files", early.len());
    let conn = rusqlite::Connection::open(&db).expect("open the killed capture");
    let mut stored: Vec<String> = conn
        .prepare("SELECT path FROM events WHERE kind = 'openat' AND result >= 0 AND path LIKE ?1")
        .unwrap()
        .query_map([format!("{work}/f%")], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    stored.sort();
    let missing: Vec<&String> = early.iter().filter(|p| !stored.contains(p)).collect();
    assert_eq!(
        missing,
        Vec::<&String>::new(),
        "made > 1.5 s before the kill, not stored"
    );
    assert_eq!(meta(&conn, "complete").as_deref(), Some("false"));
    drop(conn);

    let show = Command::new(bin())
        .args(["show", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_exit_0(&show);
    let text = String::from_utf8_lossy(&show.stdout);
    let loss = text.lines().find(|l| l.starts_with("LOSS")).unwrap();
    assert!(
        loss.contains("; UNKNOWN after 20")
            && loss.ends_with("(the last stored record): the recorder did not finish"),
        "{loss}"
    );
    assert!(!text.contains("still running at end"), "{text}");
    assert!(text.contains("no exit seen"), "{text}");
    let export = Command::new(bin())
        .args(["export", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_exit_0(&export);
    let err = String::from_utf8_lossy(&export.stderr);
    assert!(
        err.contains("is incomplete; loss UNKNOWN after 20"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--max-size`: once the capture reaches the bound, storing stops and every
/// further event is counted as loss (never a silently full disk): stored +
/// lost in the kernel + not stored = generated, exactly.
#[test]
fn max_size_stops_storing_and_counts_the_rest() {
    require_root();
    let dir = scratch("maxsize");
    const N: u64 = 150_000;
    let flood = static_distinct_open_flood(&dir, N);
    let db = dir.join("capped.db");
    let flood_s = flood.display().to_string();
    let out = record(&db, &["--max-size", "2M"], &[&flood_s]);
    assert_exit_0(&out);
    let conn = open(&db);
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    let stored = count(
        "SELECT COALESCE(SUM(COALESCE(repeat, 1)), 0) FROM events WHERE kind = 'openat' AND path_as_given LIKE '/nonexistent-agentsight/f%'",
    );
    let kernel_lost = count("SELECT COALESCE(SUM(lost), 0) FROM loss WHERE kind = 'syscall'");
    let not_stored =
        count("SELECT COALESCE(SUM(lost), 0) FROM loss WHERE kind = 'max_size:syscall'");
    assert!(not_stored > 0, "the bound was never reached");
    assert_eq!(
        stored + kernel_lost + not_stored,
        N as i64,
        "stored {stored} + lost {kernel_lost} + not stored {not_stored}"
    );
    let all_not_stored = count("SELECT SUM(lost) FROM loss WHERE kind LIKE 'max_size:%'");
    let size = std::fs::metadata(&db).unwrap().len();
    eprintln!(
        "max-size: {N} events, {stored} stored, {kernel_lost} lost in the kernel, {not_stored} not stored; capture {size} bytes"
    );
    assert!(size <= 3 << 20, "capture of {size} bytes for a 2 MiB bound");
    drop(conn);
    let show = Command::new(bin())
        .args(["show", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains(&format!(
            "; {all_not_stored} not stored (the capture reached --max-size)"
        )),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
