//! opencode sessions (1.2 – 1.18, verified on 1.18.33): one SQLite
//! database (`$XDG_DATA_HOME/opencode/opencode.db`) holds every session, so
//! a session is named by the database's path plus its `ses_…` id.
//!
//! A session is its `session` row (directory = cwd, title, version, model,
//! `parent_id` for a `task` subagent's child session), its `message` rows
//! (user and assistant, JSON `data`) and their `part` rows (`text`,
//! `tool`, `step-start`, `step-finish`, `patch`, …). See `docs/sessions.md`
//! ("opencode") for the token rule and what is not read.

/// Where the databases live and how their paths are recognised.
pub(crate) mod layout;

/// Live states from the newest rows of one session.
pub mod live;

/// Where its MCP servers are configured.
pub(crate) mod mcp;

/// The database reader.
pub mod store;

use std::path::Path;

use serde_json::Value;

pub use store::{StoredSession, sessions_between};

use super::error::{Result, SessionError};
use super::util::{self, jstr};
use super::{
    AgentSession, ErrorEvent, ErrorKind, LlmResponse, PathAccess, Provider, TokenUsage,
    ToolCategory, ToolEvent, ToolPath, ToolStatus,
};
use crate::mcp::McpCall;
use crate::provider::{IndexId, ProviderSpec, TailSpec};

/// opencode's row of the provider table.
pub(crate) const SPEC: ProviderSpec = ProviderSpec {
    provider: Provider::Opencode,
    name: "opencode",
    aliases: &[],
    cli_name: "opencode",
    roots: layout::roots,
    scan_root: layout::scan_root,
    after_scan: None,
    path_rank: 5,
    id_for_path: layout::id_for_path,
    // A database names no one session: discovery asks the store
    // (`store::recent_sessions`, `store::session_ids`).
    candidate_id: |_: &Path| None,
    index_id: |_: &Path| IndexId::None,
    is_transcript: layout::is_transcript,
    watch: layout::watch,
    header_id: false,
    verify_id: |path: &Path, id: &str| store::has_session(path, id),
    parse: |path, id, _| parse(path, id),
    enrich: None,
    mcp: mcp::SPEC,
    tail: TailSpec {
        read: |_, _, _| {},
        first_line: None,
        from_path: |_, _| {},
        widens: false,
        document: None,
    },
};

/// The built-in tools of opencode 1.18.33 (any other name holding `_` is
/// an MCP tool, `<server>_<tool>`).
const BUILTIN: &[&str] = &[
    "bash",
    "edit",
    "glob",
    "grep",
    "read",
    "write",
    "skill",
    "task",
    "todowrite",
    "todoread",
    "webfetch",
    "websearch",
    "codesearch",
    "list",
    "patch",
    "multiedit",
    "lsp",
    "invalid",
    "question",
    "batch",
];

fn format_err(path: &Path, reason: impl Into<String>) -> SessionError {
    SessionError::Format {
        path: path.to_path_buf(),
        provider: "opencode",
        reason: reason.into(),
    }
}

/// Parses session `id` of the database at `path`.
pub(crate) fn parse(path: &Path, id: Option<&str>) -> Result<AgentSession> {
    let Some(id) = id else {
        // What is at the path is reported first, as for the other providers
        // (a directory is `NotAFile`, a missing file `Io`); only a real
        // database lacks the session it cannot choose.
        store::open(path)?;
        return Err(format_err(
            path,
            "the database holds many sessions: a session id is needed",
        ));
    };
    let loaded = store::load(path, id)?
        .ok_or_else(|| format_err(path, format!("no session {id} in the database")))?;
    let mut s = AgentSession::new(Provider::Opencode, id.to_string(), path.to_path_buf());
    let row = &loaded.session;
    s.cwd = row.directory.clone();
    s.parent_session_id = row.parent_id.clone();
    s.title = row.title.clone().filter(|t| !t.is_empty());
    s.agent_version = row.version.clone();
    s.see_ts(row.created_ms);
    s.see_ts(row.updated_ms);
    s.stats.files = 1;
    s.stats.bytes = loaded.bytes;
    s.stats.bad_lines = loaded.bad_rows;
    for m in &loaded.messages {
        on_message(&mut s, m);
    }
    if s.models.is_empty()
        && let Some(m) = row.model.as_ref().and_then(|m| jstr(m, "id"))
    {
        s.see_model(m);
    }
    Ok(s)
}

