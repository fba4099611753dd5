//! Claude Code transcripts (`~/.claude/projects/<enc-cwd>/<session>.jsonl`).
//!
//! One line per record; an assistant response is split over one line per
//! content block sharing `message.id`/`requestId` (merged here, usage taken
//! from the line with the largest total, i.e. the final one). Subagents come
//! in three layouts, all folded into the parent session:
//! 1. 1.x: inline lines with `isSidechain: true` in the parent file;
//! 2. 2.0.x: `<project>/agent-<id>.jsonl` whose lines carry the parent's
//!    `sessionId`;
//! 3. ≥ 2.1.2: `<project>/<session>/subagents/**/agent-<id>.jsonl` with an
//!    optional `agent-<id>.meta.json` (`agentType`, `description`,
//!    `toolUseId`).

/// The tail reader of the live layer (`crate::live::read_tail`).
pub(crate) mod live;

/// Where transcripts live and how they are named.
pub(crate) mod layout;

/// Where its MCP servers are configured.
pub(crate) mod mcp;

/// The serde shapes of a transcript line (shared with `live`).
pub(crate) mod wire;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::de::{Content, LStr, ObjOr, Prefix};
use super::error::{Result, SessionError};
use super::util::{self, jstr, parse_ts};
use super::{
    AgentSession, ErrorEvent, ErrorKind, LlmResponse, ParseBatch, PathAccess, PlanStep, Provider,
    SubagentInfo, TokenUsage, ToolEvent, ToolPath, ToolStatus,
};
use crate::mcp::McpCall;
use crate::provider::{ProviderSpec, TailSpec};
use wire::{Block, MetaJson, ToolUseResult};

/// Claude Code's row of the provider table.
pub(crate) const SPEC: ProviderSpec = ProviderSpec {
    provider: Provider::Claude,
    name: "claude",
    aliases: &["claude-code", "claude_code"],
    cli_name: "claude",
    roots: layout::roots,
    scan_root: layout::scan_root,
    after_scan: None,
    path_rank: 3,
    id_for_path: layout::id_for_path,
    candidate_id: crate::provider::stem_id,
    index_id: crate::provider::stem_index,
    is_transcript: layout::is_transcript,
    watch: layout::watch,
    header_id: false,
    verify_id: crate::provider::name_is_id,
    parse: |path, _, batch| parse(path, batch),
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

type Line = wire::Line<wire::Full>;
type Message = wire::Message<wire::Full>;

impl wire::Usage<wire::Full> {
    fn to_tokens(&self) -> TokenUsage {
        // ccusage prefers the ephemeral buckets when present; do the same so
        // totals agree.
        let creation = match self.cache_creation.as_ref().and_then(|c| c.obj()) {
            Some(c)
                if c.ephemeral_5m_input_tokens.is_some()
                    || c.ephemeral_1h_input_tokens.is_some() =>
            {
                c.ephemeral_5m_input_tokens.unwrap_or_default().0
                    + c.ephemeral_1h_input_tokens.unwrap_or_default().0
            }
            _ => self.cache_creation_input_tokens.0,
        };
        TokenUsage::new(
            self.input_tokens.0,
            self.output_tokens.0,
            self.cache_read_input_tokens.0,
            creation,
            0,
        )
    }
}

/// Known record types that carry nothing this model keeps.
const IGNORED_TYPES: &[&str] = &[
    "file-history-snapshot",
    "attachment",
    "queue-operation",
    "agent-name",
    "agent-setting",
    "permission-mode",
    "mode",
    "pr-link",
    "last-prompt",
    "bridge-session",
];

/// Prefixes of user text injected by Claude Code rather than typed.
const INJECTED_PREFIXES: &[&str] = &[
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<system-reminder>",
    "<ide_opened_file>",
    "<ide_selection>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "Caveat:",
];

struct Parser {
    s: AgentSession,
    /// (message.id, requestId) → index in `s.responses`.
    resp_keys: HashMap<(String, String), usize>,
    /// message ids produced by the main (non-sidechain) conversation, used to
    /// drop sidechain replays of parent responses (ccusage rule).
    main_msg_ids: HashSet<String>,
    /// call id → index in `s.tools`, for pairing results.
    pending: HashMap<String, usize>,
    /// agentId → parent Task/Agent call id.
    agent_links: HashMap<String, String>,
    /// agentId (or "" for inline without id) → index in `s.subagents`.
    sub_by_agent: HashMap<String, usize>,
    /// A `custom-title` (user-set) outranks later `ai-title` records.
    saw_custom_title: bool,
}

/// Where a tool call sits: its prompt, subagent, time and the line's cwd.
struct ToolAt<'a> {
    prompt_index: Option<usize>,
    sub: Option<usize>,
    ts: Option<i64>,
    cwd: Option<&'a str>,
}

