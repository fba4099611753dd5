//! Root tests of the privileged boundary (issue 19): `sudo agentsight` must
//! never give the invoking user more than they had. Each test runs the real
//! binary as root with the variables sudo sets for the unprivileged test user.

use std::{
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::Path,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use agentsight_tests::*;

/// `agentsight ARGS` as root under sudo for the test user, in `cwd`.
fn as_sudo(cwd: &Path, args: &[&str]) -> Command {
    let (uid, gid) = test_user();
    let mut c = Command::new(bin());
    c.args(args)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .current_dir(cwd)
        .stdin(Stdio::null());
    c
}

/// Runs with a deadline: a hang is a failure, not a stuck test.
fn run_within(mut c: Command, limit: Duration) -> (Output, Duration) {
    let t = Instant::now();
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agentsight");
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect");
            panic!(
                "still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("collect");
    (out, t.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every directory entry with its bytes, mode, owner and mtime.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, u32, u32, i64, i64)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            let bytes = if m.is_file() {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (
                e.file_name().to_string_lossy().into_owned(),
                bytes,
                m.mode(),
                m.uid(),
                m.mtime(),
                m.mtime_nsec(),
            )
        })
        .collect();
    v.sort();
    v
}

// ---- through real sudo (installed by `cargo xtask setup`) ----

#[test]
fn through_real_sudo_the_user_gets_nothing_they_did_not_have() {
    require_root();
    let (uid, gid) = test_user();
    let _rule = SudoRule::install();
    let dir = scratch("realsudo");
    let ro = root_only(&dir);
    // An output where the user cannot create: refused, nothing created.
    let target = ro.join("x.db");
    let out = real_sudo(
        &dir,
        &["record", "-q", "-o", target.to_str().unwrap(), "--", "true"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "agentsight: error: {}: Permission denied (os error 13)\n",
            target.display()
        )
    );
    assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0);
    // A real recording: the command runs as the user with the documented
    // environment, the capture is theirs.
    let out = real_sudo(
        &dir,
        &[
            "record",
            "-q",
            "-o",
            "ok.db",
            "--",
            "/bin/sh",
            "-c",
            "id -u; echo $PATH",
        ],
    );
    assert_exit_0(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{uid}\n/usr/local/bin:/usr/bin:/bin\n")
    );
    let m = std::fs::metadata(dir.join("ok.db")).unwrap();
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o777), (uid, gid, 0o600));
    // --pid of root's process is refused.
    let out = real_sudo(&dir, &["record", "-q", "-o", "p.db", "--pid", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--pid 1 is not your process"),
        "{}",
        stderr(&out)
    );
    // A read command reads as the user: a root-only capture is not readable.
    std::fs::copy(dir.join("ok.db"), ro.join("copy.db")).unwrap();
    let out = real_sudo(
        &dir,
        &["show", "--db", ro.join("copy.db").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
}

// ---- point 6: hostile input never hangs or panics ----

#[test]
fn a_fifo_capture_fails_at_once_in_every_read_command() {
    require_root();
    let dir = scratch("fifo");
    let fifo = dir.join("x.db");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    let f = fifo.to_str().unwrap();
    let policy = dir.join("p.toml");
    std::fs::write(&policy, "").unwrap();
    let p = policy.to_str().unwrap();
    for args in [
        vec!["show", "--db", f],
        vec!["export", "--db", f],
        vec!["audit", "--db", f, "--policy", p],
        vec!["correlate", "abc", "--db", f],
        vec!["pid", "--db", f, "1"],
    ] {
        let (out, took) = run_within(as_sudo(&dir, &args), Duration::from_secs(5));
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
        let err = stderr(&out);
        if args[0] == "pid" {
            // `pid` names the evidence it found; a FIFO is just no capture.
            assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
            continue;
        }
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err,
            format!("agentsight: error: {f}: is a FIFO, not a regular file\n"),
            "{args:?}"
        );
    }
    // A FIFO as a provider's database in a home: not opened, noted.
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".codex/sessions")).unwrap();
    nix::unistd::mkfifo(
        &home.join(".codex/state_9.sqlite"),
        nix::sys::stat::Mode::from_bits_truncate(0o666),
    )
    .unwrap();
    let (out, took) = run_within(
        as_sudo(&dir, &["sessions", "--home", home.to_str().unwrap()]),
        Duration::from_secs(5),
    );
    assert!(took < Duration::from_secs(1), "sessions took {took:?}");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("state_9.sqlite is not a regular file"),
        "{}",
        stderr(&out)
    );
    // Auto-discovery of `*.db` in the current directory skips the FIFO.
    for args in [vec!["correlate", "abc"], vec!["pid", "1"]] {
        let (out, took) = run_within(as_sudo(&dir, &args), Duration::from_secs(5));
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn overflowing_durations_are_one_line_errors() {
    require_root();
    let dir = scratch("durations");
    for args in [
        vec![
            "record",
            "--duration",
            "99999999999999999999h",
            "--",
            "true",
        ],
        vec![
            "record",
            "--duration",
            "18446744073709551615s",
            "--",
            "true",
        ],
        vec!["sessions", "--max-age", "99999999999999999999h"],
        vec!["sessions", "--max-age", "18446744073709551615s"],
    ] {
        let (out, took) = run_within(as_sudo(&dir, &args), Duration::from_secs(5));
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("is too large"), "{err}");
    }
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing created"
    );
}

