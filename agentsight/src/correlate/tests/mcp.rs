//! MCP calls lined up with their servers' activity: a stdio filesystem
//! server (claims, tmp + rename writes, a child it starts, its activity
//! outside calls), an unknown server, parallel calls and a remote server.

use serde_json::json;

use super::*;
use crate::correlate::mcp::McpServer;
use crate::sessions::mcp::McpCall;
use crate::store::mcp::McpServerRow;

fn mcp_tool(
    name: &str,
    call_id: &str,
    server: Option<&str>,
    args: serde_json::Value,
    status: ToolStatus,
    (start, end): (i64, i64),
) -> ToolEvent {
    let mut t = tool(
        name,
        ToolCategory::Mcp,
        None,
        Vec::new(),
        status,
        None,
        start,
        end,
    );
    t.call_id = Some(call_id.into());
    t.mcp = Some(McpCall {
        server: server.map(str::to_string),
        tool: server.map(|_| name.rsplit("__").next().unwrap_or(name).to_string()),
        arguments: Some(args),
    });
    t
}

fn server_row(name: &str, transport: &str, command: &[&str], kind: Option<&str>) -> McpServerRow {
    McpServerRow {
        session_row: 1,
        name: name.into(),
        transport: transport.into(),
        command: command.iter().map(|s| s.to_string()).collect(),
        url: None,
        source: "/w/.mcp.json".into(),
        kind: kind.map(str::to_string),
        process_id: None,
        evidence: None,
    }
}

fn claude_session(tools: Vec<ToolEvent>) -> AgentSession {
    let mut session = AgentSession::new(
        Provider::Claude,
        "s1".into(),
        PathBuf::from("/h/.claude/projects/-w/s1.jsonl"),
    );
    session.cwd = Some("/w".into());
    session.start_ms = Some(wall_ms(0));
    session.end_ms = Some(wall_ms(9000));
    session.push_prompt(Some(wall_ms(100)), "use the fs server".into());
    session.tool_count = tools.len();
    session.tools = tools;
    session
}

const FS_CMD: [&str; 3] = ["node", "/opt/server-filesystem/dist/index.js", "/w"];

/// Claude Code (pid 1000) with the filesystem server `fs` (pid 1001): a
/// new file written, an existing one written through a temp file, a write
/// the server never did (while a child of it runs), a refused write, a
/// call to a server no configuration names, then a Bash call during which
/// the server acts on its own.
fn fs_capture(db: &std::path::Path) -> Capture {
    let mut cap = Capture::new(db);
    let (agent, server, wc, du, sh) = ((1, 1000), (2, 1001), (3, 1002), (4, 1003), (5, 1004));
    cap.process(1, 1000, 0, None, "claude", &["claude", "-p", "go"], None);
    cap.process(2, 1001, 500, Some(agent), "node", &FS_CMD, None);
    cap.process(
        4,
        1003,
        4050,
        Some(server),
        "du",
        &["du", "-s", "/w"],
        Some(0),
    );
    cap.process(
        5,
        1004,
        7060,
        Some(server),
        "sh",
        &["sh", "-c", "x"],
        Some(0),
    );
    let wc_argv = ["bash", "-c", "wc -l /w/a.txt"];
    cap.process(3, 1002, 7010, Some(agent), "bash", &wc_argv, Some(0));
    cap.exec(500, server, &FS_CMD);
    cap.open_write(2050, server, "/w/a.txt");
    cap.open_write(3040, server, "/w/b.txt.0a1b.tmp");
    cap.rename(3050, server, "/w/b.txt.0a1b.tmp", "/w/b.txt");
    cap.exec(4050, du, &["du", "-s", "/w"]);
    cap.open_write(5500, server, "/w/.cache");
    cap.exec(7010, wc, &wc_argv);
    cap.open_write(7050, server, "/w/late.txt");
    cap.exec(7060, sh, &["sh", "-c", "x"]);
    cap
}

