//! MCP (Model Context Protocol) tool calls and servers, as each agent names
//! and configures them (`docs/mcp.md`).
//!
//! A call is normalised to [`McpCall`] (server, tool, arguments) only where
//! the provider's own record says where the server name ends (Codex's
//! namespace, a name that splits one way only); otherwise the server stays
//! `None` and is resolved later against the configured servers
//! ([`resolve_name`]), because `_` is legal inside server and tool names.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Provider;

/// What a transcript says about one MCP tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCall {
    /// The server's configured name, when the record says where it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The server's own tool name (`write_file`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call's arguments as the transcript recorded them; `None` also
    /// when they did not fit the session's command text budget
    /// ([`crate::Bounds::command_text_bytes`], spent newest first; the
    /// bytes are counted in [`crate::CutNote::command_text_bytes_cut`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
}

impl McpCall {
    /// A call named `mcp__SERVER__TOOL` (Claude Code): the server and tool
    /// when the name splits one way ([`split_unambiguous`]), with the
    /// arguments as recorded.
    pub(crate) fn from_split_name(name: &str, arguments: serde_json::Value) -> McpCall {
        let (server, tool) =
            split_unambiguous(name).map_or((None, None), |(s, t)| (Some(s), Some(t)));
        McpCall {
            server,
            tool,
            arguments: Some(arguments),
        }
    }

    /// Cursor's `CallMcpTool{server, toolName, arguments}` (also `tool`,
    /// `args`): the server as Cursor wrote it (it may carry a scope prefix,
    /// e.g. `user-linear`).
    pub(crate) fn from_cursor_input(input: &serde_json::Value) -> McpCall {
        let text = |k: &str| input.get(k).and_then(|v| v.as_str()).map(str::to_string);
        McpCall {
            server: text("server"),
            tool: text("toolName").or_else(|| text("tool")),
            arguments: input
                .get("arguments")
                .or_else(|| input.get("args"))
                .cloned(),
        }
    }
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

/// `SERVER/TOOL` as the views show an MCP call (`fs/write_file`): `?` for a
/// server the record does not name; the server alone when the tool is
/// unknown.
pub fn label(server: Option<&str>, tool: Option<&str>) -> String {
    let server = server.unwrap_or("?");
    match tool {
        Some(t) => format!("{server}/{t}"),
        None => server.to_owned(),
    }
}

impl McpCall {
    /// [`label`] of the call's own server and tool.
    pub fn label(&self) -> String {
        label(self.server.as_deref(), self.tool.as_deref())
    }
}

/// How a provider names an MCP tool to the model and in its transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamePattern {
    /// `mcp__SERVER__TOOL` (Claude Code, Codex, Qwen Code).
    McpDoubleUnderscore,
    /// `mcp_SERVER_TOOL` (Gemini CLI ≥ 0.3x).
    McpUnderscore,
    /// `SERVER-TOOL` (Copilot CLI).
    Dash,
    /// `SERVER_TOOL` (opencode).
    Underscore,
}

impl NamePattern {
    /// The pattern of a provider's MCP tool names; `None` for Cursor,
    /// whose transcripts name every MCP call `CallMcpTool` (the server and
    /// tool are its arguments).
    pub fn of(provider: Provider) -> Option<NamePattern> {
        crate::provider::spec(provider).mcp.names
    }

    fn prefix(self) -> &'static str {
        match self {
            NamePattern::McpDoubleUnderscore => "mcp__",
            NamePattern::McpUnderscore => "mcp_",
            NamePattern::Dash | NamePattern::Underscore => "",
        }
    }

    fn separator(self) -> &'static str {
        match self {
            NamePattern::McpDoubleUnderscore => "__",
            NamePattern::McpUnderscore | NamePattern::Underscore => "_",
            NamePattern::Dash => "-",
        }
    }

    /// A configured server name as it appears inside a tool name: the
    /// CLIs replace characters a function name may not hold by `_`
    /// (Claude Code keeps `-`; Codex keeps only `[A-Za-z0-9_]`; Gemini CLI
    /// keeps `.`, `-` too).
    fn sanitized(self, server: &str) -> String {
        let keep = |c: char| match self {
            NamePattern::McpDoubleUnderscore => c.is_ascii_alphanumeric() || c == '_' || c == '-',
            NamePattern::McpUnderscore => {
                c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
            }
            NamePattern::Dash | NamePattern::Underscore => true,
        };
        server
            .chars()
            .map(|c| if keep(c) { c } else { '_' })
            .collect()
    }
}

