//! Gemini CLI chats (`~/.gemini/tmp/<project>/chats/session-*.json[l]`).
//!
//! `.json` (≤ v0.38) is one `ConversationRecord` rewritten whole. `.jsonl`
//! (≥ v0.39) is an event log of that record: a metadata line, full message
//! objects re-appended whenever they change (last write wins, first position
//! kept), `{"$set":{…}}` patches (`$set.messages` replaces the list) and
//! `{"$rewindTo":id}` (drop that message and everything after). Summing raw
//! lines would double count, so the log is replayed first.
//!
//! Tool calls and their results live in the same message record, so no
//! pairing is needed. On `--resume`, Gemini CLI 0.61 rewrites the list
//! (`$set.messages`) from its API history and loses the earlier records'
//! `toolCalls`, `tokens`, `model` and `timestamp` ([`Record::replace_all`]);
//! the replay puts them back from the lines before the rewrite. Subagent
//! chats (`chats/<parentSessionId>/*.json[l]`) are folded into the parent.

/// The tail reader of the live layer (`crate::live::read_tail`).
pub(crate) mod live;

/// Where transcripts live and how they are named.
pub(crate) mod layout;

/// Where its MCP servers are configured.
pub(crate) mod mcp;

/// The serde shapes of a chat record (shared with `live`).
pub(crate) mod wire;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::de::{Content, LStr, ObjOr};
use super::error::{Result, SessionError};
use super::util::{self, jstr, parse_ts};
use super::{
    AgentSession, ErrorEvent, ErrorKind, LlmResponse, ParseStats, PathAccess, PlanStep, Provider,
    SubagentInfo, TokenUsage, ToolEvent, ToolPath, ToolStatus,
};
use crate::mcp::McpCall;
use crate::provider::{DocumentSpec, ProviderSpec, TailSpec};
use wire::{FnResponse, FnResult, GLine, Part, Tokens as GTokens, ToolCall};

/// Gemini CLI's row of the provider table.
pub(crate) const SPEC: ProviderSpec = ProviderSpec {
    provider: Provider::Gemini,
    name: "gemini",
    aliases: &["gemini-cli"],
    cli_name: "gemini",
    roots: layout::roots,
    scan_root: layout::scan_root,
    after_scan: None,
    path_rank: 2,
    id_for_path: layout::id_for_path,
    candidate_id: header_session_id,
    index_id: layout::index_id,
    is_transcript: layout::is_transcript,
    watch: layout::watch,
    header_id: true,
    verify_id: layout::verify_id,
    parse: |path, _, _| parse(path),
    enrich: None,
    mcp: mcp::SPEC,
    tail: TailSpec {
        read: live::read,
        first_line: Some(live::apply_first_line),
        from_path: live::from_path,
        widens: true,
        document: Some(DocumentSpec {
            extension: "json",
            read_file: live::read_legacy_file,
            read_bytes: live::read_legacy_bytes,
        }),
    },
};

type Msg = wire::Msg<wire::Full>;

/// The `Exit Code: N` line Gemini CLI puts in a shell call's result text.
/// It writes `Output: …`, then `Error: …`, `Exit Code: N` (only when
/// non-zero), `Signal: …`, `Background PIDs: …`, `Process Group PGID: N`,
/// inside `<untrusted_context>`: the code is read only in that trailer, so a
/// line the command printed is never taken for it.
fn shell_exit_code(tc: &ToolCall) -> Option<i32> {
    let Content::Blocks(results) = &tc.result else {
        return None;
    };
    results.iter().find_map(|r| {
        let out = r
            .function_response
            .as_ref()?
            .obj()?
            .response
            .as_ref()?
            .obj()?
            .output
            .as_deref()?;
        for l in out.lines().rev() {
            let l = l.trim();
            if let Some(c) = util::labelled_exit_code(l, "Exit Code:") {
                return Some(c);
            }
            let trailer = l == "</untrusted_context>"
                || ["Signal:", "Background PIDs:", "Process Group PGID:"]
                    .iter()
                    .any(|p| l.starts_with(p));
            if !trailer {
                return None;
            }
        }
        None
    })
}

impl GTokens {
    fn normalized(&self) -> TokenUsage {
        let cached = self.cached.0.min(self.input.0);
        TokenUsage::new(
            self.input.0 - cached + self.tool.0,
            self.output.0 + self.thoughts.0,
            cached,
            0,
            self.thoughts.0,
        )
    }
}

