//! Root tests of session matching and `correlate` on real kernel captures:
//! a scripted agent (tests/workloads/scripted_agent.py) writes a real-format
//! Claude Code transcript or Codex rollout while really running the tools it
//! claims, plus one undeclared write and one undeclared connection.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
};

use agentsight_tests::*;
use serde_json::Value;

const CMD: &str = "echo hello > notes.txt && cat notes.txt";

struct Run {
    dir: PathBuf,
    home: PathBuf,
    work: PathBuf,
    db: PathBuf,
    port: u16,
    _listener: TcpListener,
}

fn setup(name: &str) -> Run {
    let dir = scratch(name);
    let (uid, gid) = test_user();
    let home = dir.join("home");
    let work = dir.join("work");
    for d in [&home, &work] {
        std::fs::create_dir_all(d).unwrap();
        nix::unistd::chown(d.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    Run {
        db: dir.join("run.db"),
        dir,
        home,
        work,
        port,
        _listener: listener,
    }
}

fn workload() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/scripted_agent.py")
        .display()
        .to_string()
}

fn agent(r: &Run, format: &str, sid: &str, undeclared: &str) -> Vec<String> {
    vec![
        "python3".into(),
        workload(),
        "--format".into(),
        format.into(),
        "--home".into(),
        r.home.display().to_string(),
        "--cwd".into(),
        r.work.display().to_string(),
        "--session-id".into(),
        sid.into(),
        "--port".into(),
        r.port.to_string(),
        "--undeclared".into(),
        r.work.join(undeclared).display().to_string(),
    ]
}

fn record_cmd(r: &Run, cmd: &[String]) {
    let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let out = record(&r.db, &[], &args);
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn correlate(r: &Run, sid: &str) -> Value {
    let out = Command::new(bin())
        .args(["correlate", sid, "--db"])
        .arg(&r.db)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "correlate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// (op, what, reason-or-by) of an activity list.
fn acts(v: &Value) -> Vec<(String, String, String)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let op = a["op"].as_str().unwrap().to_string();
            let what = match op.as_str() {
                // The interpreter's path depends on the user's PATH.
                "exec" => a["argv"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap())
                    .map(|x| {
                        if x.ends_with("/python3") {
                            "python3"
                        } else {
                            x
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
                "connect" => format!("{}:{}", a["addr"].as_str().unwrap(), a["port"]),
                _ => a["path"].as_str().unwrap().to_string(),
            };
            let why = a["reason"]
                .as_str()
                .or(a["by"].as_str())
                .unwrap_or("")
                .to_string();
            (op, what, why)
        })
        .collect()
}

fn t(op: &str, what: &str, why: &str) -> (String, String, String) {
    (op.into(), what.into(), why.into())
}

fn tools(rep: &Value) -> Vec<Value> {
    rep["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap().clone())
        .collect()
}

fn root_pid(r: &Run) -> i64 {
    let conn = open(&r.db);
    conn.query_row("SELECT pid FROM processes WHERE origin = 'root'", [], |r| {
        r.get(0)
    })
    .unwrap()
}

fn assert_flags(rep: &Value, r: &Run, undeclared: &str) {
    let f = &rep["flags"];
    assert_eq!(
        acts(&f["observed_not_claimed"]),
        vec![
            t(
                "write",
                &r.work.join(undeclared).display().to_string(),
                "runtime"
            ),
            t("connect", &format!("127.0.0.1:{}", r.port), "runtime"),
        ]
    );
    assert_eq!(f["claimed_not_observed"], serde_json::json!([]));
    assert_eq!(f["mismatches"], serde_json::json!([]));
    assert_eq!(f["late"], serde_json::json!([]));
}

#[test]
fn claude_session_is_bound_and_correlated() {
    require_root();
    let r = setup("corr-claude");
    let sid = "11111111-2222-4333-8444-555555555555";
    record_cmd(&r, &agent(&r, "claude", sid, "undeclared.txt"));
    let rep = correlate(&r, sid);
    let w = |f: &str| r.work.join(f).display().to_string();

    let b = &rep["bindings"].as_array().unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0]["evidence"], "transcript_write");
    assert_eq!(b[0]["root_pid"].as_i64().unwrap(), root_pid(&r));
    assert_eq!(rep["session"]["session_id"], sid);
    // Call windows are widened by the measured skew + 1 ms; the argv
    // search keeps ±1000 ms.
    let clock = &rep["clock"];
    assert_eq!(clock["argv_search_ms"], 1000);
    assert_eq!(clock["tolerance_basis"], "measured skew + 1 ms");
    assert_eq!(
        clock["tolerance_ms"].as_i64().unwrap(),
        (clock["skew_ms"].as_i64().unwrap() + 1).min(1000)
    );

    let tl = tools(&rep);
    assert_eq!(
        tl.iter()
            .map(|x| x["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec!["Bash", "Write", "Read"]
    );
    // bash runs the list and execs its last command in place.
    assert_eq!(
        acts(&tl[0]["activity"]),
        vec![
            t("exec", &format!("bash -c {CMD}"), "argv_match"),
            t("write", &w("notes.txt"), "argv_match"),
            t("exec", "cat notes.txt", "argv_match"),
            t("read", &w("notes.txt"), "argv_match"),
        ]
    );
    assert_eq!(tl[0]["exit_codes"], serde_json::json!([0]));
    assert_eq!(
        acts(&tl[1]["activity"]),
        vec![t("write", &w("out.txt"), "path_match")]
    );
    assert_eq!(
        acts(&tl[2]["activity"]),
        vec![t("read", &w("notes.txt"), "path_match")]
    );
    assert_flags(&rep, &r, "undeclared.txt");

    // Stored in the capture: the session, a raw copy, one bound tree.
    let conn = open(&r.db);
    let transcript = r
        .home
        .join(".claude/projects")
        .join(r.work.display().to_string().replace(['/', '-', '.'], "-"))
        .join(format!("{sid}.jsonl"));
    let (path, content): (String, Vec<u8>) = conn
        .query_row("SELECT path, content FROM transcript_files", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(path, transcript.display().to_string());
    assert_eq!(content, std::fs::read(&transcript).unwrap());
    let trees: Vec<(String, Option<String>)> = conn
        .prepare(
            "SELECT t.status, b.evidence FROM trees t LEFT JOIN bindings b ON b.tree_id = t.id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        trees,
        vec![("bound".into(), Some("transcript_write".into()))]
    );
    let n: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM correlations WHERE role = 'observed_not_claimed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 2);
    let _ = std::fs::remove_dir_all(&r.dir);
}

#[test]
fn codex_session_reexec_and_apply_patch_are_attributed() {
    require_root();
    let r = setup("corr-codex");
    let sid = "019c0000-0000-7000-8000-0000000000c1";
    record_cmd(&r, &agent(&r, "codex", sid, "undeclared.txt"));
    let rep = correlate(&r, sid);
    let w = |f: &str| r.work.join(f).display().to_string();
    let b = &rep["bindings"].as_array().unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0]["evidence"], "transcript_write");
    assert_eq!(b[0]["root_pid"].as_i64().unwrap(), root_pid(&r));

    let tl = tools(&rep);
    assert_eq!(
        tl.iter()
            .map(|x| x["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec!["shell", "apply_patch", "shell"]
    );
    let helper = |cmd: &str| format!("python3 {} --exec-helper bash -c {cmd}", workload());
    // Recorded as `bash -lc CMD`, run as a re-exec of the agent, then `bash -c`.
    assert_eq!(tl[0]["command"], format!("bash -lc '{CMD}'"));
    assert_eq!(
        acts(&tl[0]["activity"]),
        vec![
            t("exec", &helper(CMD), "argv_match"),
            t("exec", &format!("bash -c {CMD}"), "argv_match"),
            t("write", &w("notes.txt"), "argv_match"),
            t("exec", "cat notes.txt", "argv_match"),
        ]
    );
    // apply_patch writes from the agent process itself: a path match.
    assert_eq!(
        acts(&tl[1]["activity"]),
        vec![t("write", &w("out.txt"), "path_match")]
    );
    assert_eq!(
        acts(&tl[2]["activity"]),
        vec![
            t("exec", &helper("ls notes.txt"), "argv_match"),
            t("exec", "bash -c ls notes.txt", "argv_match"),
            t("exec", "ls notes.txt", "argv_match"),
        ]
    );
    assert_flags(&rep, &r, "undeclared.txt");
    let _ = std::fs::remove_dir_all(&r.dir);
}

#[test]
fn concurrent_sessions_in_one_cwd_and_an_unmatched_tree() {
    require_root();
    let r = setup("corr-concurrent");
    let (a, b) = (
        "aaaaaaaa-1111-4111-8111-000000000001",
        "bbbbbbbb-2222-4222-8222-000000000002",
    );
    let q = |v: Vec<String>| {
        v.iter()
            .map(|s| format!("'{s}'"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let script = format!(
        "{} & {} & sh -c 'sleep 0.3; echo x > other.txt'; wait",
        q(agent(&r, "claude", a, "undeclared-a.txt")),
        q(agent(&r, "claude", b, "undeclared-b.txt")),
    );
    let cmd = vec!["sh".to_string(), "-c".to_string(), script];
    // The wrapper runs in the work directory so the unmatched tree shares it.
    let (uid, gid) = test_user();
    let out = Command::new(bin())
        .args(["record", "--quiet", "-o"])
        .arg(&r.db)
        .arg("--")
        .args(&cmd)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .current_dir(&r.work)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Trees by their root's argv: each agent bound to its own session by
    // transcript evidence, the third tree unmatched, the wrapper in none.
    let conn = open(&r.db);
    let rows: Vec<(String, String, Option<String>, Option<String>)> = conn
        .prepare(
            "SELECT p.argv, t.status, s.session_id, b.evidence FROM trees t
             JOIN processes p ON p.id = t.root_process_id
             LEFT JOIN bindings b ON b.tree_id = t.id
             LEFT JOIN sessions s ON s.id = b.session_row ORDER BY s.session_id IS NULL, s.session_id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let summary: Vec<(String, String, Option<String>, Option<String>)> = rows
        .into_iter()
        .map(|(argv, st, s, e)| {
            let argv: Vec<String> = serde_json::from_str(&argv).unwrap();
            let who = argv
                .iter()
                .position(|x| x == "--session-id")
                .map(|i| format!("agent {}", argv[i + 1]))
                .unwrap_or_else(|| argv.join(" "));
            (who, st, s, e)
        })
        .collect();
    let tw = Some("transcript_write".to_string());
    assert_eq!(
        summary,
        vec![
            (
                format!("agent {a}"),
                "bound".into(),
                Some(a.into()),
                tw.clone()
            ),
            (format!("agent {b}"), "bound".into(), Some(b.into()), tw),
            (
                "sh -c sleep 0.3; echo x > other.txt".into(),
                "unmatched".into(),
                None,
                None
            ),
        ]
    );
    // Each session's correlation sees only its own tree.
    for (sid, und) in [(a, "undeclared-a.txt"), (b, "undeclared-b.txt")] {
        let rep = correlate(&r, sid);
        assert_eq!(rep["bindings"].as_array().unwrap().len(), 1);
        assert_flags(&rep, &r, und);
        let un = rep["unmatched_trees"].as_array().unwrap();
        assert_eq!(un.len(), 1);
        assert_eq!(un[0]["status"], "unmatched");
    }
    let _ = std::fs::remove_dir_all(&r.dir);
}

#[test]
fn pid_answers_from_an_open_transcript() {
    require_root();
    let r = setup("corr-pid");
    let sid = "019c0000-0000-7000-8000-0000000000d1";
    let dir = r.home.join(".codex/sessions/2026/11/30");
    std::fs::create_dir_all(&dir).unwrap();
    let rollout = dir.join(format!("rollout-2026-11-30T01-00-00-{sid}.jsonl"));
    // An "agent" holding its rollout open (as Codex does) runs a tool.
    let mut agent = Command::new("python3")
        .args([
            "-c",
            "import subprocess, sys\nf = open(sys.argv[1], 'a')\np = subprocess.Popen(['sleep', '3'])\nprint(p.pid, flush=True)\np.wait()",
        ])
        .arg(&rollout)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(agent.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let tool_pid = line.trim().to_string();
    let out = Command::new(bin())
        .args(["pid", &tool_pid, "--json"])
        .current_dir(&r.dir)
        .output()
        .unwrap();
    let _ = agent.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["session_id"], sid);
    assert_eq!(v["provider"], "codex");
    assert_eq!(v["evidence"], "proc_fd");
    assert_eq!(v["evidence_pid"].as_u64().unwrap(), agent.id() as u64);
    let _ = std::fs::remove_dir_all(&r.dir);
}
