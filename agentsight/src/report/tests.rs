//! The page over small captures with the real store schema: escaping of
//! hostile capture text, LOSS shown zero and non-zero, the process tree.
//! Sessions and tool calls are checked on real-CLI captures in a real
//! browser (tests/tests/report.rs).

use rusqlite::params;

use super::*;
use crate::store::Capture;

const MONO0: i64 = 1_000_000_000_000;
const WALL0: i64 = 1_800_000_000_000_000_000;
const HOSTILE: &str = "<script>alert(\"argv\")</script>";

/// A finished capture: a root shell and a child whose argv and written path
/// carry markup; `lost` exec records lost in the kernel.
fn capture(dir: &std::path::Path, lost: i64) -> Capture {
    let path = dir.join("c.db");
    let conn = crate::store::create(&path).unwrap();
    conn.execute(
        "INSERT INTO clock_anchors (label, mono_ns, wall_ns) VALUES ('start', ?1, ?2)",
        params![MONO0, WALL0],
    )
    .unwrap();
    for (k, v) in [("complete", "true"), ("command", "[\"sh\",\"-c\",\"x\"]")] {
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![k, v],
        )
        .unwrap();
    }
    conn.execute("INSERT INTO loss (kind, lost) VALUES ('exec', ?1)", [lost])
        .unwrap();
    let argv = serde_json::to_string(&["echo", HOSTILE]).unwrap();
    for (id, pid, parent, argv) in [(1, 100, None, "[\"sh\"]"), (2, 101, Some(1), argv.as_str())] {
        conn.execute(
            "INSERT INTO processes (id, pid, start_mono_ns, parent_id, origin, comm, argv, cwd, exec_count, end_mono_ns, exit_code)
             VALUES (?1, ?2, ?3, ?4, 'fork', 'sh', ?5, '/w', 1, ?6, 0)",
            params![id, pid, MONO0 + id, parent, argv, MONO0 + 5_000_000],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, tid, ppid, uid, gid, comm, process_id, path, flags, result, bytes, count)
         VALUES (?1, ?2, 'io', 0, 1, 101, 101, 100, 0, 0, 'echo', 2, '/w/<img src=x onerror=alert(1)>.txt', 'write', 0, 5, 1)",
        params![MONO0 + 2_000_000, WALL0 + 2_000_000],
    )
    .unwrap();
    // An io row that does not say its count (synthetic captures have them).
    conn.execute(
        "INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, tid, ppid, uid, gid, comm, process_id, path, flags, result, bytes)
         VALUES (?1, ?2, 'io', 0, 2, 101, 101, 100, 0, 0, 'echo', 2, '/w/uncounted', 'write', 0, 3)",
        params![MONO0 + 3_000_000, WALL0 + 3_000_000],
    )
    .unwrap();
    drop(conn);
    Capture::open(&path).unwrap()
}

#[test]
fn esc_escapes_markup_and_shows_raw_bytes() {
    assert_eq!(
        esc("<a href='x'>\"&\"</a>"),
        "&lt;a href=&#39;x&#39;&gt;&quot;&amp;&quot;&lt;/a&gt;"
    );
    // A byte that was not UTF-8 (U+10FF00 + byte) is shown \xNN.
    assert_eq!(esc("a\u{10FFFF}b"), "a\\xffb");
    // Bidi overrides, zero-width characters and controls are shown, not
    // obeyed: U+202E must not make "evil" read "live" on the page.
    assert_eq!(
        esc("\u{202e}evil\u{200b}\x1b]52;c;eA==\x07<"),
        "\\u{202e}evil\\u{200b}\\x1b]52;c;eA==\\x07&lt;"
    );
    // A newline stays one (white space in HTML).
    assert_eq!(esc("a\nb"), "a\nb");
    let long = "x".repeat(MAX_TEXT + 7);
    assert_eq!(
        esc_clip(&long),
        format!("{}… (7 more characters)", "x".repeat(MAX_TEXT))
    );
}

#[test]
fn hostile_capture_text_is_text_and_loss_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let cap = capture(dir.path(), 0);
    let (page, summary) = html(&cap, None).unwrap();
    // Exactly our one script; the capture's markup is text.
    assert_eq!(page.matches("<script>").count(), 1);
    assert!(!page.contains("<img"));
    assert!(page.contains("&lt;script&gt;alert(&quot;argv&quot;)&lt;/script&gt;"));
    assert!(page.contains("/w/&lt;img src=x onerror=alert(1)&gt;.txt"));
    assert!(page.contains(
        "<section id=\"loss\" class=\"loss zero\"><h2>LOSS: none (0 events lost, 0 missing)</h2>"
    ));
    // The tree: the child nested in its parent's <details>, each anchored.
    let root = page.find("<details open id=\"proc-1\">").unwrap();
    let child = page.find("<div class=\"leaf\" id=\"proc-2\">").unwrap();
    assert!(root < child);
    // The files written, with the counts the capture says ("?" where it does not).
    assert!(page.contains(
        "<td><code>/w/&lt;img src=x onerror=alert(1)&gt;.txt</code></td><td>5</td><td>1</td>"
    ));
    assert!(page.contains("<td><code>/w/uncounted</code></td><td>3</td><td>?</td>"));
    assert!(page.contains("No session is bound in this capture"));
    assert_eq!((summary.sessions, summary.tool_calls), (0, 0));
    assert!(summary.aggregated.is_empty());
    // No network load is possible from the page.
    assert!(page.contains("default-src 'none'"));
    assert!(!page.contains("src=\"http") && !page.contains("href=\"http"));

    let dir = tempfile::tempdir().unwrap();
    let (page, _) = html(&capture(dir.path(), 3), None).unwrap();
    assert!(page.contains("<section id=\"loss\" class=\"loss nonzero\"><h2>LOSS: 3 lost, 0 missing</h2><p class=\"loss-line\">3 events lost in the kernel (exec 3); 0 missing by sequence number</p>"));
}