fn fs_session() -> AgentSession {
    let ok = ToolStatus::Ok;
    let w = "mcp__fs__write_file";
    claude_session(vec![
        mcp_tool(
            w,
            "t0",
            Some("fs"),
            json!({"path": "a.txt"}),
            ok,
            (2000, 2100),
        ),
        // No server in the record: resolved against the configured names.
        mcp_tool(w, "t1", None, json!({"path": "/w/b.txt"}), ok, (3000, 3100)),
        mcp_tool(
            w,
            "t2",
            Some("fs"),
            json!({"path": "/w/c.txt"}),
            ok,
            (4000, 4100),
        ),
        mcp_tool(
            w,
            "t3",
            Some("fs"),
            json!({"path": "/etc/x"}),
            ToolStatus::Failed,
            (5000, 5100),
        ),
        mcp_tool(
            "mcp__gh__search",
            "t4",
            None,
            json!({"q": "x"}),
            ok,
            (6000, 6100),
        ),
        tool(
            "Bash",
            ToolCategory::Shell,
            Some("wc -l /w/a.txt"),
            Vec::new(),
            ok,
            None,
            7000,
            7100,
        ),
    ])
}

/// The server's writes inside its calls are theirs (`mcp_server`: the
/// claimed file, and the temp file it renames onto the claimed path), a
/// process it starts during a call is the call's `descendant`; outside its calls, even inside the
/// Bash call's window, its activity is the runtime group `mcp server fs`.
/// A write never done is claimed but not observed; a refused call claims
/// nothing that can be missing.
#[test]
fn a_filesystem_server_s_activity_is_its_calls() {
    let dir = tempfile::tempdir().unwrap();
    let cap = fs_capture(&dir.path().join("c.db"));
    let view = cap.view();
    let bound = bound_from_start(&view);
    let servers = [McpServer {
        row: server_row("fs", "stdio", &FS_CMD, Some("filesystem")),
        proc_ix: Some(view.procs.by_id[&2]),
    }];
    let session = fs_session();
    let r = correlate_with(
        &view,
        &session,
        SessionSource::Capture,
        &bound,
        Vec::new(),
        &servers,
    )
    .unwrap();
    let s = |x: &str| x.to_string();
    let tools = &r.prompts[0].tools;
    let acts: Vec<_> = tools.iter().map(|t| summary(&t.activity)).collect();
    assert_eq!(
        acts,
        vec![
            vec![("write", s("/w/a.txt"), "mcp_server")],
            vec![
                ("write", s("/w/b.txt.0a1b.tmp"), "mcp_server"),
                ("rename", s("/w/b.txt.0a1b.tmp → /w/b.txt"), "mcp_server"),
            ],
            vec![("exec", s("du -s /w"), "descendant")],
            vec![],
            vec![],
            vec![("exec", s("bash -c 'wc -l /w/a.txt'"), "argv_match")],
        ]
    );
    // The claims, relative paths against the server's first root.
    let paths: Vec<Vec<(&str, &str)>> = tools
        .iter()
        .map(|t| {
            t.paths
                .iter()
                .map(|p| (p.path.as_str(), p.access.as_str()))
                .collect()
        })
        .collect();
    assert_eq!(
        paths,
        vec![
            vec![("/w/a.txt", "write")],
            vec![("/w/b.txt", "write")],
            vec![("/w/c.txt", "write")],
            vec![("/etc/x", "write")],
            vec![],
            vec![],
        ]
    );
    assert_eq!(summary(&r.flags.observed_not_claimed), vec![]);
    assert_eq!(
        r.flags.claimed_not_observed,
        vec![Claimed {
            tool_index: 2,
            call_id: Some("t2".into()),
            name: "mcp__fs__write_file".into(),
            what: Claim::Write,
            detail: "no write of /w/c.txt seen".into(),
        }]
    );
    assert_eq!(
        runtime_summary(&r),
        (
            vec![("child", s("mcp server fs"), 4, 2)],
            vec![
                (
                    "exec",
                    s("node /opt/server-filesystem/dist/index.js /w"),
                    "child"
                ),
                ("write", s("/w/.cache"), "child"),
                ("write", s("/w/late.txt"), "child"),
                ("exec", s("sh -c x"), "child"),
            ]
        )
    );
    fs_server_info(&r);
}

