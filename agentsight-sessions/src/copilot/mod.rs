//! GitHub Copilot CLI sessions (`~/.copilot/session-state/<id>/events.jsonl`,
//! flat `<id>.jsonl` before 0.0.378).
//!
//! An append-only event log: one envelope per line (`type`, `id`,
//! `timestamp`, `data`, `agentId` on a subagent's records). A model call is
//! a `session.usage_record` followed by its `assistant.message` (paired by
//! `apiCallId`); the message's `toolRequests` are paired with
//! `tool.execution_start` / `_complete` by `toolCallId`, the id the model
//! sent. Tokens come from the usage records only, de-duplicated by
//! `(accounting.sourceSessionId, accounting.sequence)`; a
//! `session.shutdown` holds cumulative totals of the whole session (resumes
//! included) and is never added. A `--resume` appends to the same file
//! (`session.resume`). A `task` subagent writes into the parent's file,
//! every record tagged with its `agentId` (`subagent.started` names the
//! parent's call).

/// The tail reader of the live layer (`crate::live::read_tail`).
pub(crate) mod live;

/// Where transcripts live and how they are named.
pub(crate) mod layout;

/// Where its MCP servers are configured.
pub(crate) mod mcp;

/// The serde shapes of the records (shared with `live`).
pub(crate) mod wire;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::Value;

use super::error::{Result, SessionError};
use super::util::{self, jstr};
use super::{
    AgentSession, ErrorEvent, ErrorKind, LlmResponse, PathAccess, Provider, SubagentInfo,
    TokenUsage, ToolCategory, ToolEvent, ToolPath, ToolStatus,
};
use crate::de::ObjOr;
use crate::mcp::McpCall;
use crate::provider::{ProviderSpec, TailSpec};
use wire::{Data, Line, ToolRequest};

/// Copilot CLI's row of the provider table.
pub(crate) const SPEC: ProviderSpec = ProviderSpec {
    provider: Provider::Copilot,
    name: "copilot",
    aliases: &["copilot-cli"],
    cli_name: "copilot",
    roots: layout::roots,
    scan_root: layout::scan_root,
    after_scan: None,
    path_rank: 5,
    id_for_path: layout::id_for_path,
    candidate_id: layout::candidate_id,
    index_id: layout::index_id,
    is_transcript: layout::is_transcript,
    watch: layout::watch,
    header_id: false,
    verify_id: crate::provider::name_is_id,
    parse: |path, _, _| parse(path),
    enrich: None,
    mcp: mcp::SPEC,
    tail: TailSpec {
        read: live::read,
        first_line: None,
        from_path: live::from_path,
        widens: true,
        document: None,
    },
};

/// Record types read or knowingly passed over; any other is counted in
/// `stats.unknown_records`.
const KNOWN: &[&str] = &[
    "session.start",
    "session.resume",
    "session.info",
    "session.error",
    "session.truncation",
    "session.model_change",
    "session.compaction_start",
    "session.compaction_complete",
    "session.usage_checkpoint",
    "session.usage_record",
    "session.shutdown",
    "user.message",
    "system.message",
    "assistant.turn_start",
    "assistant.turn_end",
    "assistant.message",
    "assistant.reasoning",
    "model.response",
    "tool.execution_start",
    "tool.execution_complete",
    "subagent.started",
    "subagent.configured",
    "subagent.completed",
    "subagent.failed",
    "abort",
];

/// A model call's usage waiting for its `assistant.message`.
struct CallUsage {
    tokens: TokenUsage,
    model: Option<String>,
    ts: Option<i64>,
    subagent: Option<usize>,
}

/// What the replay of the log keeps between records.
#[derive(Default)]
struct State {
    /// Tool index by `toolCallId`.
    calls: HashMap<String, usize>,
    /// Subagent index by `agentId`.
    agents: HashMap<String, usize>,
    /// `(sourceSessionId, sequence)` of the usage records counted.
    usage_seen: HashSet<(String, String)>,
    /// Usage by `apiCallId`, in file order, until its message comes.
    usage: Vec<(Option<String>, CallUsage)>,
    compactions: u64,
    /// Usage records seen before under the same key.
    repeated: u64,
}