impl wire::Msg<wire::Full> {
    /// Fills what a rewritten message lacks from the version a rewrite
    /// dropped; that version's timestamp is the message's own.
    fn restore(&mut self, old: Msg) {
        if old.timestamp.0.is_some() {
            self.timestamp = old.timestamp;
        }
        if self.model.0.is_none() {
            self.model = old.model;
        }
        if self.tool_calls.is_empty() {
            self.tool_calls = old.tool_calls;
        }
        if self.tokens.is_none() {
            self.tokens = old.tokens;
        }
    }
}

/// The replayed conversation record.
#[derive(Default)]
struct Record {
    session_id: Option<String>,
    start_ms: Option<i64>,
    last_updated_ms: Option<i64>,
    summary: Option<String>,
    kind: Option<String>,
    messages: Vec<Msg>,
    index: HashMap<String, usize>,
    /// Messages a `$set.messages` rewrite dropped, by id, until a later
    /// rewrite brings them back.
    dropped: HashMap<String, Msg>,
}

impl Record {
    fn upsert(&mut self, m: Msg) {
        match m.id.0.clone() {
            Some(id) => match self.index.get(&id) {
                Some(&i) => {
                    if let Some(slot) = self.messages.get_mut(i) {
                        *slot = m;
                    }
                }
                None => {
                    self.index.insert(id, self.messages.len());
                    self.messages.push(m);
                }
            },
            None => self.messages.push(m),
        }
    }

    /// A `$set.messages` rewrite. Gemini CLI's rewrite
    /// (`updateMessagesFromHistory`) means to keep a message's fields other
    /// than `content` (for an id it still has, it replaces only the content).
    /// On `--resume` (0.61) it first starts a fresh record (a second metadata
    /// line and a rewrite holding only the session context), then rewrites
    /// the list from the API history against that empty record: every
    /// earlier message comes back without `toolCalls`, `tokens` and `model`,
    /// stamped with the time of the resume. The dropped versions are kept
    /// here and restore those fields.
    fn replace_all(&mut self, msgs: Vec<ObjOr<Msg>>) {
        self.index.clear();
        for m in std::mem::take(&mut self.messages) {
            if let Some(id) = m.id.0.clone() {
                self.dropped.insert(id, m);
            }
        }
        for m in msgs {
            if let ObjOr::Obj(mut m) = m {
                if let Some(old) = m.id.as_deref().and_then(|id| self.dropped.remove(id)) {
                    m.restore(old);
                }
                self.upsert(m);
            }
        }
    }

    fn rewind_to(&mut self, id: &str) {
        if let Some(&i) = self.index.get(id) {
            self.messages.truncate(i);
            self.index.retain(|_, v| *v < i);
        }
    }

    fn apply_meta(&mut self, l: &mut GLine) {
        if let Some(s) = l.session_id.take()
            && self.session_id.is_none()
        {
            self.session_id = Some(s);
        }
        if let Some(t) = l.start_time.as_deref().and_then(parse_ts) {
            self.start_ms.get_or_insert(t);
        }
        if let Some(t) = l.last_updated.as_deref().and_then(parse_ts) {
            self.last_updated_ms = Some(t);
        }
        if let Some(s) = l.summary.take() {
            self.summary = Some(s);
        }
        if let Some(k) = l.kind.take() {
            self.kind = Some(k);
        }
    }
}