fn on_message(s: &mut AgentSession, m: &store::MessageRow) {
    let d = &m.data;
    let ts = d
        .get("time")
        .and_then(|t| t.get("created"))
        .and_then(Value::as_i64)
        .or(m.created_ms);
    s.see_ts(ts);
    match jstr(d, "role") {
        Some("user") => {
            // Text parts the user typed; `synthetic` ones are opencode's
            // own additions (file contents, reminders).
            let text = m
                .parts
                .iter()
                .filter(|(_, p)| jstr(p, "type") == Some("text"))
                .filter(|(_, p)| p.get("synthetic").and_then(Value::as_bool) != Some(true))
                .filter_map(|(_, p)| jstr(p, "text"))
                .collect::<Vec<_>>()
                .join("\n");
            if !text.is_empty() {
                s.push_prompt(ts, text);
            }
        }
        Some("assistant") => on_assistant(s, m, ts),
        _ => s.stats.unknown_records += 1,
    }
}

fn on_assistant(s: &mut AgentSession, m: &store::MessageRow, ts: Option<i64>) {
    let d = &m.data;
    let prompt_index = s.current_prompt();
    let model = jstr(d, "modelID").map(str::to_string);
    if let Some(mo) = &model {
        s.see_model(mo);
    }
    if let Some(t) = d
        .get("time")
        .and_then(|t| t.get("completed"))
        .and_then(Value::as_i64)
    {
        s.see_ts(Some(t));
    }
    let mut text = String::new();
    for (_, p) in &m.parts {
        match jstr(p, "type") {
            Some("text") => {
                if let Some(t) = jstr(p, "text") {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(t);
                }
            }
            Some("tool") => {
                let t = tool_event(p, prompt_index);
                s.see_ts(t.start_ms);
                s.see_ts(t.end_ms);
                s.tools.push(t);
            }
            // Known bookkeeping: the step's tokens repeat the message's
            // (counted once, from the message), snapshots and patches.
            Some(
                "step-start" | "step-finish" | "patch" | "snapshot" | "reasoning" | "file"
                | "agent" | "subtask" | "retry" | "compaction",
            ) => {}
            _ => s.stats.unknown_records += 1,
        }
    }
    if let Some(e) = d.get("error") {
        s.errors.push(error_event(e, prompt_index, ts));
    }
    let tokens = d.get("tokens").map(usage);
    s.responses.push(LlmResponse {
        prompt_index,
        subagent: None,
        ts_ms: ts,
        model,
        native_id: Some(m.id.clone()),
        request_id: None,
        phase: jstr(d, "finish").map(str::to_string),
        text,
        text_truncated: false,
        tokens,
    });
}

/// The token rule: opencode stores `input` without the cache and `output`
/// without reasoning (`total = input + output + reasoning + cache.read +
/// cache.write`); the model's `output` here includes reasoning.
fn usage(t: &Value) -> TokenUsage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cache = t.get("cache");
    let reasoning = n(t.get("reasoning"));
    TokenUsage::new(
        n(t.get("input")),
        n(t.get("output")).saturating_add(reasoning),
        n(cache.and_then(|c| c.get("read"))),
        n(cache.and_then(|c| c.get("write"))),
        reasoning,
    )
}

/// An assistant message's `error{name, data{message, statusCode}}`.
fn error_event(e: &Value, prompt_index: Option<usize>, ts: Option<i64>) -> ErrorEvent {
    let name = jstr(e, "name").unwrap_or("error");
    let data = e.get("data");
    let status = data
        .and_then(|d| d.get("statusCode"))
        .and_then(Value::as_i64);
    let kind = match (name, status) {
        (_, Some(429)) => ErrorKind::RateLimit,
        ("APIError", _) => ErrorKind::ApiError,
        ("MessageAbortedError", _) => ErrorKind::Interrupted,
        _ => ErrorKind::Error,
    };
    let message = data
        .and_then(|d| jstr(d, "message"))
        .unwrap_or(name)
        .to_string();
    ErrorEvent {
        prompt_index,
        subagent: None,
        ts_ms: ts,
        kind,
        message,
    }
}