/// Every MCP call carries its server; one no configuration names has no
/// transport.
fn fs_server_info(r: &Report) {
    let tools = &r.prompts[0].tools;
    let fs = McpServerInfo {
        server: "fs".into(),
        tool: Some("write_file".into()),
        transport: Some("stdio".into()),
        kind: Some("filesystem".into()),
        pid: Some(1001),
        command: FS_CMD.iter().map(|s| s.to_string()).collect(),
        url: None,
    };
    for t in &tools[..4] {
        assert_eq!(t.mcp.as_ref(), Some(&fs), "{}", t.tool_index);
    }
    assert_eq!(
        tools[4].mcp,
        Some(McpServerInfo {
            server: "gh".into(),
            tool: Some("search".into()),
            transport: None,
            kind: None,
            pid: None,
            command: Vec::new(),
            url: None,
        })
    );
    assert_eq!(tools[5].mcp, None);
    let j = serde_json::to_value(r).unwrap();
    assert_eq!(
        j["prompts"][0]["tools"][0]["mcp"],
        json!({"server": "fs", "tool": "write_file", "transport": "stdio",
               "kind": "filesystem", "pid": 1001,
               "command": ["node", "/opt/server-filesystem/dist/index.js", "/w"]})
    );
    assert!(j["prompts"][0]["tools"][5].get("mcp").is_none());
    assert_eq!(
        j["prompts"][0]["tools"][0]["activity"][0]["reason"],
        "mcp_server"
    );
}

/// A server of no known kind: its activity is its call's (`mcp_server`),
/// nothing claimed. Two calls of one server at once: an activity naming one
/// call's path is that call's (also the temp file renamed onto it), another
/// the latest started's. A remote
/// server: the agent's connect to its address and port inside a call is
/// the call's, outside the runtime group of the server; a connect
/// elsewhere stays the runtime's.
/// The session of [`unknown_parallel_and_remote_servers`]: a git server's
/// call, two overlapping calls of the filesystem server, a remote server's
/// call.
fn three_servers_session() -> AgentSession {
    let ok = ToolStatus::Ok;
    claude_session(vec![
        mcp_tool(
            "mcp__git__git_status",
            "g0",
            Some("git"),
            json!({"repo_path": "/w"}),
            ok,
            (2000, 2100),
        ),
        mcp_tool(
            "mcp__fs__write_file",
            "p0",
            Some("fs"),
            json!({"path": "/w/p.txt"}),
            ok,
            (3000, 3300),
        ),
        mcp_tool(
            "mcp__fs__write_file",
            "q0",
            Some("fs"),
            json!({"path": "/w/q.txt"}),
            ok,
            (3100, 3400),
        ),
        mcp_tool(
            "mcp__notes__write_note",
            "n0",
            Some("notes"),
            json!({"text": "x"}),
            ok,
            (4000, 4100),
        ),
    ])
}