/// Where lines come from while parsing.
#[derive(Clone, Copy)]
struct Ctx {
    /// Subagent file being read (index into `subagents`), `None` for the main file.
    file_sub: Option<usize>,
}

pub(crate) fn parse(path: &Path, batch: &mut ParseBatch) -> Result<AgentSession> {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| SessionError::Format {
            path: path.to_path_buf(),
            provider: "claude",
            reason: "file name is not UTF-8".into(),
        })?
        .to_string();
    let mut p = Parser {
        s: AgentSession::new(Provider::Claude, stem.clone(), path.to_path_buf()),
        resp_keys: HashMap::new(),
        main_msg_ids: HashSet::new(),
        pending: HashMap::new(),
        agent_links: HashMap::new(),
        sub_by_agent: HashMap::new(),
        saw_custom_title: false,
    };
    p.read_file(path, Ctx { file_sub: None })?;

    for (file, meta, agent_id) in subagent_files(path, &stem, batch) {
        let info = SubagentInfo {
            agent_id: agent_id.clone(),
            kind: meta
                .as_ref()
                .and_then(|m| m.agent_type.0.clone())
                .or_else(|| {
                    agent_id
                        .as_deref()
                        .filter(|a| a.starts_with("acompact"))
                        .map(|_| "compact".to_string())
                }),
            description: meta.as_ref().and_then(|m| m.description.0.clone()),
            parent_call_id: meta.as_ref().and_then(|m| m.tool_use_id.0.clone()),
            source_path: file.clone(),
            models: Vec::new(),
            usage: TokenUsage::default(),
            responses: 0,
            tools: 0,
        };
        let idx = p.subagent_index(agent_id.as_deref(), Some(info));
        if let Err(e) = p.read_file(
            &file,
            Ctx {
                file_sub: Some(idx),
            },
        ) {
            tracing::debug!(error = %e, "skipping unreadable subagent transcript");
            p.s.stats.unreadable_files += 1;
        }
    }
    p.resolve_subagent_links();
    Ok(p.s)
}

/// The 2.0.x subagent transcripts of one project directory
/// (`<project>/agent-*.jsonl`), by the `sessionId` of their header:
/// `(path, agentId)` in file-name order.
#[derive(Debug, Default)]
pub(crate) struct ProjectAgents(HashMap<String, Vec<(PathBuf, String)>>);

impl ProjectAgents {
    /// One listing of `project`, and one header read per agent file.
    pub(crate) fn list(project: &Path) -> Self {
        let mut by_session: HashMap<String, Vec<(PathBuf, String)>> = HashMap::new();
        let Ok(rd) = std::fs::read_dir(project) else {
            return ProjectAgents(by_session);
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with("agent-") && name.ends_with(".jsonl")) {
                continue;
            }
            if let Some(sid) = header_session_id(&e.path()) {
                let id = name["agent-".len()..name.len() - ".jsonl".len()].to_string();
                by_session.entry(sid).or_default().push((e.path(), id));
            }
        }
        ProjectAgents(by_session)
    }
}

/// Subagent transcripts of a session: `(path, meta, agentId)`.
fn subagent_files(
    main: &Path,
    stem: &str,
    batch: &mut ParseBatch,
) -> Vec<(PathBuf, Option<MetaJson>, Option<String>)> {
    let mut out = Vec::new();
    let Some(project) = main.parent() else {
        return out;
    };
    // ≥ 2.1.2: <project>/<session>/subagents/**/agent-*.jsonl (workflows nest
    // two levels deeper); bounded depth, no symlink following for dirs.
    let mut stack = vec![(project.join(stem).join("subagents"), 0u32)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name();
            let name = name.to_string_lossy();
            if ft.is_dir() && depth < 3 {
                stack.push((e.path(), depth + 1));
            } else if name.starts_with("agent-") && name.ends_with(".jsonl") {
                let id = name["agent-".len()..name.len() - ".jsonl".len()].to_string();
                let meta_path = dir.join(format!("agent-{id}.meta.json"));
                let meta = crate::safefs::read_small(&meta_path, 1 << 20)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<MetaJson>(&b).ok());
                out.push((e.path(), meta, Some(id)));
            }
        }
    }
    // 2.0.x: <project>/agent-*.jsonl whose lines carry this sessionId. The
    // project is listed once per batch: per transcript, parsing every
    // session of a crowded project was quadratic.
    for (file, id) in batch
        .project_agents(project)
        .0
        .get(stem)
        .into_iter()
        .flatten()
    {
        if file != main {
            out.push((file.clone(), None, Some(id.clone())));
        }
    }
    out
}