#[test]
fn a_closed_stderr_pipe_is_exit_2_not_a_panic() {
    require_root();
    let dir = scratch("stderr");
    for args in [
        vec!["show", "--db", "missing.db"],
        vec![
            "record",
            "--duration",
            "99999999999999999999h",
            "--",
            "true",
        ],
        vec!["no-such-command"],
    ] {
        let (r, w) = nix::unistd::pipe().unwrap();
        drop(r);
        let out = as_sudo(&dir, &args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(w))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    // On a real capture: a closed stdout, stderr or both never panics.
    let db = dir.join("c.db");
    let out = record(&db, &[], &["/bin/true"]);
    assert_exit_0(&out);
    let d = db.to_str().unwrap();
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/policy.toml");
    for args in [
        vec!["show", "--db", d],
        vec!["export", "--db", d],
        vec!["audit", "--db", d, "--policy", policy.to_str().unwrap()],
        vec!["correlate", "x", "--db", d],
        vec!["sessions"],
        vec!["record", "-q", "-o", "r.db", "--", "/bin/true"],
        vec!["--help"],
    ] {
        for (close_out, close_err) in [(true, false), (false, true), (true, true)] {
            let _ = std::fs::remove_file(dir.join("r.db"));
            let pipe = || {
                let (r, w) = nix::unistd::pipe().unwrap();
                drop(r);
                Stdio::from(w)
            };
            let out = as_sudo(&dir, &args)
                .stdout(if close_out { pipe() } else { Stdio::null() })
                .stderr(if close_err { pipe() } else { Stdio::null() })
                .output()
                .unwrap();
            let code = out.status.code();
            assert!(
                matches!(code, Some(0..=2)),
                "{args:?} out={close_out} err={close_err}: {:?}",
                out.status
            );
        }
    }
}

// ---- point 5: the command's environment ----

#[test]
fn the_command_sees_only_the_documented_environment() {
    require_root();
    let dir = scratch("env");
    let db = dir.join("env.db");
    let home = nix::unistd::User::from_name(TEST_USER)
        .unwrap()
        .unwrap()
        .dir;
    let mut c = as_sudo(
        &dir,
        &[
            "record",
            "--quiet",
            "-o",
            db.to_str().unwrap(),
            "--env",
            "KEEP_ME",
            "--env",
            "SET_ME=a=b",
            "--env",
            "NOT_SET_ANYWHERE",
            "--",
            "env",
        ],
    );
    c.env_clear()
        .env("PATH", "/root/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOME", "/root")
        .env("AWS_SECRET_ACCESS_KEY", "root-secret")
        .env("LD_LIBRARY_PATH", "/root/lib")
        .env("TERM", "dumb")
        .env("LC_ALL", "C")
        .env("KEEP_ME", "kept")
        .env("SUDO_UID", test_user().0.to_string())
        .env("SUDO_GID", test_user().1.to_string())
        .env("SUDO_USER", TEST_USER);
    let out = c.output().unwrap();
    assert_exit_0(&out);
    let mut got: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    got.sort();
    let want = vec![
        format!("HOME={}", home.display()),
        "KEEP_ME=kept".into(),
        "LC_ALL=C".into(),
        format!("LOGNAME={TEST_USER}"),
        "PATH=/usr/local/bin:/usr/bin:/bin".into(),
        "SET_ME=a=b".into(),
        "SHELL=/bin/sh".into(),
        "TERM=dumb".into(),
        format!("USER={TEST_USER}"),
    ];
    assert_eq!(got, want);
    // The program itself was looked up in the command's PATH, not root's.
    let conn = open(&db);
    let execs = execs(&conn);
    // (std's execvp walks the PATH: /usr/local/bin/env fails, /usr/bin/env runs.)
    let tried: Vec<(&str, &str)> = execs
        .iter()
        .map(|e| (e.kind.as_str(), e.filename.as_str()))
        .collect();
    assert_eq!(
        tried,
        vec![
            ("exec_failed", "/usr/local/bin/env"),
            ("exec", "/usr/bin/env")
        ]
    );
}

// ---- points 1 and 9: files handed to the user are created as the user ----

/// A root-only directory (0700 root) in the scratch area.
fn root_only(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("root-only");
    std::fs::create_dir(&p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
    p
}

/// `record` under strace: returns the output and the number of bpf(2) calls.
fn record_counting_bpf(dir: &Path, args: &[&str]) -> (Output, usize) {
    let (uid, gid) = test_user();
    let log = dir.join(format!("strace-{}.log", std::process::id()));
    let out = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=bpf", "-o"])
        .arg(&log)
        .arg(bin())
        .arg("record")
        .args(args)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .current_dir(dir)
        .output()
        .expect("run strace");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (out, text.lines().filter(|l| l.contains("bpf(")).count())
}

#[test]
fn an_output_the_user_cannot_create_is_refused_before_anything_is_loaded() {
    require_root();
    let dir = scratch("rootonly");
    let ro = root_only(&dir);
    let target = ro.join("x.db");
    let (out, bpf_calls) =
        record_counting_bpf(&dir, &["-q", "-o", target.to_str().unwrap(), "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "agentsight: error: {}: Permission denied (os error 13)\n",
            target.display()
        )
    );
    assert_eq!(bpf_calls, 0, "a kernel program was loaded");
    assert_eq!(
        std::fs::read_dir(&ro).unwrap().count(),
        0,
        "nothing created"
    );

    // Through a link into the root-only directory: refused, nothing created.
    let link = dir.join("link.db");
    std::os::unix::fs::symlink(ro.join("y.db"), &link).unwrap();
    let (out, bpf_calls) = record_counting_bpf(&dir, &["-q", "-o", "link.db", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(bpf_calls, 0);
    assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0);

    // A root-owned file in /etc is not the user's to create.
    let (out, bpf_calls) = record_counting_bpf(
        &dir,
        &["-q", "-o", "/etc/agentsight-boundary-test", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(bpf_calls, 0);
    assert!(!Path::new("/etc/agentsight-boundary-test").exists());
}

#[test]
fn an_audit_report_through_a_link_leaves_the_target_untouched() {
    require_root();
    let dir = scratch("auditlink");
    let ro = root_only(&dir);
    let secret = ro.join("secret");
    std::fs::write(&secret, "root only\n").unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("report.txt")).unwrap();
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/policy.toml");
    let (out, bpf_calls) = record_counting_bpf(
        &dir,
        &[
            "-q",
            "--audit",
            policy.to_str().unwrap(),
            "--audit-output",
            "report.txt",
            "-o",
            "a.db",
            "--",
            "true",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "agentsight: error: report.txt: is a symbolic link\n"
    );
    assert_eq!(bpf_calls, 0);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n");
    assert!(!dir.join("a.db").exists());

    // A report in a root-only directory: refused the same way.
    let (out, _) = record_counting_bpf(
        &dir,
        &[
            "-q",
            "--audit",
            policy.to_str().unwrap(),
            "--audit-output",
            ro.join("r.txt").to_str().unwrap(),
            "-o",
            "a.db",
            "--",
            "true",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!ro.join("r.txt").exists());

    // A real report: the user's, 0600, no chown needed (and the bpf(2)
    // count above is real: a recording makes such calls).
    let (out, bpf_calls) = record_counting_bpf(
        &dir,
        &[
            "-q",
            "--audit",
            policy.to_str().unwrap(),
            "--audit-output",
            "r.txt",
            "-o",
            "a.db",
            "--",
            "true",
        ],
    );
    assert_exit_0(&out);
    assert!(bpf_calls > 0);
    let (uid, gid) = test_user();
    for f in ["r.txt", "a.db"] {
        let m = std::fs::metadata(dir.join(f)).unwrap();
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o777),
            (uid, gid, 0o600),
            "{f}"
        );
    }
}

#[test]
fn the_capture_and_its_sidecars_are_the_users_while_recording() {
    require_root();
    let (uid, _) = test_user();
    let dir = scratch("sidecars");
    let db = dir.join("s.db");
    let out = record(
        &db,
        &[],
        &[
            "/bin/sh",
            "-c",
            "stat -c '%n %u %a' s.db s.db-wal s.db-shm > owners.txt",
        ],
    );
    assert_exit_0(&out);
    let owners = std::fs::read_to_string(dir.join("owners.txt")).unwrap();
    assert_eq!(
        owners,
        format!("s.db {uid} 600\ns.db-wal {uid} 600\ns.db-shm {uid} 600\n")
    );
    // Finished: a single file, the user's.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, vec!["owners.txt", "s.db"]);
    assert_eq!(std::fs::metadata(&db).unwrap().uid(), uid);
}

#[test]
fn a_failed_start_leaves_no_file_and_a_retry_works() {
    require_root();
    let dir = scratch("failedstart");
    let db = dir.join("f.db");
    let out = record(&db, &[], &["/no/such/program"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "agentsight: error: cannot start /no/such/program: No such file or directory (os error 2)\n"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "left behind");
    let out = record(&db, &[], &["true"]);
    assert_exit_0(&out);
    assert!(db.exists());
}

#[test]
fn under_sudo_user_names_only_the_caller() {
    require_root();
    let dir = scratch("otheruser");
    let out = record(&dir.join("o.db"), &["--user", "nobody"], &["true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--user nobody: under sudo the command runs only as you"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

// ---- points 2 and 3: transcripts are read as the user, never via links ----

const SECRET: &str = "ROOT-ONLY-SECRET-7c1e";
const SID: &str = "5ec12e70-0000-4000-8000-00000000b0b0";

/// A root-only file holding [`SECRET`], in a root-only directory.
fn root_secret(dir: &Path) -> std::path::PathBuf {
    let ro = root_only(dir);
    let s = ro.join("secret");
    std::fs::write(&s, format!("{{\"type\":\"user\",\"text\":\"{SECRET}\"}}\n")).unwrap();
    std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o600)).unwrap();
    s
}

fn claude_line() -> String {
    format!(
        "{{\"type\":\"user\",\"uuid\":\"00000000-0000-4000-8000-000000000001\",\"parentUuid\":null,\"cwd\":\"/tmp\",\"sessionId\":\"{SID}\",\"timestamp\":\"2026-03-01T09:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"hello\"}}}}"
    )
}

#[test]
fn a_transcript_swapped_for_a_link_to_a_root_file_never_reaches_the_capture() {
    require_root();
    let dir = scratch("translink");
    let secret = root_secret(&dir);
    let home = dir.join("home");
    let proj = home.join(".claude/projects/-tmp");
    let t = proj.join(format!("{SID}.jsonl"));
    let db = dir.join("t.db");
    // The "agent": writes its transcript (binding evidence), then renames a
    // symlink to the root-only file onto it.
    let script = format!(
        "mkdir -p {p} && printf '%s\\n' '{line}' >> {t} && ln -s {s} {p}/l && mv -T {p}/l {t}",
        p = proj.display(),
        line = claude_line(),
        t = t.display(),
        s = secret.display()
    );
    let out = record(&db, &[], &["/bin/sh", "-c", &script]);
    assert_exit_0(&out);
    assert!(
        std::fs::symlink_metadata(&t)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let bytes = std::fs::read(&db).unwrap();
    assert!(
        !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
        "the root-only file reached the capture"
    );
    let conn = open(&db);
    // The session was bound (its transcript was written by the tree), but
    // no file content was copied: the path is now a link.
    let sessions: i64 = conn
        .query_row("SELECT COUNT(*) FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sessions, 1);
    let copied: i64 = conn
        .query_row("SELECT COUNT(*) FROM transcript_files", [], |r| r.get(0))
        .unwrap();
    assert_eq!(copied, 0);

    // `session show` under sudo does not print it either.
    let (out, _) = run_within(
        as_sudo(
            &dir,
            &["session", "show", SID, "--home", home.to_str().unwrap()],
        ),
        Duration::from_secs(10),
    );
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(!all.contains(SECRET), "{all}");
    assert_eq!(out.status.code(), Some(2), "{all}");
}

#[test]
fn a_codex_rollout_path_outside_the_roots_is_never_opened() {
    require_root();
    let (uid, gid) = test_user();
    let dir = scratch("rollout");
    let home = dir.join("home");
    let codex = home.join(".codex");
    std::fs::create_dir_all(codex.join("sessions")).unwrap();
    // A world-readable rollout outside the Codex roots.
    let outside =
        dir.join("rollout-2026-03-02T11-00-00-019c0000-0000-7000-8000-0000000bad00.jsonl");
    std::fs::write(&outside, "{\"type\":\"session_meta\"}\n").unwrap();
    let c = rusqlite::Connection::open(codex.join("state_5.sqlite")).unwrap();
    c.execute_batch(
        "CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL, created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL, cwd TEXT NOT NULL, title TEXT NOT NULL, tokens_used INTEGER NOT NULL DEFAULT 0,
            first_user_message TEXT NOT NULL DEFAULT '', model TEXT, source TEXT NOT NULL DEFAULT 'cli');",
    )
    .unwrap();
    c.execute(
        "INSERT INTO threads (id, rollout_path, created_at, updated_at, cwd, title, tokens_used)
         VALUES ('019c0000-0000-7000-8000-0000000bad00', ?1, 1772445600, 1772445600, '/x', 't', 777)",
        [outside.to_str().unwrap()],
    )
    .unwrap();
    drop(c);
    for p in [
        &home,
        &codex,
        &codex.join("sessions"),
        &codex.join("state_5.sqlite"),
    ] {
        nix::unistd::chown(p.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    let log = dir.join("opens.log");
    let out = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=open,openat,openat2,stat,statx,newfstatat",
            "-o",
        ])
        .arg(&log)
        .arg(bin())
        .args(["sessions", "--json", "--home", home.to_str().unwrap()])
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .output()
        .unwrap();
    assert_exit_0(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("0000000bad00"), "{stdout}");
    let trace = std::fs::read_to_string(&log).unwrap();
    assert!(trace.contains("state_5.sqlite"), "the state db was read");
    assert!(
        !trace.contains(outside.to_str().unwrap()),
        "opened: {}",
        trace
            .lines()
            .filter(|l| l.contains("bad00"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_missing_home_is_an_error() {
    require_root();
    let dir = scratch("nohome");
    for args in [
        vec!["sessions", "--home", "/no/such/home"],
        vec!["session", "show", "abc", "--home", "/no/such/home"],
    ] {
        let (out, _) = run_within(as_sudo(&dir, &args), Duration::from_secs(5));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            stderr(&out),
            "agentsight: error: --home: cannot read /no/such/home: No such file or directory (os error 2)\n"
        );
    }
}

// ---- point 4: only the caller's own processes under sudo ----

/// A fake agent (a copy of sleep named `claude`) running as `uid`.
fn fake_agent(dir: &Path, uid: u32, gid: u32) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let exe = dir.join("claude");
    if !exe.exists() {
        std::fs::copy("/bin/sleep", &exe).unwrap();
    }
    Command::new(&exe)
        .arg("30")
        .uid(uid)
        .gid(gid)
        .spawn()
        .expect("start fake agent")
}

#[test]
fn pid_of_another_users_process_is_refused() {
    require_root();
    let (uid, _) = test_user();
    let dir = scratch("otherpid");
    let (out, bpf_calls) = record_counting_bpf(&dir, &["-q", "-o", "p.db", "--pid", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "agentsight: error: --pid 1 is not your process (its uids are 0/0/0, you are uid {uid}): under sudo only your own processes are recorded (--all-users records any, and says so in the capture)\n"
        )
    );
    assert_eq!(bpf_calls, 0);
    assert!(!dir.join("p.db").exists());

    // --all-users lifts it, and the capture says so.
    let db = dir.join("all.db");
    let out = record_pid(&db, &["--pid", "1", "--all-users", "--duration", "300ms"]);
    assert_exit_0(&out);
    let conn = open(&db);
    assert_eq!(meta(&conn, "all_users").as_deref(), Some("true"));
    assert!(processes(&conn).iter().any(|p| p.pid == 1));
}

fn record_pid(db: &Path, args: &[&str]) -> Output {
    let (uid, gid) = test_user();
    Command::new(bin())
        .args(["record", "-o"])
        .arg(db)
        .args(args)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .current_dir(db.parent().unwrap())
        .output()
        .unwrap()
}

#[test]
fn agent_mode_skips_other_users_agents_and_says_so() {
    require_root();
    let (uid, gid) = test_user();
    let dir = scratch("otheragent");
    let mut theirs = fake_agent(&dir, 0, 0);
    let mut mine = fake_agent(&dir, uid, gid);
    std::thread::sleep(Duration::from_millis(100));
    let db = dir.join("a.db");
    let out = record_pid(&db, &["--agent", "claude", "--duration", "700ms"]);
    let _ = theirs.kill();
    let _ = mine.kill();
    let _ = theirs.wait();
    let _ = mine.wait();
    assert_exit_0(&out);
    let err = stderr(&out);
    assert!(
        err.lines().any(|l| l.starts_with("agentsight: skipped ")
            && l.ends_with(" process(es) of other users so far (under sudo only yours are recorded; --all-users records them)")),
        "{err}"
    );
    let conn = open(&db);
    let pids: Vec<i64> = processes(&conn).iter().map(|p| p.pid).collect();
    assert!(pids.contains(&(mine.id() as i64)), "{pids:?}");
    assert!(!pids.contains(&(theirs.id() as i64)), "{pids:?}");
    assert_eq!(meta(&conn, "all_users").as_deref(), Some("false"));
    let skipped: u64 = meta(&conn, "skipped_other_users").unwrap().parse().unwrap();
    assert!(skipped >= 1);
    assert!(processes(&conn).iter().all(|p| p.uid == Some(uid as i64)));
}

// ---- point 8 (part): honest counts, clear ids ----

/// A home owned by the test user with two Claude sessions whose ids share
/// the prefix `aaaabbbb`; the first has one reply with four bad token values.
fn home_with_bad_counts(dir: &Path) -> std::path::PathBuf {
    let home = dir.join("home");
    let proj = home.join(".claude/projects/-tmp");
    std::fs::create_dir_all(&proj).unwrap();
    let line = |sid: &str, uuid: &str, parent: &str, ts: &str, usage: &str| {
        format!(
            "{{\"type\":\"assistant\",\"uuid\":\"{uuid}\",\"parentUuid\":{parent},\"cwd\":\"/tmp\",\"sessionId\":\"{sid}\",\"timestamp\":\"2026-03-01T09:00:0{ts}.000Z\",\"message\":{{\"id\":\"msg_{uuid}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[{{\"type\":\"text\",\"text\":\"hi\"}}],\"usage\":{usage}}}}}\n"
        )
    };
    for n in 1..=2 {
        let sid = format!("aaaabbbb-0000-4000-8000-00000000000{n}");
        let text = line(
            &sid,
            "u1",
            "null",
            "1",
            r#"{"input_tokens":1e300,"output_tokens":-5,"cache_read_input_tokens":1.5,"cache_creation_input_tokens":99999999999999999999}"#,
        ) + &line(
            &sid,
            "u2",
            "\"u1\"",
            "2",
            r#"{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}"#,
        );
        // A count written as a string and a user message whose content is a
        // number: neither is summed or dropped silently, both are counted.
        let text = text
            + &line(
                &sid,
                "u3",
                "\"u2\"",
                "3",
                r#"{"input_tokens":"123","output_tokens":0}"#,
            )
            + &format!(
                "{{\"type\":\"user\",\"uuid\":\"u4\",\"parentUuid\":\"u3\",\"cwd\":\"/tmp\",\"sessionId\":\"{sid}\",\"timestamp\":\"2026-03-01T09:00:04.000Z\",\"message\":{{\"role\":\"user\",\"content\":12345}}}}\n"
            );
        std::fs::write(proj.join(format!("{sid}.jsonl")), text).unwrap();
    }
    let (uid, gid) = test_user();
    for p in [
        home.clone(),
        home.join(".claude"),
        home.join(".claude/projects"),
        proj.clone(),
        proj.join("aaaabbbb-0000-4000-8000-000000000001.jsonl"),
        proj.join("aaaabbbb-0000-4000-8000-000000000002.jsonl"),
    ] {
        nix::unistd::chown(&p, Some(uid.into()), Some(gid.into())).unwrap();
    }
    home
}

#[test]
fn bad_token_values_are_counted_not_summed() {
    require_root();
    let dir = scratch("badcounts");
    let home = home_with_bad_counts(&dir);
    let h = home.to_str().unwrap();
    let (out, _) = run_within(
        as_sudo(
            &dir,
            &[
                "session",
                "show",
                "aaaabbbb-0000-4000-8000-000000000001",
                "--json",
                "--home",
                h,
            ],
        ),
        Duration::from_secs(10),
    );
    assert_exit_0(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stats"]["bad_token_values"], 5);
    assert_eq!(v["stats"]["bad_contents"], 1);
    assert_eq!(
        v["usage"],
        serde_json::json!({"input": 10, "output": 20, "cache_read": 0, "cache_creation": 0, "reasoning": 0, "total": 30})
    );

    // A prefix of two ids says so.
    let (out, _) = run_within(
        as_sudo(&dir, &["session", "show", "aaaabbbb", "--home", h]),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "agentsight: error: looking up session aaaabbbb: session id prefix \"aaaabbbb\" is ambiguous: it matches 2 sessions (aaaabbbb-0000-4000-8000-000000000001, aaaabbbb-0000-4000-8000-000000000002); give more of the id\n"
    );

    // A transcript in that home that is not the home owner's is skipped.
    let foreign = home.join(".claude/projects/-tmp/aaaabbbb-0000-4000-8000-000000000002.jsonl");
    nix::unistd::chown(&foreign, Some(0.into()), Some(0.into())).unwrap();
    let (out, _) = run_within(
        as_sudo(
            &dir,
            &[
                "session",
                "show",
                "aaaabbbb-0000-4000-8000-000000000002",
                "--home",
                h,
            ],
        ),
        Duration::from_secs(10),
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

// ---- point 7: reading never writes ----

/// Leaves `db` as a killed recorder leaves it: WAL mode, with -wal and -shm.
fn crash_left_capture(db: &Path) {
    let (uid, gid) = test_user();
    let mut child = Command::new(bin())
        .args(["record", "-q", "-o"])
        .arg(db)
        .args(["--", "/bin/sh", "-c", "/bin/echo hi; /bin/sleep 2"])
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0, "no -wal left");
}

/// Leaves `db` with a hot rollback journal: a writer killed mid-transaction
/// after its changes spilled into the file.
fn hot_journal_capture(db: &Path) {
    let out = record(
        db,
        &[],
        &[
            "/bin/sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8; do /bin/true; done",
        ],
    );
    assert_exit_0(&out);
    let py = "import sqlite3, os, sys\n\
c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
c.execute('PRAGMA cache_size=1')\n\
c.execute('BEGIN')\n\
c.execute(\"UPDATE events SET comm = comm || ?\", ('x' * 4000,))\n\
os._exit(1)\n";
    let st = Command::new("/usr/bin/python3")
        .args(["-c", py])
        .arg(db)
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(1));
    let mut j = db.as_os_str().to_owned();
    j.push("-journal");
    assert!(std::fs::metadata(&j).unwrap().len() > 0, "no hot journal");
}

#[test]
fn read_commands_leave_the_directory_byte_identical() {
    require_root();
    let dir = scratch("readonly");
    let tmp = scratch("readonly-tmp");
    let clean = dir.join("clean.db");
    assert_exit_0(&record(&clean, &[], &["/bin/true"]));
    let crashed = dir.join("crashed.db");
    crash_left_capture(&crashed);
    let journal = dir.join("journal.db");
    hot_journal_capture(&journal);
    let policy = tmp.join("p.toml");
    std::fs::write(&policy, "").unwrap();
    // Read-only even for root: 0555.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = snapshot(&dir);
    for db in [&clean, &crashed, &journal] {
        let d = db.to_str().unwrap();
        for args in [
            vec!["show", "--db", d],
            vec!["export", "--db", d],
            vec!["audit", "--db", d, "--policy", policy.to_str().unwrap()],
            vec!["correlate", "nosuchsession", "--db", d],
            vec!["pid", "--db", d, "1"],
        ] {
            for sudo in [true, false] {
                let mut c = if sudo {
                    as_sudo(&tmp, &args)
                } else {
                    let mut c = Command::new(bin());
                    c.args(&args).current_dir(&tmp);
                    c
                };
                c.env("TMPDIR", &tmp);
                let (out, _) = run_within(c, Duration::from_secs(20));
                let err = stderr(&out);
                assert!(!err.contains("readonly database"), "{args:?}: {err}");
                if matches!(args[0], "show" | "export") {
                    assert_eq!(out.status.code(), Some(0), "{args:?} sudo={sudo}: {err}");
                }
                let note = if db == &crashed {
                    Some("was not closed cleanly")
                } else if db == &journal {
                    Some("has a rollback journal left by an interrupted write: read as rolled back")
                } else {
                    None
                };
                if matches!(args[0], "show" | "export" | "audit") {
                    match note {
                        Some(n) => assert!(err.contains(n), "{args:?}: {err}"),
                        None => assert!(!err.contains("note:"), "{args:?}: {err}"),
                    }
                }
            }
        }
    }
    assert_eq!(
        snapshot(&dir),
        before,
        "a read command changed the directory"
    );
    // The private copies are gone too.
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("agentsight-read-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // What the crash-left capture holds is what was committed to its WAL.
    let (out, _) = run_within(
        as_sudo(&tmp, &["export", "--db", crashed.to_str().unwrap()]),
        Duration::from_secs(20),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("\"kind\":\"exec\"") && l.contains("/bin/echo")),
        "{text}"
    );
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

// ---- point 10: bytes the kernel moves between fds are counted ----

#[test]
fn copy_file_range_sendfile_and_splice_bytes_are_counted() {
    require_root();
    let dir = scratch("kernelcopy");
    let src = dir.join("src");
    std::fs::write(&src, vec![b'x'; 10_000]).unwrap();
    let d = dir.display();
    let script = format!(
        "import os\n\
         def o(n, w):\n    return os.open('{d}/' + n, (os.O_WRONLY | os.O_CREAT) if w else os.O_RDONLY, 0o644)\n\
         s, t = o('src', 0), o('by-copy-file-range', 1)\n\
         assert os.copy_file_range(s, t, 10000) == 10000\n\
         os.close(s); os.close(t)\n\
         s, t = o('src', 0), o('by-sendfile', 1)\n\
         assert os.sendfile(t, s, 0, 10000) == 10000\n\
         os.close(s); os.close(t)\n\
         s, t = o('src', 0), o('by-splice', 1)\n\
         r, w = os.pipe()\n\
         assert os.splice(s, w, 10000) == 10000\n\
         assert os.splice(r, t, 10000) == 10000\n\
         os.close(s); os.close(t)\n"
    );
    let db = dir.join("k.db");
    let out = record(&db, &[], &["/usr/bin/python3", "-c", &script]);
    assert_exit_0(&out);
    // `cat` of coreutils 9 copies with copy_file_range too.
    let db2 = dir.join("cat.db");
    let out = record(
        &db2,
        &[],
        &["/bin/sh", "-c", &format!("/bin/cat {d}/src > {d}/by-cat")],
    );
    assert_exit_0(&out);
    let io = |db: &Path, name: &str| -> (i64, i64) {
        open(db)
            .query_row(
                "SELECT COALESCE(SUM(bytes), 0), COALESCE(SUM(read_bytes), 0) FROM events WHERE kind = 'io' AND path = ?1",
                [format!("{d}/{name}")],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    };
    for name in ["by-copy-file-range", "by-sendfile", "by-splice"] {
        assert_eq!(io(&db, name), (10_000, 0), "{name} written");
    }
    // The source was read three times, 10,000 bytes each.
    assert_eq!(io(&db, "src"), (0, 30_000));
    assert_eq!(io(&db2, "by-cat"), (10_000, 0));
    assert_eq!(io(&db2, "src"), (0, 10_000));
}

/// `sudo agentsight top --home <root's home>`: top keeps root only for its
/// recorder's thread; everything it reads, it reads as the caller, so a
/// root-only home shows nothing of its sessions — with and without the
/// kernel programs.
#[test]
fn sudo_top_never_shows_a_root_only_home() {
    require_root();
    let dir = scratch("top-rootonly");
    let home = root_only(&dir);
    let proj = home.join(".claude/projects/-tmp");
    std::fs::create_dir_all(&proj).unwrap();
    let now = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.000Z"])
        .output()
        .unwrap();
    let now = String::from_utf8(now.stdout).unwrap();
    let line = format!(
        "{{\"type\":\"user\",\"uuid\":\"00000000-0000-4000-8000-000000000001\",\"parentUuid\":null,\"cwd\":\"/tmp\",\"sessionId\":\"{SID}\",\"timestamp\":\"{}\",\"message\":{{\"role\":\"user\",\"content\":\"{SECRET}\"}}}}\n",
        now.trim()
    );
    std::fs::write(proj.join(format!("{SID}.jsonl")), line).unwrap();
    let home_s = home.display().to_string();
    for extra in [&["--no-kernel"][..], &[][..]] {
        let mut args = vec!["top", "--once", "--json", "--home", &home_s];
        args.extend_from_slice(extra);
        let (out, _) = run_within(as_sudo(&dir, &args), Duration::from_secs(60));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.contains(SECRET) && !stderr(&out).contains(SECRET),
            "{extra:?}: root's session leaked: {stdout}"
        );
        assert!(!stdout.contains(SID), "{extra:?}: {stdout}");
        // The caller cannot enter the home: nothing is known of it.
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(
            (v["candidates"].clone(), v["rows"].clone()),
            (serde_json::json!(0), serde_json::json!([])),
            "{extra:?}: {stdout}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