/// Correlates [`three_servers_session`] with a capture of the agent, a git
/// server, a filesystem server and connects to a remote server's port.
fn three_servers_report() -> Report {
    let dir = tempfile::tempdir().unwrap();
    let mut cap = Capture::new(&dir.path().join("c.db"));
    let (agent, git, fs) = ((1, 1000), (2, 1001), (3, 1002));
    cap.process(1, 1000, 0, None, "claude", &["claude", "-p", "go"], None);
    cap.process(
        2,
        1001,
        300,
        Some(agent),
        "uvx",
        &["uvx", "mcp-server-git"],
        None,
    );
    cap.process(3, 1002, 400, Some(agent), "node", &FS_CMD, None);
    cap.open_write(2050, git, "/w/.git/index.lock");
    cap.open_write(3200, fs, "/w/p.txt.5e.tmp");
    cap.rename(3210, fs, "/w/p.txt.5e.tmp", "/w/p.txt");
    cap.open_write(3250, fs, "/w/other.txt");
    let connect = |ms: i64, port: i64| EventRow {
        kind: "connect",
        family: Some("inet"),
        addr: Some("127.0.0.1"),
        port: Some(port),
        ..cap.row(ms, agent)
    };
    let (inside, outside, elsewhere) =
        (connect(4050, 8790), connect(4500, 8790), connect(4060, 443));
    for e in [inside, elsewhere, outside] {
        cap.put(e);
    }

    let session = three_servers_session();
    let view = cap.view();
    let bound = bound_from_start(&view);
    let mut notes = server_row("notes", "http", &[], None);
    notes.url = Some("http://localhost:8790/mcp".into());
    let servers = [
        McpServer {
            row: server_row("git", "stdio", &["uvx", "mcp-server-git"], None),
            proc_ix: Some(view.procs.by_id[&2]),
        },
        McpServer {
            row: server_row("fs", "stdio", &FS_CMD, Some("filesystem")),
            proc_ix: Some(view.procs.by_id[&3]),
        },
        McpServer {
            row: notes,
            proc_ix: None,
        },
    ];
    correlate_with(
        &view,
        &session,
        SessionSource::Capture,
        &bound,
        Vec::new(),
        &servers,
    )
    .unwrap()
}

#[test]
fn unknown_parallel_and_remote_servers() {
    let r = three_servers_report();
    let s = |x: &str| x.to_string();
    let tools = &r.prompts[0].tools;
    let acts: Vec<_> = tools.iter().map(|t| summary(&t.activity)).collect();
    assert_eq!(
        acts,
        vec![
            vec![("write", s("/w/.git/index.lock"), "mcp_server")],
            vec![
                ("write", s("/w/p.txt.5e.tmp"), "mcp_server"),
                ("rename", s("/w/p.txt.5e.tmp → /w/p.txt"), "mcp_server"),
            ],
            vec![("write", s("/w/other.txt"), "mcp_server")],
            vec![("connect", s("127.0.0.1:8790"), "mcp_server")],
        ]
    );
    assert!(tools[0].paths.is_empty());
    assert_eq!(
        r.flags.claimed_not_observed,
        vec![Claimed {
            tool_index: 2,
            call_id: Some("q0".into()),
            name: "mcp__fs__write_file".into(),
            what: Claim::Write,
            detail: "no write of /w/q.txt seen".into(),
        }]
    );
    assert_eq!(summary(&r.flags.observed_not_claimed), vec![]);
    assert_eq!(
        runtime_summary(&r),
        (
            vec![
                ("runtime", s("claude"), 1, 1),
                ("runtime", s("mcp server notes"), 1, 1)
            ],
            vec![
                ("connect", s("127.0.0.1:443"), "runtime"),
                ("connect", s("127.0.0.1:8790"), "runtime"),
            ]
        )
    );
    let notes_info = tools[3].mcp.as_ref().unwrap();
    assert_eq!(
        (
            notes_info.transport.as_deref(),
            notes_info.url.as_deref(),
            notes_info.pid
        ),
        (Some("http"), Some("http://localhost:8790/mcp"), None)
    );
    let text = render::text(&r, false);
    assert!(
        text.contains("      mcp notes/write_note · http http://localhost:8790/mcp\n"),
        "{text}"
    );
    assert!(
        text.contains("08:00:04.050  connect pid 1000    127.0.0.1:8790  [mcp_server]\n"),
        "{text}"
    );
}