fn read_record(path: &Path, stats: &mut ParseStats) -> Result<Record> {
    let f = util::open_regular(path)?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    stats.files += 1;
    stats.bytes += len;
    let mut rec = Record::default();
    let jsonl = path.extension().and_then(|e| e.to_str()) == Some("jsonl");
    if !jsonl {
        // Legacy whole-file JSON.
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::BufReader::new(f), &mut bytes)
            .map_err(|e| SessionError::io(path, e))?;
        stats.lines = 1;
        let mut l: GLine = match util::parse_line(&bytes, false, stats) {
            Some(l) => l,
            None => {
                return Err(SessionError::Format {
                    path: path.to_path_buf(),
                    provider: "gemini",
                    reason: stats
                        .first_error
                        .clone()
                        .unwrap_or_else(|| "not JSON".into()),
                });
            }
        };
        rec.apply_meta(&mut l);
        if let Some(ms) = l.messages.take() {
            rec.replace_all(ms);
        }
        return Ok(rec);
    }
    let r = util::for_each_line(f, stats, |line, last, st| {
        let Some(mut l) = util::parse_line::<GLine>(line, last, st) else {
            return;
        };
        if let Some(set) = l.set.take() {
            match set {
                ObjOr::Obj(mut p) => {
                    if let Some(t) = p.last_updated.as_deref().and_then(parse_ts) {
                        rec.last_updated_ms = Some(t);
                    }
                    if let Some(s) = p.summary.take() {
                        rec.summary = Some(s);
                    }
                    if let Some(ms) = p.messages.take() {
                        rec.replace_all(ms);
                    }
                }
                ObjOr::Other(_) => st.bad_lines += 1,
            }
            return;
        }
        if let Some(id) = l.rewind_to.take() {
            rec.rewind_to(&id);
            return;
        }
        if l.id.0.is_some() {
            let m = Msg {
                id: std::mem::take(&mut l.id),
                timestamp: std::mem::take(&mut l.timestamp),
                kind: std::mem::take(&mut l.msg_type),
                content: l.content.take().unwrap_or_default(),
                model: std::mem::take(&mut l.model),
                tool_calls: std::mem::take(&mut l.tool_calls),
                tokens: l.tokens.take(),
            };
            rec.upsert(m);
            return;
        }
        if l.session_id.0.is_some() || l.start_time.0.is_some() || l.messages.is_some() {
            rec.apply_meta(&mut l);
            if let Some(ms) = l.messages.take() {
                rec.replace_all(ms);
            }
            return;
        }
        st.unknown_records += 1;
    });
    r.map_err(|e| SessionError::io(path, e))?;
    Ok(rec)
}

/// `sessionId` from the bounded header of a chat file (discovery).
pub(crate) fn header_session_id(path: &Path) -> Option<String> {
    let head = util::read_head(path, util::HEADER_BYTES).ok()?;
    // `"sessionId"` sits at the top of both layouts; find its string value
    // without parsing a record that may be cut off by the header cap.
    let text = String::from_utf8_lossy(&head);
    let i = text.find("\"sessionId\"")?;
    let rest = text[i + "\"sessionId\"".len()..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start().strip_prefix('"')?;
    let end = rest.find('"')?;
    let id = &rest[..end];
    (!id.is_empty()).then(|| id.to_string())
}

/// The project directory (`tmp/<project>`) of a chat file, and whether the
/// file is a subagent chat (`chats/<parent>/x.jsonl`).
fn project_dir(path: &Path) -> Option<(PathBuf, bool)> {
    let dir = path.parent()?;
    if dir.file_name()? == "chats" {
        return Some((dir.parent()?.to_path_buf(), false));
    }
    let chats = dir.parent()?;
    if chats.file_name()? == "chats" {
        return Some((chats.parent()?.to_path_buf(), true));
    }
    None
}

/// cwd of a Gemini project: `.project_root` (≥ v0.29), else the inverted
/// `projects.json` registry. Hash-named (≤ v0.28) dirs give none.
fn project_cwd(project: &Path) -> Option<String> {
    if let Ok(b) = crate::safefs::read_small(&project.join(".project_root"), 64 * 1024) {
        let s = String::from_utf8_lossy(&b);
        let s = s.trim();
        if !s.is_empty() {
            return Some(s.to_string());
        }
    }
    let slug = project.file_name()?.to_str()?;
    let gemini = project.parent()?.parent()?;
    let reg = crate::safefs::read_small(&gemini.join("projects.json"), 16 << 20).ok()?;
    let v: Value = serde_json::from_slice(&reg).ok()?;
    v.get("projects")?
        .as_object()?
        .iter()
        .find(|(_, s)| s.as_str() == Some(slug))
        .map(|(k, _)| k.clone())
}

pub(crate) fn parse(path: &Path) -> Result<AgentSession> {
    let mut stats = ParseStats::default();
    let rec = read_record(path, &mut stats)?;
    let Some(id) = rec.session_id.clone() else {
        return Err(SessionError::Format {
            path: path.to_path_buf(),
            provider: "gemini",
            reason: "no sessionId".into(),
        });
    };
    let mut s = AgentSession::new(Provider::Gemini, id.clone(), path.to_path_buf());
    s.conversation_id = Some(id.clone());
    s.stats = stats;
    s.title = rec.summary.clone();
    s.see_ts(rec.start_ms);
    s.see_ts(rec.last_updated_ms);
    let proj = project_dir(path);
    if let Some((p, _)) = &proj {
        s.cwd = project_cwd(p);
    }
    let mut hints = HashMap::new();
    emit(&mut s, rec, None, &mut hints);

    // Subagent chats live in chats/<sessionId>/; only for a main chat.
    if let Some((p, false)) = &proj {
        let dir = p.join("chats").join(&id);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        matches!(
                            p.extension().and_then(|e| e.to_str()),
                            Some("json" | "jsonl")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        // Prefer .jsonl when a .json twin has the same stem.
        let stems: std::collections::HashSet<PathBuf> = files
            .iter()
            .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("jsonl"))
            .map(|p| p.with_extension(""))
            .collect();
        files.retain(|p| {
            p.extension().and_then(|e| e.to_str()) == Some("jsonl")
                || !stems.contains(&p.with_extension(""))
        });
        for f in files {
            let mut st = std::mem::take(&mut s.stats);
            let r = read_record(&f, &mut st);
            s.stats = st;
            match r {
                Ok(child) => {
                    s.subagents.push(SubagentInfo {
                        agent_id: child.session_id.clone(),
                        kind: child.kind.clone(),
                        description: child.summary.clone(),
                        parent_call_id: None,
                        source_path: f.clone(),
                        models: Vec::new(),
                        usage: TokenUsage::default(),
                        responses: 0,
                        tools: 0,
                    });
                    let si = s.subagents.len() - 1;
                    emit(&mut s, child, Some(si), &mut hints);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "skipping unreadable gemini subagent chat");
                    s.stats.unreadable_files += 1;
                }
            }
        }
        link_subagents(&mut s, &hints);
    }
    Ok(s)
}

