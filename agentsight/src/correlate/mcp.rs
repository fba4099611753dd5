//! MCP calls and their servers: which configured server each MCP call names,
//! which processes (or endpoint) are that server's, and what a call of a
//! server with known tools claims (`docs/correlate.md`, MCP).
//!
//! A server's processes (the stored process and its whole subtree) are the
//! agent's side: only the MCP calls of that server are attributed their
//! activity (reason `mcp_server`; a claimed path, directly or through a
//! rename, only decides between overlapping calls of the server); outside
//! those calls it is runtime activity of the group `mcp server NAME`, never
//! a built-in call's.

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::IpAddr;

use serde_json::Value;

use super::{
    CorrelateError,
    calls::Call,
    report::{Activity, McpServerInfo, Op},
    view::CaptureView,
};
use crate::{
    matching::ProcTable,
    sessions::{AgentSession, PathAccess, Provider, ToolEvent, ToolPath, mcp as sessions_mcp},
    store::mcp::McpServerRow,
};

/// A session's MCP server with its process (read by the view).
pub use super::view::McpServer;

/// The stored MCP servers of session row `session_row`, each with the
/// index of its process in the view's process table
/// ([`CaptureView::mcp_servers`]).
pub fn stored_servers(
    view: &CaptureView,
    session_row: i64,
) -> Result<Vec<McpServer>, CorrelateError> {
    view.mcp_servers(session_row)
}

/// The kind of the reference filesystem server (`store::mcp::McpServerRow::kind`).
pub const FILESYSTEM: &str = "filesystem";

/// The program name of a server's runtime group (`mcp server fs`).
pub fn group_program(server: &str) -> String {
    format!("mcp server {server}")
}

/// Whether a tool call is an MCP call.
pub(super) fn is_mcp(t: &ToolEvent) -> bool {
    t.mcp.is_some()
}

/// `raw_name` split into (server, tool) by the provider's naming against
/// the configured server names, else where its form alone says
/// (`mcp__S__T`).
fn resolve_name(provider: Provider, raw_name: &str, names: &[&str]) -> Option<(String, String)> {
    sessions_mcp::resolve_name(provider, raw_name, names)
        .or_else(|| sessions_mcp::split_unambiguous(raw_name))
}

/// The first allowed directory of a filesystem server, from its command
/// line (`sessions::mcp::filesystem_roots`; options skipped).
fn first_root(row: &McpServerRow) -> Option<String> {
    let config = sessions_mcp::McpServerConfig {
        name: row.name.clone(),
        transport: sessions_mcp::McpTransport::parse(&row.transport)?,
        command: row.command.clone(),
        cwd: None,
        url: row.url.clone(),
        source: row.source.clone(),
    };
    sessions_mcp::filesystem_roots(&config)
        .into_iter()
        .find(|w| !w.starts_with('-'))
}

/// The reference filesystem server's tools and the claims their arguments
/// make (`docs/correlate.md`, MCP claims): `(tool, argument, access)`;
/// `edit_file` with `dryRun: true` is a read.
const FILESYSTEM_CLAIMS: &[(&str, &str, PathAccess)] = &[
    ("write_file", "path", PathAccess::Write),
    ("edit_file", "path", PathAccess::Write),
    ("create_directory", "path", PathAccess::Create),
    ("read_text_file", "path", PathAccess::Read),
    ("read_file", "path", PathAccess::Read),
    ("read_media_file", "path", PathAccess::Read),
    ("read_multiple_files", "paths", PathAccess::Read),
    ("list_directory", "path", PathAccess::Read),
    ("list_directory_with_sizes", "path", PathAccess::Read),
    ("directory_tree", "path", PathAccess::Read),
    ("search_files", "path", PathAccess::Read),
];

/// What a filesystem server's call claims, paths as given (resolved by
/// [`resolve_path`]). `move_file`: the source renamed away, the destination
/// renamed onto; `get_file_info`, `list_allowed_directories` and unknown
/// tools: nothing.
fn filesystem_claims(tool: &str, args: &Value) -> Vec<ToolPath> {
    let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    if tool == "move_file" {
        let (Some(src), Some(dst)) = (s("source"), s("destination")) else {
            return Vec::new();
        };
        let mut to = ToolPath::new(dst, PathAccess::Rename);
        to.previous_path = Some(src.clone());
        return vec![ToolPath::new(src, PathAccess::RenameFrom), to];
    }
    let Some(&(_, key, access)) = FILESYSTEM_CLAIMS.iter().find(|(t, _, _)| *t == tool) else {
        return Vec::new();
    };
    let access = if tool == "edit_file" && args.get("dryRun").and_then(Value::as_bool) == Some(true)
    {
        PathAccess::Read
    } else {
        access
    };
    match args.get(key) {
        Some(Value::String(p)) => vec![ToolPath::new(p.clone(), access)],
        Some(Value::Array(ps)) => ps
            .iter()
            .filter_map(Value::as_str)
            .map(|p| ToolPath::new(p, access))
            .collect(),
        _ => Vec::new(),
    }
}