/// The agent's own helpers started during an MCP call (Claude Code runs
/// `git` and its shell snapshot while its server works) are never the MCP
/// call's: the agent starts nothing for an MCP call, its server acts for
/// it. Inside no other call's window they are the runtime's helpers; inside
/// a built-in call's window too (a parallel call), that call's by
/// `time_window`, as without the MCP call. The agent's own read or write
/// of a path an MCP call names is not the call's either: of a server known
/// by its process, only that server acts for the call.
#[test]
fn agent_helpers_in_an_mcp_call_s_window_are_not_its() {
    let dir = tempfile::tempdir().unwrap();
    let mut cap = Capture::new(&dir.path().join("c.db"));
    let (agent, server, git, snap, hook, wc) = (
        (1, 1000),
        (2, 1001),
        (3, 1002),
        (4, 1003),
        (5, 1004),
        (6, 1005),
    );
    cap.process(1, 1000, 0, None, "claude", &["claude", "-p", "go"], None);
    cap.process(2, 1001, 500, Some(agent), "node", &FS_CMD, None);
    let git_argv = ["git", "status", "--porcelain"];
    cap.process(3, 1002, 2030, Some(agent), "git", &git_argv, Some(0));
    let snap_argv = ["bash", "-c", "env"];
    cap.process(4, 1003, 2060, Some(agent), "bash", &snap_argv, Some(0));
    let hook_argv = ["hook", "--post"];
    cap.process(5, 1004, 3150, Some(agent), "hook", &hook_argv, Some(0));
    let wc_argv = ["bash", "-c", "wc -l /w/a.txt"];
    cap.process(6, 1005, 3160, Some(agent), "bash", &wc_argv, Some(0));
    cap.exec(500, server, &FS_CMD);
    cap.exec(2030, git, &git_argv);
    cap.open_write(2040, git, "/w/.git/index.lock");
    cap.open_write(2050, server, "/w/a.txt");
    cap.exec(2060, snap, &snap_argv);
    cap.exec(3150, hook, &hook_argv);
    // The agent itself on the MCP calls' paths: its own, not theirs.
    let read = Some("read,cloexec");
    cap.event(3120, "openat", agent, Some("/w/a.txt"), None, read, None);
    cap.open_write(2080, agent, "/w/a.txt");
    cap.exec(3160, wc, &wc_argv);

    let ok = ToolStatus::Ok;
    let session = claude_session(vec![
        mcp_tool(
            "mcp__fs__write_file",
            "w0",
            Some("fs"),
            json!({"path": "/w/a.txt"}),
            ok,
            (2000, 2100),
        ),
        tool(
            "Bash",
            ToolCategory::Shell,
            Some("wc -l /w/a.txt"),
            Vec::new(),
            ok,
            None,
            3000,
            3300,
        ),
        mcp_tool(
            "mcp__fs__read_text_file",
            "r0",
            Some("fs"),
            json!({"path": "/w/a.txt"}),
            ok,
            (3100, 3200),
        ),
    ]);
    let view = cap.view();
    let bound = bound_from_start(&view);
    let servers = [McpServer {
        row: server_row("fs", "stdio", &FS_CMD, Some("filesystem")),
        proc_ix: Some(view.procs.by_id[&2]),
    }];
    let r = correlate_with(
        &view,
        &session,
        SessionSource::Capture,
        &bound,
        Vec::new(),
        &servers,
    )
    .unwrap();
    let s = |x: &str| x.to_string();
    let acts: Vec<_> = r.prompts[0]
        .tools
        .iter()
        .map(|t| summary(&t.activity))
        .collect();
    assert_eq!(
        acts,
        vec![
            vec![("write", s("/w/a.txt"), "mcp_server")],
            vec![
                ("exec", s("hook --post"), "time_window"),
                ("exec", s("bash -c 'wc -l /w/a.txt'"), "argv_match"),
            ],
            vec![],
        ]
    );
    assert_eq!(summary(&r.flags.observed_not_claimed), vec![]);
    assert_eq!(
        runtime_summary(&r),
        (
            vec![
                ("child", s("mcp server fs"), 1, 1),
                ("child", s("git"), 2, 1),
                ("child", s("bash"), 1, 1),
                ("runtime", s("claude"), 1, 1),
            ],
            vec![
                (
                    "exec",
                    s("node /opt/server-filesystem/dist/index.js /w"),
                    "child"
                ),
                ("exec", s("git status --porcelain"), "child"),
                ("write", s("/w/.git/index.lock"), "child"),
                ("exec", s("bash -c env"), "child"),
                ("write", s("/w/a.txt"), "runtime"),
            ]
        )
    );
}