/// Links subagents to the parent tool call that names their `agentId`, and
/// gives their events that call's prompt index.
fn link_subagents(s: &mut AgentSession, hints: &HashMap<String, String>) {
    let mut calls: HashMap<&str, (Option<String>, Option<usize>)> = HashMap::new();
    for t in s.tools.iter().filter(|t| t.subagent.is_none()) {
        if let Some(a) = t.call_id.as_ref().and_then(|c| hints.get(c)) {
            calls.insert(a.as_str(), (t.call_id.clone(), t.prompt_index));
        }
    }
    let mut prompt_of: Vec<Option<usize>> = vec![None; s.subagents.len()];
    for (i, sub) in s.subagents.iter_mut().enumerate() {
        if let Some((call, pi)) = sub.agent_id.as_deref().and_then(|a| calls.get(a)) {
            sub.parent_call_id = call.clone();
            prompt_of[i] = *pi;
        }
    }
    let prompts: Vec<(usize, Option<i64>)> = s.prompts.iter().map(|p| (p.index, p.ts_ms)).collect();
    let by_time = |ts: Option<i64>| {
        let ts = ts?;
        prompts
            .iter()
            .rev()
            .find(|(_, t)| t.is_some_and(|t| t <= ts))
            .map(|(i, _)| *i)
    };
    for t in s.tools.iter_mut() {
        if let Some(si) = t.subagent {
            t.prompt_index = prompt_of
                .get(si)
                .copied()
                .flatten()
                .or_else(|| by_time(t.start_ms));
        }
    }
    for r in s.responses.iter_mut() {
        if let Some(si) = r.subagent {
            r.prompt_index = prompt_of
                .get(si)
                .copied()
                .flatten()
                .or_else(|| by_time(r.ts_ms));
        }
    }
    for e in s.errors.iter_mut() {
        if let Some(si) = e.subagent {
            e.prompt_index = prompt_of
                .get(si)
                .copied()
                .flatten()
                .or_else(|| by_time(e.ts_ms));
        }
    }
}

fn text_of(c: &Content<Part>) -> String {
    match c {
        Content::Text(t) => t.clone(),
        Content::Blocks(parts) => {
            let mut out = String::new();
            for p in parts {
                if let Some(t) = p.text.as_deref() {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(t);
                }
            }
            out
        }
    }
}

