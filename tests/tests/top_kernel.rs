//! `agentsight top` as root (issue 15): the kernel columns it shows for a
//! bound real-CLI session equal what `record` stores for the same tree over
//! the same interval. `top --json --record FILE` watches a real Claude Code
//! run (a build step writing three files, then `sleep 12`); the columns of
//! the last line that shows the sleep running are recomputed with SQL on
//! FILE, the finished capture, for the tree record bound to the session and
//! the same `as_of`.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use agentsight_tests::{
    bin,
    e2e::{Agent, RUN_TIMEOUT, Run, as_test_user},
    open, require_root, scratch,
};
use serde_json::Value;

/// The window `execs_per_s` averages over (livecap::EXEC_RATE_WINDOW).
const EXEC_WINDOW_NS: i64 = 10_000_000_000;

/// The kernel columns of a row, as `top --json` prints them.
#[derive(Debug, PartialEq)]
struct Columns {
    processes_alive: i64,
    execs_in_window: i64,
    files_written: i64,
    connections: i64,
    lost_events: i64,
}

fn columns_of(kernel: &Value) -> Columns {
    let int = |k: &str| {
        kernel[k]
            .as_i64()
            .unwrap_or_else(|| panic!("kernel.{k} missing: {kernel}"))
    };
    let rate = kernel["execs_per_s"].as_f64().expect("execs_per_s");
    Columns {
        processes_alive: int("processes_alive"),
        // execs_per_s = execs in the window / its 10 s: exact in tenths.
        execs_in_window: (rate * 10.0).round() as i64,
        files_written: int("files_written"),
        connections: int("connections"),
        lost_events: int("lost_events"),
    }
}

/// The same columns from the finished capture: the processes of the tree
/// record bound to session `id` (its root's subtree) that had started by
/// `as_of`, and their events up to `as_of`.
fn columns_in_capture(db: &Path, id: &str, as_of: i64) -> Columns {
    let c = open(db);
    let root: i64 = c
        .query_row(
            "SELECT t.root_process_id FROM bindings b JOIN trees t ON t.id = b.tree_id
             JOIN sessions s ON s.id = b.session_row WHERE s.session_id = ?1",
            [id],
            |r| r.get(0),
        )
        .expect("record bound the session to one tree");
    let tree = "WITH RECURSIVE tree(id) AS (
                  SELECT ?1 UNION SELECT p.id FROM processes p JOIN tree ON p.parent_id = tree.id)
                SELECT id FROM tree";
    let members = format!("SELECT id FROM processes WHERE id IN ({tree}) AND start_mono_ns <= ?2");
    let one = |sql: String| -> i64 {
        c.query_row(&sql, rusqlite::params![root, as_of], |r| r.get(0))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    Columns {
        processes_alive: one(format!(
            "SELECT COUNT(*) FROM processes WHERE id IN ({members})
               AND (end_mono_ns IS NULL OR end_mono_ns > ?2)"
        )),
        execs_in_window: one(format!(
            "SELECT COUNT(*) FROM events WHERE process_id IN ({members}) AND kind = 'exec'
               AND mono_ns <= ?2 AND mono_ns > ?2 - {EXEC_WINDOW_NS}"
        )),
        files_written: one(format!(
            "SELECT COUNT(DISTINCT path) FROM events WHERE process_id IN ({members})
               AND mono_ns <= ?2 AND result >= 0
               AND (kind IN ('creat','truncate','ftruncate')
                    OR (kind IN ('open','openat','openat2')
                        AND (flags LIKE '%write%' OR flags LIKE '%create%' OR flags LIKE '%trunc%')))
               AND path NOT LIKE '/dev/%' AND path NOT LIKE '/proc/%' AND path NOT LIKE '/sys/%'"
        )),
        connections: one(format!(
            "SELECT COUNT(*) FROM events WHERE process_id IN ({members}) AND mono_ns <= ?2
               AND kind = 'connect' AND family IN ('ipv4','ipv6')
               AND (result >= 0 OR errno = 'EINPROGRESS')"
        )),
        lost_events: c
            .query_row("SELECT COALESCE(SUM(lost), 0) FROM loss", [], |r| r.get(0))
            .unwrap(),
    }
}

