//! Root test of a message sent while recording, for each agent: a real
//! Claude Code, Codex and Gemini CLI session (the scripted model server's
//! `inspect` run) continued by `agentsight
//! session message` under `agentsight record --user agentsight-test` in the
//! run's network namespace (`continue_record`). The capture's
//! `external_messages` row has the submission's exact fields and names the
//! recorded provider process; `show` lists it, `correlate` names it for the
//! session and `export` carries it; `audit` with the default
//! policy reports exactly one `session-continued-externally` warning beside
//! what the policy says of the rest of the run, and none once the rule is
//! disabled.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use agentsight_tests::{
    e2e::{Agent, Run, clis_bin, scenario},
    messaging::only_session,
    *,
};
use serde_json::Value;

/// The continued session's id: the one transcript of the first run.
fn first_session(run: &Run) -> String {
    let out = run.run();
    assert!(out.status.success(), "the first run failed: {}", out.stderr);
    only_session(run).0
}

/// What differs between the agents a message is sent to.
struct Agentish {
    agent: Agent,
    provider: &'static str,
    transport: &'static str,
    /// Whether a process's argv is the provider `session message` starts.
    is_provider: fn(&[String], &str) -> bool,
    /// The findings the default policy has besides ours and the unexplained
    /// activity (rule, severity, message), `LOG` standing for the
    /// messaging log's path and `RUNHOME` for the run's home.
    findings: &'static [(&'static str, &'static str, &'static str)],
    /// The tool indices of the first run's calls: before the recording.
    before_recording: &'static [u64],
}

const CLAUDE: Agentish = Agentish {
    agent: Agent::Claude,
    provider: "claude",
    transport: "claude-stream-json",
    is_provider: |argv, id| {
        argv.first().is_some_and(|a| a.ends_with("/claude"))
            && argv.windows(2).any(|w| w[0] == "--resume" && w[1] == id)
            && argv.iter().any(|a| a == "-p")
    },
    // The messaging log outside the allowed roots and the model server on
    // loopback (undeclared: errors, exit status 1); the first run's first
    // tool call, made before this capture began, which correlate finds
    // unobserved in it.
    findings: &[
        (
            "write-outside-allowed",
            "error",
            "write outside the allowed roots: LOG",
        ),
        (
            "network-undeclared",
            "error",
            "connect to undeclared loopback destination 127.0.0.1:8787 (TCP established)",
        ),
    ],
    before_recording: &[0, 1],
};

const GEMINI: Agentish = Agentish {
    agent: Agent::Gemini,
    provider: "gemini",
    transport: "gemini-resume",
    is_provider: |argv, id| argv.windows(2).any(|w| w[0] == "--resume" && w[1] == id),
    // The messaging log outside the allowed roots, Gemini CLI reading its
    // `~/.gemini/.env` (where its key and endpoint are for a cleared
    // environment: a denied path to the default policy) and the model
    // server on loopback: errors, exit status 1.
    findings: &[
        (
            "write-outside-allowed",
            "error",
            "write outside the allowed roots: LOG",
        ),
        (
            "denied-path",
            "error",
            "read of denied path RUNHOME/.gemini/.env",
        ),
        (
            "network-undeclared",
            "error",
            "connect to undeclared loopback destination 127.0.0.1:8787 (TCP established)",
        ),
    ],
    before_recording: &[0, 1],
};

const CODEX: Agentish = Agentish {
    agent: Agent::Codex,
    provider: "codex",
    transport: "codex-app-server",
    is_provider: |argv, _| argv.iter().any(|a| a == "app-server"),
    // The messaging log outside the allowed roots and the model server on
    // loopback (undeclared: errors, exit status 1). The first run's tool
    // calls, made before this capture began, are not judged.
    findings: &[
        (
            "write-outside-allowed",
            "error",
            "write outside the allowed roots: LOG",
        ),
        (
            "network-undeclared",
            "error",
            "connect to undeclared loopback destination 127.0.0.1:8787 (TCP established)",
        ),
    ],
    before_recording: &[0, 1],
};

/// `record --user agentsight-test -o DB -- agentsight session message ID
/// --allow-messaging --text TEXT --home HOME`, in the run's namespace, with
/// the continuation scenario on the model server.
fn message_recorded(run: &mut Run, id: &str) -> PathBuf {
    run.configure_for_message();
    run.scenario = scenario("continue_record");
    let db = run.server_dir.join("message.db");
    let out = run.launch(|_| {
        sv(&[
            &bin().display().to_string(),
            "record",
            "--quiet",
            "--user",
            TEST_USER,
            // The pinned CLIs first, as for the runs themselves.
            "--env",
            &format!("PATH={}:/usr/local/bin:/usr/bin:/bin", clis_bin().display()),
            "-o",
            &db.display().to_string(),
            "--",
            &bin().display().to_string(),
            "session",
            "message",
            id,
            "--allow-messaging",
            "--text",
            &run.scenario.prompt,
            "--home",
            &run.home.display().to_string(),
        ])
    });
    assert!(
        out.status.success(),
        "record of session message failed ({:?}): {}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    assert!(
        out.stdout.contains("turn completed"),
        "stdout: {}",
        out.stdout
    );
    db
}