/// A path as the filesystem server resolves it: `~` against the home,
/// relative against its first allowed directory (left relative when that
/// is unknown; `calls` then joins it to the call's cwd).
fn resolve_path(p: &str, root: Option<&str>, home: Option<&str>) -> String {
    if let Some(h) = home
        && (p == "~" || p.starts_with("~/"))
    {
        return format!("{h}{}", &p[1..]);
    }
    match root {
        Some(r) if !p.starts_with('/') => format!("{}/{p}", r.trim_end_matches('/')),
        _ => p.to_string(),
    }
}

/// The session's home, when its transcript lies under an agent's state
/// directory in it (`/home/u/.claude/projects/…` → `/home/u`).
fn home_of(session: &AgentSession) -> Option<String> {
    let mut cur = session.source_path.parent();
    while let Some(d) = cur {
        let name = d.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(name, ".claude" | ".codex" | ".gemini" | ".cursor") {
            return d.parent().map(|h| h.display().to_string());
        }
        cur = d.parent();
    }
    None
}

/// A remote server's endpoint: the addresses its URL's host stands for and
/// its port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    addrs: Vec<IpAddr>,
    port: u16,
}

/// The endpoint of an `http(s)://HOST[:PORT]/…` URL whose host is an IP
/// address or `localhost` (127.0.0.1 and ::1); `None` for another host
/// name (this tool resolves no names).
fn endpoint(url: &str) -> Option<Endpoint> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit('@').next()?;
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default_port,
    };
    let addrs = if host.eq_ignore_ascii_case("localhost") {
        vec![
            IpAddr::from([127, 0, 0, 1]),
            IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ]
    } else {
        vec![host.parse::<IpAddr>().ok()?.to_canonical()]
    };
    Some(Endpoint { addrs, port })
}

/// Does a connect activity reach `e`?
fn reaches(a: &Activity, e: &Endpoint) -> bool {
    a.op == Op::Connect
        && a.port == Some(e.port)
        && a.addr
            .as_deref()
            .and_then(|s| s.parse::<IpAddr>().ok())
            .is_some_and(|ip| e.addrs.contains(&ip.to_canonical()))
}

/// One MCP call: its server (index into the servers, when configured), as
/// reported, and its claims.
#[derive(Debug, Clone)]
struct CallServer {
    server: Option<usize>,
    info: McpServerInfo,
    /// For a server of known kind: the call's claims (replace the
    /// transcript's paths).
    claims: Option<Vec<ToolPath>>,
}

/// The MCP side of a session: its servers, which process is whose, and
/// each MCP call's server.
pub(super) struct McpSide<'a> {
    servers: &'a [McpServer],
    /// Tool index → its server.
    calls: HashMap<usize, CallServer>,
    /// Process index → the server whose subtree it is in.
    member: HashMap<usize, usize>,
    /// The stored (root) process of each stdio server.
    roots: HashMap<usize, usize>,
    /// Server index → its endpoint, for remote servers.
    remote: Vec<(usize, Endpoint)>,
}

