//! MCP (Model Context Protocol) tool calls and servers, as each agent names
//! and configures them (`docs/mcp.md`).
//!
//! A call is normalised to [`McpCall`] (server, tool, arguments) only where
//! the provider's own record says where the server name ends (Codex's
//! namespace, a name that splits one way only); otherwise the server stays
//! `None` and is resolved later against the configured servers
//! ([`resolve_name`]), because `_` is legal inside server and tool names.

use serde::{Deserialize, Serialize};

/// What a transcript says about one MCP tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCall {
    /// The server's configured name, when the record says where it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The server's own tool name (`write_file`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call's arguments as the transcript recorded them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
}

/// How an MCP server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on its stdin/stdout.
    Stdio,
    /// Streamable HTTP at a URL.
    Http,
    /// The older HTTP+SSE transport at a URL.
    Sse,
}

impl McpTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            McpTransport::Stdio => "stdio",
            McpTransport::Http => "http",
            McpTransport::Sse => "sse",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "stdio" => Some(McpTransport::Stdio),
            "http" => Some(McpTransport::Http),
            "sse" => Some(McpTransport::Sse),
            _ => None,
        }
    }
}

/// One MCP server as an agent's configuration declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerConfig {
    pub name: String,
    pub transport: McpTransport,
    /// Stdio: the configured command and its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Stdio: the working directory it is started in, when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Http/Sse: the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Where it was declared: the file and, where the format has them, the
    /// scope (`~/.claude.json projects./w`, `--mcp-config /p/fs.json`).
    pub source: String,
}