/// The one stored submission, every column.
fn external_message(db: &Path) -> serde_json::Map<String, Value> {
    let conn = open(db);
    let mut st = conn
        .prepare(
            "SELECT id, time_ms, session_id, provider, transport, container, invoking_uid,
                    invoking_user, run_as_uid, pid, provider_pid, message_bytes, outcome, detail,
                    finished_ms
             FROM external_messages",
        )
        .unwrap();
    let names: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
    let rows: Vec<serde_json::Map<String, Value>> = st
        .query_map([], |r| {
            let mut m = serde_json::Map::new();
            for (i, n) in names.iter().enumerate() {
                let v = match r.get_ref(i)? {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(x) => Value::from(x),
                    rusqlite::types::ValueRef::Text(t) => {
                        Value::from(String::from_utf8_lossy(t).into_owned())
                    }
                    other => panic!("{n}: unexpected {other:?}"),
                };
                m.insert(n.clone(), v);
            }
            Ok(m)
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    rows.into_iter().next().unwrap()
}

/// Checks the row's fields against what the test ran; returns the provider
/// process's pid.
fn check_row(case: &Agentish, db: &Path, id: &str, text: &str) -> i64 {
    let (uid, _) = test_user();
    let row = external_message(db);
    let procs = processes(&open(db));
    // The recorded command: `agentsight session message …`, the root.
    let root = procs
        .iter()
        .find(|p| p.origin == "root")
        .expect("the recorded root");
    assert_eq!(root.argv[1..4], sv(&["session", "message", id]));
    let provider_pid = row["provider_pid"].as_i64().expect("provider_pid");
    let provider: Vec<&ProcRow> = procs.iter().filter(|p| p.pid == provider_pid).collect();
    assert_eq!(provider.len(), 1, "{provider:#?}");
    let argv = &provider[0].argv;
    assert!((case.is_provider)(argv, id), "provider argv {argv:?}");
    // The provider is the submitting process's child, run as the user.
    assert_eq!(provider[0].parent_id, Some(root.id));
    assert_eq!(provider[0].uid, Some(uid as i64));
    let started = row["time_ms"].as_i64().unwrap();
    let finished = row["finished_ms"].as_i64().expect("finished_ms");
    assert!(started <= finished, "{row:?}");
    let mut want = row.clone();
    for (k, v) in [
        ("session_id", Value::from(id)),
        ("provider", case.provider.into()),
        ("transport", case.transport.into()),
        ("container", Value::Null),
        ("invoking_uid", uid.into()),
        ("invoking_user", TEST_USER.into()),
        ("run_as_uid", uid.into()),
        ("pid", root.pid.into()),
        ("message_bytes", text.len().into()),
        ("outcome", "completed".into()),
        ("detail", Value::Null),
    ] {
        want.insert(k.into(), v);
    }
    assert_eq!(row, want);
    provider_pid
}

/// `agentsight show DB`'s EXTERNAL MESSAGES section.
fn check_show(case: &Agentish, db: &Path, id: &str, text: &str, provider_pid: i64) {
    let out = Command::new(bin())
        .args(["show", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert_exit_0(&out);
    let show = String::from_utf8(out.stdout).unwrap();
    let section: Vec<&str> = show
        .lines()
        .skip_while(|l| !l.starts_with("EXTERNAL MESSAGES"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(section.len(), 2, "{show}");
    let (uid, _) = test_user();
    let line = section[1];
    let want = format!(
        "  session {id} ({})  {}  by {TEST_USER} (uid {uid}) as uid {uid}  {} bytes  completed  provider pid {provider_pid} (",
        case.provider,
        case.transport,
        text.len()
    );
    assert!(line.contains(&want), "{line}\nwanted: {want}");
}

/// `correlate ID --db DB --json` lists the submission that continued the
/// session; `export --format jsonl` carries it as a record of its own kind.
fn check_correlate_and_export(case: &Agentish, run: &Run, db: &Path, id: &str, row_id: &str) {
    let c = run.correlate(id, db);
    // The first run's calls ended before the recording began: not judged,
    // and named as such; every call of the continued turn is judged.
    let before: Vec<u64> = c["flags"]["before_recording"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    assert_eq!(before, case.before_recording, "{}", c["flags"]);
    assert_eq!(
        c["flags"]["claimed_not_observed"],
        serde_json::json!([]),
        "{}",
        c["flags"]
    );
    let listed: Vec<&str> = c["external_messages"]
        .as_array()
        .expect("external_messages")
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [row_id]);
    let out = Command::new(bin())
        .args(["export", "--format", "jsonl", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert_exit_0(&out);
    let records: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &Value| r["kind"] == "external_message")
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (
            &records[0]["id"],
            &records[0]["session_id"],
            &records[0]["outcome"]
        ),
        (
            &Value::from(row_id),
            &Value::from(id),
            &Value::from("completed")
        )
    );
}

/// `agentsight audit --db DB --policy POLICY --format json`: exit status
/// and (rule, severity, message) of every finding.
fn audit(db: &Path, policy: &str) -> (i32, Vec<(String, String, String)>) {
    let path = db.with_extension(format!("policy{}.toml", policy.len()));
    std::fs::write(&path, policy).unwrap();
    let out = Command::new(bin())
        .args(["audit", "--format", "json", "--db"])
        .arg(db)
        .arg("--policy")
        .arg(&path)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("audit JSON: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    let findings = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["severity"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (out.status.code().unwrap(), findings)
}

/// One agent at a time: every submission of the test user goes to one log,
/// and a capture stores all of those made inside its window, whoever made
/// them (cargo runs the test binaries one after another).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The whole check for one agent.
fn message_while_recording(case: &Agentish) {
    require_root();
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut run = Run::prepare(case.agent, "inspect");
    let id = first_session(&run);
    let db = message_recorded(&mut run, &id);
    let text = run.scenario.prompt.clone();
    let provider_pid = check_row(case, &db, &id, &text);
    check_show(case, &db, &id, &text, provider_pid);
    let row_id = external_message(&db)["id"].as_str().unwrap().to_owned();
    check_correlate_and_export(case, &run, &db, &id, &row_id);

    let (status, findings) = audit(&db, "");
    let ours: Vec<&(String, String, String)> = findings
        .iter()
        .filter(|f| f.0 == "session-continued-externally")
        .collect();
    assert_eq!(ours.len(), 1, "{findings:#?}");
    assert_eq!(ours[0].1, "warning");
    let prefix = format!(
        "session {id} ({}) continued externally by agentsight session message ({}, {} bytes, by {TEST_USER}) at ",
        case.provider,
        case.transport,
        text.len()
    );
    assert!(ours[0].2.starts_with(&prefix), "{}", ours[0].2);
    // The rest of the run under the default policy, exactly, but for the
    // unexplained activity (the agent's own start-up work varies).
    let exact: Vec<(&str, &str, String)> = findings
        .iter()
        .filter(|f| f.0 != "session-continued-externally" && f.0 != "unexplained-activity")
        .map(|f| (f.0.as_str(), f.1.as_str(), f.2.clone()))
        .collect();
    let log = format!("/home/{TEST_USER}/.local/state/agentsight/messages.jsonl");
    let want: Vec<(&str, &str, String)> = case
        .findings
        .iter()
        .map(|&(rule, severity, message)| {
            let home = run.home.display().to_string();
            (
                rule,
                severity,
                message.replace("LOG", &log).replace("RUNHOME", &home),
            )
        })
        .collect();
    assert_eq!(exact, want, "{findings:#?}");
    // Unexplained activity: warnings, among them the submitting process's
    // own bookkeeping (the messaging log and the session's lock).
    let unexplained: Vec<&str> = findings
        .iter()
        .filter(|f| f.0 == "unexplained-activity")
        .map(|f| {
            assert_eq!(f.1, "warning");
            f.2.as_str()
        })
        .collect();
    let lock = run.home.join(format!(
        ".local/state/agentsight/locks/{}-{id}.lock",
        case.provider
    ));
    for want in [
        format!("activity no tool call explains: openat {log}"),
        format!("activity no tool call explains: openat {}", lock.display()),
    ] {
        assert!(
            unexplained.contains(&want.as_str()),
            "{want}: {unexplained:#?}"
        );
    }
    assert_eq!(status, 1);

    let (status, without) = audit(&db, "[external_messages]\nenabled = false\n");
    assert_eq!(status, 1);
    let rest: Vec<&(String, String, String)> = findings
        .iter()
        .filter(|f| f.0 != "session-continued-externally")
        .collect();
    assert_eq!(without.iter().collect::<Vec<_>>(), rest);
}

#[test]
fn a_message_to_codex_while_recording_is_in_the_capture_show_and_audit() {
    message_while_recording(&CODEX);
}

#[test]
fn a_message_to_claude_code_while_recording_is_in_the_capture_show_and_audit() {
    message_while_recording(&CLAUDE);
}

#[test]
fn a_message_to_gemini_cli_while_recording_is_in_the_capture_show_and_audit() {
    message_while_recording(&GEMINI);
}
