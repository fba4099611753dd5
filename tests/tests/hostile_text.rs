//! Recorded and transcript text that tries to forge the reviewer's screen: a
//! scripted agent (tests/workloads/scripted_agent.py) works in a directory
//! and writes a file whose names, and its prompt, hold a newline before a
//! fake `LOSS` line, an OSC 52 clipboard write and U+202E (bidi override).
//! Every text output shows them escaped (`rawtext::visible`): no raw ESC,
//! BEL or U+202E, no forged line; the JSON outputs keep the exact text.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
};

use agentsight_tests::*;
use serde_json::Value;

/// A newline and a fake LOSS line, an OSC 52 write (ended by BEL), U+202E.
const HOSTILE: &str = "x\nLOSS      0 events lost\x1b]52;c;ZXZpbA==\x07\u{202e}evil";
/// [`HOSTILE`] as the text outputs show it.
const SHOWN: &str = "x\\nLOSS      0 events lost\\x1b]52;c;ZXZpbA==\\x07\\u{202e}evil";
const SID: &str = "5b0c7a52-3f1e-4c55-9d0e-0000000000ee";

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin()).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// No raw ESC, BEL or U+202E, and exactly `loss_lines` lines starting
/// with `LOSS` (show's own line, or none).
#[track_caller]
fn assert_inert(what: &str, text: &str, loss_lines: usize) {
    for (c, name) in [('\x1b', "ESC"), ('\x07', "BEL"), ('\u{202e}', "U+202E")] {
        assert!(!text.contains(c), "{what}: raw {name} in:\n{text}");
    }
    let forged = text.lines().filter(|l| l.starts_with("LOSS")).count();
    assert_eq!(forged, loss_lines, "{what}: LOSS lines in:\n{text}");
}

fn owned_dir(d: &Path) {
    let (uid, gid) = test_user();
    std::fs::create_dir_all(d).unwrap();
    nix::unistd::chown(d, Some(uid.into()), Some(gid.into())).unwrap();
}

/// Records the scripted Claude agent in `<dir>/work/HOSTILE`, prompted with
/// HOSTILE, writing `HOSTILE.txt` there: (dir, home, cwd, capture).
fn record_hostile_run() -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let dir = scratch("hostile-text");
    let home = dir.join("home");
    let cwd = dir.join("work").join(HOSTILE);
    for d in [&home, &dir.join("work"), &cwd] {
        owned_dir(d);
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/scripted_agent.py");
    let undeclared = cwd.join(format!("{HOSTILE}.txt"));
    let db = dir.join("run.db");
    let out = record(
        &db,
        &[],
        &[
            "python3",
            &workload.display().to_string(),
            "--format",
            "claude",
            "--home",
            &home.display().to_string(),
            "--cwd",
            &cwd.display().to_string(),
            "--session-id",
            SID,
            "--port",
            &port,
            "--undeclared",
            &undeclared.display().to_string(),
            "--prompt",
            HOSTILE,
        ],
    );
    assert_exit_0(&out);
    drop(listener);
    (dir, home, cwd, db)
}

#[test]
fn hostile_text_is_shown_escaped_in_every_text_output() {
    require_root();
    let (dir, home, cwd, db) = record_hostile_run();
    let db_s = db.display().to_string();
    let home_s = home.display().to_string();
    let cwd_shown = format!("{}/work/{SHOWN}", dir.display());

    // show: the written file's path in "files written", the one true LOSS line.
    let (code, show, err) = run(&["show", "--db", &db_s]);
    assert_eq!(code, Some(0), "{err}");
    assert_inert("show", &show, 1);
    assert!(show.contains(&format!("{cwd_shown}/{SHOWN}.txt")), "{show}");

    // correlate: the session's cwd in its header, the prompt on one line.
    let (code, text, err) = run(&["correlate", SID, "--db", &db_s]);
    assert_eq!(code, Some(0), "{err}");
    assert_inert("correlate", &text, 0);
    assert!(text.contains(&format!("cwd {cwd_shown}\n")), "{text}");
    // The prompt: its newline as ⏎ (correlate's one-line form), the rest escaped.
    assert!(text.contains("x⏎LOSS      0 events lost\\x1b]52"), "{text}");
    assert!(
        text.contains("lost\\x1b]52;c;ZXZpbA==\\x07\\u{202e}evil"),
        "{text}"
    );

    // sessions: the end of the cwd (the informative part) in its column.
    let (code, text, err) = run(&["sessions", "--home", &home_s]);
    assert_eq!(code, Some(0), "{err}");
    assert_inert("sessions", &text, 0);
    assert!(
        text.contains(SID) && text.contains("\\u{202e}evil"),
        "{text}"
    );

    // session show: the cwd line whole.
    let (code, text, err) = run(&["session", "show", SID, "--home", &home_s]);
    assert_eq!(code, Some(0), "{err}");
    assert_inert("session show", &text, 0);
    assert!(
        text.contains(&format!("  cwd           {cwd_shown}\n")),
        "{text}"
    );

    // The JSON outputs keep the exact text.
    let (code, json, err) = run(&["session", "show", SID, "--home", &home_s, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["cwd"], cwd.display().to_string());
    assert_eq!(v["prompts"][0]["text"], HOSTILE);
    let (code, json, err) = run(&["correlate", SID, "--db", &db_s, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["session"]["cwd"], cwd.display().to_string());

    // audit text: the write outside the policy names the path escaped.
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "[writes]\nallow = [\"/dev/null\"]\n").unwrap();
    let policy_s = policy.display().to_string();
    let (_, text, err) = run(&["audit", "--db", &db_s, "--policy", &policy_s]);
    assert_inert("audit", &text, 0);
    assert!(text.contains(&format!("{SHOWN}.txt")), "{text}\n{err}");

    // The HTML report: shown visibly, U+202E included.
    let html = dir.join("r.html");
    let (code, _, err) = run(&["report", "--db", &db_s, "-o", &html.display().to_string()]);
    assert_eq!(code, Some(0), "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    for (c, name) in [('\x1b', "ESC"), ('\x07', "BEL"), ('\u{202e}', "U+202E")] {
        assert!(!page.contains(c), "report: raw {name}");
    }
    assert!(
        page.contains("\\u{202e}evil"),
        "the report does not show the text"
    );
}
