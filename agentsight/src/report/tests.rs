//! The page over small captures with the real store schema: escaping of
//! hostile capture text, LOSS shown zero and non-zero, the process tree.
//! Sessions and tool calls are checked on real-CLI captures in a real
//! browser (tests/tests/report.rs).

use super::*;
use crate::store::{
    Capture,
    meta::key,
    synthetic::{EventRow, ProcessRow, SyntheticCapture},
};

const MONO0: i64 = 1_000_000_000_000;
const WALL0: i64 = 1_800_000_000_000_000_000;
const HOSTILE: &str = "<script>alert(\"argv\")</script>";

/// A finished capture: a root shell and a child whose argv and written path
/// carry markup; `lost` exec records lost in the kernel.
fn capture(dir: &std::path::Path, lost: i64) -> Capture {
    let path = dir.join("c.db");
    let mut cap = SyntheticCapture::create(&path, &path.display().to_string());
    cap.anchor("start", MONO0, WALL0);
    cap.meta(key::COMPLETE, "true");
    cap.meta(key::COMMAND, "[\"sh\",\"-c\",\"x\"]");
    cap.loss("exec", lost);
    let child: &[&str] = &["echo", HOSTILE];
    for (id, pid, parent, argv) in [(1, 100, None, &["sh"][..]), (2, 101, Some((1, 100)), child)] {
        cap.process(&ProcessRow {
            id,
            pid,
            start_mono_ns: MONO0 + id,
            parent,
            origin: "fork",
            comm: "sh",
            argv,
            cwd: Some("/w"),
            exec_count: 1,
            exit_code: Some(0),
            ..Default::default()
        });
        cap.end_process(id, MONO0 + 5_000_000);
    }
    let write = |at: i64, path| EventRow {
        mono_ns: MONO0 + at,
        wall_ns: WALL0 + at,
        kind: "io",
        pid: 101,
        ppid: 100,
        process_id: Some(2),
        comm: Some("echo"),
        path: Some(path),
        flags: Some("write"),
        ..Default::default()
    };
    cap.io_event(
        &write(2_000_000, "/w/<img src=x onerror=alert(1)>.txt"),
        5,
        Some(1),
    );
    // An io row that does not say its count (synthetic captures have them).
    cap.io_event(&write(3_000_000, "/w/uncounted"), 3, None);
    drop(cap);
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
    let (page, summary) = html(&cap, None, true).unwrap();
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
    let (page, _) = html(&capture(dir.path(), 3), None, true).unwrap();
    assert!(page.contains("<section id=\"loss\" class=\"loss nonzero\"><h2>LOSS: 3 lost, 0 missing</h2><p class=\"loss-line\">3 events lost in the kernel (exec 3); 0 missing by sequence number</p>"));
}

mod calls_and_secrets {
    use serde_json::json;

    use super::{MONO0, WALL0};
    use crate::sessions::{
        AgentSession, Prompt, Provider, ToolCategory, ToolEvent, ToolStatus, util::join_argv,
    };
    use crate::store::{
        Capture,
        meta::key,
        sessions::{BindingRow, TreeRow},
        synthetic::{ProcessRow, SyntheticCapture},
    };
    use crate::views::redact::planted::{KEPT, agent_argv, secrets, tool_argv};

    const ODD: &str = "odd \"id\" <b>&'x";
    const IDS: [Option<&str>; 4] = [Some("call_Ab12"), Some("toolu_01XyZ"), Some(ODD), None];

    fn ms(mono: i64) -> i64 {
        (WALL0 + mono - MONO0) / 1_000_000
    }