/// `sessionId` of the first record that has one, within the header bytes.
pub(crate) fn header_session_id(path: &Path) -> Option<String> {
    #[derive(Deserialize)]
    struct H {
        #[serde(rename = "sessionId", default)]
        session_id: LStr,
    }
    let head = util::read_head(path, util::HEADER_BYTES).ok()?;
    for line in head.split(|&b| b == b'\n') {
        if let Ok(mut h) = serde_json::from_slice::<H>(line)
            && let Some(id) = h.session_id.take()
        {
            return Some(id);
        }
    }
    None
}

impl Parser {
    fn read_file(&mut self, path: &Path, ctx: Ctx) -> Result<()> {
        let f = util::open_regular(path)?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        self.s.stats.files += 1;
        self.s.stats.bytes += len;
        let mut stats = std::mem::take(&mut self.s.stats);
        let r = util::for_each_line(f, &mut stats, |line, last, st| {
            if let Some(l) = util::parse_line::<Line>(line, last, st) {
                self.on_line(l, ctx, st);
            }
        });
        self.s.stats = stats;
        r.map_err(|e| SessionError::io(path, e))
    }

    fn subagent_index(&mut self, agent_id: Option<&str>, info: Option<SubagentInfo>) -> usize {
        let key = agent_id.unwrap_or("").to_string();
        if let Some(&i) = self.sub_by_agent.get(&key) {
            if let Some(info) = info
                && let Some(s) = self.s.subagents.get_mut(i)
            {
                // A file found later refines an inline entry.
                s.kind = s.kind.take().or(info.kind);
                s.description = s.description.take().or(info.description);
                s.parent_call_id = s.parent_call_id.take().or(info.parent_call_id);
                s.source_path = info.source_path;
            }
            return i;
        }
        let info = info.unwrap_or_else(|| SubagentInfo {
            agent_id: agent_id.map(str::to_string),
            kind: None,
            description: None,
            parent_call_id: None,
            source_path: self.s.source_path.clone(),
            models: Vec::new(),
            usage: TokenUsage::default(),
            responses: 0,
            tools: 0,
        });
        self.s.subagents.push(info);
        let i = self.s.subagents.len() - 1;
        self.sub_by_agent.insert(key, i);
        i
    }