/// The (server, tool) of `raw_name` when its form says where the server
/// name ends without a list of servers: `mcp__SERVER__TOOL` with exactly one
/// `__` after the prefix (Claude Code, Codex). `None` for any other name.
pub fn split_unambiguous(raw_name: &str) -> Option<(String, String)> {
    let rest = raw_name.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    if server.is_empty() || tool.is_empty() || tool.contains("__") {
        return None;
    }
    Some((server.to_string(), tool.to_string()))
}

/// The (server, tool) of a raw tool name given the configured server names:
/// the longest configured name that fits the provider's pattern
/// ([`NamePattern::of`]); `None` when none fits (or the provider has no
/// name pattern). The server returned is the configured spelling.
pub fn resolve_name(
    provider: Provider,
    raw_name: &str,
    configured: &[&str],
) -> Option<(String, String)> {
    resolve_with(NamePattern::of(provider)?, raw_name, configured)
}

/// [`resolve_name`] for an explicit pattern (the CLIs that are not a
/// [`Provider`] yet: Copilot's `S-T`, opencode's `S_T`).
pub fn resolve_with(
    pattern: NamePattern,
    raw_name: &str,
    configured: &[&str],
) -> Option<(String, String)> {
    let rest = raw_name.strip_prefix(pattern.prefix())?;
    let mut best: Option<(&str, &str)> = None;
    for server in configured {
        let shown = pattern.sanitized(server);
        if shown.is_empty() {
            continue;
        }
        let Some(tool) = rest
            .strip_prefix(shown.as_str())
            .and_then(|r| r.strip_prefix(pattern.separator()))
        else {
            continue;
        };
        if tool.is_empty() {
            continue;
        }
        if best.is_none_or(|(b, _)| server.len() > b.len()) {
            best = Some((server, tool));
        }
    }
    best.map(|(s, t)| (s.to_string(), t.to_string()))
}

/// Where an agent's MCP configuration is read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpPlaces {
    /// The agent's configuration root ([`config_home`]): Claude Code's
    /// directory holding `.claude.json`, Codex's `CODEX_HOME`, the
    /// directory holding Gemini CLI's `.gemini` or Cursor's `.cursor`.
    pub home: PathBuf,
    /// The session's working directory (the project), when known.
    pub project: Option<PathBuf>,
    /// The agent process's argv (Claude Code's `--mcp-config`, Codex's
    /// `-c mcp_servers.…` overrides).
    pub argv: Vec<String>,
    /// Configuration the agent got from its environment, as recorded
    /// (opencode's `OPENCODE_CONFIG_CONTENT`, reduced to its servers: meta
    /// `opencode_config_content`). A variable absent here is read from the
    /// reader's own environment.
    pub env: Vec<(String, String)>,
}

/// The variable of an agent's environment that holds MCP configuration
/// (opencode's `OPENCODE_CONFIG_CONTENT`): what a recording keeps of it
/// for [`McpPlaces::env`].
pub const CONFIG_CONTENT_VAR: &str = crate::opencode::mcp::CONTENT_VAR;

/// What a recording keeps of [`CONFIG_CONTENT_VAR`]'s value: its MCP
/// servers only (no provider keys, no server environment or headers);
/// `None` when it declares none.
pub fn config_content_to_keep(value: &str) -> Option<String> {
    crate::opencode::mcp::servers_only(value)
}

impl McpPlaces {
    /// Variable `name` of the agent's environment: as recorded, else the
    /// reader's own.
    pub(crate) fn env_var(&self, name: &str) -> Option<String> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    }
}

/// The servers an agent's configuration declares, and what could not be
/// read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfigs {
    /// One per name, the winning declaration of each (the provider's
    /// precedence); in the order the sources are read, by name within a
    /// JSON file.
    pub servers: Vec<McpServerConfig>,
    /// One line each: an unreadable or corrupt file, a skipped entry.
    pub problems: Vec<String>,
}