/// Turns replayed messages into model events.
/// `hints` collects call id → `agentId` named by tool calls, for linking.
fn emit(
    s: &mut AgentSession,
    rec: Record,
    sub: Option<usize>,
    hints: &mut HashMap<String, String>,
) {
    let mut api_calls = ApiCalls::of(&rec.messages);
    for m in rec.messages {
        let ts = m.timestamp.as_deref().and_then(parse_ts);
        s.see_ts(ts);
        match m.kind.as_deref().unwrap_or("") {
            "user" => {
                let text = text_of(&m.content);
                // Gemini CLI 0.61 opens each chat with a user-role
                // `<session_context>` message (date, OS, directory tree) that
                // the CLI wrote, not the user.
                if sub.is_none()
                    && !text.trim().is_empty()
                    && !text.trim_start().starts_with("<session_context>")
                {
                    s.push_prompt(ts, text);
                }
            }
            "gemini" | "model" | "assistant" => {
                if let Some(model) = m.model.as_deref() {
                    s.see_model(model);
                }
                s.responses.push(LlmResponse {
                    prompt_index: s.current_prompt(),
                    subagent: sub,
                    ts_ms: ts,
                    model: m.model.0.clone(),
                    native_id: m.id.0.clone(),
                    request_id: None,
                    phase: None,
                    text: text_of(&m.content),
                    text_truncated: false,
                    tokens: m
                        .tokens
                        .as_ref()
                        .and_then(|t| t.obj())
                        .map(|t| t.normalized()),
                });
                for tc in &m.tool_calls {
                    if let ObjOr::Obj(tc) = tc {
                        let ev = tool_event(s, tc, ts, sub);
                        if let (Some(c), Some(a)) = (&ev.call_id, tc.agent_id.0.clone()) {
                            hints.insert(c.clone(), a);
                        }
                        s.tools.push(ev);
                    }
                }
                for tc in api_calls.unlisted(&m) {
                    let ev = tool_event(s, &tc, ts, sub);
                    s.tools.push(ev);
                }
            }
            "error" | "warning" => {
                s.errors.push(ErrorEvent {
                    prompt_index: s.current_prompt(),
                    subagent: sub,
                    ts_ms: ts,
                    kind: ErrorKind::from_code(m.kind.0.clone().unwrap_or_default()),
                    message: text_of(&m.content),
                });
            }
            _ => {}
        }
    }
}

/// Calls that the file holds only as API-history parts: a `functionCall` in
/// a model message's content whose id no `toolCalls` record has (the replay
/// restores the records it can; this is for calls with none left), paired
/// with the first `functionResponse` of that id (a resume writes each earlier
/// result twice: rebuilt from the call record, then the original message).
struct ApiCalls {
    results: HashMap<String, FnResponse>,
    /// Call ids already listed (from `toolCalls` or an earlier part).
    listed: HashSet<String>,
}

impl ApiCalls {
    fn of(msgs: &[Msg]) -> Self {
        let mut results = HashMap::new();
        let mut listed = HashSet::new();
        for m in msgs {
            listed.extend(
                m.tool_calls
                    .iter()
                    .filter_map(|t| Some(t.obj()?.id.as_deref()?.to_string())),
            );
            if m.kind.as_deref() != Some("user") {
                continue;
            }
            for r in parts(&m.content).filter_map(|p| p.function_response.as_ref()?.obj()) {
                if let Some(id) = r.id.as_deref() {
                    results.entry(id.to_string()).or_insert_with(|| r.clone());
                }
            }
        }
        ApiCalls { results, listed }
    }

    /// `m`'s calls not listed yet. Their status is what the paired result
    /// states: `error` for a `response.error`, else unknown (the file
    /// records none).
    fn unlisted(&mut self, m: &Msg) -> Vec<ToolCall> {
        let mut out = Vec::new();
        for c in parts(&m.content).filter_map(|p| p.function_call.as_ref()?.obj()) {
            if let Some(id) = c.id.as_deref()
                && !self.listed.insert(id.to_string())
            {
                continue;
            }
            let result = c.id.as_deref().and_then(|id| self.results.get(id));
            let failed = result
                .and_then(|r| r.response.as_ref()?.obj())
                .is_some_and(|o| o.error.is_some());
            let result = result.map(|r| FnResult {
                function_response: Some(ObjOr::Obj(r.clone())),
            });
            out.push(ToolCall {
                id: c.id.clone(),
                name: c.name.clone(),
                args: c.args.clone(),
                status: LStr(failed.then(|| "error".to_string())),
                result: Content::Blocks(result.into_iter().collect()),
                ..ToolCall::default()
            });
        }
        out
    }
}

fn parts(c: &Content<Part>) -> impl Iterator<Item = &Part> {
    match c {
        Content::Blocks(p) => p.iter(),
        Content::Text(_) => [].iter(),
    }
}

