//! Root tests of `agentsight audit` and `record --audit` on real kernel
//! captures: a scripted agent (tests/workloads/audit_agent.sh) that stays
//! inside the policy (creating allowed roots included: mkdir of its TMPDIR,
//! O_TMPFILE opens naming the TMPDIR and the workspace), one that breaks it
//! in every way, and a flood that forces loss; plus the exit statuses of bad
//! input.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use agentsight_tests::*;
use serde_json::Value;

struct Run {
    dir: PathBuf,
    work: PathBuf,
    db: PathBuf,
    policy: PathBuf,
    outside: PathBuf,
    /// The command's TMPDIR: not created; the workload makes it.
    tmpdir: PathBuf,
    allowed: u16,
    denied: u16,
    undeclared: u16,
    _listeners: (TcpListener, TcpListener),
}

fn home() -> PathBuf {
    test_user();
    nix::unistd::User::from_name(TEST_USER)
        .unwrap()
        .unwrap()
        .dir
}

/// A fake key in the test user's ~/.ssh (the denied path the agent reads).
fn fake_key() -> PathBuf {
    let (uid, gid) = test_user();
    let ssh = home().join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    let key = ssh.join("id_rsa");
    std::fs::write(&key, "not a real key\n").unwrap();
    for p in [&ssh, &key] {
        nix::unistd::chown(p.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    key
}

fn setup(name: &str) -> Run {
    let dir = scratch(name);
    let (uid, gid) = test_user();
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    nix::unistd::chown(work.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    let allowed_l = TcpListener::bind("127.0.0.1:0").unwrap();
    let undeclared_l = TcpListener::bind("127.0.0.1:0").unwrap();
    // A port nothing listens on: bind, note, drop.
    let denied = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let allowed = allowed_l.local_addr().unwrap().port();
    let undeclared = undeclared_l.local_addr().unwrap().port();
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "# test policy\n[writes]\nallow = [\"${{workspace}}/**\", \"${{tmpdir}}/**\", \"/dev/null\", \"/dev/tty\"]\n\n[network]\nallow = [\"127.0.0.1:{allowed}\"]\ndeny = [\"127.0.0.1:{denied}\"]\n"
        ),
    )
    .unwrap();
    Run {
        // The capture sits in the workspace: `record` runs the command there.
        db: work.join("run.db"),
        outside: dir.join("outside.txt"),
        tmpdir: dir.join("tmp"),
        dir,
        work,
        policy,
        allowed,
        denied,
        undeclared,
        _listeners: (allowed_l, undeclared_l),
    }
}

fn workload() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/audit_agent.sh")
        .display()
        .to_string()
}

fn audit(db: &Path, policy: &Path, format: &str) -> Output {
    Command::new(bin())
        .args(["audit", "--db"])
        .arg(db)
        .arg("--policy")
        .arg(policy)
        .args(["--format", format])
        .output()
        .expect("run agentsight audit")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// (rule, severity, message, leaf argv, chain of argv[0..2] from the root)
type Brief = (String, String, String, Vec<String>, Vec<Vec<String>>);

fn briefs(report: &Value) -> Vec<Brief> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let chain = f["process"]["chain"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .map(|e| {
                            e["argv"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .take(2)
                                .map(|s| s.as_str().unwrap().to_string())
                                .collect()
                        })
                        .collect()
                })
                .unwrap_or_default();
            let leaf = f["process"]["argv"]
                .as_array()
                .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            (
                f["rule"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
                leaf,
                chain,
            )
        })
        .collect()
}

const NO_CORR: &str = "the capture holds no session bindings or correlations: unexplained-activity and claims-mismatch were not checked";