/// Reads `top --json` lines on a thread.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("top stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first row of the run's Claude session whose kernel columns satisfy
/// `pred`.
fn row_until(
    rx: &std::sync::mpsc::Receiver<String>,
    run: &Run,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < RUN_TIMEOUT {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) else {
            continue;
        };
        let v: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line ({e}): {line}"));
        let Some(id) = run
            .transcripts()
            .first()
            .and_then(|f| f.file_stem())
            .map(|s| s.to_string_lossy().into_owned())
        else {
            continue;
        };
        let Some(row) = v["rows"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["session_id"] == id.as_str()))
        else {
            continue;
        };
        seen.push(row["kernel"].clone());
        if pred(&row["kernel"]) {
            return row.clone();
        }
    }
    panic!("no row matched; kernel columns seen: {seen:?}");
}

/// A row that shows the `sleep 12` running after the build step: Claude,
/// the tool's bash and its sleep alive, the three files written.
fn row_while_sleeping(rx: &std::sync::mpsc::Receiver<String>, run: &Run) -> Value {
    row_until(rx, run, |k| {
        k["processes_alive"].as_i64().unwrap_or(0) >= 3
            && k["files_written"].as_i64().unwrap_or(0) >= 3
    })
}

#[test]
fn top_kernel_columns_equal_the_recorded_capture() {
    require_root();
    let run = Run::prepare(Agent::Claude, "busy");
    let db = run.server_dir.join("top.db");
    // As root, not under sudo: every user's agents are watched.
    let mut top = Command::new(bin())
        .args(["top", "--json", "--all", "--home"])
        .arg(&run.home)
        .arg("--record")
        .arg(&db)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start top");
    let rx = lines_of(&mut top);
    // The first line comes once the kernel programs run.
    rx.recv_timeout(Duration::from_secs(60))
        .expect("top printed nothing");
    let running = run.start(as_test_user);
    let row = row_while_sleeping(&rx, &run);
    let out = running.wait(RUN_TIMEOUT);
    assert!(out.status.success(), "claude run failed: {}", out.stderr);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(top.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = top.wait().unwrap();
    assert!(status.success(), "top exited {status}");

    let id = row["session_id"].as_str().unwrap();
    let kernel = &row["kernel"];
    let as_of = kernel["as_of_mono_ns"].as_i64().expect("as_of_mono_ns");
    assert_eq!(
        columns_of(kernel),
        columns_in_capture(&db, id, as_of),
        "top's columns vs the capture for {id} at {as_of}: {kernel}"
    );
    // Ground truth of the workload: the build step's three files are among
    // the files the tree wrote, and the sleep ran in it.
    let c = open(&db);
    for i in 1..=3 {
        let p = run.work.join(format!("out/part{i}.txt"));
        let n: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM events WHERE path = ?1 AND mono_ns <= ?2",
                rusqlite::params![p.display().to_string(), as_of],
                |r| r.get(0),
            )
            .unwrap();
        assert!(n >= 1, "{} not written by {as_of}", p.display());
    }
    // While the sleep ran, the session was working (process truth: a tool
    // is running).
    assert_eq!(row["state"], "working", "{row}");
}

/// Starts `top --json ARGS --home HOME` as root with `TMPDIR=tmpdir`;
/// returns it and its line reader once the first line (kernel loaded) came.
fn start_top(
    home: &Path,
    tmpdir: &Path,
    args: &[&str],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut top = Command::new(bin())
        .args(["top", "--json", "--all"])
        .args(args)
        .arg("--home")
        .arg(home)
        .env("TMPDIR", tmpdir)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start top");
    let rx = lines_of(&mut top);
    let first = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("top printed nothing");
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["kernel"], true, "kernel programs not loaded: {first}");
    assert_eq!(v["kernel_error"], Value::Null, "{first}");
    (top, rx)
}

