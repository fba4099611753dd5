//! `[mcp]`: its parse errors, the two server findings, and a denied-path
//! read done by an MCP server naming the MCP call.

use std::path::PathBuf;

use super::*;
use crate::sessions::{AgentSession, Provider, ToolCategory, ToolEvent, ToolStatus, mcp::McpCall};
use crate::store::{
    CaptureRw,
    mcp::McpServerRow,
    sessions::{BindingRow, CorrelationRow, Role, TreeRow},
};

fn server(name: &str, transport: &str, command: &[&str], url: Option<&str>) -> McpServerRow {
    McpServerRow {
        session_row: 1,
        name: name.into(),
        transport: transport.into(),
        command: command.iter().map(|s| s.to_string()).collect(),
        url: url.map(str::to_string),
        source: "/w/.mcp.json".into(),
        kind: None,
        process_id: None,
        evidence: None,
    }
}

/// [`capture`] whose `cat` (process 2, the one reading `~/.ssh/id_rsa`,
/// event 4) is the stdio server `fs` of Claude Code session `s1`, and that
/// read attributed to the MCP call #0 `mcp__fs__read_text_file` (`t0`) by
/// `mcp_server`; three more servers configured.
fn mcp_capture(dir: &Path) -> PathBuf {
    let db = capture(dir, 0);
    let c = SyntheticCapture::open(&db, "c.db");
    let mut session = AgentSession::new(
        Provider::Claude,
        "s1".into(),
        PathBuf::from("/home/u/.claude/projects/-w/s1.jsonl"),
    );
    session.tools = vec![ToolEvent {
        prompt_index: None,
        subagent: None,
        name: "mcp__fs__read_text_file".into(),
        category: ToolCategory::Mcp,
        call_id: Some("t0".into()),
        command: None,
        command_truncated: false,
        cwd: None,
        status: ToolStatus::Ok,
        exit_code: None,
        start_ms: None,
        end_ms: None,
        paths: Vec::new(),
        domains: Vec::new(),
        mcp: Some(McpCall {
            server: Some("fs".into()),
            tool: Some("read_text_file".into()),
            arguments: None,
        }),
    }];
    let row = c.session(&session);
    let tree = c.tree(&TreeRow {
        id: 0,
        root_process_id: 1,
        root_pid: 100,
        root_start_mono_ns: 10,
        status: "bound".into(),
        note: None,
    });
    c.binding(&BindingRow {
        tree_id: tree,
        session_row: row,
        evidence: "transcript_write".into(),
        evidence_count: 1,
        evidence_process_id: Some(1),
        evidence_path: None,
        first_evidence_mono_ns: None,
        from_mono_ns: 0,
        to_mono_ns: None,
    });
    drop(c);
    let rw = CaptureRw::open(&db).unwrap();
    let mut fs = server(
        "fs",
        "stdio",
        &["node", "/opt/server-filesystem/dist/index.js", "/w"],
        None,
    );
    fs.process_id = Some(2);
    rw.put_mcp_servers(&[
        McpServerRow {
            session_row: row,
            ..fs
        },
        McpServerRow {
            session_row: row,
            ..server("git", "stdio", &["uvx", "mcp-server-git"], None)
        },
        McpServerRow {
            session_row: row,
            ..server("notes", "http", &[], Some("http://127.0.0.1:8790/mcp"))
        },
        McpServerRow {
            session_row: row,
            ..server("far", "sse", &[], Some("http://10.0.0.5/sse"))
        },
    ])
    .unwrap();
    rw.put_correlations(&[CorrelationRow {
        session_row: row,
        tool_index: Some(0),
        call_id: Some("t0".into()),
        event_id: Some(4),
        process_id: Some(2),
        role: Role::Attributed,
        reason: Some("mcp_server".into()),
        late: false,
    }])
    .unwrap();
    drop(rw);
    db
}

/// (rule, message, detail, pid) of the `[mcp]` findings under `policy`.
fn mcp_findings(cap: &Capture, policy: &str) -> Vec<(String, String, String, Option<i64>)> {
    let p = Policy::parse(policy, "p.toml").unwrap();
    audit(cap, &p)
        .unwrap()
        .findings
        .into_iter()
        .filter(|f| f.kind.as_str() == "mcp_server")
        .map(|f| {
            (
                f.rule,
                f.message,
                f.evidence.detail.unwrap_or_default(),
                f.process.map(|p| p.pid),
            )
        })
        .collect()
}