    fn on_line(&mut self, mut l: Line, ctx: Ctx, st: &mut super::ParseStats) {
        let kind = l.kind.take().unwrap_or_default();
        let ts = l.timestamp.as_deref().and_then(parse_ts);
        let sidechain = ctx.file_sub.is_some() || l.is_sidechain.0 == Some(true);
        let sub = match ctx.file_sub {
            Some(i) => Some(i),
            None if sidechain => Some(self.subagent_index(l.agent_id.as_deref(), None)),
            None => None,
        };
        match kind.as_str() {
            "user" | "assistant" | "system" | "progress" => {
                self.s.see_ts(ts);
                if !sidechain {
                    if self.s.cwd.is_none() {
                        self.s.cwd = l.cwd.0.clone().filter(|c| !c.is_empty());
                    }
                    if self.s.conversation_id.is_none() {
                        self.s.conversation_id = l.session_id.0.clone();
                    }
                    if self.s.git_branch.is_none() {
                        self.s.git_branch = l.git_branch.0.clone().filter(|b| !b.is_empty());
                    }
                    if let Some(v) = l.version.0.clone() {
                        self.s.agent_version = Some(v);
                    }
                }
            }
            _ => {}
        }
        match kind.as_str() {
            "user" => self.on_user(l, ts, sidechain, sub),
            "assistant" => self.on_assistant(l, ts, sidechain, sub, st),
            "system" => {
                if l.subtype.as_deref() == Some("api_error") {
                    let msg = l
                        .error
                        .map(|e| e.0)
                        .filter(|m| !m.is_empty())
                        .or(l.content.map(|c| c.0))
                        .unwrap_or_default();
                    self.push_error(ts, sub, api_error_kind(&msg), msg);
                }
            }
            "progress" => {
                if let Some(d) = l.data.as_ref().and_then(|d| d.obj())
                    && d.kind.as_deref() == Some("agent_progress")
                    && let (Some(a), Some(p)) =
                        (d.agent_id.0.clone(), l.parent_tool_use_id.0.clone())
                {
                    self.agent_links.entry(a).or_insert(p);
                }
            }
            "summary" => {
                if self.s.title.is_none() {
                    self.s.title = l.summary.take();
                }
            }
            "custom-title" => {
                if let Some(t) = l.custom_title.take() {
                    self.s.title = Some(t);
                    self.saw_custom_title = true;
                }
            }
            "ai-title" => {
                if !self.saw_custom_title
                    && let Some(t) = l.ai_title.take()
                {
                    self.s.title = Some(t);
                }
            }
            k if IGNORED_TYPES.contains(&k) => {}
            _ => st.unknown_records += 1,
        }
    }

    fn push_error(
        &mut self,
        ts: Option<i64>,
        sub: Option<usize>,
        kind: ErrorKind,
        message: String,
    ) {
        self.s.errors.push(ErrorEvent {
            prompt_index: self.s.current_prompt(),
            subagent: sub,
            ts_ms: ts,
            kind,
            message,
        });
    }