pub(crate) fn parse(path: &Path) -> Result<AgentSession> {
    let f = util::open_regular(path)?;
    let mut s = AgentSession::new(
        Provider::Copilot,
        layout::candidate_id(path).unwrap_or_default(),
        path.to_path_buf(),
    );
    let mut st = State::default();
    let mut stats = std::mem::take(&mut s.stats);
    stats.files = 1;
    stats.bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
    util::for_each_line(f, &mut stats, |line, last, stats| {
        let Some(l) = util::parse_line::<Line>(line, last, stats) else {
            return;
        };
        match l.kind.as_deref() {
            Some(k) if KNOWN.contains(&k) => st.record(&mut s, k, &l),
            _ => stats.unknown_records += 1,
        }
    })
    .map_err(|e| SessionError::io(path, e))?;
    st.finish(&mut s);
    if st.compactions > 0 {
        stats
            .notes
            .push(format!("{} context compaction(s)", st.compactions));
    }
    stats.repeated_usage_skipped += st.repeated;
    s.stats = stats;
    if s.session_id.is_empty() {
        return Err(SessionError::Format {
            path: path.to_path_buf(),
            provider: "copilot",
            reason: "no session id (neither the path nor session.start names one)".into(),
        });
    }
    Ok(s)
}

impl State {
    /// One record of a type in [`KNOWN`].
    fn record(&mut self, s: &mut AgentSession, kind: &str, l: &Line) {
        let ts = l.timestamp.as_deref().and_then(util::parse_ts);
        s.see_ts(ts);
        let empty = Data::default();
        let d = l.data().unwrap_or(&empty);
        let sub = l
            .agent_id
            .as_deref()
            .and_then(|a| self.agents.get(a).copied());
        match kind {
            "session.start" | "session.resume" => session_start(s, d),
            "session.model_change" => see_model(s, d.new_model.as_deref()),
            // A subagent's task prompt is the parent's, not a person's.
            "user.message" if l.agent_id.0.is_none() => {
                s.push_prompt(ts, d.content.0.clone().unwrap_or_default());
            }
            "session.usage_record" => self.usage(s, d, ts, sub),
            "assistant.message" => self.message(s, d, ts, sub),
            "tool.execution_start" => self.tool_start(s, d, ts, sub),
            "tool.execution_complete" => self.tool_complete(s, d, ts),
            "subagent.started" => self.subagent(s, l, d),
            "session.error" => s.errors.push(ErrorEvent {
                prompt_index: s.current_prompt(),
                subagent: sub,
                ts_ms: ts,
                kind: ErrorKind::from_code(d.error_type.0.clone().unwrap_or("error".into())),
                message: d.message.0.clone().unwrap_or_default(),
            }),
            "abort" => s.errors.push(ErrorEvent {
                prompt_index: s.current_prompt(),
                subagent: sub,
                ts_ms: ts,
                kind: ErrorKind::Interrupted,
                message: d.reason.0.clone().unwrap_or_default(),
            }),
            "session.compaction_complete" => self.compactions += 1,
            _ => {}
        }
    }

    fn usage(&mut self, s: &mut AgentSession, d: &Data, ts: Option<i64>, sub: Option<usize>) {
        let Some(u) = d.usage.as_ref().and_then(ObjOr::obj) else {
            return;
        };
        if let Some(k) = u.key()
            && !self.usage_seen.insert(k)
        {
            self.repeated += 1;
            return;
        }
        see_model(s, u.model.as_deref());
        let call = CallUsage {
            tokens: u.normalized(),
            model: u.model.0.clone(),
            ts,
            subagent: sub,
        };
        self.usage.push((u.api_call_id.0.clone(), call));
    }

    fn message(&mut self, s: &mut AgentSession, d: &Data, ts: Option<i64>, sub: Option<usize>) {
        see_model(s, d.model.as_deref());
        let api = d.api_call_id.as_deref();
        let usage = api.and_then(|a| {
            let i = self
                .usage
                .iter()
                .position(|(k, _)| k.as_deref() == Some(a))?;
            Some(self.usage.remove(i).1)
        });
        s.responses.push(LlmResponse {
            prompt_index: s.current_prompt(),
            subagent: sub,
            ts_ms: ts,
            model: d.model.0.clone().or_else(|| usage.as_ref()?.model.clone()),
            native_id: d.message_id.0.clone(),
            request_id: api.map(str::to_string),
            phase: None,
            text: d.content.0.clone().unwrap_or_default(),
            text_truncated: false,
            tokens: usage.map(|u| u.tokens),
        });
        for r in d.tool_requests.iter().flatten().filter_map(ObjOr::obj) {
            self.request(s, r, ts, sub);
        }
    }