#[test]
fn agent_inside_the_policy_passes() {
    require_root();
    let r = setup("audit-clean");
    let port = r.allowed.to_string();
    let policy = r.policy.display().to_string();
    let sarif_out = r.dir.join("audit.sarif");
    let sarif_s = sarif_out.display().to_string();
    let tmpdir = r.tmpdir.display().to_string();
    let out = record_env(
        &r.db,
        &[
            "--audit",
            &policy,
            "--audit-format",
            "sarif",
            "--audit-output",
            &sarif_s,
            // The command gets an env_reset environment: its TMPDIR is
            // passed on explicitly, as a user would.
            "--env",
            "TMPDIR",
        ],
        &["/bin/bash", &workload(), "clean", &port],
        &[("TMPDIR", &tmpdir)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The roots were created, and that passed: mkdir of the TMPDIR, and
    // O_TMPFILE opens naming the TMPDIR and the workspace, all successful.
    let conn = open(&r.db);
    assert_eq!(
        meta(&conn, "tmpdirs").as_deref(),
        Some(format!("[\"{tmpdir}\"]").as_str())
    );
    let created = |kind: &str, path: &str, flag: &str| -> i64 {
        conn.query_row(
            "SELECT COUNT(*) FROM events WHERE kind = ?1 AND path = ?2 AND result >= 0
             AND (?3 = '' OR ',' || flags || ',' LIKE '%,' || ?3 || ',%')",
            [kind, path, flag],
            |row| row.get(0),
        )
        .unwrap()
    };
    let work = r.work.display().to_string();
    assert_eq!(created("mkdir", &tmpdir, ""), 1);
    assert_eq!(created("openat", &tmpdir, "tmpfile"), 1);
    assert_eq!(created("openat", &work, "tmpfile"), 1);
    let sarif: Value = serde_json::from_slice(&std::fs::read(&sarif_out).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(sarif["runs"][0]["results"].as_array().unwrap().len(), 1);
    assert!(
        stderr(&out).contains("audit PASSED: 0 error(s), 0 warning(s), 1 note(s)"),
        "{}",
        stderr(&out)
    );
    let a = audit(&r.db, &r.policy, "json");
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    let report: Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(report["passed"], true);
    assert_eq!(report["workspace"], r.work.display().to_string());
    assert_eq!(
        briefs(&report),
        vec![(
            "audit-note".to_string(),
            "note".to_string(),
            NO_CORR.to_string(),
            vec![],
            vec![]
        )]
    );
    let _ = std::fs::remove_dir_all(&r.dir);
}

/// The error findings of the breaking run. The read through a symlink
/// (`cat innocent.txt`, innocent.txt → the key) is a finding: the capture
/// holds the path the kernel opened; so is the read through a hard link
/// (`cat copy.txt`): the key's inode was noted when recording started.
const BAD_ERRORS: usize = 8;

/// What the breaking run was given: the fake key, curl's hard link, the
/// workload script and its arguments, and the TMPDIR its wrapper set.
struct Bad {
    key: PathBuf,
    fetch: PathBuf,
    script: String,
    args: [String; 5],
    tmpdir: String,
}

/// Records the workload's `bad` mode with `--audit`: the command succeeds,
/// the audit fails (exit 1) with its summary and the denied read on stderr.
fn record_the_breaking_agent(r: &Run) -> Bad {
    let key = fake_key();
    // curl under another name, for the workload to run (made as root).
    let fetch = r.work.join("fetch");
    std::fs::hard_link("/usr/bin/curl", &fetch).unwrap();
    let policy = r.policy.display().to_string();
    let script = workload();
    let args = [
        "bad".to_string(),
        r.allowed.to_string(),
        r.outside.display().to_string(),
        r.denied.to_string(),
        r.undeclared.to_string(),
    ];
    // TMPDIR set by a wrapper, not inherited from `record`: read from the
    // root's environment once `env` has exec'd the workload.
    let tmpdir = r.tmpdir.display().to_string();
    let tmp_env = format!("TMPDIR={tmpdir}");
    let mut cmd = vec![
        "/usr/bin/env",
        tmp_env.as_str(),
        "/bin/bash",
        script.as_str(),
    ];
    cmd.extend(args.iter().map(String::as_str));
    let out = record(&r.db, &["--audit", &policy], &cmd);
    // The command succeeded; the audit failed: exit 1, findings on stderr.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let errors = BAD_ERRORS;
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "audit FAILED: {errors} error(s), 0 warning(s), 1 note(s)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "ERROR [denied-path] read of denied path {}",
            key.display()
        )),
        "{err}"
    );
    Bad {
        key,
        fetch,
        script,
        args,
        tmpdir,
    }
}