impl McpConfigs {
    /// Adds `server` unless a declaration of higher precedence (added
    /// earlier) already named it.
    pub(crate) fn add(&mut self, server: McpServerConfig) {
        if !self.servers.iter().any(|s| s.name == server.name) {
            self.servers.push(server);
        }
    }

    /// Adds `server`, replacing an earlier declaration of the same name in
    /// place (for sources read from lowest to highest precedence).
    pub(crate) fn set(&mut self, server: McpServerConfig) {
        match self.servers.iter_mut().find(|s| s.name == server.name) {
            Some(old) => *old = server,
            None => self.servers.push(server),
        }
    }

    pub(crate) fn problem(&mut self, line: String) {
        self.problems.push(line);
    }
}

/// What a provider's row says about MCP (see `provider::ProviderSpec`).
pub(crate) struct McpSpec {
    /// How its transcripts name MCP tools.
    pub names: Option<NamePattern>,
    /// The configuration root that applies to a transcript.
    pub home: fn(transcript: &Path) -> Option<PathBuf>,
    /// Reads the servers the configuration declares.
    pub servers: fn(places: &McpPlaces, out: &mut McpConfigs),
}

/// The MCP servers `provider`'s configuration declares for a session, with
/// the provider's sources and precedence (`docs/sessions.md`, "MCP"):
/// - Claude Code: `--mcp-config FILE_OR_JSON…` of `argv` (with
///   `--strict-mcp-config` only those), then `HOME/.claude.json`
///   `projects.<project>.mcpServers` (local), `<project>/.mcp.json`
///   (project), `HOME/.claude.json` `mcpServers` (user); the first
///   declaration of a name wins.
/// - Codex: `CODEX_HOME/config.toml` `[mcp_servers.NAME]`, a trusted
///   project's `<project>/.codex/config.toml` over it, then `-c
///   mcp_servers.NAME.KEY=VALUE` of `argv` over both; `enabled = false`
///   drops a server.
/// - Gemini CLI: `HOME/.gemini/settings.json`, then
///   `<project>/.gemini/settings.json` (a name declared again replaces
///   the user's); `mcp.excluded` drops names, `mcp.allowed` keeps only
///   those.
/// - Cursor: `HOME/.cursor/mcp.json`, then `<project>/.cursor/mcp.json`
///   (replacing by name).
///
/// Files are read as regular files, never through a symbolic link, at most
/// [`MAX_CONFIG_BYTES`]; a missing file is no problem, anything else that
/// cannot be used is one line of [`McpConfigs::problems`].
pub fn configured_servers(provider: Provider, places: &McpPlaces) -> McpConfigs {
    let mut out = McpConfigs::default();
    (crate::provider::spec(provider).mcp.servers)(places, &mut out);
    out
}

/// The configuration root whose MCP servers apply to the session of
/// `transcript` (the e2e tier and `sudo` runs use other homes than the
/// reader's own):
/// - Claude Code (`<dir>/projects/<project>/….jsonl`): when `<dir>` is
///   named `.claude`, its parent (`$HOME`, whose `.claude.json` is read);
///   otherwise `<dir>` itself (`CLAUDE_CONFIG_DIR`, `~/.config/claude`:
///   `<dir>/.claude.json` is read).
/// - Codex (`<CODEX_HOME>/sessions/…`, `<CODEX_HOME>/archived_sessions/…`):
///   `CODEX_HOME` (its `config.toml` is read).
/// - Gemini CLI (`<HOME>/.gemini/tmp/…`): `HOME` (`.gemini/settings.json`).
/// - Cursor (`<HOME>/.cursor/projects/…`): `HOME` (`.cursor/mcp.json`).
///
/// `None` when the path is not of the provider's layout.
pub fn config_home(provider: Provider, transcript: &Path) -> Option<PathBuf> {
    (crate::provider::spec(provider).mcp.home)(transcript)
}

/// The nearest ancestor of `path` named `name` (the transcript's own name
/// excluded).
pub(crate) fn ancestor_named<'a>(path: &'a Path, name: &str) -> Option<&'a Path> {
    path.parent()?
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == name))
}

