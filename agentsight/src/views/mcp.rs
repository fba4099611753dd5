//! An MCP call as every view shows it: what the transcript said (server,
//! tool, arguments) joined with what correlate found of its server
//! (transport, kind, process, command, URL). Correlate's server wins where
//! both name one: it was resolved against the configured servers.

use crate::{
    correlate::report::McpServerInfo,
    sessions::{ToolEvent, mcp},
};

/// One MCP call's server, for the views.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct McpView<'a> {
    pub server: Option<&'a str>,
    pub tool: Option<&'a str>,
    /// `stdio`, `http`, `sse`; `None` when no configuration declared it.
    pub transport: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub pid: Option<u32>,
    pub command: &'a [String],
    pub url: Option<&'a str>,
    /// The call's arguments as the transcript recorded them (content).
    pub arguments: Option<&'a serde_json::Value>,
}

impl<'a> McpView<'a> {
    /// `None` for a call that is not an MCP call by either source.
    pub fn of(tool: &'a ToolEvent, server: Option<&'a McpServerInfo>) -> Option<Self> {
        let call = tool.mcp.as_ref();
        if call.is_none() && server.is_none() {
            return None;
        }
        Some(McpView {
            server: server
                .map(|s| s.server.as_str())
                .or_else(|| call.and_then(|c| c.server.as_deref())),
            tool: server
                .and_then(|s| s.tool.as_deref())
                .or_else(|| call.and_then(|c| c.tool.as_deref())),
            transport: server.and_then(|s| s.transport.as_deref()),
            kind: server.and_then(|s| s.kind.as_deref()),
            pid: server.and_then(|s| s.pid),
            command: server.map_or(&[], |s| s.command.as_slice()),
            url: server.and_then(|s| s.url.as_deref()),
            arguments: call.and_then(|c| c.arguments.as_ref()),
        })
    }

    /// `fs/write_file` (`sessions::mcp::label`).
    pub fn label(&self) -> String {
        mcp::label(self.server, self.tool)
    }

    /// The OpenTelemetry `network.transport` of the transport: `pipe` for
    /// stdio, `tcp` for HTTP (the MCP semantic conventions' values).
    pub fn network_transport(&self) -> Option<&'static str> {
        match self.transport? {
            "stdio" => Some("pipe"),
            "http" | "sse" => Some("tcp"),
            _ => None,
        }
    }

    /// A remote server's host and port (the scheme's default port when the
    /// URL names none).
    pub fn host_port(&self) -> Option<(&'a str, Option<u16>)> {
        host_port(self.url?)
    }
}

/// Host and port of `scheme://[user@]host[:port][/…]`; an IPv6 host without
/// its brackets. `None` for a URL that has no host.
pub fn host_port(url: &str) -> Option<(&str, Option<u16>)> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    // Credentials before the host are never part of the address.
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        },
    };
    if host.is_empty() {
        return None;
    }
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    let port = match port {
        Some(p) => Some(p.parse().ok()?),
        None => default,
    };
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::{ToolCategory, ToolStatus, mcp::McpCall};

    #[test]
    fn a_urls_host_and_port() {
        let table = [
            ("http://127.0.0.1:8931/mcp", Some(("127.0.0.1", Some(8931)))),
            (
                "https://mcp.example.com/v1?x=1",
                Some(("mcp.example.com", Some(443))),
            ),
            ("http://user:secret@host/mcp", Some(("host", Some(80)))),
            ("http://[::1]:9000/mcp", Some(("::1", Some(9000)))),
            ("HTTP://h", Some(("h", Some(80)))),
            ("ws://h", Some(("h", None))),
            ("http://h:notaport/", None),
            ("http:///mcp", None),
            ("no-scheme:80", None),
        ];
        for (url, want) in table {
            assert_eq!(host_port(url), want, "{url}");
        }
    }

    fn call(mcp: Option<McpCall>) -> ToolEvent {
        ToolEvent {
            prompt_index: None,
            subagent: None,
            name: "mcp__fs__write_file".into(),
            category: ToolCategory::Mcp,
            call_id: None,
            command: None,
            command_truncated: false,
            cwd: None,
            status: ToolStatus::Ok,
            exit_code: None,
            start_ms: None,
            end_ms: None,
            paths: Vec::new(),
            domains: Vec::new(),
            mcp,
        }
    }

    /// Correlate's server wins over the transcript's; the arguments are the
    /// transcript's; neither source: not an MCP call.
    #[test]
    fn the_view_joins_transcript_and_correlate() {
        let transcript = McpCall {
            server: None,
            tool: Some("write_file".into()),
            arguments: Some(serde_json::json!({"path": "/w/a"})),
        };
        let info = McpServerInfo {
            server: "fs".into(),
            tool: None,
            transport: Some("stdio".into()),
            kind: Some("filesystem".into()),
            pid: Some(4242),
            command: vec!["node".into(), "/srv/fs.js".into()],
            url: None,
        };
        let t = call(Some(transcript));
        let v = McpView::of(&t, Some(&info)).unwrap();
        assert_eq!(v.label(), "fs/write_file");
        assert_eq!(v.network_transport(), Some("pipe"));
        assert_eq!((v.pid, v.kind), (Some(4242), Some("filesystem")));
        assert_eq!(v.arguments, Some(&serde_json::json!({"path": "/w/a"})));
        assert_eq!(McpView::of(&t, None).unwrap().label(), "?/write_file");
        assert_eq!(McpView::of(&call(None), None), None);
        let remote = McpServerInfo {
            transport: Some("http".into()),
            pid: None,
            command: Vec::new(),
            url: Some("http://127.0.0.1:8931/mcp".into()),
            ..info
        };
        let v = McpView::of(&t, Some(&remote)).unwrap();
        assert_eq!(v.network_transport(), Some("tcp"));
        assert_eq!(v.host_port(), Some(("127.0.0.1", Some(8931))));
    }
}
