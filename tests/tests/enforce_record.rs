//! Root tests of `record --enforce` (docs/enforce.md): a denied file read by
//! the recorded tree directly, through a hard link and through a symlink is
//! refused with EPERM while the test itself (outside the tree) reads it
//! during the run; a denied executable run by its name and through a hard
//! link is refused; a rule whose mark the kernel refuses stops the start
//! (exit 2, nothing run, no capture) unless `--enforce=best-effort`.
//!
//! Not tested here: `record --enforce` as a non-root user. `record` itself
//! refuses to run without root (it loads kernel programs) before the policy
//! is even read, so the non-root case says nothing about enforcement; the
//! refusal that names a rule is tested as root with a mark the kernel
//! refuses (a permission mark on a /proc file: EINVAL).

use std::{
    os::unix::fs::MetadataExt,
    path::Path,
    process::{Command, Output, Stdio},
};

use agentsight::enforce::DenialKind;
use agentsight::store::{Capture, enforcement::DenialRow};
use agentsight_tests::*;
use serde_json::Value;

/// `record --enforce --audit POLICY` as the test user (through sudo's
/// variables), the command's output piped.
fn spawn_record(db: &Path, policy: &Path, mode: &str, command: &[&str]) -> std::process::Child {
    let (uid, gid) = test_user();
    Command::new(bin())
        .arg("record")
        .arg("--quiet")
        .arg("-o")
        .arg(db)
        .arg(mode)
        .arg("--audit")
        .arg(policy)
        .arg("--")
        .args(command)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .current_dir(db.parent().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run agentsight record")
}

/// `agentsight show --db DB`'s output.
fn show(db: &Path) -> String {
    let out = Command::new(bin())
        .args(["show", "--db"])
        .arg(db)
        .output()
        .expect("run show");
    text(&out.stdout)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn denials(db: &Path) -> Vec<DenialRow> {
    let cap = Capture::open(db).expect("open capture");
    cap.reader().enforcement_denials().expect("denials")
}

fn audit_json(db: &Path, policy: &Path) -> Value {
    let out = Command::new(bin())
        .args(["audit", "--format", "json", "--db"])
        .arg(db)
        .arg("--policy")
        .arg(policy)
        .output()
        .expect("run audit");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)))
}

/// (pid, process row id) of the recorded processes whose argv starts `argv0`, in order.
fn procs_named(db: &Path, argv0: &str) -> Vec<(i64, i64)> {
    processes(&open(db))
        .into_iter()
        .filter(|p| p.argv.first().map(String::as_str) == Some(argv0))
        .map(|p| (p.pid, p.id))
        .collect()
}