    /// A session whose calls have the ids [`IDS`]; the second runs the
    /// planted tool command and the prompt names a planted key.
    fn session() -> AgentSession {
        let mut s = AgentSession::new(Provider::Claude, "s-1".into(), "/h/s-1.jsonl".into());
        s.cwd = Some("/w".into());
        s.prompts = vec![Prompt::new(
            0,
            Some(ms(MONO0)),
            "use the key sk-proj-Q7x9Lm2Np4Rt6Vw8Yz0Ab1Cd".into(),
        )];
        s.tools = IDS
            .iter()
            .enumerate()
            .map(|(i, id)| ToolEvent {
                prompt_index: Some(0),
                subagent: None,
                name: "Bash".into(),
                category: ToolCategory::Shell,
                call_id: id.map(str::to_owned),
                command: Some(if i == 1 {
                    join_argv(&tool_argv())
                } else {
                    format!("true {i}")
                }),
                command_truncated: false,
                cwd: Some("/w".into()),
                status: ToolStatus::Ok,
                exit_code: None,
                start_ms: Some(ms(MONO0 + (i as i64 + 1) * 1_000_000)),
                end_ms: Some(ms(MONO0 + (i as i64 + 1) * 1_000_000 + 500_000)),
                paths: Vec::new(),
                domains: Vec::new(),
                mcp: None,
            })
            .collect();
        s.prompt_count = 1;
        s.tool_count = s.tools.len();
        s
    }

    /// The agent (planted secrets in its argv, and as the recorded
    /// command) and the tool it ran, bound to [`session`].
    fn capture(dir: &std::path::Path) -> Capture {
        let path = dir.join("s.db");
        let cap = SyntheticCapture::create(&path, &path.display().to_string());
        cap.anchor("start", MONO0, WALL0);
        cap.meta(key::COMPLETE, "true");
        cap.meta(key::COMMAND, &json!(agent_argv()).to_string());
        for (id, pid, parent, argv) in [
            (1, 100, None, agent_argv()),
            (2, 101, Some((1, 100)), tool_argv()),
        ] {
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            cap.process(&ProcessRow {
                id,
                pid,
                start_mono_ns: MONO0 + id,
                parent,
                origin: "fork",
                comm: "x",
                argv: &argv,
                cwd: Some("/w"),
                exec_count: 1,
                exit_code: Some(0),
                ..Default::default()
            });
            cap.end_process(id, MONO0 + 9_000_000);
        }
        let row = cap.session(&session());
        let tree = cap.tree(&TreeRow {
            id: 0,
            root_process_id: 1,
            root_pid: 100,
            root_start_mono_ns: MONO0 + 1,
            status: "bound".into(),
            note: None,
        });
        cap.binding(&BindingRow {
            tree_id: tree,
            session_row: row,
            evidence: "transcript_write".into(),
            evidence_count: 1,
            evidence_process_id: Some(1),
            evidence_path: Some("/h/s-1.jsonl".into()),
            first_evidence_mono_ns: Some(MONO0 + 1),
            from_mono_ns: MONO0,
            to_mono_ns: None,
        });
        cap.create_indexes();
        drop(cap);
        Capture::open(&path).unwrap()
    }

    #[test]
    fn each_call_is_anchored_and_shown_by_its_native_id() {
        let dir = tempfile::tempdir().unwrap();
        let (page, summary) = super::html(&capture(dir.path()), None, true).unwrap();
        assert_eq!(summary.tool_calls, 4);
        for (i, id, anchor) in [
            (0, "call_Ab12", "call-call_Ab12"),
            (1, "toolu_01XyZ", "call-toolu_01XyZ"),
            (
                2,
                "odd &quot;id&quot; &lt;b&gt;&amp;&#39;x",
                "call-odd%20%22id%22%20%3Cb%3E%26%27x",
            ),
        ] {
            // The row's anchor, its id as text, and the timeline's link to it.
            assert!(
                page.contains(&format!(
                    "<details class=\"call status-ok\" id=\"{anchor}\" data-flags=\"claimed-not-observed\" data-tool-index=\"{i}\"><summary><strong>#{i} Bash</strong> <code class=\"call-id\">{id}</code> <span "
                )),
                "call {i}"
            );
            assert_eq!(page.matches(&format!("id=\"{anchor}\"")).count(), 1);
            assert!(page.contains(&format!("<a href=\"#{anchor}\"><g class=\"call-row\"")));
        }
        // (No process ran the calls' commands: each is claimed, not observed.)
        // No id: anchored by its place, and no id shown.
        assert!(page.contains(
            "<details class=\"call status-ok\" id=\"call-0-3\" data-flags=\"claimed-not-observed\" data-tool-index=\"3\"><summary><strong>#3 Bash</strong> <span"
        ));
        // The odd id never reaches the markup raw.
        assert!(!page.contains(ODD) && !page.contains("<b>"));
    }