/// Takes the findings whose leaf argv is `argv` out of `got`.
fn take_briefs_of(got: &mut Vec<Brief>, argv: &[String]) -> Vec<Brief> {
    let taken: Vec<Brief> = got.iter().filter(|b| b.3 == argv).cloned().collect();
    got.retain(|b| b.3 != argv);
    taken
}

/// The findings through links, taken out of `got`: the key read through
/// its hard link, curl exec'd through its hard link, the key read through
/// a symlink.
fn check_the_findings_through_links(r: &Run, bad: &Bad, got: &mut Vec<Brief>) {
    let root: Vec<String> = vec!["/bin/bash".into(), bad.script.clone()];
    let key_s = bad.key.display().to_string();
    let through_hard_link = sv(&["cat", "copy.txt"]);
    let hard = take_briefs_of(got, &through_hard_link);
    let copy = r.work.join("copy.txt").display().to_string();
    assert_eq!(hard.len(), 1, "{hard:?}");
    assert_eq!(
        (hard[0].0.as_str(), hard[0].1.as_str()),
        ("denied-path", "error")
    );
    assert!(
        hard[0].2.starts_with(&format!(
            "read of denied path {key_s} through {copy} (the same file: device "
        )),
        "{hard:?}"
    );
    // The hard link of curl is known by its inode, noted as recording began.
    let fetch_argv = sv(&["./fetch", "--version"]);
    let fetched = take_briefs_of(got, &fetch_argv);
    assert_eq!(fetched.len(), 1, "{fetched:?}");
    assert_eq!(fetched[0].0, "denied-executable");
    assert!(
        fetched[0].2.starts_with(&format!(
            "exec of denied executable /usr/bin/curl through {} (the same file: device ",
            bad.fetch.display()
        )),
        "{fetched:?}"
    );
    let through_link = sv(&["cat", "innocent.txt"]);
    let linked = take_briefs_of(got, &through_link);
    assert_eq!(linked.len(), 1, "{linked:?}");
    assert_eq!(
        (linked[0].0.as_str(), linked[0].1.as_str()),
        ("denied-path", "error")
    );
    assert!(linked[0].2.contains(&key_s), "{linked:?}");
    assert_eq!(linked[0].4, vec![root.clone(), through_link.clone()]);
}

/// The findings left once those through links are taken out: exactly the
/// direct ones, in order, with their processes and chains.
fn check_the_direct_findings(r: &Run, bad: &Bad, got: Vec<Brief>) {
    let root: Vec<String> = vec!["/bin/bash".into(), bad.script.clone()];
    let key_s = bad.key.display().to_string();
    let curl_url = format!("http://127.0.0.1:{}/", r.denied);
    let curl_argv = sv(&["curl", "-s", "--max-time", "2", &curl_url]);
    let mut root_argv = root.clone();
    root_argv.extend(bad.args.iter().cloned());
    assert_eq!(
        got,
        vec![
            (
                "denied-path".into(),
                "error".into(),
                format!("read of denied path {key_s}"),
                sv(&["cat", &key_s]),
                vec![root.clone(), sv(&["cat", &key_s])]
            ),
            (
                "write-outside-allowed".into(),
                "error".into(),
                format!("write outside the allowed roots: {}", r.outside.display()),
                root_argv.clone(),
                vec![root.clone()]
            ),
            (
                "denied-executable".into(),
                "error".into(),
                "exec of denied executable /usr/bin/curl".into(),
                curl_argv.clone(),
                vec![root.clone(), sv(&["curl", "-s"])]
            ),
            (
                "network-denied".into(),
                "error".into(),
                // curl connects non-blocking (EINPROGRESS); the outcome is
                // the tcp_state that follows: nothing listens there.
                format!(
                    "connect to denied destination 127.0.0.1:{} (TCP closed)",
                    r.denied
                ),
                curl_argv.clone(),
                vec![root.clone(), sv(&["curl", "-s"])]
            ),
            (
                "network-undeclared".into(),
                "error".into(),
                format!(
                    "connect to undeclared loopback destination 127.0.0.1:{}",
                    r.undeclared
                ),
                root_argv.clone(),
                vec![root.clone()]
            ),
            (
                "audit-note".into(),
                "note".into(),
                NO_CORR.into(),
                vec![],
                vec![]
            ),
        ]
    );
}