/// Waits (bounded by tries, not by a clock) for `p` to exist.
fn wait_for(p: &Path, child: &mut std::process::Child) {
    for _ in 0..600 {
        if p.exists() {
            return;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("record ended ({st}) before {} appeared", p.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} never appeared", p.display());
}

fn finish(child: std::process::Child) -> Output {
    child.wait_with_output().expect("wait for record")
}

/// `DIR/home/.ssh/id_rsa` holding `content`, 0644 and the test user's own
/// (only enforcement can refuse its read), and a policy denying reads of
/// `~/.ssh/**` with that home: (key, policy).
fn planted_key(dir: &Path, content: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (uid, gid) = test_user();
    let ssh = dir.join("home/.ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    let key = ssh.join("id_rsa");
    std::fs::write(&key, content).unwrap();
    for p in [dir.join("home"), ssh, key.clone()] {
        nix::unistd::chown(p.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    (
        key,
        policy_file(dir, "[denied_paths]\nread = [\"~/.ssh/**\"]\n"),
    )
}

/// `DIR/policy.toml`: `rules` with `DIR/home` as the home.
fn policy_file(dir: &Path, rules: &str) -> std::path::PathBuf {
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("home = \"{}\"\n{rules}", dir.join("home").display()),
    )
    .unwrap();
    policy
}

#[test]
fn denied_reads_are_refused_for_the_tree_only() {
    require_root();
    let dir = scratch("enforce-read");
    let (uid, gid) = test_user();
    let (key, policy) = planted_key(&dir, "not a real key\n");
    let ssh = dir.join("home/.ssh");
    let hard = dir.join("hard");
    let sym = dir.join("sym");
    std::fs::hard_link(&key, &hard).unwrap();
    std::os::unix::fs::symlink(&key, &sym).unwrap();
    let (ready, gate) = (dir.join("ready"), dir.join("gate"));
    // Created during the run in the marked directory: denied as its child.
    let later = ssh.join("later");
    let db = dir.join("run.db");
    let script = format!(
        "cat {k}; echo direct=$?; cat {h}; echo hard=$?; cat {s}; echo sym=$?; : > {r}; \
         while [ ! -e {g} ]; do sleep 0.02; done; cat {l}; echo later=$?",
        l = later.display(),
        k = key.display(),
        h = hard.display(),
        s = sym.display(),
        r = ready.display(),
        g = gate.display()
    );
    let mut child = spawn_record(&db, &policy, "--enforce", &["sh", "-c", &script]);
    wait_for(&ready, &mut child);
    // A process outside the tree reads the same file during the run.
    let outside = Command::new("cat").arg(&key).output().unwrap();
    std::fs::write(&later, "made later\n").unwrap();
    nix::unistd::chown(later.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    std::fs::write(&gate, "").unwrap();
    let out = finish(child);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}"); // the audit failed
    assert_eq!(text(&outside.stdout), "not a real key\n");
    assert_eq!(outside.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "direct=1\nhard=1\nsym=1\nlater=1\n");
    for p in [&key, &hard, &sym, &later] {
        let line = format!("cat: {}: Operation not permitted", p.display());
        assert!(stderr.lines().any(|l| l == line), "{line} in {stderr}");
    }
    assert!(
        stderr.lines().any(|l| l.starts_with(
            "agentsight: enforce: 4 accesses blocked (4 reads, 0 writes, 0 execs, 0 connects, 0 sends); audited, not enforced: "
        )),
        "{stderr}"
    );
    // The capture: one row per cat, by the file's identity.
    let m = std::fs::metadata(&key).unwrap();
    let dev = agentsight::enforce::kernel_dev(m.dev());
    let cats = procs_named(&db, "cat");
    assert_eq!(cats.len(), 4, "{cats:?}");
    let ml = std::fs::metadata(&later).unwrap();
    let rows = denials(&db);
    let got: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.kind,
                r.path.clone(),
                r.dev,
                r.ino,
                i64::from(r.pid),
                r.process_id,
                r.rule.as_str(),
                r.mechanism.as_str(),
            )
        })
        .collect();
    let want: Vec<_> = cats
        .iter()
        .enumerate()
        .map(|(i, &(pid, id))| {
            let (path, ino) = if i < 3 {
                (&key, m.ino())
            } else {
                (&later, ml.ino())
            };
            (
                DenialKind::Read,
                path.display().to_string(),
                dev,
                ino as i64,
                pid,
                Some(id),
                "denied-path",
                "fanotify",
            )
        })
        .collect();
    assert_eq!(got, want);
    // The audit: one blocked denied-path finding per cat.
    let report = audit_json(&db, &policy);
    let findings: Vec<(String, bool, i64)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "denied-path")
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["blocked"].as_bool().unwrap(),
                f["process"]["pid"].as_i64().unwrap(),
            )
        })
        .collect();
    let mut findings = findings;
    findings.sort_by_key(|f| f.2);
    let want: Vec<_> = cats
        .iter()
        .enumerate()
        .map(|(i, &(pid, _))| {
            let path = if i < 3 { &key } else { &later };
            (path.display().to_string(), true, pid)
        })
        .collect();
    assert_eq!(findings, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn denied_executables_are_refused_by_inode() {
    require_root();
    let dir = scratch("enforce-exec");
    let tool = dir.join("forbidden");
    let alias = dir.join("alias");
    std::fs::copy("/usr/bin/true", &tool).unwrap();
    std::fs::hard_link(&tool, &alias).unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[executables]\ndeny = [\"{}\"]\n", tool.display()),
    )
    .unwrap();
    let db = dir.join("run.db");
    let script = format!(
        "{t}; echo name=$?; {a}; echo link=$?",
        t = tool.display(),
        a = alias.display()
    );
    let out = finish(spawn_record(
        &db,
        &policy,
        "--enforce",
        &["sh", "-c", &script],
    ));
    let stderr = text(&out.stderr);
    assert_eq!(text(&out.stdout), "name=126\nlink=126\n", "{stderr}");
    for p in [&tool, &alias] {
        let line = format!("sh: 1: {}: Operation not permitted", p.display());
        assert!(stderr.lines().any(|l| l == line), "{line} in {stderr}");
    }
    let m = std::fs::metadata(&tool).unwrap();
    let rows = denials(&db);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        assert_eq!(
            (r.kind, r.path.as_str(), r.ino, r.rule.as_str()),
            (
                DenialKind::Exec,
                tool.to_str().unwrap(),
                m.ino() as i64,
                "denied-executable"
            )
        );
        assert!(r.process_id.is_some(), "{r:?}");
    }
    assert_ne!(rows[0].pid, rows[1].pid);
    let report = audit_json(&db, &policy);
    let blocked: Vec<(bool, i64)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "denied-executable")
        .map(|f| {
            (
                f["blocked"].as_bool().unwrap(),
                f["process"]["pid"].as_i64().unwrap(),
            )
        })
        .collect();
    let mut blocked = blocked;
    blocked.sort_by_key(|b| b.1);
    let mut want: Vec<(bool, i64)> = rows.iter().map(|r| (true, i64::from(r.pid))).collect();
    want.sort_by_key(|b| b.1);
    assert_eq!(blocked, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rule_that_cannot_be_enforced_refuses_the_start_unless_best_effort() {
    require_root();
    let dir = scratch("enforce-refused");
    let policy = dir.join("policy.toml");
    // procfs refuses permission marks (EINVAL).
    std::fs::write(&policy, "[denied_paths]\nread = [\"/proc/version\"]\n").unwrap();
    let ran = dir.join("ran");
    let script = format!(": > {}", ran.display());
    let db = dir.join("run.db");
    let out = finish(spawn_record(
        &db,
        &policy,
        "--enforce",
        &["sh", "-c", &script],
    ));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "agentsight: error: --enforce: cannot enforce denied-path for /proc/version: fanotify_mark: EINVAL: Invalid argument\n"
    );
    assert!(!ran.exists(), "the command ran");
    assert!(!db.exists(), "a capture was left");
    let out = finish(spawn_record(
        &db,
        &policy,
        "--enforce=best-effort",
        &["sh", "-c", &script],
    ));
    assert!(ran.exists(), "{}", text(&out.stderr));
    let cap = Capture::open(&db).unwrap();
    let meta = cap.reader().enforcement_meta().unwrap().unwrap();
    assert_eq!(meta.mode, "best-effort");
    assert_eq!(
        meta.audited_not_enforced.last().map(String::as_str),
        Some("denied-path (/proc/version: fanotify_mark: EINVAL: Invalid argument): mark refused")
    );
    assert!(cap.reader().enforcement_denials().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether `pid` still runs code (present and not a zombie).
fn running(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X')
    })
}