    /// A tool call the model asked for.
    fn request(
        &mut self,
        s: &mut AgentSession,
        r: &ToolRequest,
        ts: Option<i64>,
        sub: Option<usize>,
    ) {
        let Some(id) = r.tool_call_id.0.clone() else {
            return;
        };
        if self.calls.contains_key(&id) {
            return;
        }
        let mcp = r.mcp_server_name.0.clone().map(|server| McpCall {
            server: Some(server),
            tool: r.mcp_tool_name.0.clone(),
            arguments: r.arguments.clone(),
        });
        let name = r.name.0.clone().unwrap_or_default();
        let ev = tool_event(
            s,
            name,
            Some(id.clone()),
            r.arguments.as_ref(),
            mcp,
            ts,
            sub,
        );
        self.calls.insert(id, s.tools.len());
        s.tools.push(ev);
    }

    /// `tool.execution_start`: the call as run (it names MCP calls' server
    /// and tool too); a call never requested (none seen) is added.
    fn tool_start(&mut self, s: &mut AgentSession, d: &Data, ts: Option<i64>, sub: Option<usize>) {
        let Some(id) = d.tool_call_id.0.clone() else {
            return;
        };
        if let Some(&i) = self.calls.get(&id) {
            if let Some(t) = s.tools.get_mut(i)
                && t.mcp.is_none()
                && let Some(server) = d.mcp_server_name.0.clone()
            {
                t.category = ToolCategory::Mcp;
                t.mcp = Some(McpCall {
                    server: Some(server),
                    tool: d.mcp_tool_name.0.clone(),
                    arguments: d.arguments.clone(),
                });
            }
            return;
        }
        let mcp = d.mcp_server_name.0.clone().map(|server| McpCall {
            server: Some(server),
            tool: d.mcp_tool_name.0.clone(),
            arguments: d.arguments.clone(),
        });
        let name = d.tool_name.0.clone().unwrap_or_default();
        let ev = tool_event(
            s,
            name,
            Some(id.clone()),
            d.arguments.as_ref(),
            mcp,
            ts,
            sub,
        );
        self.calls.insert(id, s.tools.len());
        s.tools.push(ev);
    }

    /// `tool.execution_complete`: status, exit code and end time. Copilot
    /// 1.0.102 writes `success: true` for a command that exited non-zero
    /// (the exit code is in `shellExecution`): such a call failed.
    fn tool_complete(&mut self, s: &mut AgentSession, d: &Data, ts: Option<i64>) {
        let Some(t) = d
            .tool_call_id
            .as_deref()
            .and_then(|id| self.calls.get(id))
            .and_then(|&i| s.tools.get_mut(i))
        else {
            return;
        };
        t.end_ms = ts;
        if t.category == ToolCategory::Shell {
            t.exit_code = wire::exit_code(d);
        }
        let failed = d.success.0 == Some(false) || t.exit_code.is_some_and(|c| c != 0);
        t.status = if failed {
            ToolStatus::Failed
        } else {
            ToolStatus::Ok
        };
    }

    fn subagent(&mut self, s: &mut AgentSession, l: &Line, d: &Data) {
        let Some(agent) = l.agent_id.0.clone() else {
            return;
        };
        if self.agents.contains_key(&agent) {
            return;
        }
        self.agents.insert(agent.clone(), s.subagents.len());
        s.subagents.push(SubagentInfo {
            agent_id: Some(agent),
            kind: d.agent_type.0.clone().or_else(|| d.agent_name.0.clone()),
            description: d.agent_description.0.clone(),
            parent_call_id: d.tool_call_id.0.clone(),
            source_path: s.source_path.clone(),
            models: Vec::new(),
            usage: TokenUsage::default(),
            responses: 0,
            tools: 0,
        });
    }