/// Each finding names its event and a time inside the run; the denied
/// read its matched glob, the denied connect its address; nothing under
/// the TMPDIR is a finding.
fn check_the_finding_details(r: &Run, bad: &Bad, report: &Value) {
    let tmpdir = &bad.tmpdir;
    let started = meta(&open(&r.db), "started_at").unwrap();
    let findings = report["findings"].as_array().unwrap();
    for f in findings.iter().take(BAD_ERRORS) {
        let t = f["time"].as_str().unwrap();
        assert!(t > started.as_str() && t.ends_with('Z'), "{t} vs {started}");
        assert!(!f["evidence"]["event_ids"].as_array().unwrap().is_empty());
    }
    assert_eq!(findings[0]["evidence"]["matched"], "~/.ssh/**");
    assert_eq!(findings[0]["access"], "read");
    let denied = findings
        .iter()
        .find(|f| f["rule"] == "network-denied")
        .unwrap();
    assert_eq!(denied["addr"], "127.0.0.1");
    assert_eq!(denied["port"], r.denied);
    // Nothing else: the TMPDIR and O_TMPFILE work of the run passed.
    assert!(
        !findings
            .iter()
            .any(|f| f["path"].as_str().is_some_and(|p| p.starts_with(tmpdir))),
        "{findings:?}"
    );
}

/// The other formats of the same report: SARIF levels in time order, and
/// the JUnit summary.
fn check_the_sarif_and_junit_reports(r: &Run) {
    let sarif = audit(&r.db, &r.policy, "sarif");
    assert_eq!(sarif.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&sarif.stdout).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let mut levels: Vec<(&str, &str)> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["ruleId"].as_str().unwrap(), x["level"].as_str().unwrap()))
        .collect();
    // The three denied reads (direct, symlink, hard link) come first, by time.
    assert_eq!(levels.remove(1), ("denied-path", "error"));
    assert_eq!(levels.remove(1), ("denied-path", "error"));
    assert_eq!(
        levels,
        vec![
            ("denied-path", "error"),
            ("write-outside-allowed", "error"),
            ("denied-executable", "error"),
            ("network-denied", "error"),
            ("network-undeclared", "error"),
            // curl through its hard link, last.
            ("denied-executable", "error"),
            ("audit-note", "note"),
        ]
    );
    let junit = audit(&r.db, &r.policy, "junit");
    assert_eq!(junit.status.code(), Some(1));
    let xml = String::from_utf8(junit.stdout).unwrap();
    assert!(
        xml.contains(
            "<testsuites name=\"agentsight audit\" tests=\"10\" failures=\"5\" errors=\"0\">"
        ),
        "{xml}"
    );
}

#[test]
fn agent_breaking_the_policy_is_flagged() {
    require_root();
    let r = setup("audit-bad");
    let bad = record_the_breaking_agent(&r);

    let a = audit(&r.db, &r.policy, "json");
    assert_eq!(a.status.code(), Some(1), "{}", stderr(&a));
    let report: Value = serde_json::from_slice(&a.stdout).unwrap();
    let tmpdirs: Vec<String> =
        serde_json::from_str(&meta(&open(&r.db), "tmpdirs").unwrap()).unwrap();
    assert!(tmpdirs.contains(&bad.tmpdir), "{tmpdirs:?}");
    let mut got = briefs(&report);
    check_the_findings_through_links(&r, &bad, &mut got);
    check_the_direct_findings(&r, &bad, got);
    check_the_finding_details(&r, &bad, &report);

    check_the_sarif_and_junit_reports(&r);
    let _ = std::fs::remove_dir_all(&r.dir);
}