/// The recorder is SIGKILLed while its tree reads the denied key in a
/// tight loop: fanotify alone would fail open (the group closes, waiting
/// opens are allowed). The sentinel keeps the group, stops and kills the
/// tree, says so, and notes it in the capture; no read of the key ever
/// succeeded, and afterwards the key is readable again outside.
#[test]
fn the_tree_is_stopped_when_the_recorder_dies() {
    require_root();
    let dir = scratch("enforce-backstop");
    let (uid, gid) = test_user();
    let marker = "BACKSTOP-KEY-MARKER";
    let (key, policy) = planted_key(&dir, &format!("{marker}\n"));
    // The tree writes into dir: the test user's.
    nix::unistd::chown(dir.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    let (shell_pid, loop_pid, ready, out) = (
        dir.join("shell.pid"),
        dir.join("loop.pid"),
        dir.join("ready"),
        dir.join("out"),
    );
    // Its output goes to files: only the recorder and its sentinel hold the
    // pipes the test reads to their end.
    let script = format!(
        "exec > {o}.log 2>&1; echo $$ > {sp}; (while :; do sleep 0.05; done) & echo $! > {lp}; \
         : > {r}; while :; do cat {k} >> {o}; done",
        o = out.display(),
        sp = shell_pid.display(),
        lp = loop_pid.display(),
        r = ready.display(),
        k = key.display(),
    );
    let db = dir.join("run.db");
    let mut child = spawn_record(&db, &policy, "--enforce", &["sh", "-c", &script]);
    wait_for(&ready, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let recorder = child.id();
    child.kill().unwrap();
    let done = finish(child);
    let stderr = text(&done.stderr);
    let pid_of = |p: &Path| -> i64 { std::fs::read_to_string(p).unwrap().trim().parse().unwrap() };
    let (sh, bg) = (pid_of(&shell_pid), pid_of(&loop_pid));
    let said = format!(
        "agentsight: enforce: the recorder (pid {recorder}) ended without stopping enforcement: its tree was stopped and killed ("
    );
    assert!(
        stderr.lines().any(|l| l.starts_with(&said)
            && l.ends_with(" process(es)), so nothing of it ran unenforced")),
        "{stderr}"
    );
    assert!(
        !running(sh) && !running(bg),
        "the tree still runs: {stderr}"
    );
    // Not one read of the key got through, before or after the kill.
    let got = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(!got.contains(marker), "{got}");
    let log = std::fs::read_to_string(format!("{}.log", out.display())).unwrap();
    assert!(
        log.lines()
            .all(|l| l == format!("cat: {}: Operation not permitted", key.display())),
        "{log}"
    );
    assert!(!log.is_empty());
    // The marks went with the sentinel: outside the tree the key reads.
    let outside = Command::new("cat").arg(&key).output().unwrap();
    assert_eq!(text(&outside.stdout), format!("{marker}\n"));
    // The capture says what happened.
    let cap = Capture::open(&db).expect("open the capture of a killed recorder");
    let meta = cap
        .reader()
        .enforcement_meta()
        .unwrap()
        .expect("meta enforcement");
    let b = meta.backstop.expect("the backstop noted");
    assert_eq!(b.recorder_pid, recorder);
    assert!(b.still_running.is_empty(), "{b:?}");
    for p in [sh, bg] {
        assert!(b.killed.contains(&(p as u32)), "{p} in {b:?}");
    }
    let rows = denials(&db);
    assert!(!rows.is_empty());
    assert!(
        rows.iter()
            .all(|r| r.path == key.display().to_string() && r.rule == "denied-path"),
        "{rows:?}"
    );
    let shown = show(&db);
    let line = format!(
        "  the recorder (pid {recorder}) ended without stopping enforcement: its tree was stopped and killed ({} process(es)); denials of its last 50 ms may be missing",
        b.killed.len()
    );
    assert!(shown.lines().any(|l| l == line), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The network rules (the workload run under `strace -f`, which agrees): a
/// connect to a denied destination, to an undeclared
/// one (IPv4, IPv4-mapped IPv6, IPv6) and a datagram sent to an undeclared
/// one are refused with EPERM for the tree, while its allowed connect and
/// its DNS-port send succeed and the test itself, outside the tree,
/// connects to the denied port during the run.
#[test]
fn connects_and_sends_are_refused_for_the_tree_only() {
    use std::net::{TcpListener, UdpSocket};
    require_root();
    let dir = scratch("enforce-net");
    let listen = || TcpListener::bind("127.0.0.1:0").unwrap();
    let (allowed, denied, undeclared) = (listen(), listen(), listen());
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = |l: &TcpListener| l.local_addr().unwrap().port();
    let (a, d, u, q) = (
        port(&allowed),
        port(&denied),
        port(&undeclared),
        udp.local_addr().unwrap().port(),
    );
    for l in [&allowed, &denied, &undeclared] {
        l.set_nonblocking(true).unwrap();
    }
    udp.set_nonblocking(true).unwrap();
    let policy = policy_file(
        &dir,
        &format!("[network]\nallow = [\"127.0.0.1:{a}\"]\ndeny = [\"127.0.0.1:{d}\"]\n"),
    );
    let (ready, gate) = (dir.join("ready"), dir.join("gate"));
    // Copied where the test user can read it.
    let script = dir.join("net_attempts.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/net_attempts.py"),
        &script,
    )
    .unwrap();
    let db = dir.join("run.db");
    let args: Vec<String> = [a, d, u, q].iter().map(u16::to_string).collect();
    // Under `strace -f`, for an account of the calls independent of ours.
    let trace = dir.join("strace.txt");
    let mut command = vec![
        "strace",
        "-f",
        "-qq",
        "-e",
        "trace=connect,sendto",
        "-o",
        trace.to_str().unwrap(),
        "python3",
        script.to_str().unwrap(),
    ];
    command.extend(args.iter().map(String::as_str));
    command.extend([gate.to_str().unwrap(), ready.to_str().unwrap()]);
    let mut child = spawn_record(&db, &policy, "--enforce", &command);
    wait_for(&ready, &mut child);
    // Outside the tree, the denied port is reached during the run.
    let outside = std::net::TcpStream::connect(("127.0.0.1", d));
    assert!(outside.is_ok(), "{outside:?}");
    std::fs::write(&gate, "").unwrap();
    let out = finish(child);
    let stderr = text(&out.stderr);
    assert_eq!(
        text(&out.stdout),
        "allowed=ok\ndenied=EPERM\nundeclared=EPERM\nmapped_allowed=ok\nmapped_denied=EPERM\n\
         v6_undeclared=EPERM\nudp_undeclared=EPERM\nudp_dns=ok\ndenied_again=EPERM\n",
        "{stderr}"
    );
    // What reached the listeners: the tree's two allowed connects, the
    // test's one to the denied port, nothing else (the DNS-port datagram
    // went to port 53, where nothing listens).
    let accepted = |l: &TcpListener| std::iter::from_fn(|| l.accept().ok()).count();
    assert_eq!(
        (accepted(&allowed), accepted(&denied), accepted(&undeclared)),
        (2, 1, 0)
    );
    let mut buf = [0u8; 64];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "a refused datagram arrived"
    );
    strace_agrees(&trace, (a, d, u, q));
    assert_eq!(out.status.code(), Some(1), "{stderr}"); // the audit failed
    assert!(
        stderr.lines().any(|l| l.starts_with(
            "agentsight: enforce: 6 accesses blocked (0 reads, 0 writes, 0 execs, 5 connects, 1 send); audited, not enforced: "
        )),
        "{stderr}"
    );
    // The capture: one row per refusal, with its destination.
    let py = procs_named(&db, "python3");
    assert_eq!(py.len(), 1, "{py:?}");
    let (pid, id) = py[0];
    let got: Vec<_> = denials(&db)
        .iter()
        .map(|r| {
            (
                r.kind,
                r.target(),
                i64::from(r.pid),
                r.process_id,
                r.rule.clone(),
                r.mechanism.clone(),
                r.path.clone(),
            )
        })
        .collect();
    let row = |kind, target: String, rule: &str| {
        (
            kind,
            target,
            pid,
            Some(id),
            rule.to_owned(),
            "cgroup-bpf".to_owned(),
            String::new(),
        )
    };
    use DenialKind::{Connect, Send};
    assert_eq!(
        got,
        vec![
            row(Connect, format!("127.0.0.1:{d}"), "network-denied"),
            row(Connect, format!("127.0.0.1:{u}"), "network-undeclared"),
            row(Connect, format!("127.0.0.1:{d}"), "network-denied"),
            row(Connect, format!("[::1]:{u}"), "network-undeclared"),
            row(Send, format!("127.0.0.1:{q}"), "network-undeclared"),
            row(Connect, format!("127.0.0.1:{d}"), "network-denied"),
        ]
    );
    net_audited_and_shown(&db, &policy, pid, (d, u, q));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The network run's audit marks each refused attempt's finding blocked
/// (the allowed ones are no finding), and `show` lists each refusal: `pid`
/// the workload's; the denied, undeclared and UDP ports.
fn net_audited_and_shown(db: &Path, policy: &Path, pid: i64, (d, u, q): (u16, u16, u16)) {
    let db = db.to_path_buf();
    let policy = policy.to_path_buf();
    let report = audit_json(&db, &policy);
    // Each finding counts its events: the two refused connects to the denied
    // port by IPv4 are one finding.
    let mut findings: Vec<(String, String, i64, bool, i64)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["rule"]
                .as_str()
                .is_some_and(|r| r.starts_with("network-"))
        })
        .filter(|f| f["access"] != "dns")
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                format!("{}:{}", f["addr"].as_str().unwrap(), f["port"]),
                f["process"]["pid"].as_i64().unwrap(),
                f["blocked"].as_bool().unwrap(),
                f["evidence"]["count"].as_i64().unwrap(),
            )
        })
        .collect();
    findings.sort();
    let f = |rule: &str, addr: &str, port: u16, n: i64| {
        (rule.to_owned(), format!("{addr}:{port}"), pid, true, n)
    };
    let mut want = vec![
        f("network-denied", "127.0.0.1", d, 2),
        f("network-denied", "::ffff:127.0.0.1", d, 1),
        f("network-undeclared", "127.0.0.1", u, 1),
        f("network-undeclared", "127.0.0.1", q, 1),
        f("network-undeclared", "::1", u, 1),
    ];
    want.sort();
    assert_eq!(findings, want, "{report:#}");
    // `show` lists each refusal by its destination.
    let shown = show(&db);
    assert!(
        shown.contains("blocked (0 read(s), 0 exec(s), 5 connect(s), 1 send(s)), 0 not stored"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            " send 127.0.0.1:{q} pid {pid} python3 network-undeclared (cgroup-bpf)\n"
        )),
        "{shown}"
    );
}