#[test]
fn servers_not_allowed_by_mcp_are_findings() {
    let dir = tempfile::tempdir().unwrap();
    let db = mcp_capture(dir.path());
    let cap = Capture::open(&db).unwrap();
    let f = |rule: &str, msg: &str, detail: &str, pid: Option<i64>| {
        (rule.to_string(), msg.to_string(), detail.to_string(), pid)
    };
    // Without `[mcp]`, nothing is judged.
    assert_eq!(mcp_findings(&cap, POLICY), vec![]);
    let allowing = r#"
[mcp]
allowed_servers = ["git"]
allowed_commands = ["node /opt/*/dist/index.js*"]
allowed_urls = ["http://127.0.0.1:8790/mcp"]
"#;
    let far = f(
        "mcp-remote-undeclared",
        "remote MCP server far (sse http://10.0.0.5/sse) of claude session s1 is not declared in [mcp] allowed_urls",
        "server far (sse) configured in /w/.mcp.json",
        None,
    );
    assert_eq!(mcp_findings(&cap, allowing), vec![far.clone()]);
    let strict = "[mcp]\nid = \"mcp-strict\"\nseverity = \"warning\"\n";
    assert_eq!(
        mcp_findings(&cap, strict),
        vec![
            f(
                "mcp-strict",
                "MCP server fs (stdio: node /opt/server-filesystem/dist/index.js /w) of claude session s1 is not allowed by [mcp]",
                "server fs (stdio) configured in /w/.mcp.json",
                Some(101),
            ),
            f(
                "mcp-strict",
                "MCP server git (stdio: uvx mcp-server-git) of claude session s1 is not allowed by [mcp]",
                "server git (stdio) configured in /w/.mcp.json",
                None,
            ),
            f(
                "mcp-remote-undeclared",
                "remote MCP server notes (http http://127.0.0.1:8790/mcp) of claude session s1 is not declared in [mcp] allowed_urls",
                "server notes (http) configured in /w/.mcp.json",
                None,
            ),
            far,
        ]
    );
    let p = Policy::parse(strict, "p.toml").unwrap();
    let r = audit(&cap, &p).unwrap();
    let sev: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind.as_str() == "mcp_server")
        .map(|f| f.severity)
        .collect();
    assert_eq!(sev, vec![Severity::Warning; 4]);
    let ids: Vec<_> = r.rules.iter().map(|i| i.id.as_str()).collect();
    assert!(ids.contains(&"mcp-strict") && ids.contains(&"mcp-remote-undeclared"));
    assert_sarif_valid(&render::sarif(&r));
    let disabled = mcp_findings(&cap, "[mcp]\nenabled = false\n");
    assert_eq!(disabled, vec![]);
}

#[test]
fn the_mcp_table_rejects_unknown_keys_and_bad_globs() {
    let err = |src: &str| Policy::parse(src, "p.toml").unwrap_err().to_string();
    assert_eq!(
        err("[mcp]\nallow = []\n"),
        "p.toml:2: unknown field `allow`, expected one of `id`, `remote_id`, `severity`, `enabled`, `allowed_servers`, `allowed_commands`, `allowed_urls`"
    );
    assert_eq!(
        err("[mcp]\nallowed_commands = [\"node\", \"a[b\"]\n"),
        "p.toml:2: bad glob \"a[b\": unclosed character class; missing ']'"
    );
    assert_eq!(
        err("[mcp]\nallowed_servers = \"fs\"\n"),
        "p.toml:2: invalid type: string \"fs\", expected a sequence"
    );
}

/// The MCP server's read of `~/.ssh/id_rsa` is a `denied-path` finding
/// naming the MCP call: its tool name and call id, attributed by
/// `mcp_server`.
#[test]
fn a_denied_read_by_an_mcp_server_names_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let db = mcp_capture(dir.path());
    let cap = Capture::open(&db).unwrap();
    let p = Policy::parse(POLICY, "p.toml").unwrap();
    let r = audit(&cap, &p).unwrap();
    let ssh = r.findings.iter().find(|f| f.rule == "denied-path").unwrap();
    assert_eq!(ssh.message, "read of denied path /home/u/.ssh/id_rsa");
    let s = ssh.session.as_ref().unwrap();
    assert_eq!(
        (
            s.tool.as_deref(),
            s.call_id.as_deref(),
            s.tool_index,
            s.reason.as_deref()
        ),
        (
            Some("mcp__fs__read_text_file"),
            Some("t0"),
            Some(0),
            Some("mcp_server")
        )
    );
    let text = render::text(&r);
    assert!(
        text.contains(
            "    tool     claude session s1, tool call #0 mcp__fs__read_text_file (t0), attributed by mcp_server\n"
        ),
        "{text}"
    );
    let json = render::json(&r);
    assert_eq!(
        json["findings"][0]["session"]["tool"],
        "mcp__fs__read_text_file"
    );
}