pub(crate) fn tool_event(
    s: &mut AgentSession,
    tc: &ToolCall,
    ts: Option<i64>,
    sub: Option<usize>,
) -> ToolEvent {
    let name = tc.name.0.clone().unwrap_or_default();
    let args = tc.args.clone().unwrap_or(Value::Null);
    let a = |k: &str| jstr(&args, k).map(str::to_string);
    let mut command = None;
    let mut cwd = None;
    let mut paths = Vec::new();
    let mut domains = Vec::new();
    let file = || {
        a("file_path")
            .or_else(|| a("absolute_path"))
            .or_else(|| a("path"))
    };
    let dir = || {
        a("dir_path")
            .or_else(|| a("path"))
            .or_else(|| a("directory"))
    };
    match name.as_str() {
        "run_shell_command" => {
            command = a("command");
            cwd = a("dir_path").or_else(|| a("directory"));
        }
        "read_file" => {
            if let Some(p) = file() {
                paths.push(ToolPath::new(p, PathAccess::Read));
            }
        }
        "write_file" | "replace" | "edit" => {
            let created = tc
                .result_display
                .as_ref()
                .and_then(|d| d.obj())
                .and_then(|d| d.is_new_file.0)
                == Some(true);
            if let Some(p) = file() {
                let access = if created {
                    PathAccess::Create
                } else {
                    PathAccess::Write
                };
                paths.push(ToolPath::new(p, access));
            }
        }
        "list_directory" => {
            if let Some(p) = dir() {
                paths.push(ToolPath::new(p, PathAccess::Read));
            }
        }
        "glob" | "grep_search" | "search_file_content" => {
            command = a("pattern");
            if let Some(p) = dir() {
                paths.push(ToolPath::new(p, PathAccess::Read));
            }
        }
        "google_web_search" => command = a("query"),
        "web_fetch" => {
            command = a("prompt").or_else(|| a("url"));
            domains = command
                .as_deref()
                .map(util::domains_in_text)
                .unwrap_or_default();
        }
        "write_todos" => {
            if let Some(todos) = args.get("todos").and_then(|t| t.as_array()) {
                s.plan = todos
                    .iter()
                    .filter_map(|t| {
                        Some(PlanStep {
                            step: jstr(t, "description")?.to_string(),
                            status: jstr(t, "status").map(str::to_string),
                        })
                    })
                    .collect();
            }
        }
        _ => {
            command = a("command").or_else(|| a("query")).or_else(|| a("pattern"));
        }
    }
    let exit_code = (name == "run_shell_command")
        .then(|| shell_exit_code(tc))
        .flatten();
    let status = match tc.status.as_deref() {
        Some("success") if exit_code.is_some_and(|c| c != 0) => ToolStatus::Failed,
        Some("success") => ToolStatus::Ok,
        Some("error" | "cancelled") => ToolStatus::Failed,
        _ => ToolStatus::Unknown,
    };
    // The call record's timestamp is written when the call completes.
    let end_ms = if status == ToolStatus::Unknown {
        None
    } else {
        tc.timestamp.as_deref().and_then(parse_ts)
    };
    // Gemini CLI names an MCP tool `mcp_SERVER_TOOL`; `_` is legal in
    // both parts, so the server is left to the configured names
    // (`mcp::resolve_name`).
    let category = util::gemini_tool_category(&name);
    let mcp = (category == super::ToolCategory::Mcp).then_some(McpCall {
        server: None,
        tool: None,
        arguments: Some(args),
    });
    ToolEvent {
        prompt_index: s.current_prompt(),
        subagent: sub,
        category,
        name,
        call_id: tc.id.0.clone(),
        command,
        command_truncated: false,
        cwd,
        status,
        exit_code,
        start_ms: ts,
        end_ms,
        paths,
        domains,
        mcp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `<session_context>` message Gemini CLI 0.61 writes first is not a
    /// prompt; the typed one after it is.
    #[test]
    fn session_context_is_not_a_prompt() {
        let dir =
            std::env::temp_dir().join(format!("agentsight-gemini-ctx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("session-2026-01-01T00-00-abcd1234.jsonl");
        let lines = [
            r#"{"sessionId":"abcd1234-0000-4000-8000-000000000000","projectHash":"x","startTime":"2026-01-01T00:00:00.000Z","lastUpdated":"2026-01-01T00:00:00.000Z","kind":"main"}"#,
            r#"{"$set":{"messages":[{"id":"c","timestamp":"2026-01-01T00:00:00.100Z","type":"user","content":[{"text":"<session_context>\nThis is the Gemini CLI.\n</session_context>"}]}]}}"#,
            r#"{"id":"u","timestamp":"2026-01-01T00:00:01.000Z","type":"user","content":[{"text":"list the files"}]}"#,
        ];
        std::fs::write(&f, lines.join("\n") + "\n").unwrap();
        let s = crate::parse_file(Provider::Gemini, &f).unwrap();
        assert_eq!(s.prompt_count, 1);
        assert_eq!(s.prompts[0].text, "list the files");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Calls a file holds only as API-history parts (a resume's rewrite with
    /// no earlier `toolCalls` record of the same id left in the file): each
    /// listed once, paired with its first result; status only where the
    /// result states one. A call that has a record is not listed again.
    #[test]
    fn calls_only_in_history_parts_are_listed_once() {
        let dir =
            std::env::temp_dir().join(format!("agentsight-gemini-parts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("session-2026-12-01T12-35-ca9aa233.jsonl");
        let lines = [
            r#"{"sessionId":"ca9aa233-cec4-4674-b04d-95038af60e2d","projectHash":"58cc","startTime":"2026-12-01T12:35:36.722Z","lastUpdated":"2026-12-01T12:35:36.722Z","kind":"main"}"#,
            r#"{"$set":{"messages":[{"id":"u1","timestamp":"2026-12-01T12:35:36.733Z","type":"user","content":[{"text":"Look at this project."}]},{"id":"g1","timestamp":"2026-12-01T12:35:36.733Z","type":"gemini","content":[{"text":"Listing the project first."},{"functionCall":{"id":"list_directory__list_directory_1796128534434_0","name":"list_directory","args":{"dir_path":"/home/dev/work"}}}]},{"id":"g1_response","timestamp":"2026-12-01T12:35:36.733Z","type":"user","content":[{"functionResponse":{"id":"list_directory__list_directory_1796128534434_0","name":"list_directory","response":{"output":"Directory listing for /home/dev/work:\n[DIR] src\nnotes.txt (37 bytes)"}}}]},{"id":"r1","timestamp":"2026-12-01T12:35:36.733Z","type":"user","content":[{"functionResponse":{"id":"list_directory__list_directory_1796128534434_0","name":"list_directory","response":{"output":"Directory listing for /home/dev/work:\n[DIR] src\nnotes.txt (37 bytes)"}}}]},{"id":"g2","timestamp":"2026-12-01T12:35:36.733Z","type":"gemini","content":[{"text":"Checking."},{"functionCall":{"id":"run_shell_command__run_shell_command_1796128534500_0","name":"run_shell_command","args":{"command":"make check"}}},{"functionCall":{"id":"read_file__read_file_1796128534500_1","name":"read_file","args":{"file_path":"/home/dev/work/missing.txt"}}}]},{"id":"g2_response","timestamp":"2026-12-01T12:35:36.733Z","type":"user","content":[{"functionResponse":{"id":"run_shell_command__run_shell_command_1796128534500_0","name":"run_shell_command","response":{"output":"<untrusted_context>\nOutput: check failed\nExit Code: 3\nProcess Group PGID: 1791\n</untrusted_context>"}}},{"functionResponse":{"id":"read_file__read_file_1796128534500_1","name":"read_file","response":{"error":"File not found: /home/dev/work/missing.txt"}}}]}]}}"#,
            r#"{"id":"g3","timestamp":"2026-12-01T12:35:36.868Z","type":"gemini","content":[{"text":"Reading the notes again."},{"functionCall":{"id":"read_file__read_file_1796128536783_0","name":"read_file","args":{"file_path":"/home/dev/work/notes.txt"}}}],"toolCalls":[{"id":"read_file__read_file_1796128536783_0","name":"read_file","args":{"file_path":"/home/dev/work/notes.txt"},"status":"success","timestamp":"2026-12-01T12:35:36.884Z"}]}"#,
            r#"{"id":"g4","timestamp":"2026-12-01T12:35:36.890Z","type":"gemini","content":[{"functionCall":{"name":"glob","args":{"pattern":"*.md"}}}]}"#,
        ];
        std::fs::write(&f, lines.join("\n") + "\n").unwrap();
        let s = crate::parse_file(Provider::Gemini, &f).unwrap();
        let t: Vec<_> = s
            .tools
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.call_id.as_deref(),
                    t.status,
                    t.exit_code,
                    t.end_ms,
                )
            })
            .collect();
        let at = |s: &str| parse_ts(s);
        assert_eq!(
            t,
            [
                (
                    "list_directory",
                    Some("list_directory__list_directory_1796128534434_0"),
                    ToolStatus::Unknown,
                    None,
                    None
                ),
                (
                    "run_shell_command",
                    Some("run_shell_command__run_shell_command_1796128534500_0"),
                    ToolStatus::Unknown,
                    Some(3),
                    None
                ),
                (
                    "read_file",
                    Some("read_file__read_file_1796128534500_1"),
                    ToolStatus::Failed,
                    None,
                    // The rewrite's times are the resume's, not the result's.
                    None
                ),
                (
                    "read_file",
                    Some("read_file__read_file_1796128536783_0"),
                    ToolStatus::Ok,
                    None,
                    at("2026-12-01T12:35:36.884Z")
                ),
                ("glob", None, ToolStatus::Unknown, None, None),
            ]
        );
        assert_eq!(s.tools[1].command.as_deref(), Some("make check"));
        assert_eq!(s.prompt_count, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Gemini CLI marks a failing command `success`; the exit code is only in
    /// the result text. A new file is flagged by `resultDisplay.isNewFile`.
    #[test]
    fn shell_exit_code_and_new_file() {
        let call = |v: Value| -> ToolCall { serde_json::from_value(v).unwrap() };
        let shell = |out: &str| {
            call(
                serde_json::json!({"id":"c","name":"run_shell_command","args":{"command":"x"},"status":"success",
                "result":[{"functionResponse":{"id":"c","name":"run_shell_command","response":{"output":out}}}]}),
            )
        };
        assert_eq!(
            shell_exit_code(&shell("Output: x\nExit Code: 3\nProcess Group PGID: 9")),
            Some(3)
        );
        assert_eq!(
            shell_exit_code(&shell("Output: x\nProcess Group PGID: 9")),
            None
        );
        // Gemini CLI 0.61 wraps the result; the code is in the trailer only.
        assert_eq!(
            shell_exit_code(&shell(
                "<untrusted_context>\nOutput: check failed\nExit Code: 3\nProcess Group PGID: 1791\n</untrusted_context>"
            )),
            Some(3)
        );
        assert_eq!(
            shell_exit_code(&shell(
                "<untrusted_context>\nOutput: Exit Code: 7\nExit Code: 7\nProcess Group PGID: 12\n</untrusted_context>"
            )),
            Some(7)
        );
        // A line the command printed (success: no trailer code).
        assert_eq!(
            shell_exit_code(&shell(
                "<untrusted_context>\nOutput: log\nExit Code: 7\ndone\nProcess Group PGID: 12\n</untrusted_context>"
            )),
            None
        );
        let mut s = AgentSession::new(Provider::Gemini, "g".into(), PathBuf::new());
        let t = tool_event(&mut s, &shell("Output: x\nExit Code: 3\n"), None, None);
        assert_eq!((t.status, t.exit_code), (ToolStatus::Failed, Some(3)));
        let t = tool_event(&mut s, &shell("Output: x\nExit Code: 0\n"), None, None);
        assert_eq!((t.status, t.exit_code), (ToolStatus::Ok, Some(0)));
        let t = tool_event(
            &mut s,
            &shell("Output: x\nProcess Group PGID: 9"),
            None,
            None,
        );
        assert_eq!((t.status, t.exit_code), (ToolStatus::Ok, None));
        // Only the shell tool's result carries a code: a file read that
        // ends in such a line is not one.
        let read = call(
            serde_json::json!({"id":"r","name":"read_file","args":{"file_path":"/w/log"},"status":"success",
            "result":[{"functionResponse":{"id":"r","name":"read_file","response":{"output":"Exit Code: 3"}}}]}),
        );
        let t = tool_event(&mut s, &read, None, None);
        assert_eq!((t.status, t.exit_code), (ToolStatus::Ok, None));
        let w = call(
            serde_json::json!({"id":"w","name":"write_file","args":{"file_path":"/w/a"},"status":"success",
            "resultDisplay":{"isNewFile":true}}),
        );
        let t = tool_event(&mut s, &w, None, None);
        assert_eq!(t.paths, vec![ToolPath::new("/w/a", PathAccess::Create)]);
    }
}