/// `strace -f` of the network workload: each refused call returned EPERM
/// (the five connects to the denied and undeclared ports, the datagram to
/// the undeclared UDP port), the two allowed connects returned 0 and the
/// datagram to port 53 was sent; no other connect or sendto.
fn strace_agrees(trace: &Path, (a, d, u, q): (u16, u16, u16, u16)) {
    let text = std::fs::read_to_string(trace).expect("the strace output");
    let calls: Vec<(String, u16, String)> = text
        .lines()
        .filter_map(|l| {
            let call = ["connect(", "sendto("]
                .into_iter()
                .find(|c| l.contains(c))?;
            let port: u16 = l.split("htons(").nth(1)?.split(')').next()?.parse().ok()?;
            let result = l.rsplit(" = ").next()?.split(' ').next()?.to_owned();
            let result = if result == "-1" {
                l.rsplit(" = -1 ").next()?.split(' ').next()?.to_owned()
            } else {
                result
            };
            Some((call.trim_end_matches('(').to_owned(), port, result))
        })
        .collect();
    let c = |port: u16, r: &str| ("connect".to_owned(), port, r.to_owned());
    assert_eq!(
        calls,
        vec![
            c(a, "0"),
            c(d, "EPERM"),
            c(u, "EPERM"),
            c(a, "0"),
            c(d, "EPERM"),
            c(u, "EPERM"),
            ("sendto".to_owned(), q, "EPERM".to_owned()),
            ("sendto".to_owned(), 53, "10".to_owned()),
            c(d, "EPERM"),
        ],
        "{text}"
    );
}

