//! `show` and `export` on real captures, and on files that are not captures.

use std::process::Command;

use agentsight_tests::*;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin()).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn show_and_export_read_a_capture_without_changing_it() {
    require_root();
    let dir = scratch("views");
    let db = dir.join("v.db");
    let out = record(
        &db,
        &[],
        &[
            "/bin/sh",
            "-c",
            "/bin/echo one >/dev/null; /bin/sh -c 'exit 2'; exit 0",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let before = std::fs::read(&db).unwrap();
    let db_s = db.display().to_string();

    let (code, text, _) = run(&["show", "--db", &db_s]);
    assert_eq!(code, Some(0));
    assert!(
        text.contains("LOSS      0 events lost in the kernel; 0 missing by sequence number"),
        "{text}"
    );
    assert!(text.contains("programs  5 attached, 0 failed"), "{text}");
    let counts = text.lines().find(|l| l.starts_with("events    ")).unwrap();
    for part in ["exec 3,", "exit 3,", "fork 2,"] {
        assert!(counts.contains(part), "{counts}");
    }
    // `echo one >/dev/null`: the shell's write of "one\n" to /dev/null, summed.
    assert!(
        text.contains("files written (bytes, writes)\n  /dev/null  (4, 1)\n"),
        "{text}"
    );
    assert!(text.contains("/bin/echo one  ["), "{text}");
    assert!(
        text.contains("/bin/sh -c 'exit 2'  [") && text.contains("exit 2]"),
        "{text}"
    );

    let (code, jsonl, _) = run(&["export", "--db", &db_s, "--format", "jsonl"]);
    assert_eq!(code, Some(0));
    let all: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut last = 0;
    for e in &all {
        for key in ["ts", "mono_ns", "kind", "pid", "ppid", "tid", "comm", "uid"] {
            assert!(e.get(key).is_some(), "{key} missing in {e}");
        }
        let ts = e["ts"].as_str().unwrap();
        assert!(ts.ends_with('Z') && ts.len() == 30, "ts {ts}");
        let mono = e["mono_ns"].as_u64().unwrap();
        assert!(mono >= last);
        last = mono;
    }
    // The process lifecycle, in order (file events interleave; checked elsewhere).
    let events: Vec<&serde_json::Value> = all
        .iter()
        .filter(|e| matches!(e["kind"].as_str(), Some("exec" | "fork" | "exit")))
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        vec![
            "exec", "fork", "exec", "exit", "fork", "exec", "exit", "exit"
        ]
    );
    assert_eq!(events[2]["argv"], serde_json::json!(["/bin/echo", "one"]));
    assert_eq!(
        events[2]["cwd"],
        serde_json::json!(dir.display().to_string())
    );
    assert_eq!(events[6]["exit_code"], serde_json::json!(2));

    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "a view modified the capture"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_files_get_one_line_errors_naming_them() {
    let dir = std::env::temp_dir().join(format!("agentsight-badfiles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.db");
    std::fs::write(
        &garbage,
        b"this is not a database at all, just text\n".repeat(200),
    )
    .unwrap();
    let other = dir.join("other.db");
    let c = rusqlite::Connection::open(&other).unwrap();
    c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    drop(c);
    let empty = dir.join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let missing = dir.join("missing.db");
    for (file, needle) in [
        (&garbage, "not an agentsight capture"),
        (&other, "not an agentsight capture"),
        (&empty, "not an agentsight capture"),
        (&missing, "no such file"),
    ] {
        let f = file.display().to_string();
        for cmd in [
            vec!["show", "--db", &f],
            vec!["export", "--db", &f, "--format", "jsonl"],
        ] {
            let (code, stdout, stderr) = run(&cmd);
            assert_eq!(code, Some(2), "{cmd:?}");
            assert!(stdout.is_empty());
            assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
            assert!(stderr.contains(&f) && stderr.contains(needle), "{stderr}");
        }
    }
    assert!(!missing.exists(), "a view created a file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_capture_is_reported() {
    require_root();
    let dir = scratch("trunc");
    let db = dir.join("t.db");
    let out = record(
        &db,
        &[],
        &[
            "/bin/sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8; do /bin/true $i; done",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let bytes = std::fs::read(&db).unwrap();
    let cut = dir.join("cut.db");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let f = cut.display().to_string();
    let (code, _, stderr) = run(&["show", "--db", &f]);
    assert_eq!(code, Some(2));
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&f), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