fn sigterm(top: &mut std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(top.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = top.wait().unwrap();
    assert!(status.success(), "top exited {status}");
}

/// Without `--record` the live capture is a private temporary file, gone
/// when `top` ends.
#[test]
fn top_without_record_leaves_no_capture() {
    require_root();
    let dir = scratch("top-no-record");
    let home = dir.join("home");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let (mut top, _rx) = start_top(&home, &tmp, &[]);
    let during: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert_eq!(during.len(), 1, "one private capture directory: {during:?}");
    assert!(
        during[0]
            .file_name()
            .to_string_lossy()
            .starts_with("agentsight-top-")
    );
    sigterm(&mut top);
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Process truth beats file age: Gemini CLI 0.61 exits on a 401 and leaves
/// a transcript whose newest record is the prompt (an open turn, "working"
/// without root, see top_agents.rs). As root, its bound tree has exited, so
/// the session is not working: idle.
#[test]
fn exited_tree_is_never_working() {
    require_root();
    let run = Run::prepare(Agent::Gemini, "unauthorized");
    let tmp = run.server_dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let (mut top, rx) = start_top(&run.home, &tmp, &[]);
    let out = run.launch(as_test_user);
    assert!(!out.status.success(), "gemini should fail on the 401");
    let start = Instant::now();
    let row = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("top went silent");
        let v: Value = serde_json::from_str(&line).unwrap();
        // Only this run's session (other agents on the machine are listed too).
        let home = run.home.display().to_string();
        let row = v["rows"].as_array().and_then(|rows| {
            rows.iter()
                .find(|r| r["path"].as_str().is_some_and(|p| p.starts_with(&home)))
                .cloned()
        });
        if let Some(row) = row
            && row["kernel"]["processes_alive"] == 0
        {
            break row;
        }
        assert!(start.elapsed() < RUN_TIMEOUT, "no exited row: {line}");
    };
    sigterm(&mut top);
    assert_eq!(row["provider"], "gemini", "{row}");
    // The open turn of an exited tree is not waiting for anything: idle.
    assert_eq!(row["state"], "idle", "{row}");
}

/// An agent already running when `top` starts is adopted at start and its
/// session bound (by the `/proc` fd scan or its next transcript write). The
/// agent's call waits for a file the test creates once `top` showed it, so
/// however long loading takes, the agent is still running.
#[test]
fn running_agent_is_adopted_at_start() {
    require_root();
    let run = Run::prepare(Agent::Claude, "gated");
    let running = run.start(as_test_user);
    let start = Instant::now();
    // The gated call is running once the transcript holds it.
    while !run.transcripts().first().is_some_and(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| t.contains("while [ ! -e release ]"))
    }) {
        assert!(
            start.elapsed() < RUN_TIMEOUT,
            "the gated call never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let tmp = run.server_dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let (mut top, rx) = start_top(&run.home, &tmp, &[]);
    // Bound and measured: Claude and the call's shell alive.
    let row = row_until(&rx, &run, |k| {
        k["processes_alive"].as_i64().unwrap_or(0) >= 2
    });
    std::fs::write(run.work.join("release"), "").unwrap();
    let out = running.wait(RUN_TIMEOUT);
    sigterm(&mut top);
    assert!(out.status.success(), "claude run failed: {}", out.stderr);
    assert_eq!(row["state"], "working", "{row}");
}

/// `top --record FILE` names the file when the file is the problem, not
/// "loading the kernel programs".
#[test]
fn a_record_file_that_cannot_be_made_is_named_as_such() {
    require_root();
    let dir = scratch("top-record-file");
    let target = dir.join("missing-dir/x.db");
    let out = Command::new(bin())
        .args(["top", "--json", "--record"])
        .arg(&target)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "agentsight: error: top --record: {}: No such file or directory (os error 2)\n",
            target.display()
        )
    );
}