/// 300 opens for writing of `home/loop.txt`, each refused.
const LOOP: &str = "import os
n = 0
for _ in range(300):
    try:
        os.close(os.open(\"home/loop.txt\", os.O_WRONLY | os.O_CREAT))
    except PermissionError:
        n += 1
print(f\"loop={n}\")";

/// The tree's writes outside the allowed roots, as the workload at the top
/// of [`writes_outside_the_allowed_roots_are_refused_for_the_tree_only`]
/// makes them: (process argv[0], path under the scratch dir, rule).
const REFUSED_WRITES: &[(&str, &str, &str)] = &[
    ("sh", "home/outside.txt", "write-outside-allowed"),
    ("sh", "home/existing.txt", "write-outside-allowed"),
    ("mkdir", "home/newdir", "write-outside-allowed"),
    ("mv", "home/moved.txt", "write-outside-allowed"),
    ("sh", "home/viasym.txt", "write-outside-allowed"),
    ("truncate", "home/existing.txt", "write-outside-allowed"),
    ("ln", "home/existing.txt", "write-outside-allowed"),
    ("rm", "home/existing.txt", "write-outside-allowed"),
    ("sh", "home/.ssh/authorized_keys", "denied-path"),
];

/// Landlock (issue 31, writes): with the workspace the only allowed root
/// (and `/dev/null`), the tree's create, append, mkdir, rename out, write
/// through a symlink pointing outside, truncate, hard link of an outside
/// file into the workspace (EXDEV), remove and write of a denied path
/// outside it all fail with EACCES (`strace -f` agrees, call by
/// call) while its writes inside succeed; a process of the same user
/// outside the tree writes there during the run; each refusal is one
/// `landlock` row with its process and rule, a `blocked` audit finding,
/// and in `show`.
#[test]
fn writes_outside_the_allowed_roots_are_refused_for_the_tree_only() {
    use std::os::unix::process::CommandExt;
    require_root();
    let (uid, gid) = test_user();
    let dir = scratch("enforce-writes");
    let (ws, home) = (dir.join("ws"), dir.join("home"));
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(home.join("existing.txt"), "old\n").unwrap();
    std::os::unix::fs::symlink("../home/viasym.txt", ws.join("sym")).unwrap();
    for p in [&home, &home.join(".ssh"), &home.join("existing.txt"), &ws] {
        nix::unistd::chown(p.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    nix::unistd::fchownat(
        nix::fcntl::AT_FDCWD,
        &ws.join("sym"),
        Some(uid.into()),
        Some(gid.into()),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "home = \"{}\"\nworkspace = \"{}\"\n[writes]\nallow = [\"${{workspace}}/**\", \"/dev/null\"]\n[denied_paths]\nwrite = [\"~/.ssh/**\"]\n",
            home.display(),
            ws.display()
        ),
    )
    .unwrap();
    let script = format!(
        "cd {d}
echo ok > ws/inside.txt && echo inside=ok
echo x > home/outside.txt || echo create=refused
: > ws/ready; while [ ! -e ws/gate ]; do sleep 0.05; done
echo x >> home/existing.txt || echo append=refused
mkdir home/newdir || echo mkdir=refused
mv ws/inside.txt home/moved.txt || echo mv=refused
echo x > ws/sym || echo sym=refused
truncate -s0 home/existing.txt || echo truncate=refused
ln home/existing.txt ws/hl || echo link=refused
rm -f home/existing.txt || echo rm=refused
echo k > home/.ssh/authorized_keys || echo ssh=refused
echo n > /dev/null && echo devnull=ok
python3 -c '{LOOP}'
",
        d = dir.display()
    )
    .replace("{LOOP}", LOOP);
    let trace = ws.join("strace.txt");
    let db = dir.join("run.db");
    let command = [
        "strace",
        "-f",
        "-qq",
        "-e",
        "trace=openat,mkdir,rename,renameat2,truncate,link,linkat,unlink,unlinkat",
        "-o",
        trace.to_str().unwrap(),
        "sh",
        "-c",
        &script,
    ];
    let mut child = spawn_record(&db, &policy, "--enforce", &command);
    wait_for(&ws.join("ready"), &mut child);
    // A process of the same user outside the tree writes there meanwhile.
    let outside = Command::new("sh")
        .args(["-c", "echo outside > \"$0\"/home/outside.txt"])
        .arg(&dir)
        .uid(uid)
        .gid(gid)
        .status()
        .unwrap();
    assert!(outside.success());
    assert_eq!(
        std::fs::read_to_string(home.join("outside.txt")).unwrap(),
        "outside\n"
    );
    std::fs::remove_file(home.join("outside.txt")).unwrap();
    std::fs::write(ws.join("gate"), "").unwrap();
    let out = finish(child);
    let stderr = text(&out.stderr);
    assert_eq!(
        text(&out.stdout),
        "inside=ok\ncreate=refused\nappend=refused\nmkdir=refused\nmv=refused\nsym=refused\ntruncate=refused\nlink=refused\nrm=refused\nssh=refused\ndevnull=ok\nloop=300\n",
        "{stderr}"
    );
    // Nothing outside changed; inside, the file written is still there.
    let mut left: Vec<String> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".ssh", "existing.txt"]);
    assert_eq!(std::fs::read_dir(home.join(".ssh")).unwrap().count(), 0);
    assert_eq!(
        std::fs::read_to_string(home.join("existing.txt")).unwrap(),
        "old\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("inside.txt")).unwrap(),
        "ok\n"
    );
    writes_strace_agrees(&trace);
    assert_eq!(out.status.code(), Some(1), "{stderr}"); // the audit failed
    assert!(
        stderr.lines().any(|l| l.starts_with(
            "agentsight: enforce: 309 accesses blocked (0 reads, 309 writes, 0 execs, 0 connects, 0 sends); audited, not enforced: denied-path writes inside the allowed roots (Landlock only refuses outside them)"
        )),
        "{stderr}"
    );
    // The capture: one row per refusal, by path, process and rule.
    let argv0: std::collections::HashMap<i64, String> = processes(&open(&db))
        .into_iter()
        .map(|p| (p.id, p.argv.first().cloned().unwrap_or_default()))
        .collect();
    // The loop's refusals: identical failures back to back are folded into
    // rows with `repeat`; together they are its 300 calls.
    let (looped, rows): (Vec<DenialRow>, Vec<DenialRow>) = denials(&db)
        .into_iter()
        .partition(|r| r.path == dir.join("home/loop.txt").display().to_string());
    assert_eq!(
        looped.iter().map(|r| r.repeat).sum::<u64>(),
        300,
        "{looped:?}"
    );
    assert!(looped.iter().all(|r| r.rule == "write-outside-allowed"));
    let got: Vec<(DenialKind, String, String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.kind,
                r.process_id
                    .and_then(|id| argv0.get(&id).cloned())
                    .unwrap_or_default(),
                r.path.clone(),
                r.rule.clone(),
                r.mechanism.clone(),
            )
        })
        .collect();
    let want: Vec<_> = REFUSED_WRITES
        .iter()
        .map(|(p, path, rule)| {
            (
                DenialKind::Write,
                p.to_string(),
                dir.join(path).display().to_string(),
                rule.to_string(),
                "landlock".to_string(),
            )
        })
        .collect();
    assert_eq!(got, want);
    let meta = Capture::open(&db)
        .unwrap()
        .reader()
        .enforcement_meta()
        .unwrap()
        .unwrap();
    assert_eq!((meta.blocked_writes, meta.blocked_reads), (309, 0));
    // The audit: every refusal a blocked finding of its rule and path.
    let report = audit_json(&db, &policy);
    let mut blocked: Vec<(String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["blocked"] == true)
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or_default().to_owned(),
                f["path"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    blocked.sort();
    let mut expected: Vec<(String, String)> = REFUSED_WRITES
        .iter()
        .map(|(_, path, rule)| (rule.to_string(), dir.join(path).display().to_string()))
        .collect();
    // The loop's rows are one finding (its count their calls).
    expected.push((
        "write-outside-allowed".to_owned(),
        dir.join("home/loop.txt").display().to_string(),
    ));
    expected.sort();
    assert_eq!(blocked, expected, "{report:#}");
    let shown = show(&db);
    assert!(
        shown.contains("blocked (0 read(s), 309 write(s), 0 exec(s)), 0 not stored"),
        "{shown}"
    );
    let sym_line = format!(" write {} pid ", home.join("viasym.txt").display());
    assert!(
        shown.contains(&sym_line) && shown.contains(" write-outside-allowed (landlock)\n"),
        "{shown}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `strace -f` of the workload: the calls that failed with EACCES are
/// exactly the workload's writes outside the workspace, in its order.
fn writes_strace_agrees(trace: &Path) {
    let text = std::fs::read_to_string(trace).expect("the strace output");
    let refused: Vec<String> = text
        .lines()
        .filter(|l| l.contains("= -1 EACCES") || l.contains("= -1 EXDEV"))
        // The last path a call names (a rename's new name).
        .filter_map(|l| Some(l.split('"').rev().nth(1)?.to_owned()))
        .collect();
    // The symlink is named as asked; the hard link by its new name.
    assert_eq!(
        refused,
        [
            "home/outside.txt",
            "home/existing.txt",
            "home/newdir",
            "home/moved.txt",
            "ws/sym",
            "home/existing.txt",
            "ws/hl",
            "home/existing.txt",
            "home/.ssh/authorized_keys",
        ]
        .map(String::from)
        .into_iter()
        .chain(std::iter::repeat_n("home/loop.txt".to_owned(), 300))
        .collect::<Vec<_>>(),
        "{text}"
    );
}