/// The largest configuration file read (`~/.claude.json` also holds every
/// project's history and can be several MiB).
pub const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// A configuration file's text: `Ok(None)` when it does not exist; an
/// error line (naming the file) when it is not a readable regular file
/// (a symbolic link, a directory), too large, or not UTF-8.
pub(crate) fn read_config(path: &Path) -> Result<Option<String>, String> {
    let bytes = match crate::safefs::read_small(path, MAX_CONFIG_BYTES + 1) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!(
            "{}: larger than {MAX_CONFIG_BYTES} bytes, not read",
            path.display()
        ));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| format!("{}: not UTF-8", path.display()))
}

/// A JSON configuration file as a value (`Ok(None)`: no such file).
pub(crate) fn read_json(path: &Path) -> Result<Option<Value>, String> {
    let Some(text) = read_config(path)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{}: not valid JSON ({e})", path.display()))
}

/// How a JSON entry without a `type` but with a `url` is reached.
#[derive(Clone, Copy)]
pub(crate) struct JsonDialect {
    /// Transport of `url` without `type` (Gemini CLI: SSE; others: HTTP).
    pub url_without_type: McpTransport,
}

/// Every entry of a JSON `mcpServers` object: each server through `sink`
/// with `source`, each unusable entry as a problem.
pub(crate) fn json_servers(
    servers: Option<&Value>,
    source: &str,
    dialect: JsonDialect,
    out: &mut McpConfigs,
    mut sink: impl FnMut(&mut McpConfigs, McpServerConfig),
) {
    let Some(servers) = servers else { return };
    let Some(map) = servers.as_object() else {
        out.problem(format!("{source}: mcpServers is not an object, skipped"));
        return;
    };
    for (name, entry) in map {
        match json_server(name, entry, source, dialect) {
            Ok(s) => sink(out, s),
            Err(why) => out.problem(format!("{source}: server {name:?} skipped ({why})")),
        }
    }
}

/// One JSON server entry: `{type?, command, args?, cwd?}` (stdio; opencode's
/// `command` may be the whole argv), `{type: http|sse, url}`, Gemini CLI's
/// `httpUrl` (streamable HTTP).
fn json_server(
    name: &str,
    entry: &Value,
    source: &str,
    dialect: JsonDialect,
) -> Result<McpServerConfig, String> {
    if !entry.is_object() {
        return Err("not an object".into());
    }
    let text = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_string);
    let declared = text("type");
    let mut server = McpServerConfig {
        name: name.to_string(),
        transport: McpTransport::Stdio,
        command: Vec::new(),
        cwd: text("cwd"),
        url: None,
        source: source.to_string(),
    };
    if let Some(url) = text("httpUrl") {
        server.transport = McpTransport::Http;
        server.url = Some(url);
        return Ok(server);
    }
    match declared.as_deref() {
        None | Some("stdio" | "local") if entry.get("command").is_some() => {
            server.command = command_words(entry.get("command"), entry.get("args"))?;
            Ok(server)
        }
        None if text("url").is_some() => {
            server.transport = dialect.url_without_type;
            server.url = text("url");
            Ok(server)
        }
        Some(word @ ("http" | "streamable-http" | "streamableHttp" | "remote" | "sse")) => {
            server.transport = if word == "sse" {
                McpTransport::Sse
            } else {
                McpTransport::Http
            };
            server.url = Some(text("url").ok_or("no url")?);
            Ok(server)
        }
        Some(other) if entry.get("command").is_none() && text("url").is_none() => {
            Err(format!("type {other:?} without command or url"))
        }
        Some(other) => Err(format!("unknown type {other:?}")),
        None => Err("neither command nor url".into()),
    }
}

/// `command` (a program, or the whole argv) followed by `args`.
fn command_words(command: Option<&Value>, args: Option<&Value>) -> Result<Vec<String>, String> {
    let strings = |v: &Value, what: &str| -> Result<Vec<String>, String> {
        match v {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(a) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{what} holds a value that is not a string")),
            _ => Err(format!("{what} is not a string or a list of strings")),
        }
    };
    let mut words = match command {
        Some(c) => strings(c, "command")?,
        None => Vec::new(),
    };
    if words.first().is_none_or(|w| w.is_empty()) {
        return Err("empty command".into());
    }
    if let Some(a) = args.filter(|a| !a.is_null()) {
        if !a.is_array() {
            return Err("args is not a list".into());
        }
        words.extend(strings(a, "args")?);
    }
    Ok(words)
}