    #[test]
    fn planted_secrets_are_redacted_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let cap = capture(dir.path());
        let (page, _) = super::html(&cap, None, true).unwrap();
        for s in secrets() {
            assert!(!page.contains(s), "{s} in the report");
        }
        for k in KEPT {
            assert!(page.contains(k), "{k} lost");
        }
        // The command row, the tree and the call's command say what was there.
        assert!(page.contains(
            "<tr><th>command</th><td><code>env HOLDOUT_OPENAI_KEY=‹redacted› PATH=/usr/bin KEYBOARD=us GH_TOKEN=‹redacted› agent --api-key ‹redacted› --password=‹redacted› --model gpt-5</code>"
        ));
        assert!(page.contains("https://alice:‹redacted›@git.example.com/r.git"));
        assert!(page.contains("&#39;Authorization: Bearer ‹redacted›&#39;"));
        // The exact text on request.
        let (page, _) = super::html(&cap, None, false).unwrap();
        for s in secrets() {
            assert!(page.contains(s), "{s} not in the --no-redact report");
        }
        assert!(!page.contains("‹redacted›"));
    }
}

/// An MCP call's server block: every field through `esc`, the command and
/// arguments redacted as commands are (unless the exact text is asked for).
#[test]
fn an_mcp_calls_server_is_shown_escaped_and_redacted() {
    use crate::correlate::report::McpServerInfo;
    let stdio = McpServerInfo {
        server: "fs<b>".into(),
        tool: Some("write_file".into()),
        transport: Some("stdio".into()),
        kind: Some("filesystem".into()),
        pid: Some(150),
        command: vec![
            "node".into(),
            "/srv/fs.js".into(),
            "--api-key=sk-live1234".into(),
        ],
        url: None,
    };
    let args = r#"{"path":"/w/a<1>.txt","api_key":"sk-abc123"}"#.to_owned();
    let render = |m: &McpServerInfo, a: Option<&String>, redact: bool| {
        let _scope = RedactScope::enter(redact);
        let mut s = String::new();
        session::mcp_server_for_test(m, a, &mut s);
        s
    };
    let redacted = render(&stdio, Some(&args), true);
    assert_eq!(
        redacted,
        format!(
            "<h4>MCP server</h4><table class=\"mcp\">\
             <tr><th>server</th><td><code>fs&lt;b&gt;</code></td></tr>\
             <tr><th>tool</th><td><code>write_file</code></td></tr>\
             <tr><th>transport</th><td>stdio</td></tr>\
             <tr><th>kind</th><td>filesystem</td></tr>\
             <tr><th>process</th><td>pid 150 <code>node /srv/fs.js --api-key={r}</code></td></tr>\
             <tr><th>arguments</th><td><code>{{&quot;path&quot;:&quot;/w/a&lt;1&gt;.txt&quot;,&quot;api_key&quot;:&quot;{r}&quot;}}</code></td></tr>\
             </table>",
            r = crate::views::redact::REDACTED
        )
    );
    let exact = render(&stdio, Some(&args), false);
    assert!(
        exact.contains("sk-live1234") && exact.contains("sk-abc123"),
        "{exact}"
    );
    // A remote server: its URL; an undeclared one: said so.
    let remote = McpServerInfo {
        server: "api".into(),
        tool: None,
        transport: None,
        kind: None,
        pid: None,
        command: Vec::new(),
        url: Some("http://127.0.0.1:8931/mcp".into()),
    };
    assert_eq!(
        render(&remote, None, true),
        "<h4>MCP server</h4><table class=\"mcp\">\
         <tr><th>server</th><td><code>api</code></td></tr>\
         <tr><th>transport</th><td>— (not configured)</td></tr>\
         <tr><th>url</th><td><code>http://127.0.0.1:8931/mcp</code></td></tr>\
         </table>"
    );
}