/// The category of an opencode tool name.
pub(crate) fn category(name: &str) -> ToolCategory {
    if !BUILTIN.contains(&name) && name.contains('_') {
        return ToolCategory::Mcp;
    }
    match name {
        "list" => ToolCategory::Read,
        "patch" => ToolCategory::Edit,
        "codesearch" => ToolCategory::Search,
        "todoread" => ToolCategory::Plan,
        _ => util::tool_category(name),
    }
}

fn tool_event(p: &Value, prompt_index: Option<usize>) -> ToolEvent {
    let name = jstr(p, "tool").unwrap_or_default().to_string();
    let null = Value::Null;
    let state = p.get("state").unwrap_or(&null);
    let input = state.get("input").unwrap_or(&null);
    let meta = state.get("metadata");
    let status = match jstr(state, "status") {
        Some("completed") => ToolStatus::Ok,
        Some("error") => ToolStatus::Failed,
        _ => ToolStatus::Unknown,
    };
    let time = state.get("time");
    let at = |k: &str| time.and_then(|t| t.get(k)).and_then(Value::as_i64);
    let exit_code = meta
        .and_then(|m| m.get("exit"))
        .and_then(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok());
    let category = category(&name);
    let mut t = ToolEvent {
        prompt_index,
        subagent: None,
        name,
        category,
        call_id: jstr(p, "callID").map(str::to_string),
        command: None,
        command_truncated: false,
        cwd: None,
        // A shell command that exited non-zero completes as a tool call:
        // the exit code says it failed.
        status: if exit_code.is_some_and(|c| c != 0) {
            ToolStatus::Failed
        } else {
            status
        },
        exit_code,
        start_ms: at("start"),
        end_ms: at("end"),
        paths: Vec::new(),
        domains: Vec::new(),
        mcp: None,
    };
    describe(&mut t, input, meta);
    t
}

/// Command, cwd, paths, domains and MCP call from the camelCase input.
fn describe(t: &mut ToolEvent, input: &Value, meta: Option<&Value>) {
    let file = jstr(input, "filePath").map(str::to_string);
    match t.name.as_str() {
        "bash" => {
            t.command = jstr(input, "command").map(str::to_string);
            t.cwd = jstr(input, "workdir").map(str::to_string);
        }
        "read" | "list" => {
            if let Some(f) = file.or_else(|| jstr(input, "path").map(str::to_string)) {
                t.paths.push(ToolPath::new(f, PathAccess::Read));
            }
        }
        "write" => {
            // `metadata.exists`: whether the file was there before.
            let existed = meta.and_then(|m| m.get("exists")).and_then(Value::as_bool);
            let access = if existed == Some(false) {
                PathAccess::Create
            } else {
                PathAccess::Write
            };
            if let Some(f) = file {
                t.paths.push(ToolPath::new(f, access));
            }
        }
        "edit" | "multiedit" => {
            if let Some(f) = file {
                t.paths.push(ToolPath::new(f, PathAccess::Write));
            }
        }
        "glob" | "grep" => {
            t.command = jstr(input, "pattern").map(str::to_string);
            t.cwd = jstr(input, "path").map(str::to_string);
        }
        "webfetch" => {
            if let Some(u) = jstr(input, "url") {
                t.domains.extend(util::url_domain(u));
                t.command = Some(u.to_string());
            }
        }
        "task" => {
            t.command = jstr(input, "prompt").map(str::to_string);
        }
        _ if t.category == ToolCategory::Mcp => {
            // `<server>_<tool>`: both may hold `_`, so the server is left
            // to the configured names (`mcp::resolve_name`).
            t.mcp = Some(McpCall {
                server: None,
                tool: None,
                arguments: Some(input.clone()),
            });
        }
        _ => {}
    }
}