    fn on_user(&mut self, mut l: Line, ts: Option<i64>, sidechain: bool, sub: Option<usize>) {
        let Some(ObjOr::Obj(msg)) = l.message.take() else {
            return;
        };
        let tur = l.tool_use_result.take();
        let mut texts: Vec<String> = Vec::new();
        match msg.content {
            Content::Text(t) => texts.push(t),
            Content::Blocks(blocks) => {
                for mut b in blocks {
                    match b.kind.as_deref() {
                        Some("tool_result") => {
                            let Some(id) = b.tool_use_id.take() else {
                                continue;
                            };
                            self.on_tool_result(&id, &b, tur.as_ref(), ts);
                        }
                        Some("text") => {
                            if let Some(t) = b.text.take() {
                                texts.push(t);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        if texts.is_empty() {
            return;
        }
        let text = texts.join("\n");
        let trimmed = text.trim_start();
        if trimmed.starts_with("[Request interrupted by user") {
            self.push_error(ts, sub, ErrorKind::Interrupted, trimmed.trim().to_string());
            return;
        }
        if sidechain
            || l.is_meta.0 == Some(true)
            || l.is_compact_summary.0 == Some(true)
            || INJECTED_PREFIXES.iter().any(|p| trimmed.starts_with(p))
        {
            return;
        }
        self.s.push_prompt(ts, text);
    }

    fn on_tool_result(
        &mut self,
        id: &str,
        b: &Block,
        tur: Option<&ObjOr<ToolUseResult>>,
        ts: Option<i64>,
    ) {
        let Some(&ti) = self.pending.get(id) else {
            return;
        };
        let Some(t) = self.s.tools.get_mut(ti) else {
            return;
        };
        if t.end_ms.is_some() || t.status != ToolStatus::Unknown {
            return; // first result wins; a replayed copy changes nothing
        }
        t.end_ms = ts;
        let tur_obj = tur.and_then(|r| r.obj());
        let is_error = b.is_error.0 == Some(true);
        // A structured `toolUseResult.exitCode`, else the `Exit code N` first
        // line Claude Code puts on a failed Bash result (a command that
        // succeeded has no code in the transcript).
        t.exit_code = tur_obj
            .and_then(|r| r.exit_code.as_ref())
            .and_then(util::exit_code_of)
            .or_else(|| {
                let text = &b.content.as_ref()?.0;
                (is_error && t.name == "Bash")
                    .then(|| util::labelled_exit_code(text.lines().next()?, "Exit code"))
                    .flatten()
            });
        let failed = is_error
            || t.exit_code.is_some_and(|c| c != 0)
            || matches!(tur, Some(ObjOr::Other(s)) if s.starts_with("Error"));
        t.status = if failed {
            ToolStatus::Failed
        } else {
            ToolStatus::Ok
        };
        if let Some(r) = tur_obj {
            // Write reports whether it created or updated the file.
            if t.name == "Write" {
                let access = match r.kind.as_deref() {
                    Some("create") => Some(PathAccess::Create),
                    Some("update") => Some(PathAccess::Write),
                    _ => None,
                };
                if let Some(a) = access {
                    for p in &mut t.paths {
                        p.access = a;
                    }
                }
            }
            if let Some(a) = r.agent_id.0.clone() {
                self.agent_links.entry(a).or_insert_with(|| id.to_string());
            }
        }
        if let Some(c) = &b.content
            && let Some(a) = agent_id_trailer(&c.0)
        {
            self.agent_links.entry(a).or_insert_with(|| id.to_string());
        }
    }

    /// An assistant line: an API error marker, or one split part of a model
    /// response (text, tool calls, usage) merged into its response.
    fn on_assistant(
        &mut self,
        mut l: Line,
        ts: Option<i64>,
        sidechain: bool,
        sub: Option<usize>,
        st: &mut super::ParseStats,
    ) {
        let Some(ObjOr::Obj(mut msg)) = l.message.take() else {
            return;
        };
        if l.is_api_error.0 == Some(true) {
            self.on_api_error(&msg, l.error.take(), ts, sub);
            return;
        }
        let msg_id = msg.id.take();
        let req_id = l.request_id.take();
        if let Some(m) = msg.model.as_deref() {
            self.s.see_model(m);
        }
        // Sidechain copies of a parent response (same message.id) are
        // replays: keep the non-sidechain copy only.
        if sidechain
            && msg_id
                .as_ref()
                .is_some_and(|id| self.main_msg_ids.contains(id))
        {
            st.replayed_skipped += 1;
            return;
        }
        if !sidechain && let Some(id) = &msg_id {
            self.main_msg_ids.insert(id.clone());
        }
        let ri = self.response_index(msg_id, req_id, msg.model.0.clone(), ts, sub);
        let prompt_index = self.s.current_prompt();
        let cwd = l.cwd.0.clone();
        let mut new_tools = Vec::new();
        if let Content::Blocks(blocks) = std::mem::take(&mut msg.content) {
            for mut b in blocks {
                match b.kind.as_deref() {
                    Some("text") => {
                        if let (Some(t), Some(r)) = (b.text.take(), self.s.responses.get_mut(ri)) {
                            if !r.text.is_empty() {
                                r.text.push('\n');
                            }
                            r.text.push_str(&t);
                        }
                    }
                    Some("tool_use") => {
                        let at = ToolAt {
                            prompt_index,
                            sub,
                            ts,
                            cwd: cwd.as_deref(),
                        };
                        new_tools.extend(self.tool_call(b, &at));
                    }
                    _ => {}
                }
            }
        }
        // Registered only after the whole message, so the duplicate check in
        // `tool_call` looks at earlier lines only.
        for t in new_tools {
            if let Some(id) = &t.call_id {
                self.pending.insert(id.clone(), self.s.tools.len());
            }
            self.s.tools.push(t);
        }
        self.merge_response_meta(ri, msg);
    }

    /// An assistant line flagged `isApiErrorMessage`: an error event whose
    /// text is the message's text blocks, else the line's `error`.
    fn on_api_error(
        &mut self,
        msg: &Message,
        error: Option<Prefix>,
        ts: Option<i64>,
        sub: Option<usize>,
    ) {
        let mut text = String::new();
        if let Content::Blocks(bs) = &msg.content {
            for b in bs {
                if let Some(t) = b.text.as_deref() {
                    text.push_str(t);
                }
            }
        }
        if text.is_empty() {
            text = error.map(|e| e.0).unwrap_or_default();
        }
        self.push_error(ts, sub, api_error_kind(&text), text);
    }

    /// The index in `s.responses` of the response that split lines with this
    /// (message.id, requestId) belong to, creating it on first sight.
    fn response_index(
        &mut self,
        msg_id: Option<String>,
        req_id: Option<String>,
        model: Option<String>,
        ts: Option<i64>,
        sub: Option<usize>,
    ) -> usize {
        let key = msg_id
            .clone()
            .map(|m| (m, req_id.clone().unwrap_or_default()));
        if let Some(&i) = key.as_ref().and_then(|k| self.resp_keys.get(k)) {
            return i;
        }
        self.s.responses.push(LlmResponse {
            prompt_index: self.s.current_prompt(),
            subagent: sub,
            ts_ms: ts,
            model,
            native_id: msg_id,
            request_id: req_id,
            phase: None,
            text: String::new(),
            text_truncated: false,
            tokens: None,
        });
        let i = self.s.responses.len() - 1;
        if let Some(k) = key {
            self.resp_keys.insert(k, i);
        }
        i
    }

    /// A `tool_use` block as a tool event; `None` for a call id already seen
    /// (a duplicated line). A `TodoWrite` call also replaces the plan.
    fn tool_call(&mut self, mut b: Block, at: &ToolAt<'_>) -> Option<ToolEvent> {
        let name = b.name.take().unwrap_or_default();
        let input = b.input.take().unwrap_or(Value::Null);
        let call_id = b.id.take();
        if let Some(id) = &call_id
            && self.pending.contains_key(id)
        {
            return None;
        }
        if name == "TodoWrite"
            && let Some(todos) = input.get("todos").and_then(|t| t.as_array())
        {
            self.s.plan = todos
                .iter()
                .filter_map(|t| {
                    Some(PlanStep {
                        step: jstr(t, "content").or(jstr(t, "subject"))?.to_string(),
                        status: jstr(t, "status").map(str::to_string),
                    })
                })
                .collect();
        }
        let d = describe_tool(&name, &input);
        let category = util::tool_category(&name);
        let mcp = (name.starts_with("mcp__")).then(|| McpCall::from_split_name(&name, input));
        Some(ToolEvent {
            prompt_index: at.prompt_index,
            subagent: at.sub,
            category,
            name,
            call_id,
            command: d.command,
            command_truncated: false,
            cwd: d.cwd.or_else(|| at.cwd.map(str::to_string)),
            status: ToolStatus::Unknown,
            exit_code: None,
            start_ms: at.ts,
            end_ms: None,
            paths: d.paths,
            domains: d.domains,
            mcp,
        })
    }

    /// What the last split line of a response says about the whole of it:
    /// usage (the largest seen), stop reason, model.
    fn merge_response_meta(&mut self, ri: usize, mut msg: Message) {
        let Some(r) = self.s.responses.get_mut(ri) else {
            return;
        };
        if let Some(u) = msg.usage.as_ref().and_then(|u| u.obj()) {
            let t = u.to_tokens();
            // Later split lines repeat input/cache and grow output: keep
            // the largest (ccusage's rule, equivalent to "last line").
            if r.tokens.is_none_or(|old| t.total >= old.total) {
                r.tokens = Some(t);
            }
        }
        if let Some(sr) = msg.stop_reason.take() {
            r.phase = Some(sr);
        }
        if r.model.is_none() {
            r.model = msg.model.0;
        }
    }

    /// Gives subagent events the prompt index of the parent call that
    /// spawned them, or else the parent prompt current at their time.
    fn resolve_subagent_links(&mut self) {
        for s in &mut self.s.subagents {
            if s.parent_call_id.is_none()
                && let Some(a) = &s.agent_id
            {
                s.parent_call_id = self.agent_links.get(a).cloned();
            }
        }
        let call_prompt: HashMap<&str, Option<usize>> = self
            .s
            .tools
            .iter()
            .filter(|t| t.subagent.is_none())
            .filter_map(|t| Some((t.call_id.as_deref()?, t.prompt_index)))
            .collect();
        let linked: Vec<Option<Option<usize>>> = self
            .s
            .subagents
            .iter()
            .map(|s| {
                s.parent_call_id
                    .as_deref()
                    .and_then(|c| call_prompt.get(c).copied())
            })
            .collect();
        let prompt_ts: Vec<(usize, Option<i64>)> =
            self.s.prompts.iter().map(|p| (p.index, p.ts_ms)).collect();
        let by_time = |ts: Option<i64>| -> Option<usize> {
            let ts = ts?;
            prompt_ts
                .iter()
                .rev()
                .find(|(_, pt)| pt.is_some_and(|pt| pt <= ts))
                .map(|(i, _)| *i)
        };
        let pick = |sub: Option<usize>, ts: Option<i64>, cur: Option<usize>| -> Option<usize> {
            match sub {
                Some(si) => match linked.get(si).copied().flatten() {
                    Some(pi) => pi,
                    None => by_time(ts).or(cur),
                },
                None => cur,
            }
        };
        for t in &mut self.s.tools {
            t.prompt_index = pick(t.subagent, t.start_ms, t.prompt_index);
        }
        for r in &mut self.s.responses {
            r.prompt_index = pick(r.subagent, r.ts_ms, r.prompt_index);
        }
        for e in &mut self.s.errors {
            e.prompt_index = pick(e.subagent, e.ts_ms, e.prompt_index);
        }
    }
}

/// An API error's kind from its text.
fn api_error_kind(text: &str) -> ErrorKind {
    if is_rate_limit(text) {
        ErrorKind::RateLimit
    } else {
        ErrorKind::ApiError
    }
}

fn is_rate_limit(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("rate limit") || t.contains("usage limit") || t.contains("rate_limit")
}

/// `agentId: <id>` trailer of a Task/Agent result text.
fn agent_id_trailer(text: &str) -> Option<String> {
    let i = text.find("agentId: ")?;
    let rest = &text[i + "agentId: ".len()..];
    let id: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    (!id.is_empty()).then_some(id)
}

/// What a tool call's arguments say: command text, paths, domains, cwd.
#[derive(Default)]
pub(crate) struct ToolDesc {
    pub command: Option<String>,
    pub cwd: Option<String>,
    pub paths: Vec<ToolPath>,
    pub domains: Vec<String>,
}

/// Describes an Anthropic-style tool call (Claude Code; Cursor uses similar
/// names). Paths get an access kind only when the tool's semantics fix it:
/// shell commands get none because their effects are not stated.
pub(crate) fn describe_tool(name: &str, input: &Value) -> ToolDesc {
    let mut d = ToolDesc::default();
    let s = |k: &str| jstr(input, k).map(str::to_string);
    let path_of = || {
        s("file_path")
            .or_else(|| s("notebook_path"))
            .or_else(|| s("path"))
            .or_else(|| s("target_file"))
            .or_else(|| s("filePath"))
    };
    match name {
        "Bash" | "Shell" | "run_terminal_cmd" | "BashOutput" => {
            d.command = s("command").or_else(|| s("cmd"));
            d.cwd = s("working_directory").or_else(|| s("cwd"));
        }
        "Read" | "ReadFile" | "read_file" | "NotebookRead" => {
            if let Some(p) = path_of() {
                d.paths.push(ToolPath::new(p, PathAccess::Read));
            }
        }
        "LS" | "ls" | "list_dir" => {
            if let Some(p) = path_of().or_else(|| s("target_directory")) {
                d.paths.push(ToolPath::new(p, PathAccess::Read));
            }
        }
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "StrReplace" | "search_replace"
        | "edit_file" | "EditNotebook" | "write" | "edit" => {
            if let Some(p) = path_of() {
                d.paths.push(ToolPath::new(p, PathAccess::Write));
            }
        }
        "Delete" | "delete_file" | "DeleteFile" => {
            if let Some(p) = path_of() {
                d.paths.push(ToolPath::new(p, PathAccess::Delete));
            }
        }
        "Glob" | "Grep" | "grep" | "glob_file_search" | "codebase_search" => {
            d.command = s("pattern")
                .or_else(|| s("query"))
                .or_else(|| s("glob_pattern"));
            if let Some(p) = s("path").or_else(|| s("target_directory")) {
                d.paths.push(ToolPath::new(p, PathAccess::Read));
            }
        }
        "WebFetch" | "web_fetch" => {
            d.command = s("url");
            if let Some(dom) = d.command.as_deref().and_then(util::url_domain) {
                d.domains.push(dom);
            }
        }
        "WebSearch" | "web_search" => {
            d.command = s("query").or_else(|| s("search_term"));
            if let Some(a) = input.get("allowed_domains").and_then(|v| v.as_array()) {
                d.domains = a
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
            }
        }
        "Task" | "Agent" => {
            d.command = s("description").or_else(|| s("prompt"));
        }
        _ => {
            d.command = s("command")
                .or_else(|| s("cmd"))
                .or_else(|| s("query"))
                .or_else(|| s("pattern"))
                .or_else(|| s("url"));
        }
    }
    d
}