impl<'a> McpSide<'a> {
    pub fn of(session: &AgentSession, servers: &'a [McpServer], procs: &ProcTable) -> Self {
        let names: Vec<&str> = servers.iter().map(|s| s.row.name.as_str()).collect();
        let home = home_of(session);
        let mut calls = HashMap::new();
        for (i, t) in session.tools.iter().enumerate() {
            let Some(m) = &t.mcp else { continue };
            let split = resolve_name(session.provider, &t.name, &names);
            let name = m
                .server
                .clone()
                .or_else(|| split.as_ref().map(|s| s.0.clone()));
            let tool = m.tool.clone().or_else(|| split.map(|s| s.1));
            let server = name
                .as_deref()
                .and_then(|n| servers.iter().position(|s| s.row.name == n));
            let row = server.map(|s| &servers[s]);
            let claims = row
                .filter(|s| s.row.kind.as_deref() == Some(FILESYSTEM))
                .map(|s| {
                    let root = first_root(&s.row);
                    let root = root.as_deref();
                    let args = m.arguments.clone().unwrap_or(Value::Null);
                    let mut claims = filesystem_claims(tool.as_deref().unwrap_or(""), &args);
                    for c in &mut claims {
                        c.path = resolve_path(&c.path, root, home.as_deref());
                        if let Some(prev) = &mut c.previous_path {
                            *prev = resolve_path(prev, root, home.as_deref());
                        }
                    }
                    claims
                });
            let info = McpServerInfo {
                server: name.unwrap_or_else(|| t.name.clone()),
                tool,
                transport: row.map(|s| s.row.transport.clone()),
                kind: row.and_then(|s| s.row.kind.clone()),
                pid: row.and_then(|s| s.proc_ix).map(|p| procs.procs[p].pid),
                command: row.map(|s| s.row.command.clone()).unwrap_or_default(),
                url: row.and_then(|s| s.row.url.clone()),
            };
            calls.insert(
                i,
                CallServer {
                    server,
                    info,
                    claims,
                },
            );
        }
        let mut member = HashMap::new();
        let mut roots = HashMap::new();
        let mut remote = Vec::new();
        for (si, s) in servers.iter().enumerate() {
            if let Some(root) = s.proc_ix {
                roots.insert(root, si);
                for m in procs.subtree(root) {
                    member.entry(m).or_insert(si);
                }
            } else if let Some(e) = s.row.url.as_deref().and_then(endpoint) {
                remote.push((si, e));
            }
        }
        McpSide {
            servers,
            calls,
            member,
            roots,
            remote,
        }
    }

    /// The session with each MCP call's paths replaced by its claims (a
    /// copy only when some call has claims).
    pub fn with_claims<'s>(&self, session: &'s AgentSession) -> Cow<'s, AgentSession> {
        if self.calls.values().all(|c| c.claims.is_none()) {
            return Cow::Borrowed(session);
        }
        let mut s = session.clone();
        for (&i, c) in &self.calls {
            if let Some(claims) = &c.claims {
                s.tools[i].paths = claims.clone();
            }
        }
        Cow::Owned(s)
    }

    /// The report's server of tool `i`, for an MCP call.
    pub fn info(&self, tool_index: usize) -> Option<McpServerInfo> {
        self.calls.get(&tool_index).map(|c| c.info.clone())
    }

    /// Is tool `i` an MCP call whose server is known by its process or its
    /// endpoint? Only that server's activity is then the call's: anyone
    /// else's on its claimed paths (the agent listing its workspace) is not.
    pub fn served(&self, tool_index: usize) -> bool {
        self.calls
            .get(&tool_index)
            .and_then(|c| c.server)
            .is_some_and(|si| {
                self.servers[si].proc_ix.is_some() || self.remote.iter().any(|(r, _)| *r == si)
            })
    }

    /// The server whose subtree process `p` is in.
    pub fn server_of_process(&self, p: usize) -> Option<usize> {
        self.member.get(&p).copied()
    }

    /// Is `p` the stored process of a stdio server?
    pub fn is_server_root(&self, p: usize) -> bool {
        self.roots.contains_key(&p)
    }

    /// The remote server a connect activity reaches.
    pub fn remote_server_of(&self, a: &Activity) -> Option<usize> {
        self.remote
            .iter()
            .find(|(_, e)| reaches(a, e))
            .map(|(si, _)| *si)
    }

    /// The server's configured name.
    pub fn name(&self, server: usize) -> &str {
        &self.servers[server].row.name
    }

    /// The calls (indices into `calls`) of `server` whose own windows hold
    /// `mono`.
    pub fn calls_at(&self, calls: &[Call], server: usize, mono: u64) -> Vec<usize> {
        calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.win_lo <= mono && mono <= c.win_hi)
            .filter(|(_, c)| {
                self.calls
                    .get(&c.idx)
                    .is_some_and(|cs| cs.server == Some(server))
            })
            .map(|(ci, _)| ci)
            .collect()
    }
}