    /// Usage records whose message never came (a crash between them, an
    /// error answer) are still model calls: each becomes a response
    /// without text, so the totals hold every call.
    fn finish(&mut self, s: &mut AgentSession) {
        for (api, u) in self.usage.drain(..) {
            s.responses.push(LlmResponse {
                prompt_index: s.current_prompt(),
                subagent: u.subagent,
                ts_ms: u.ts,
                model: u.model,
                native_id: None,
                request_id: api,
                phase: None,
                text: String::new(),
                text_truncated: false,
                tokens: Some(u.tokens),
            });
        }
    }
}

fn session_start(s: &mut AgentSession, d: &Data) {
    if s.session_id.is_empty()
        && let Some(id) = d.session_id.as_deref()
    {
        s.session_id = id.to_string();
    }
    if let Some(c) = d.context.as_ref().and_then(ObjOr::obj) {
        if s.cwd.is_none() {
            s.cwd = c.cwd.0.clone();
        }
        if s.git_branch.is_none() {
            s.git_branch = c.branch.0.clone();
        }
    }
    if s.agent_version.is_none() {
        s.agent_version = d.copilot_version.0.clone();
    }
    see_model(s, d.selected_model.as_deref());
}

/// A model name; `auto` is Copilot's unresolved choice, not a model.
fn see_model(s: &mut AgentSession, m: Option<&str>) {
    if let Some(m) = m.filter(|m| *m != "auto") {
        s.see_model(m);
    }
}

/// The category of a Copilot CLI 1.0.102 tool.
fn category(name: &str) -> ToolCategory {
    match name {
        "view" => ToolCategory::Read,
        "create" | "edit" => ToolCategory::Edit,
        "bash" | "read_bash" | "write_bash" | "stop_bash" | "list_bash" => ToolCategory::Shell,
        "grep" | "glob" => ToolCategory::Search,
        "task" | "read_agent" | "list_agents" | "write_agent" => ToolCategory::Subagent,
        _ => util::tool_category(name),
    }
}

/// A path argument as absolute: Copilot's file tools take absolute paths;
/// a relative one is relative to the session's directory.
fn absolute(s: &AgentSession, p: &str) -> String {
    match &s.cwd {
        Some(cwd) if !p.starts_with('/') => Path::new(cwd).join(p).display().to_string(),
        _ => p.to_string(),
    }
}

/// A tool event from the call's name and arguments.
fn tool_event(
    s: &AgentSession,
    name: String,
    call_id: Option<String>,
    args: Option<&Value>,
    mcp: Option<McpCall>,
    ts: Option<i64>,
    subagent: Option<usize>,
) -> ToolEvent {
    let null = Value::Null;
    let args = args.unwrap_or(&null);
    let a = |k: &str| jstr(args, k).map(str::to_string);
    let mut command = None;
    let mut paths = Vec::new();
    let mut domains = Vec::new();
    let category = if mcp.is_some() {
        ToolCategory::Mcp
    } else {
        category(&name)
    };
    let mut path = |p: Option<String>, access| {
        if let Some(p) = p.filter(|p| !p.is_empty()) {
            paths.push(ToolPath::new(absolute(s, &p), access));
        }
    };
    match (mcp.is_some(), name.as_str()) {
        (true, _) => {}
        (_, "bash") => command = a("command"),
        (_, "write_bash") => command = a("input"),
        (_, "view") => path(a("path"), PathAccess::Read),
        (_, "create") => path(a("path"), PathAccess::Create),
        (_, "edit") => path(a("path"), PathAccess::Write),
        (_, "grep" | "glob") => {
            command = a("pattern");
            path(a("paths").or_else(|| a("path")), PathAccess::Read);
        }
        (_, "task") => command = a("description").or_else(|| a("prompt")),
        _ => {
            command = a("command")
                .or_else(|| a("query"))
                .or_else(|| a("pattern"))
                .or_else(|| a("url"));
            if let Some(d) = a("url").as_deref().and_then(util::url_domain) {
                domains.push(d);
            }
        }
    }
    ToolEvent {
        prompt_index: s.current_prompt(),
        subagent,
        name,
        category,
        call_id,
        command,
        command_truncated: false,
        cwd: None,
        status: ToolStatus::Unknown,
        exit_code: None,
        start_ms: ts,
        end_ms: None,
        paths,
        domains,
        mcp,
    }
}