#[test]
fn forced_loss_fails_require_no_loss() {
    require_root();
    let dir = scratch("audit-loss");
    let flood = static_open_flood(&dir, 300_000, "/nonexistent-agentsight-audit");
    let db = dir.join("flood.db");
    let out = record(&db, &["--ring-mib", "1"], &[&flood.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let conn = open(&db);
    let lost: i64 = conn
        .query_row("SELECT lost FROM loss WHERE kind = 'syscall'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let missing: i64 = conn
        .query_row("SELECT COALESCE(SUM(missing), 0) FROM gaps", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(lost > 0, "the 1 MiB ring was expected to overflow");
    // The default policy: require_no_loss = true.
    let policy = dir.join("empty.toml");
    std::fs::write(&policy, "# all defaults\n").unwrap();
    let a = audit(&db, &policy, "json");
    assert_eq!(a.status.code(), Some(1), "{}", stderr(&a));
    let report: Value = serde_json::from_slice(&a.stdout).unwrap();
    let loss: Vec<(String, String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "capture-loss")
        .map(|f| {
            (
                f["severity"].as_str().unwrap().to_string(),
                f["kind"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        loss,
        vec![
            (
                "error".to_string(),
                "loss".to_string(),
                format!("{lost} syscall record(s) lost in the kernel (loss table)")
            ),
            (
                "error".to_string(),
                "gap".to_string(),
                format!("{missing} record(s) missing in per-CPU sequence gaps")
            ),
        ]
    );
    // Turned off, loss is still reported, as a note, and the audit passes.
    std::fs::write(&policy, "require_no_loss = false\n").unwrap();
    let a = audit(&db, &policy, "text");
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_2_with_file_and_line() {
    let dir = scratch("audit-input");
    let policy = dir.join("bad.toml");
    std::fs::write(
        &policy,
        "require_no_loss = true\n[executables]\ndeny = [\"cu[rl\"]\n",
    )
    .unwrap();
    let a = audit(&dir.join("none.db"), &policy, "text");
    assert_eq!(a.status.code(), Some(2));
    assert_eq!(
        stderr(&a),
        format!(
            "agentsight: error: {}:3: bad glob \"cu[rl\": unclosed character class; missing ']'\n",
            policy.display()
        )
    );
    std::fs::write(&policy, "[rules]\n").unwrap();
    let a = audit(&dir.join("none.db"), &policy, "text");
    assert_eq!(a.status.code(), Some(2));
    assert!(
        stderr(&a).starts_with(&format!(
            "agentsight: error: {}:1: unknown field `rules`",
            policy.display()
        )),
        "{}",
        stderr(&a)
    );
    std::fs::write(&policy, "").unwrap();
    let a = audit(&dir.join("none.db"), &policy, "text");
    assert_eq!(a.status.code(), Some(2));
    assert_eq!(
        stderr(&a),
        format!(
            "agentsight: error: {}: no such file\n",
            dir.join("none.db").display()
        )
    );
    // A bad policy fails `record --audit` before anything runs.
    std::fs::write(&policy, "unexplained_activity = \"sometimes\"\n").unwrap();
    let out = record(
        &dir.join("never.db"),
        &["--audit", &policy.display().to_string()],
        &["/bin/true"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.join("never.db").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scripted Claude Code agent (tests/workloads/scripted_agent.py, shared
/// with the correlate tests) whose session `record` binds: findings name the
/// session and tool call, and correlate's flags become rule findings.
#[test]
fn findings_name_the_session_and_tool_call() {
    require_root();
    let dir = scratch("audit-corr");
    let (uid, gid) = test_user();
    let home = dir.join("home");
    let work = dir.join("work");
    for d in [&home, &work] {
        std::fs::create_dir_all(d).unwrap();
        nix::unistd::chown(d.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sid = "22222222-3333-4444-8555-666666666666";
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/scripted_agent.py")
        .display()
        .to_string();
    let undeclared = work.join("undeclared.txt").display().to_string();
    let args = [
        "python3",
        &script,
        "--format",
        "claude",
        "--home",
        &home.display().to_string(),
        "--cwd",
        &work.display().to_string(),
        "--session-id",
        sid,
        "--port",
        &port.to_string(),
        "--undeclared",
        &undeclared,
    ];
    let db = dir.join("run.db");
    let out = record(&db, &[], &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Writes only under the agent's home (its transcript): the workspace
    // writes become findings that carry their tool call.
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "unexplained_activity = \"fail\"\nclaims_mismatch = \"fail\"\n[writes]\nallow = [\"{}/**\", \"/dev/null\"]\n[network]\nallow = [\"127.0.0.1:{port}\"]\n",
            home.display()
        ),
    )
    .unwrap();
    let a = audit(&db, &policy, "json");
    assert_eq!(a.status.code(), Some(1), "{}", stderr(&a));
    let report: Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(report["correlations"], true);
    let got: Vec<(String, String, Value, Value, Value)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
                f["session"]["tool_index"].clone(),
                f["session"]["role"].clone(),
                f["session"]["reason"].clone(),
            )
        })
        .collect();
    let w = |f: &str| work.join(f).display().to_string();
    let row = |rule: &str, msg: String, idx: Value, role: &str, reason: &str| {
        (
            rule.to_string(),
            msg,
            idx,
            Value::from(role),
            Value::from(reason),
        )
    };
    assert_eq!(
        got,
        vec![
            row(
                "write-outside-allowed",
                format!("write outside the allowed roots: {}", w("notes.txt")),
                0.into(),
                "attributed",
                "argv_match"
            ),
            row(
                "write-outside-allowed",
                format!("write outside the allowed roots: {}", w("out.txt")),
                1.into(),
                "attributed",
                "path_match"
            ),
            row(
                "write-outside-allowed",
                format!("write outside the allowed roots: {undeclared}"),
                Value::Null,
                "observed_not_claimed",
                "runtime"
            ),
            row(
                "unexplained-activity",
                format!("activity no tool call explains: openat {undeclared}"),
                Value::Null,
                "observed_not_claimed",
                "runtime"
            ),
            row(
                "unexplained-activity",
                format!("activity no tool call explains: connect 127.0.0.1:{port}"),
                Value::Null,
                "observed_not_claimed",
                "runtime"
            ),
        ]
    );
    // The Bash tool call's write was done by `bash -c CMD`, a child of the agent.
    let chain = report["findings"][0]["process"]["chain"]
        .as_array()
        .unwrap();
    assert_eq!(chain.len(), 2);
    assert_eq!(chain[0]["argv"][1], script);
    assert_eq!(
        chain[1]["argv"],
        serde_json::json!(["bash", "-c", "echo hello > notes.txt && cat notes.txt"])
    );
    assert!(report["findings"][0]["session"]["call_id"].is_string());
    for f in report["findings"].as_array().unwrap() {
        assert_eq!(f["session"]["session_id"], sid, "{f}");
        assert_eq!(f["session"]["provider"], "claude", "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tree adopted with `--pid`: its root's TMPDIR (from /proc/PID/environ)
/// is stored in meta `tmpdirs`, a child's is not.
#[test]
fn tmpdir_of_an_adopted_tree_is_recorded() {
    require_root();
    let dir = scratch("audit-pid-tmpdir");
    let mut target = Command::new("/bin/sh")
        .args(["-c", "TMPDIR=/srv/child-tmp /bin/sleep 5 & wait"])
        .env("TMPDIR", "/srv/agent-tmp//")
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let db = dir.join("pid.db");
    let out = Command::new(bin())
        .args(["record", "--quiet", "--duration", "1s", "-o"])
        .arg(&db)
        .args(["--pid", &target.id().to_string()])
        .output()
        .unwrap();
    let _ = target.kill();
    let _ = target.wait();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        meta(&open(&db), "tmpdirs").as_deref(),
        Some("[\"/srv/agent-tmp\"]")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
