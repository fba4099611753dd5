//! Codex CLI rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`).
//!
//! Two layouts are read: the current envelope `{timestamp, type, payload}`
//! (since 2025-09) and the legacy one (first line a bare `SessionMeta`, then
//! bare `ResponseItem`s and `{"record_type":"state"}` lines).
//!
//! Usage: `token_count.info.total_token_usage` is cumulative per thread. Each
//! response is counted as the field-wise delta to the previous total;
//! unchanged repeats are skipped; a drop starts a new baseline and counts that
//! event's `last_token_usage`. Thread-spawn subagent and forked rollouts start
//! by replaying the parent's history (a foreign `session_meta` followed by a
//! burst of lines sharing its timestamp second): those lines only move the
//! token baseline and are otherwise dropped, so nothing is counted twice.

/// The tail reader of the live layer (`crate::live::read_tail`).
pub(crate) mod live;

/// Where transcripts live and how they are named.
pub(crate) mod layout;

/// Where its MCP servers are configured.
pub(crate) mod mcp;
/// The state database the session list reads.
pub(crate) mod state;

/// The serde shapes of a rollout line (shared with `live`).
pub(crate) mod wire;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::de::{Content, Count, ObjOr};
use super::error::{Result, SessionError};
use super::util::{self, jstr, parse_ts};
use super::{
    AgentSession, ErrorEvent, ErrorKind, LlmResponse, PathAccess, PlanStep, Provider, TokenUsage,
    ToolCategory, ToolEvent, ToolPath, ToolStatus,
};
use crate::mcp::McpCall;
use crate::provider::{ProviderSpec, TailSpec};
use wire::RawUsage;

/// Codex's row of the provider table.
pub(crate) const SPEC: ProviderSpec = ProviderSpec {
    provider: Provider::Codex,
    name: "codex",
    aliases: &[],
    cli_name: "codex",
    roots: layout::roots,
    scan_root: layout::scan_root,
    after_scan: Some(layout::after_scan),
    path_rank: 1,
    id_for_path: layout::id_for_path,
    candidate_id: layout::candidate_id,
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
        document: None,
    },
};

type Line = wire::Line<wire::Full>;
type Payload = wire::Payload<wire::Full>;
type Item = wire::Item;

impl RawUsage {
    fn ge(&self, o: &RawUsage) -> bool {
        self.input_tokens.0 >= o.input_tokens.0
            && self.cached_input_tokens.0 >= o.cached_input_tokens.0
            && self.output_tokens.0 >= o.output_tokens.0
            && self.reasoning_output_tokens.0 >= o.reasoning_output_tokens.0
            && self.total_tokens.0 >= o.total_tokens.0
    }
    fn minus(&self, o: &RawUsage) -> RawUsage {
        RawUsage {
            input_tokens: Count(self.input_tokens.0 - o.input_tokens.0),
            cached_input_tokens: Count(self.cached_input_tokens.0 - o.cached_input_tokens.0),
            output_tokens: Count(self.output_tokens.0 - o.output_tokens.0),
            reasoning_output_tokens: Count(
                self.reasoning_output_tokens.0 - o.reasoning_output_tokens.0,
            ),
            total_tokens: Count(self.total_tokens.0 - o.total_tokens.0),
        }
    }
    pub(crate) fn normalized(&self) -> TokenUsage {
        let cached = self.cached_input_tokens.0.min(self.input_tokens.0);
        TokenUsage::new(
            self.input_tokens.0 - cached,
            self.output_tokens.0,
            cached,
            0,
            self.reasoning_output_tokens.0,
        )
    }
}

/// Outcome read from a tool output without keeping the (possibly huge) text:
/// the status and the exit code the output states, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutputStatus(ToolStatus, Option<i32>);