/// Of overlapping calls of one server (parallel calls) holding an activity
/// at `mono`: the latest started at or before it, else the latest started.
pub(super) fn latest_before(calls: &[Call], candidates: &[usize], mono: u64) -> Option<usize> {
    candidates
        .iter()
        .copied()
        .filter(|&ci| calls[ci].start_mono <= mono)
        .max_by_key(|&ci| calls[ci].start_ms)
        .or_else(|| {
            candidates
                .iter()
                .copied()
                .max_by_key(|&ci| calls[ci].start_ms)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(tool: &str, args: Value) -> Vec<(String, &'static str, Option<String>)> {
        filesystem_claims(tool, &args)
            .into_iter()
            .map(|c| (c.path, c.access.as_str(), c.previous_path))
            .collect()
    }

    #[test]
    fn filesystem_tools_claim_their_paths() {
        let p = |s: &str| s.to_string();
        assert_eq!(
            claims("write_file", json!({"path": "/w/a", "content": "x"})),
            vec![(p("/w/a"), "write", None)]
        );
        assert_eq!(
            claims("edit_file", json!({"path": "/w/a", "edits": []})),
            vec![(p("/w/a"), "write", None)]
        );
        assert_eq!(
            claims("edit_file", json!({"path": "/w/a", "dryRun": true})),
            vec![(p("/w/a"), "read", None)]
        );
        assert_eq!(
            claims("create_directory", json!({"path": "/w/d"})),
            vec![(p("/w/d"), "create", None)]
        );
        assert_eq!(
            claims(
                "move_file",
                json!({"source": "/w/a", "destination": "/w/b"})
            ),
            vec![
                (p("/w/a"), "rename_from", None),
                (p("/w/b"), "rename", Some(p("/w/a")))
            ]
        );
        assert_eq!(
            claims("read_multiple_files", json!({"paths": ["/w/a", "/w/b"]})),
            vec![(p("/w/a"), "read", None), (p("/w/b"), "read", None)]
        );
        for t in [
            "read_text_file",
            "read_file",
            "read_media_file",
            "list_directory",
            "list_directory_with_sizes",
            "directory_tree",
            "search_files",
        ] {
            assert_eq!(
                claims(t, json!({"path": "/w"})),
                vec![(p("/w"), "read", None)],
                "{t}"
            );
        }
        assert_eq!(claims("get_file_info", json!({"path": "/w/a"})), vec![]);
        assert_eq!(claims("list_allowed_directories", json!({})), vec![]);
        assert_eq!(claims("write_file", json!({"content": "x"})), vec![]);
    }

    #[test]
    fn paths_resolve_against_the_first_root_and_the_home() {
        let row = McpServerRow {
            session_row: 1,
            name: "fs".into(),
            transport: "stdio".into(),
            command: ["node", "/opt/server-filesystem/dist/index.js", "/w", "/x"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            url: None,
            source: "/w/.mcp.json".into(),
            kind: Some(FILESYSTEM.into()),
            process_id: None,
            evidence: None,
        };
        let root = first_root(&row);
        assert_eq!(root.as_deref(), Some("/w"));
        let root = root.as_deref();
        assert_eq!(resolve_path("a/b.txt", root, Some("/h")), "/w/a/b.txt");
        assert_eq!(resolve_path("/etc/x", root, Some("/h")), "/etc/x");
        assert_eq!(resolve_path("~/n.txt", root, Some("/h")), "/h/n.txt");
        assert_eq!(resolve_path("~/n.txt", root, None), "/w/~/n.txt");
        assert_eq!(resolve_path("a", None, None), "a");
    }

    #[test]
    fn names_split_against_the_configured_servers() {
        let s = |a: &str, b: &str| Some((a.to_string(), b.to_string()));
        let r = |n: &str, names: &[&str]| resolve_name(Provider::Claude, n, names);
        let g = |n: &str, names: &[&str]| resolve_name(Provider::Gemini, n, names);
        assert_eq!(r("mcp__fs__write_file", &["fs"]), s("fs", "write_file"));
        assert_eq!(r("mcp__git__status", &[]), s("git", "status"));
        assert_eq!(g("mcp_fs_write_file", &["fs"]), s("fs", "write_file"));
        assert_eq!(g("mcp_my_fs_read", &["my", "my_fs"]), s("my_fs", "read"));
        assert_eq!(g("mcp_fs_write_file", &[]), None);
    }

    #[test]
    fn urls_name_their_address_and_port() {
        let e = |a: &[&str], port| {
            Some(Endpoint {
                addrs: a.iter().map(|s| s.parse().unwrap()).collect(),
                port,
            })
        };
        assert_eq!(
            endpoint("http://127.0.0.1:8790/mcp"),
            e(&["127.0.0.1"], 8790)
        );
        assert_eq!(
            endpoint("http://localhost/mcp"),
            e(&["127.0.0.1", "::1"], 80)
        );
        assert_eq!(endpoint("https://[::1]/x"), e(&["::1"], 443));
        assert_eq!(endpoint("https://u@10.0.0.1:9"), e(&["10.0.0.1"], 9));
        assert_eq!(endpoint("https://mcp.example.com/x"), None);
        assert_eq!(endpoint("ftp://127.0.0.1/"), None);
    }
}