/// The npm package of the reference filesystem server.
const FILESYSTEM_PACKAGE: &str = "@modelcontextprotocol/server-filesystem";

/// Index of the argv word that runs the reference filesystem server: the
/// npm package (`@modelcontextprotocol/server-filesystem[@version]`), its
/// bin (`mcp-server-filesystem`) or a script inside the package
/// (`…/server-filesystem/dist/index.js`).
fn filesystem_word(server: &McpServerConfig) -> Option<usize> {
    server.command.iter().position(|w| {
        let base = w.rsplit('/').next().unwrap_or(w);
        w.starts_with(FILESYSTEM_PACKAGE)
            || base == "mcp-server-filesystem"
            || (w.contains("/server-filesystem/") && w.ends_with(".js"))
    })
}

/// The kind of a server whose tools have well-known effects: `"filesystem"`
/// for the reference filesystem server (however it is started: `npx -y
/// @modelcontextprotocol/server-filesystem /w`, `node
/// /…/server-filesystem/dist/index.js /w`, `mcp-server-filesystem /w`);
/// `None` for any other server.
pub fn server_kind(server: &McpServerConfig) -> Option<&'static str> {
    filesystem_word(server).map(|_| "filesystem")
}

/// The allowed directories of a reference filesystem server: the argv words
/// after its package or script (empty for another server). The server may
/// replace them by the client's MCP roots (`docs/mcp.md` §6).
pub fn filesystem_roots(server: &McpServerConfig) -> Vec<String> {
    match filesystem_word(server) {
        Some(i) => server.command[i + 1..].to_vec(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/mcp")
            .join(rel)
    }

    fn places(home: &str, project: Option<PathBuf>, argv: &[&str]) -> McpPlaces {
        McpPlaces {
            home: fixture(home),
            project,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
        }
    }

    /// (name, transport, command line, cwd, url, source relative to fixtures/mcp).
    fn summary(c: &McpConfigs) -> Vec<String> {
        let root = fixture("").display().to_string();
        c.servers
            .iter()
            .map(|s| {
                format!(
                    "{} {} [{}] cwd={:?} url={:?} from {}",
                    s.name,
                    s.transport.as_str(),
                    s.command.join(" "),
                    s.cwd,
                    s.url,
                    s.source.replace(&root, "")
                )
            })
            .collect()
    }

    fn problems(c: &McpConfigs) -> Vec<String> {
        let root = fixture("").display().to_string();
        c.problems.iter().map(|p| p.replace(&root, "")).collect()
    }

    fn cfg(words: &[&str]) -> McpServerConfig {
        McpServerConfig {
            name: "fs".into(),
            transport: McpTransport::Stdio,
            command: words.iter().map(|s| s.to_string()).collect(),
            cwd: None,
            url: None,
            source: "test".into(),
        }
    }

    #[test]
    fn names_resolve_against_the_configured_servers() {
        let configured = ["fs", "fs_extra", "my__srv", "a.b"];
        let r = |p, n| resolve_name(p, n, &configured);
        let pair = |s: &str, t: &str| Some((s.to_string(), t.to_string()));
        assert_eq!(
            r(Provider::Claude, "mcp__fs__write_file"),
            pair("fs", "write_file")
        );
        // The longest configured name that fits wins.
        assert_eq!(
            r(Provider::Claude, "mcp__fs_extra__read__x"),
            pair("fs_extra", "read__x")
        );
        assert_eq!(
            r(Provider::Codex, "mcp__my__srv__do_it"),
            pair("my__srv", "do_it")
        );
        assert_eq!(
            r(Provider::Gemini, "mcp_fs_write_file"),
            pair("fs", "write_file")
        );
        assert_eq!(
            r(Provider::Gemini, "mcp_fs_extra_list"),
            pair("fs_extra", "list")
        );
        // Gemini keeps `.`; Claude Code writes it as `_`.
        assert_eq!(r(Provider::Gemini, "mcp_a.b_t"), pair("a.b", "t"));
        assert_eq!(r(Provider::Claude, "mcp__a_b__t"), pair("a.b", "t"));
        // Nothing fits: not configured, no tool, a built-in, Cursor.
        assert_eq!(r(Provider::Claude, "mcp__other__write_file"), None);
        assert_eq!(r(Provider::Claude, "mcp__fs__"), None);
        assert_eq!(r(Provider::Gemini, "write_file"), None);
        assert_eq!(r(Provider::Cursor, "mcp__fs__write_file"), None);
        // Copilot and opencode.
        let c = ["fs", "fs-x"];
        assert_eq!(
            resolve_with(NamePattern::Dash, "fs-x-write_file", &c),
            pair("fs-x", "write_file")
        );
        assert_eq!(
            resolve_with(NamePattern::Underscore, "fs_write_file", &c),
            pair("fs", "write_file")
        );
        assert_eq!(resolve_with(NamePattern::Underscore, "fsx_write", &c), None);
    }

    #[test]
    fn names_split_only_one_way() {
        let pair = |s: &str, t: &str| Some((s.to_string(), t.to_string()));
        assert_eq!(
            split_unambiguous("mcp__fs__write_file"),
            pair("fs", "write_file")
        );
        assert_eq!(
            split_unambiguous("mcp__my_fs__read_text_file"),
            pair("my_fs", "read_text_file")
        );
        assert_eq!(split_unambiguous("mcp__a__b__c"), None);
        assert_eq!(split_unambiguous("mcp__fs"), None);
        assert_eq!(split_unambiguous("mcp____t"), None);
        assert_eq!(split_unambiguous("mcp_fs_write_file"), None);
    }

    #[test]
    fn claude_code_scopes_and_flags() {
        // User and local scopes (the local `fs` wins), no project file.
        let c = configured_servers(
            Provider::Claude,
            &places("home", Some("/w/proj".into()), &["claude", "-p"]),
        );
        assert_eq!(
            summary(&c),
            [
                "fs stdio [node /opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js /w/proj] cwd=None url=None from home/.claude.json projects./w/proj",
                "git_tools stdio [uvx mcp-server-git --repository /w/proj] cwd=Some(\"/w/proj\") url=None from home/.claude.json projects./w/proj",
                "search http [] cwd=None url=Some(\"http://127.0.0.1:8931/mcp\") from home/.claude.json mcpServers",
            ]
        );
        assert_eq!(
            problems(&c),
            [
                "home/.claude.json mcpServers: server \"broken_entry\" skipped (type \"stdio\" without command or url)"
            ]
        );
        // Project scope over user scope.
        let project = fixture("project");
        let c = configured_servers(Provider::Claude, &places("home", Some(project), &[]));
        let names: Vec<_> = c
            .servers
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.source.replace(&fixture("").display().to_string(), ""),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("docs", "project/.mcp.json".to_string()),
                ("git_tools", "project/.mcp.json".to_string()),
                ("fs", "home/.claude.json mcpServers".to_string()),
                ("search", "home/.claude.json mcpServers".to_string()),
            ]
        );
        assert_eq!(c.servers[0].transport, McpTransport::Sse);
        // --mcp-config (a file relative to the project, inline JSON) first;
        // with --strict-mcp-config nothing else.
        let argv = [
            "claude",
            "--mcp-config",
            "../fs-flag.json",
            r#"{"mcpServers":{"inline":{"type":"http","url":"http://h/mcp"}}}"#,
            "--strict-mcp-config",
            "-p",
            "hello",
        ];
        let c = configured_servers(
            Provider::Claude,
            &places("home", Some(fixture("project")), &argv),
        );
        assert_eq!(
            summary(&c),
            [
                "fs stdio [node /opt/mcp/server-filesystem/dist/index.js /w/flag] cwd=None url=None from --mcp-config project/../fs-flag.json",
                "inline http [] cwd=None url=Some(\"http://h/mcp\") from --mcp-config <inline JSON>",
            ]
        );
        assert!(c.problems.is_empty());
        let c = configured_servers(
            Provider::Claude,
            &places(
                "home",
                None,
                &["claude", "--mcp-config=/nonexistent.json", "{bad"],
            ),
        );
        assert_eq!(c.servers.len(), 2); // the user scope: fs, search
        assert_eq!(
            problems(&c)[0],
            "--mcp-config /nonexistent.json: no such file"
        );
    }

    #[test]
    fn claude_code_local_scope_beats_project_scope() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("proj");
        std::fs::create_dir(&project).unwrap();
        std::fs::write(
            project.join(".mcp.json"),
            r#"{"mcpServers":{"fs":{"command":"project-fs"},"p":{"command":"p"}}}"#,
        )
        .unwrap();
        let global = serde_json::json!({
            "mcpServers": {"fs": {"command": "user-fs"}, "u": {"command": "u"}},
            "projects": {project.to_string_lossy(): {"mcpServers": {"fs": {"command": "local-fs"}}}}
        });
        std::fs::write(dir.path().join(".claude.json"), global.to_string()).unwrap();
        let c = configured_servers(
            Provider::Claude,
            &McpPlaces {
                home: dir.path().to_path_buf(),
                project: Some(project),
                argv: Vec::new(),
                env: Vec::new(),
            },
        );
        let got: Vec<_> = c
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.command.join(" ")))
            .collect();
        assert_eq!(
            got,
            [
                ("fs", "local-fs".to_string()),
                ("p", "p".to_string()),
                ("u", "u".to_string())
            ]
        );
    }

    #[test]
    fn codex_config_toml_trusted_project_and_overrides() {
        let c = configured_servers(Provider::Codex, &places(".", None, &[]));
        assert!(
            c.servers.is_empty(),
            "no config.toml directly in fixtures/mcp"
        );
        let c = configured_servers(Provider::Codex, &places("home/.codex", None, &["codex"]));
        assert_eq!(
            summary(&c),
            [
                "fs stdio [node /opt/mcp/server-filesystem/dist/index.js /w/proj] cwd=None url=None from home/.codex/config.toml",
                "remote_docs http [] cwd=None url=Some(\"https://mcp.example.test/mcp\") from home/.codex/config.toml",
            ]
        );
        assert_eq!(
            problems(&c),
            ["home/.codex/config.toml: server \"bad\" skipped (neither command nor url)"]
        );
        // A trusted project's file over the global one, then `-c` overrides.
        let dir = tempfile::tempdir().unwrap();
        let trusted = dir.path().join("t");
        std::fs::create_dir_all(trusted.join(".codex")).unwrap();
        std::fs::copy(
            fixture("project/.codex/config.toml"),
            trusted.join(".codex/config.toml"),
        )
        .unwrap();
        let home = dir.path().join("codex-home");
        std::fs::create_dir(&home).unwrap();
        let global = std::fs::read_to_string(fixture("home/.codex/config.toml"))
            .unwrap()
            .replace("/w/trusted", &trusted.to_string_lossy());
        std::fs::write(home.join("config.toml"), global).unwrap();
        let argv = [
            "codex",
            "exec",
            "-c",
            "mcp_servers.local_only.args=[\"-m\", \"other\"]",
            "--config=mcp_servers.fs.enabled=false",
            "-c",
            "mcp_servers.extra.command=extra-server",
            "-c",
            "model=\"o3\"",
        ];
        let c = configured_servers(
            Provider::Codex,
            &McpPlaces {
                home,
                project: Some(trusted.clone()),
                argv: argv.iter().map(|s| s.to_string()).collect(),
                env: Vec::new(),
            },
        );
        let got: Vec<_> = c
            .servers
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.command.join(" "),
                    s.source.starts_with("-c"),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("remote_docs", String::new(), false),
                ("local_only", "python3 -m other".to_string(), true),
                ("extra", "extra-server".to_string(), true),
            ]
        );
        assert_eq!(c.servers[1].cwd.as_deref(), Some("/w/trusted"));
    }

    #[test]
    fn gemini_cli_user_then_project_settings() {
        let c = configured_servers(
            Provider::Gemini,
            &places("home", Some(fixture("project")), &[]),
        );
        assert_eq!(
            summary(&c),
            [
                "fs stdio [npx -y @modelcontextprotocol/server-filesystem@2026.8.31 /w/proj] cwd=Some(\"/w/proj\") url=None from project/.gemini/settings.json",
                "legacy_sse sse [] cwd=None url=Some(\"http://127.0.0.1:9000/sse\") from home/.gemini/settings.json",
                "web_api http [] cwd=None url=Some(\"http://127.0.0.1:8931/mcp\") from home/.gemini/settings.json",
            ]
        );
        assert!(c.problems.is_empty());
    }

    #[test]
    fn cursor_user_then_project() {
        let c = configured_servers(
            Provider::Cursor,
            &places("home", Some(fixture("project")), &[]),
        );
        assert_eq!(
            summary(&c),
            [
                "fs stdio [node /opt/mcp/server-filesystem/dist/index.js /w/proj] cwd=None url=None from project/.cursor/mcp.json",
                "linear http [] cwd=None url=Some(\"https://mcp.linear.app/sse\") from home/.cursor/mcp.json",
            ]
        );
    }

    #[test]
    fn broken_files_are_problem_lines() {
        let broken = Some(fixture("broken"));
        let c = configured_servers(Provider::Claude, &places("broken", broken.clone(), &[]));
        assert!(c.servers.is_empty());
        let p = problems(&c);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].starts_with("broken/.claude.json: not valid JSON (EOF while parsing"),
            "{p:?}"
        );
        assert_eq!(p[1], "broken/.mcp.json: is a directory, not a regular file");
        let c = configured_servers(Provider::Cursor, &places("broken", None, &[]));
        assert_eq!(problems(&c), ["broken/.cursor/mcp.json: not UTF-8"]);
        let c = configured_servers(Provider::Codex, &places("broken/.codex", None, &[]));
        assert_eq!(c.problems.len(), 1);
        assert!(problems(&c)[0].starts_with("broken/.codex/config.toml: not valid TOML ("));
        let c = configured_servers(Provider::Gemini, &places("broken", None, &[]));
        assert_eq!(
            problems(&c),
            ["broken/.gemini/settings.json: is a symbolic link"]
        );
        assert!(c.servers.is_empty());
    }

    #[test]
    fn config_homes_from_transcript_paths() {
        let h = |p, path: &str| config_home(p, Path::new(path));
        let some = |s: &str| Some(PathBuf::from(s));
        assert_eq!(
            h(Provider::Claude, "/h/.claude/projects/-w/s.jsonl"),
            some("/h")
        );
        assert_eq!(
            h(
                Provider::Claude,
                "/h/.claude/projects/-w/s/subagents/agent-a.jsonl"
            ),
            some("/h")
        );
        assert_eq!(
            h(Provider::Claude, "/cfg/claude/projects/-w/s.jsonl"),
            some("/cfg/claude")
        );
        assert_eq!(h(Provider::Claude, "/h/s.jsonl"), None);
        assert_eq!(
            h(
                Provider::Codex,
                "/h/.codex/sessions/2026/04/02/rollout-x.jsonl"
            ),
            some("/h/.codex")
        );
        assert_eq!(
            h(Provider::Codex, "/ch/archived_sessions/rollout-x.jsonl"),
            some("/ch")
        );
        assert_eq!(
            h(Provider::Gemini, "/h/.gemini/tmp/p/chats/session-x.json"),
            some("/h")
        );
        assert_eq!(
            h(
                Provider::Cursor,
                "/h/.cursor/projects/w/agent-transcripts/x.jsonl"
            ),
            some("/h")
        );
    }

    #[test]
    fn the_reference_filesystem_server_and_its_roots() {
        let npx = cfg(&[
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/w",
            "/tmp/x",
        ]);
        assert_eq!(server_kind(&npx), Some("filesystem"));
        assert_eq!(filesystem_roots(&npx), ["/w", "/tmp/x"]);
        let pinned = cfg(&[
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem@2026.8.31",
            ".",
        ]);
        assert_eq!(filesystem_roots(&pinned), ["."]);
        let node = cfg(&[
            "node",
            "/o/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
            "/w",
        ]);
        assert_eq!(server_kind(&node), Some("filesystem"));
        assert_eq!(filesystem_roots(&node), ["/w"]);
        let bin = cfg(&["/usr/local/bin/mcp-server-filesystem", "/srv"]);
        assert_eq!(filesystem_roots(&bin), ["/srv"]);
        let other = cfg(&["uvx", "mcp-server-git", "--repository", "/w"]);
        assert_eq!(server_kind(&other), None);
        assert!(filesystem_roots(&other).is_empty());
        let remote = McpServerConfig {
            transport: McpTransport::Http,
            url: Some("http://h/mcp".into()),
            ..cfg(&[])
        };
        assert_eq!(server_kind(&remote), None);
    }
}