impl<'de> Deserialize<'de> for OutputStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OutputStatus;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("tool output")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<OutputStatus, E> {
                Ok(output_status(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<OutputStatus, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(OutputStatus(ToolStatus::Ok, None))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<OutputStatus, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(OutputStatus(ToolStatus::Ok, None))
            }
            fn visit_unit<E>(self) -> std::result::Result<OutputStatus, E> {
                Ok(OutputStatus(ToolStatus::Unknown, None))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<OutputStatus, E> {
                Ok(OutputStatus(ToolStatus::Ok, None))
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<OutputStatus, E> {
                Ok(OutputStatus(ToolStatus::Ok, None))
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<OutputStatus, E> {
                Ok(OutputStatus(ToolStatus::Ok, None))
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<OutputStatus, E> {
                Ok(OutputStatus(ToolStatus::Ok, None))
            }
        }
        d.deserialize_any(V)
    }
}

/// Outcome of a tool from its output text: the structured shell form
/// (`{"output":…,"metadata":{"exit_code":N}}`), the freeform form
/// (`Exit code: N`), unified exec (`Process exited with code N`), or an
/// explicit failure message. Any other recorded output counts as ok. The
/// labelled forms are read only in the header Codex writes before the
/// command's own `Output:`, so output that merely mentions a code is not
/// taken for one.
fn output_status(s: &str) -> OutputStatus {
    let of_code = |c: Option<i32>| match c {
        Some(0) | None => OutputStatus(ToolStatus::Ok, c),
        Some(_) => OutputStatus(ToolStatus::Failed, c),
    };
    let t = s.trim_start();
    if t.starts_with('{') {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Meta {
            exit_code: Option<Value>,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Structured {
            metadata: Option<ObjOr<Meta>>,
        }
        if let Ok(v) = serde_json::from_str::<Structured>(t) {
            return of_code(
                v.metadata
                    .as_ref()
                    .and_then(|m| m.obj())
                    .and_then(|m| m.exit_code.as_ref())
                    .and_then(util::exit_code_of),
            );
        }
    }
    let labelled = t
        .lines()
        .take_while(|l| l.trim_end() != "Output:")
        .find_map(|l| {
            util::labelled_exit_code(l, "Exit code:")
                .or_else(|| util::labelled_exit_code(l, "Process exited with code"))
        });
    if labelled.is_some() {
        return of_code(labelled);
    }
    let head: String = t.chars().take(64).collect::<String>().to_ascii_lowercase();
    if head.starts_with("error")
        || head.starts_with("failed")
        || head.starts_with("apply_patch verification failed")
        || head.starts_with("execution error")
        || tool_failed(&head)
    {
        return OutputStatus(ToolStatus::Failed, None);
    }
    OutputStatus(ToolStatus::Ok, None)
}

/// `TOOL failed: …`: Codex's output for a call it did not run, e.g.
/// `exec_command failed: CreateProcess { message: "Rejected(\"approval
/// request failed\")" }` when the approval was refused (Codex 0.169).
fn tool_failed(head: &str) -> bool {
    head.split_once(" failed:").is_some_and(|(tool, _)| {
        !tool.is_empty() && tool.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    })
}

/// Header facts of a rollout used by discovery.
#[derive(Debug, Clone, Default)]
pub(crate) struct Header {
    pub id: Option<String>,
    pub cwd: Option<String>,
    pub parent_id: Option<String>,
    pub start_ms: Option<i64>,
}

/// Reads the first line (up to [`util::CODEX_FIRST_LINE_CAP`]) for the
/// canonical `session_meta`.
pub(crate) fn read_header(path: &Path) -> Result<Header> {
    let Some(line) = util::read_first_line(path, util::CODEX_FIRST_LINE_CAP)? else {
        return Err(SessionError::Format {
            path: path.to_path_buf(),
            provider: "codex",
            reason: "first line longer than the 1 MiB header cap".into(),
        });
    };
    let mut st = super::ParseStats::default();
    let Some(mut l) = util::parse_line::<Line>(&line, true, &mut st) else {
        return Err(SessionError::Format {
            path: path.to_path_buf(),
            provider: "codex",
            reason: "first line is not JSON".into(),
        });
    };
    let mut h = Header::default();
    match l.payload.take() {
        Some(ObjOr::Obj(mut p)) if l.kind.as_deref() == Some("session_meta") => {
            h.id = p.id.take();
            h.cwd = p.cwd.take();
            h.parent_id = parent_of(&p);
            h.start_ms = p.timestamp.as_deref().and_then(parse_ts);
        }
        None if l.kind.0.is_none() => {
            h.id = l.id.take();
            h.start_ms = l.timestamp.as_deref().and_then(parse_ts);
        }
        _ => {}
    }
    if h.id.is_none() {
        return Err(SessionError::Format {
            path: path.to_path_buf(),
            provider: "codex",
            reason: "no session_meta id on the first line".into(),
        });
    }
    Ok(h)
}

/// Parent thread of a subagent (`source.subagent.thread_spawn`) or fork.
fn parent_of(p: &Payload) -> Option<String> {
    let spawn = p
        .source
        .as_ref()
        .and_then(|s| s.get("subagent"))
        .and_then(|s| s.get("thread_spawn"))
        .and_then(|t| jstr(t, "parent_thread_id"))
        .map(str::to_string);
    spawn.or_else(|| p.forked_from_id.0.clone())
}

/// Thread id from a rollout file name (`rollout-<local time>-<uuid>.jsonl`).
pub(crate) fn id_from_file_name(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    if !stem.starts_with("rollout-") || stem.len() < 36 + 9 {
        return None;
    }
    let id = &stem[stem.len() - 36..];
    let ok = id.len() == 36
        && id.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    ok.then(|| id.to_string())
}

struct Parser {
    s: AgentSession,
    legacy: bool,
    own_id: Option<String>,
    is_child: bool,
    /// Timestamp second of a replayed parent burst, while inside it.
    replay_second: Option<i64>,
    replay_done: bool,
    model: Option<String>,
    turn_cwd: Option<String>,
    prev_total: Option<RawUsage>,
    pending_text: String,
    pending_phase: Option<String>,
    pending_ts: Option<i64>,
    calls: HashMap<String, usize>,
    /// Source (`true` = `item_completed`) and text of the last prompt taken
    /// from an event, so a version writing both forms counts a prompt once.
    last_event_prompt: Option<(bool, String)>,
}

pub(crate) fn parse(path: &Path) -> Result<AgentSession> {
    let f = util::open_regular(path)?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut p = Parser {
        s: AgentSession::new(Provider::Codex, String::new(), path.to_path_buf()),
        legacy: false,
        own_id: None,
        is_child: false,
        replay_second: None,
        replay_done: false,
        model: None,
        turn_cwd: None,
        prev_total: None,
        pending_text: String::new(),
        pending_phase: None,
        pending_ts: None,
        calls: HashMap::new(),
        last_event_prompt: None,
    };
    p.s.stats.files = 1;
    p.s.stats.bytes = len;
    let mut stats = std::mem::take(&mut p.s.stats);
    let r = util::for_each_line(f, &mut stats, |line, last, st| {
        if let Some(l) = util::parse_line::<Line>(line, last, st) {
            p.on_line(l, line, st);
        }
    });
    p.s.stats = stats;
    r.map_err(|e| SessionError::io(path, e))?;
    p.flush_text();
    match p.own_id.clone().or_else(|| id_from_file_name(path)) {
        Some(id) => p.s.session_id = id,
        None => {
            return Err(SessionError::Format {
                path: path.to_path_buf(),
                provider: "codex",
                reason: "no session_meta and no thread id in the file name".into(),
            });
        }
    }
    Ok(p.s)
}

impl Parser {
    fn on_line(&mut self, mut l: Line, raw: &[u8], st: &mut super::ParseStats) {
        let ts = l.timestamp.as_deref().and_then(parse_ts);
        let kind = l.kind.take();
        let payload = match l.payload.take() {
            Some(ObjOr::Obj(p)) => p,
            Some(ObjOr::Other(_)) => {
                st.bad_lines += 1;
                return;
            }
            None => {
                if l.record_type.0.is_some() {
                    return; // legacy {"record_type":"state"}
                }
                if kind.is_none() {
                    // Legacy first line: bare SessionMeta.
                    if let Some(id) = l.id.take()
                        && self.own_id.is_none()
                    {
                        self.legacy = true;
                        self.s.conversation_id = Some(id.clone());
                        self.own_id = Some(id);
                        self.s.see_ts(ts);
                    } else {
                        st.unknown_records += 1;
                    }
                    return;
                }
                // Legacy: the line itself is a ResponseItem.
                match serde_json::from_slice::<Payload>(raw) {
                    Ok(p) => {
                        self.legacy = true;
                        self.on_response_item(p, ts);
                    }
                    Err(_) => st.bad_lines += 1,
                }
                return;
            }
        };
        let kind = kind.unwrap_or_default();

        // Replay region of a child rollout (see module docs).
        if let Some(sec) = self.replay_second {
            if ts.map(|t| t.div_euclid(1000)) == Some(sec) {
                if kind == "event_msg" && payload.kind.as_deref() == Some("token_count") {
                    self.token_count(&payload, ts, true, st);
                }
                st.replayed_skipped += 1;
                return;
            }
            self.replay_second = None;
            self.replay_done = true;
        }

        if kind != "session_meta" {
            self.s.see_ts(ts);
        }
        match kind.as_str() {
            "session_meta" => self.on_session_meta(payload, ts, st),
            "turn_context" => {
                if let Some(m) = payload.model.0.clone() {
                    self.s.see_model(&m);
                    self.model = Some(m);
                }
                if let Some(c) = payload.cwd.0.clone() {
                    if self.s.cwd.is_none() {
                        self.s.cwd = Some(c.clone());
                    }
                    self.turn_cwd = Some(c);
                }
            }
            "response_item" => self.on_response_item(payload, ts),
            "event_msg" => self.on_event(payload, ts, st),
            "compacted" => {}
            _ => st.unknown_records += 1,
        }
    }

    fn on_session_meta(&mut self, mut p: Payload, ts: Option<i64>, st: &mut super::ParseStats) {
        let id = p.id.take();
        match (&self.own_id, id) {
            (None, Some(id)) => {
                self.s
                    .see_ts(p.timestamp.as_deref().and_then(parse_ts).or(ts));
                self.s.conversation_id = Some(id.clone());
                self.own_id = Some(id);
                self.s.cwd = p.cwd.take().or(self.s.cwd.take());
                self.s.agent_version = p.cli_version.take();
                self.s.git_branch = p
                    .git
                    .as_ref()
                    .and_then(|g| g.obj())
                    .and_then(|g| g.branch.0.clone());
                self.s.parent_session_id = parent_of(&p);
                self.is_child = self.s.parent_session_id.is_some();
            }
            (Some(own), Some(id)) if *own != id => {
                // A copied parent meta: the replay burst starts here.
                if self.is_child && !self.replay_done {
                    self.replay_second = ts.map(|t| t.div_euclid(1000));
                }
                st.replayed_skipped += 1;
            }
            _ => {}
        }
    }

    fn flush_text(&mut self) {
        if self.pending_text.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.pending_text);
        self.s.responses.push(LlmResponse {
            prompt_index: self.s.current_prompt(),
            subagent: None,
            ts_ms: self.pending_ts.take(),
            model: self.model.clone(),
            native_id: None,
            request_id: None,
            phase: self.pending_phase.take(),
            text,
            text_truncated: false,
            tokens: None,
        });
    }

    fn on_response_item(&mut self, mut p: Payload, ts: Option<i64>) {
        match p.kind.as_deref().unwrap_or("") {
            "message" => {
                let role = p.role.take().unwrap_or_default();
                let mut text = String::new();
                match std::mem::take(&mut p.content) {
                    Content::Text(t) => text = t,
                    Content::Blocks(bs) => {
                        for mut b in bs {
                            if matches!(
                                b.kind.as_deref(),
                                Some("input_text" | "output_text" | "text")
                            ) && let Some(t) = b.text.take()
                            {
                                if !text.is_empty() {
                                    text.push('\n');
                                }
                                text.push_str(&t);
                            }
                        }
                    }
                }
                match role.as_str() {
                    "assistant" => {
                        if !self.pending_text.is_empty() {
                            self.pending_text.push('\n');
                        }
                        self.pending_text.push_str(&text);
                        self.pending_ts = self.pending_ts.or(ts);
                        if let Some(ph) = p.phase.take() {
                            self.pending_phase = Some(ph);
                        }
                    }
                    // Modern rollouts carry the typed prompt as
                    // event_msg/user_message; user response items also hold
                    // injected context, so only legacy files use them.
                    "user" if self.legacy && !is_injected(&text) => {
                        self.flush_text();
                        self.s.push_prompt(ts, text);
                    }
                    _ => {}
                }
            }
            "function_call" | "custom_tool_call" | "local_shell_call" | "web_search_call"
            | "tool_search_call" => self.on_call(p, ts),
            "tool_search_output" => self.tool_search_ended(&p, ts),
            "function_call_output" | "custom_tool_call_output" => {
                if let Some(id) = p.call_id.as_deref()
                    && let Some(&ti) = self.calls.get(id)
                    && let Some(t) = self.s.tools.get_mut(ti)
                    && t.end_ms.is_none()
                {
                    t.end_ms = ts;
                    let out = p.output.unwrap_or(OutputStatus(ToolStatus::Unknown, None));
                    t.status = out.0;
                    // A structured event (exec_command_end, a completed
                    // CommandExecution item) already said it exactly.
                    t.exit_code = t.exit_code.or(out.1);
                }
            }
            _ => {}
        }
    }

    fn on_call(&mut self, mut p: Payload, ts: Option<i64>) {
        let kind = p.kind.take().unwrap_or_default();
        let name = match kind.as_str() {
            "local_shell_call" => "local_shell".to_string(),
            "web_search_call" => "web_search".to_string(),
            "tool_search_call" => "tool_search".to_string(),
            _ => p.name.take().unwrap_or_default(),
        };
        let args: Value = match p.arguments.take() {
            Some(Value::String(a)) => serde_json::from_str(&a).unwrap_or(Value::String(a)),
            Some(v) => v,
            None => Value::Null,
        };
        let (name, mcp_at) = mcp_name(name, p.namespace.take());
        if let Some(id) = p.call_id.as_deref()
            && let Some(&ti) = self.calls.get(id)
            && self.s.tools.get(ti).is_some_and(|t| t.mcp.is_some())
        {
            return; // an `mcp_tool_call_end` came first and made the call
        }
        let mut command: Option<String> = None;
        let mut cwd: Option<String> = None;
        let mut paths: Vec<ToolPath> = Vec::new();
        let mut domains: Vec<String> = Vec::new();
        let s = |v: &Value, k: &str| jstr(v, k).map(str::to_string);
        let argv_or_str = |v: Option<&Value>| -> Option<String> {
            match v? {
                Value::String(s) => Some(s.clone()),
                Value::Array(a) => Some(util::join_argv(
                    &a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect::<Vec<_>>(),
                )),
                _ => None,
            }
        };
        match name.as_str() {
            "shell" | "shell_command" | "container.exec" => {
                command = argv_or_str(args.get("command"));
                cwd = s(&args, "workdir");
            }
            "exec_command" => {
                command = s(&args, "cmd").or_else(|| argv_or_str(args.get("command")));
                cwd = s(&args, "workdir");
            }
            "local_shell" => {
                let action = p.action.as_ref();
                command = argv_or_str(action.and_then(|a| a.get("command")));
                cwd = action.and_then(|a| s(a, "working_directory"));
            }
            "apply_patch" => {
                let text = p.input.take().or_else(|| s(&args, "input"));
                if let Some(t) = &text {
                    paths = util::apply_patch_paths(t);
                }
                command = text;
            }
            "update_plan" => {
                if let Some(plan) = args.get("plan").and_then(|v| v.as_array()) {
                    self.s.plan = plan
                        .iter()
                        .filter_map(|x| {
                            Some(PlanStep {
                                step: jstr(x, "step")?.to_string(),
                                status: jstr(x, "status").map(str::to_string),
                            })
                        })
                        .collect();
                }
            }
            "read_file" | "view_image" | "list_dir" => {
                if let Some(path) = s(&args, "file_path")
                    .or_else(|| s(&args, "path"))
                    .or_else(|| s(&args, "dir_path"))
                {
                    paths.push(ToolPath::new(path, PathAccess::Read));
                }
            }
            "grep_files" => {
                command = s(&args, "pattern");
                if let Some(path) = s(&args, "path") {
                    paths.push(ToolPath::new(path, PathAccess::Read));
                }
            }
            "web_search" => {
                let action = p.action.as_ref();
                command = action
                    .and_then(|a| s(a, "query"))
                    .or_else(|| action.and_then(|a| s(a, "url")));
                if let Some(d) = action
                    .and_then(|a| jstr(a, "url"))
                    .and_then(util::url_domain)
                {
                    domains.push(d);
                }
            }
            "spawn_agent" => {
                command = s(&args, "message").or_else(|| s(&args, "prompt"));
            }
            "tool_search" => command = s(&args, "query"),
            _ => {
                command = s(&args, "cmd")
                    .or_else(|| s(&args, "command"))
                    .or_else(|| p.input.take());
            }
        }
        let mcp = mcp_at.map(|(server, tool)| McpCall {
            server,
            tool,
            arguments: Some(args),
        });
        let ev = ToolEvent {
            prompt_index: self.s.current_prompt(),
            subagent: None,
            category: util::tool_category(&name),
            name,
            call_id: p.call_id.take(),
            command,
            command_truncated: false,
            cwd: cwd.or_else(|| self.turn_cwd.clone()),
            status: ToolStatus::Unknown,
            exit_code: None,
            start_ms: ts,
            end_ms: None,
            paths,
            domains,
            mcp,
        };
        if let Some(id) = &ev.call_id {
            self.calls.insert(id.clone(), self.s.tools.len());
        }
        self.s.tools.push(ev);
    }

    fn on_event(&mut self, mut p: Payload, ts: Option<i64>, st: &mut super::ParseStats) {
        match p.kind.as_deref().unwrap_or("") {
            "user_message" => {
                let text = p.message.take().unwrap_or_default();
                self.event_prompt(false, ts, text);
            }
            // Codex 0.169 writes no user_message event; the typed prompt is
            // only an item_completed `UserMessage` item.
            "item_completed" => match p.item.as_mut() {
                Some(ObjOr::Obj(item)) if item.kind.as_deref() == Some("UserMessage") => {
                    let mut text = String::new();
                    if let Content::Blocks(bs) = std::mem::take(&mut item.content) {
                        for mut b in bs {
                            if b.kind.as_deref() == Some("text")
                                && let Some(t) = b.text.take()
                            {
                                if !text.is_empty() {
                                    text.push('\n');
                                }
                                text.push_str(&t);
                            }
                        }
                    }
                    self.event_prompt(true, ts, text);
                }
                // Codex 0.169 ends a command with a `CommandExecution` item
                // keyed by the call id (no exec_command_end event).
                Some(ObjOr::Obj(item)) if item.kind.as_deref() == Some("CommandExecution") => {
                    if let Some(code) = item.exit_code.as_ref().and_then(util::exit_code_of) {
                        self.call_ended(item.id.as_deref(), None, Some(code), ts);
                    }
                }
                // Codex 0.169 ends every MCP call with a `McpToolCall` item
                // keyed by the call id; its status is the only record of a
                // refusal (the `function_call_output` reads as a success).
                Some(ObjOr::Obj(item)) if item.kind.as_deref() == Some("McpToolCall") => {
                    let failed = mcp_item_failed(item);
                    let ended = McpEnd {
                        call_id: item.id.take(),
                        server: item.server.take(),
                        tool: item.tool.take(),
                        arguments: item.arguments.take(),
                        failed,
                    };
                    self.mcp_call_ended(ended, ts);
                }
                _ => {}
            },
            "token_count" => self.token_count(&p, ts, false, st),
            "error" => {
                let kind = match p.codex_error_info.as_ref() {
                    Some(Value::String(s)) => ErrorKind::from_code(s.clone()),
                    Some(Value::Object(m)) => {
                        ErrorKind::from_code(m.keys().next().cloned().unwrap_or_default())
                    }
                    _ => ErrorKind::Error,
                };
                self.push_error(ts, kind, p.message.take().unwrap_or_default());
            }
            "turn_aborted" => {
                let reason = p.reason.take().unwrap_or_default();
                self.push_error(ts, ErrorKind::TurnAborted, reason);
            }
            "thread_name_updated" => {
                if let Some(n) = p.thread_name.take() {
                    self.s.title = Some(n);
                }
            }
            "mcp_tool_call_end" => {
                let ended = McpEnd::of_event(&mut p);
                self.mcp_call_ended(ended, ts);
            }
            "exec_command_end" | "patch_apply_end" => {
                // Extended persistence: refine the outcome of a paired call.
                let code = p.exit_code.as_ref().and_then(util::exit_code_of);
                self.call_ended(p.call_id.as_deref(), p.success.0, code, ts);
            }
            _ => {}
        }
    }

    /// The end record of a paired call (`exec_command_end`…, or a completed
    /// `CommandExecution` item): its success flag and exit code are exact,
    /// so they set the status and the exit code.
    fn call_ended(
        &mut self,
        call_id: Option<&str>,
        success: Option<bool>,
        code: Option<i32>,
        ts: Option<i64>,
    ) {
        let Some(t) = call_id
            .and_then(|id| self.calls.get(id))
            .and_then(|&ti| self.s.tools.get_mut(ti))
        else {
            return;
        };
        let st = match (success, code) {
            (Some(true), _) | (None, Some(0)) => Some(ToolStatus::Ok),
            (Some(false), _) | (None, Some(_)) => Some(ToolStatus::Failed),
            _ => None,
        };
        if let Some(s) = st {
            t.status = s;
        }
        if code.is_some() {
            t.exit_code = code;
        }
        if t.end_ms.is_none() {
            t.end_ms = ts;
        }
    }

    /// `tool_search_output`: the end of the search it answers (by call id,
    /// else the latest search without an end).
    fn tool_search_ended(&mut self, p: &Payload, ts: Option<i64>) {
        let ti = match p.call_id.as_deref() {
            Some(id) => self.calls.get(id).copied(),
            None => self
                .s
                .tools
                .iter()
                .rposition(|t| t.name == "tool_search" && t.end_ms.is_none()),
        };
        let Some(t) = ti.and_then(|ti| self.s.tools.get_mut(ti)) else {
            return;
        };
        if t.end_ms.is_none() {
            t.end_ms = ts;
            t.status = match p.status.as_deref() {
                Some("failed" | "incomplete") => ToolStatus::Failed,
                _ => ToolStatus::Ok,
            };
        }
    }

    /// The end of an MCP call (`mcp_tool_call_end` with extended
    /// persistence, or a completed `McpToolCall` item): the server, tool and
    /// arguments of the call with its call id, and its outcome; a call not
    /// seen before is made here, so a call is never counted twice.
    fn mcp_call_ended(&mut self, mut end: McpEnd, ts: Option<i64>) {
        let known = end
            .call_id
            .as_deref()
            .and_then(|id| self.calls.get(id))
            .copied();
        let ti = match known {
            Some(ti) => ti,
            None => {
                let name = match (&end.server, &end.tool) {
                    (Some(s), Some(t)) => format!("mcp__{s}__{t}"),
                    _ => "mcp".to_string(),
                };
                self.s.tools.push(ToolEvent {
                    prompt_index: self.s.current_prompt(),
                    subagent: None,
                    category: ToolCategory::Mcp,
                    name,
                    call_id: end.call_id.clone(),
                    command: None,
                    command_truncated: false,
                    cwd: self.turn_cwd.clone(),
                    status: ToolStatus::Unknown,
                    exit_code: None,
                    start_ms: None,
                    end_ms: None,
                    paths: Vec::new(),
                    domains: Vec::new(),
                    mcp: None,
                });
                let ti = self.s.tools.len() - 1;
                if let Some(id) = end.call_id.take() {
                    self.calls.insert(id, ti);
                }
                ti
            }
        };
        let Some(t) = self.s.tools.get_mut(ti) else {
            return;
        };
        t.category = ToolCategory::Mcp;
        let mcp = t.mcp.get_or_insert(McpCall {
            server: None,
            tool: None,
            arguments: None,
        });
        mcp.server = end.server.or(mcp.server.take());
        mcp.tool = end.tool.or(mcp.tool.take());
        if mcp.arguments.is_none() {
            mcp.arguments = end.arguments;
        }
        if let Some(failed) = end.failed {
            t.status = if failed {
                ToolStatus::Failed
            } else {
                ToolStatus::Ok
            };
        }
        if t.end_ms.is_none() {
            t.end_ms = ts;
        }
    }

    fn event_prompt(&mut self, from_item: bool, ts: Option<i64>, text: String) {
        if let Some((src, last)) = &self.last_event_prompt
            && *src != from_item
            && *last == text
        {
            self.last_event_prompt = None;
            return;
        }
        self.flush_text();
        self.last_event_prompt = Some((from_item, text.clone()));
        self.s.push_prompt(ts, text);
    }

    fn push_error(&mut self, ts: Option<i64>, kind: ErrorKind, message: String) {
        self.s.errors.push(ErrorEvent {
            prompt_index: self.s.current_prompt(),
            subagent: None,
            ts_ms: ts,
            kind,
            message,
        });
    }

    fn token_count(
        &mut self,
        p: &Payload,
        ts: Option<i64>,
        replay: bool,
        st: &mut super::ParseStats,
    ) {
        let Some(info) = p.info.as_ref().and_then(|i| i.obj()) else {
            return; // rate-limit-only refresh
        };
        let total = info
            .total_token_usage
            .as_ref()
            .and_then(|u| u.obj())
            .copied();
        let last = info
            .last_token_usage
            .as_ref()
            .and_then(|u| u.obj())
            .copied();
        let delta = match (total, self.prev_total) {
            (Some(t), Some(prev)) if t == prev => {
                if !replay {
                    st.repeated_usage_skipped += 1;
                }
                None
            }
            (Some(t), Some(prev)) if t.ge(&prev) => Some(t.minus(&prev)),
            (Some(t), Some(_)) => Some(last.unwrap_or(t)),
            (Some(t), None) => Some(t),
            (None, _) => last,
        };
        if total.is_some() {
            self.prev_total = total;
        }
        if replay {
            return;
        }
        let Some(delta) = delta else { return };
        let tokens = delta.normalized();
        if tokens.is_zero() {
            return;
        }
        let text = std::mem::take(&mut self.pending_text);
        self.s.responses.push(LlmResponse {
            prompt_index: self.s.current_prompt(),
            subagent: None,
            ts_ms: ts,
            model: self.model.clone(),
            native_id: None,
            request_id: None,
            phase: self.pending_phase.take(),
            text,
            text_truncated: false,
            tokens: Some(tokens),
        });
        self.pending_ts = None;
    }
}

/// What the end record of an MCP call says (`mcp_tool_call_end` or a
/// `McpToolCall` item).
struct McpEnd {
    call_id: Option<String>,
    server: Option<String>,
    tool: Option<String>,
    arguments: Option<Value>,
    /// `None` when the record does not say.
    failed: Option<bool>,
}

impl McpEnd {
    /// `mcp_tool_call_end{call_id, invocation{server, tool, arguments},
    /// result}`: `Err`, or an `Ok` result with `isError`, is a failure.
    fn of_event(p: &mut Payload) -> McpEnd {
        let mut invocation = match p.invocation.take() {
            Some(ObjOr::Obj(i)) => Some(i),
            _ => None,
        };
        let failed = match &p.result {
            Some(ObjOr::Obj(r)) if r.err.is_some() => Some(true),
            Some(ObjOr::Obj(r)) => match &r.ok {
                Some(ObjOr::Obj(ok)) => Some(ok.is_error.0 == Some(true)),
                _ => None,
            },
            _ => None,
        };
        McpEnd {
            call_id: p.call_id.take(),
            server: invocation.as_mut().and_then(|i| i.server.take()),
            tool: invocation.as_mut().and_then(|i| i.tool.take()),
            arguments: invocation.and_then(|i| i.arguments),
            failed,
        }
    }
}

/// Whether a `McpToolCall` item says its call failed: status `failed`, an
/// `error`, or a result with `isError`; `completed` (or no status) with a
/// result is a success; any other status (or none, and no result) says
/// nothing.
fn mcp_item_failed(item: &Item) -> Option<bool> {
    let is_error = match &item.result {
        Some(ObjOr::Obj(r)) => Some(r.is_error.0 == Some(true)),
        _ => None,
    };
    let has_error = item.error.as_ref().is_some_and(|e| !e.is_null());
    match item.status.as_deref() {
        Some("failed") => Some(true),
        _ if has_error => Some(true),
        Some("completed") | None => is_error,
        Some(_) => None,
    }
}

/// An MCP call's server and tool, each when the record says it.
type ServerTool = (Option<String>, Option<String>);

/// The name a call is shown by, and the (server, tool) of an MCP call: a
/// `function_call` in an `mcp__SERVER__` namespace (with or without the
/// trailing `__`) is `mcp__SERVER__NAME`; an un-namespaced `mcp__S__T` name
/// splits only one way ([`crate::mcp::split_unambiguous`]).
fn mcp_name(name: String, namespace: Option<String>) -> (String, Option<ServerTool>) {
    let server = namespace
        .as_deref()
        .and_then(|ns| ns.strip_prefix("mcp__"))
        .map(|s| s.strip_suffix("__").unwrap_or(s))
        .filter(|s| !s.is_empty());
    if let Some(server) = server {
        let shown = format!("mcp__{server}__{name}");
        return (shown, Some((Some(server.to_string()), Some(name))));
    }
    if name.starts_with("mcp__") {
        let split = crate::mcp::split_unambiguous(&name);
        let (server, tool) = split.map_or((None, None), |(s, t)| (Some(s), Some(t)));
        return (name, Some((server, tool)));
    }
    (name, None)
}

/// User-role text Codex injects as context rather than a typed prompt.
fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<environment_context>")
        || t.starts_with("<user_instructions>")
        || t.starts_with("# AGENTS.md instructions")
        || t.starts_with("<INSTRUCTIONS>")
        || t.starts_with("<skills_instructions>")
        || t.starts_with("<permissions instructions>")
        || t.is_empty()
}

/// Latest cumulative usage and plan found in a rollout tail (discovery fast
/// path; at most the final 1 MiB is read).
#[derive(Debug, Clone, Default)]
pub(crate) struct TailSummary {
    pub total: Option<TokenUsage>,
    pub model: Option<String>,
    pub plan: Vec<PlanStep>,
}

pub(crate) fn tail_summary(path: &Path) -> Result<TailSummary> {
    let buf = util::read_tail(path, 1024 * 1024)?;
    let mut out = TailSummary::default();
    let mut st = super::ParseStats::default();
    for line in buf.split(|&b| b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let Some(mut l) = util::parse_line::<Line>(line, false, &mut st) else {
            continue;
        };
        let Some(ObjOr::Obj(mut p)) = l.payload.take() else {
            continue;
        };
        match (l.kind.as_deref(), p.kind.as_deref()) {
            (Some("event_msg"), Some("token_count")) => {
                if let Some(t) = p
                    .info
                    .as_ref()
                    .and_then(|i| i.obj())
                    .and_then(|i| i.total_token_usage.as_ref()?.obj().copied())
                {
                    out.total = Some(t.normalized());
                }
            }
            (Some("turn_context"), _) => {
                if let Some(m) = p.model.take() {
                    out.model = Some(m);
                }
            }
            (Some("response_item"), Some("function_call"))
                if p.name.as_deref() == Some("update_plan") =>
            {
                if let Some(a) = p.arguments.as_ref().and_then(Value::as_str)
                    && let Ok(v) = serde_json::from_str::<Value>(a)
                    && let Some(plan) = v.get("plan").and_then(|v| v.as_array())
                {
                    out.plan = plan
                        .iter()
                        .filter_map(|x| {
                            Some(PlanStep {
                                step: jstr(x, "step")?.to_string(),
                                status: jstr(x, "status").map(str::to_string),
                            })
                        })
                        .collect();
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_exit_codes() {
        let ok = |c| OutputStatus(ToolStatus::Ok, c);
        let failed = |c| OutputStatus(ToolStatus::Failed, c);
        assert_eq!(output_status("Exit code: 0\nWall time: 1s"), ok(Some(0)));
        assert_eq!(
            output_status("Exit code: 2\nWall time: 1s"),
            failed(Some(2))
        );
        assert_eq!(
            output_status(r#"{"output":"x","metadata":{"exit_code":1,"duration_seconds":0.1}}"#),
            failed(Some(1))
        );
        assert_eq!(
            output_status("Success. Updated the following files:\nM a"),
            ok(None)
        );
        assert_eq!(
            output_status("apply_patch verification failed: x"),
            failed(None)
        );
        assert_eq!(
            output_status("Chunk ID: 1\nProcess exited with code 3\n"),
            failed(Some(3))
        );
        // Codex 0.169's unified exec header, then the command's output.
        assert_eq!(
            output_status(
                "Chunk ID: 529bee\nWall time: 0.0000 seconds\nProcess exited with code 3\nOriginal token count: 7\nOutput:\ncheck failed: 2 problems\n"
            ),
            failed(Some(3))
        );
        // A call Codex did not run: its approval was refused.
        assert_eq!(
            output_status(
                r#"exec_command failed: CreateProcess { message: "Rejected(\"approval request failed\")" }"#
            ),
            failed(None)
        );
        // Output that merely says something failed later is the command's.
        assert_eq!(output_status("all tests passed, none failed: ok"), ok(None));
        // A code the command printed is not the command's exit code.
        assert_eq!(
            output_status(
                "Chunk ID: 1\nWall time: 1.0 seconds\nProcess running with session ID 7\nOutput:\nProcess exited with code 9\nExit code: 9\n"
            ),
            ok(None)
        );
    }

    #[test]
    fn file_name_id() {
        let p = Path::new("rollout-2026-03-02T10-00-00-019c0000-0000-7000-8000-00000000abcd.jsonl");
        assert_eq!(
            id_from_file_name(p).as_deref(),
            Some("019c0000-0000-7000-8000-00000000abcd")
        );
        assert_eq!(id_from_file_name(Path::new("rollout-x.jsonl")), None);
    }

    /// A `McpToolCall` item ends its call (found by id, made when its
    /// function_call is missing) and says its outcome; the
    /// function_call_output after it changes nothing.
    #[test]
    fn mcp_tool_call_item_ends_the_call() {
        let dir = std::env::temp_dir().join(format!("agentsight-codex-mcp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let meta = r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"019c0000-0000-7000-8000-00000000abce","cwd":"/w"}}"#;
        let call = |id: &str| {
            format!(
                r#"{{"timestamp":"2026-01-01T00:00:01.000Z","type":"response_item","payload":{{"type":"function_call","name":"write_file","namespace":"mcp__fs","arguments":"{{\"path\":\"/w/a\"}}","call_id":"{id}"}}}}"#
            )
        };
        let item = |id: &str, rest: &str| {
            format!(
                r#"{{"timestamp":"2026-01-01T00:00:02.000Z","type":"event_msg","payload":{{"type":"item_completed","item":{{"type":"McpToolCall","id":"{id}","server":"fs","tool":"write_file","arguments":{{"path":"/w/a"}}{rest}}}}}}}"#
            )
        };
        let output = |id: &str| {
            format!(
                r#"{{"timestamp":"2026-01-01T00:00:03.000Z","type":"response_item","payload":{{"type":"function_call_output","call_id":"{id}","output":"Wall time: 0.01 seconds\nOutput:\n{{}}"}}}}"#
            )
        };
        let lines = [
            meta.to_string(),
            call("c1"),
            item(
                "c1",
                r#","status":"failed","result":{"content":[],"isError":true}"#,
            ),
            output("c1"),
            call("c2"),
            item("c2", r#","status":"completed","result":{"content":[]}"#),
            output("c2"),
            call("c3"),
            item(
                "c3",
                r#","status":"completed","result":{"content":[],"isError":true}"#,
            ),
            call("c4"),
            item(
                "c4",
                r#","status":"completed","error":{"message":"timed out"}"#,
            ),
            call("c5"),
            item("c5", r#","status":"inProgress""#),
            // No function_call record: the item makes the call once.
            item("c6", r#","status":"completed","result":{"content":[]}"#),
            output("c6"),
        ];
        let f = dir.join("mcp-items.jsonl");
        std::fs::write(&f, lines.join("\n") + "\n").unwrap();
        let s = crate::parse_file(Provider::Codex, &f).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        // (name, call id, status, start, end)
        type Got<'a> = (
            &'a str,
            Option<&'a str>,
            ToolStatus,
            Option<i64>,
            Option<i64>,
        );
        let got: Vec<Got> = s
            .tools
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.call_id.as_deref(),
                    t.status,
                    t.start_ms,
                    t.end_ms,
                )
            })
            .collect();
        let (t1, t2) = (
            parse_ts("2026-01-01T00:00:01.000Z"),
            parse_ts("2026-01-01T00:00:02.000Z"),
        );
        let w = "mcp__fs__write_file";
        use ToolStatus::*;
        assert_eq!(
            got,
            [
                (w, Some("c1"), Failed, t1, t2),
                (w, Some("c2"), Ok, t1, t2),
                (w, Some("c3"), Failed, t1, t2),
                (w, Some("c4"), Failed, t1, t2),
                (w, Some("c5"), Unknown, t1, t2),
                (w, Some("c6"), Ok, None, t2),
            ]
        );
        let c6 = s.tools[5].mcp.as_ref().expect("mcp");
        assert_eq!(
            (
                c6.server.as_deref(),
                c6.tool.as_deref(),
                c6.arguments.clone()
            ),
            (
                Some("fs"),
                Some("write_file"),
                Some(serde_json::json!({"path": "/w/a"}))
            )
        );
        assert_eq!(s.stats.bad_lines, 0);
    }

    /// Codex 0.169 records the typed prompt only as an item_completed
    /// `UserMessage`; a file that also has the user_message event counts it once.
    #[test]
    fn item_completed_user_message_is_the_prompt() {
        let dir =
            std::env::temp_dir().join(format!("agentsight-codex-item-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let meta = r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"019c0000-0000-7000-8000-00000000abcd","cwd":"/w"}}"#;
        let item = r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"UserMessage","id":"u1","content":[{"type":"text","text":"fix it","text_elements":[]}]}}}"#;
        let agent = r#"{"timestamp":"2026-01-01T00:00:02.000Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"AgentMessage","id":"m1","content":[{"type":"Text","text":"ok"}]}}}"#;
        let legacy = r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"user_message","message":"fix it"}}"#;
        for (name, lines, n) in [
            ("only-item.jsonl", vec![meta, item, agent], 1),
            ("both.jsonl", vec![meta, legacy, item, agent], 1),
            ("two-prompts.jsonl", vec![meta, item, agent, item], 2),
        ] {
            let f = dir.join(name);
            std::fs::write(&f, lines.join("\n") + "\n").unwrap();
            let s = crate::parse_file(Provider::Codex, &f).unwrap();
            assert_eq!(s.prompt_count, n, "{name}");
            assert_eq!(s.prompts[0].text, "fix it", "{name}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
