//! Live turn rules for Claude Code transcripts
//! (`~/.claude/projects/<encoded-cwd>/<session-id>.jsonl`).
//!
//! Per line, oldest to newest: `isSidechain` lines are skipped (subagent
//! traffic), `isMeta` lines ignored (injected text). A prompt or tool result
//! opens the turn; an assistant line with `stop_reason` end_turn /
//! stop_sequence / stop ends it, `null` or `tool_use` keeps it open; a
//! pending `AskUserQuestion` / `ExitPlanMode` waits on the person; the
//! interrupt text ends it. `isApiErrorMessage` lines never end a turn: they
//! carry the refusal signals (`error: rate_limit | billing_error |
//! authentication_failed`, the 1.x "usage limit reached|<reset>" text), as
//! do `system/api_error` lines once their retries are used up.

use std::collections::HashMap;

use super::wire;
use crate::de::{Content, ObjOr};
use crate::live::{
    PROMPT_CHARS, Signal, TailFacts, TokenTotals, TurnStatus, WaitReason, line_key, newest,
    parse_time,
};
use jiff::Timestamp;

type Line = wire::Line<wire::Tail>;
type Message = wire::Message<wire::Tail>;
type Usage = wire::Usage<wire::Tail>;

/// Record types that are bookkeeping, not conversation: known, ignored.
const BOOKKEEPING: &[&str] = &[
    "summary",
    "file-history-snapshot",
    "queue-operation",
    "attachment",
    "custom-title",
    "ai-title",
    "agent-name",
    "agent-setting",
    "permission-mode",
    "mode",
    "pr-link",
    "last-prompt",
    "bridge-session",
    // Seen with Claude Code 2.1.3xx around requests and at exit
    // (`api-request` itself is read: see `api_request`).
    "api-request-shape",
    "api-request-blob",
    "atis-latch",
    "cost-state",
    "tools-used",
];

/// Prompt text that is the CLI's own (slash commands, their output, caveats),
/// not a person's prompt: it neither opens a turn nor titles the session.
const COMMAND_PREFIXES: &[&str] = &[
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "Caveat:",
];

const INTERRUPT_PREFIX: &str = "[Request interrupted by user";

#[derive(Default)]
struct State {
    usage: HashMap<String, (u64, Usage)>,
    /// Response ids in the order first seen.
    order: Vec<String>,
    no_id_usage: TokenTotals,
}

pub(crate) fn read(lines: &[&str], begin: bool, facts: &mut TailFacts) {
    let mut st = State::default();
    for line in lines {
        let Ok(l) = serde_json::from_str::<Line>(line) else {
            facts.skipped_lines += 1;
            continue;
        };
        one_line(line, l, begin, facts, &mut st);
    }
    let mut tokens = st.no_id_usage;
    for (_, u) in st.usage.values() {
        add_usage(&mut tokens, u);
    }
    tokens.whole_session = begin;
    facts.tokens = tokens;
    let end = |id: Option<&String>| {
        let id = id?;
        let (_, u) = st.usage.get(id)?;
        let mut t = TokenTotals::default();
        add_usage(&mut t, u);
        Some((id.clone(), t))
    };
    facts.response_ends.first = end(st.order.first());
    facts.response_ends.last = end(st.order.last());
}

fn add_usage(t: &mut TokenTotals, u: &Usage) {
    t.input += u.input_tokens.0;
    t.output += u.output_tokens.0;
    t.cache_creation += u.cache_creation_input_tokens.0;
    t.cache_read += u.cache_read_input_tokens.0;
}

fn one_line(raw: &str, l: Line, begin: bool, facts: &mut TailFacts, st: &mut State) {
    if l.is_sidechain.0 == Some(true) || l.is_meta.0 == Some(true) {
        return;
    }
    let kind = l.kind.as_deref().unwrap_or("");
    let time = l.timestamp.as_deref().and_then(parse_time);
    let key = l
        .uuid
        .as_deref()
        .map_or_else(|| line_key(raw), str::to_string);
    match kind {
        "user" | "assistant" | "system" | "progress" => {}
        "api-request" => return api_request(&l, time, facts),
        k if BOOKKEEPING.contains(&k) => return,
        _ => {
            facts.skipped_lines += 1;
            return;
        }
    }
    newest(&mut facts.last_activity, time);
    if let Some(c) = l.cwd.as_deref() {
        facts.cwd = Some(c.to_string());
    }
    if facts.session_id.is_none() {
        facts.session_id = l.session_id.0.clone();
    }
    match kind {
        "user" => user_line(&l, key, begin, facts),
        "assistant" => assistant_line(&l, key, facts, st),
        "system" => system_line(&l, key, facts),
        _ => progress_line(&l, facts),
    }
}

/// `api-request` (2.1.3xx) is written as the CLI sends a request. One of
/// the main conversation (`querySource` `sdk` or `repl_main_thread…`, no
/// `agentId`) means a turn is running even when its prompt is older than
/// the tail (the request records themselves can be 100 KB each); requests
/// of side tasks (titles, suggestions, memories) and subagents are not the
/// person's turn and count for nothing.
fn api_request(l: &Line, time: Option<Timestamp>, facts: &mut TailFacts) {
    let main = l.agent_id.0.is_none()
        && l.query_source
            .as_deref()
            .is_some_and(|q| q == "sdk" || q.starts_with("repl_main_thread"));
    if main {
        newest(&mut facts.last_activity, time);
        facts.turn = TurnStatus::Open;
        facts.signal = None;
    }
}

fn user_line(l: &Line, key: String, begin: bool, facts: &mut TailFacts) {
    if l.is_compact_summary.0 == Some(true) {
        return;
    }
    let Some(msg) = l.message.as_ref().and_then(ObjOr::obj) else {
        return;
    };
    let (text, has_result) = match &msg.content {
        Content::Text(t) => (Some(t.as_str()), false),
        Content::Blocks(bs) => (
            bs.iter()
                .find(|b| b.kind.as_deref() == Some("text"))
                .and_then(|b| b.text.as_ref())
                .map(|p| p.0.as_str()),
            bs.iter().any(|b| b.kind.as_deref() == Some("tool_result")),
        ),
    };
    let text = text.map(str::trim_start);
    if text.is_some_and(|t| t.starts_with(INTERRUPT_PREFIX)) {
        facts.turn = TurnStatus::WaitingOnUser {
            key,
            reason: WaitReason::Interrupted,
        };
        facts.signal = None;
        return;
    }
    if !has_result && text.is_some_and(|t| COMMAND_PREFIXES.iter().any(|p| t.starts_with(p))) {
        return;
    }
    if !has_result && begin && facts.first_prompt.is_none() {
        facts.first_prompt = text.map(|t| crate::util::preview(t, PROMPT_CHARS));
    }
    facts.turn = TurnStatus::Open;
    facts.signal = None;
}

fn assistant_line(l: &Line, key: String, facts: &mut TailFacts, st: &mut State) {
    let msg = l.message.as_ref().and_then(ObjOr::obj);
    if l.is_api_error.0 == Some(true) {
        // Never ends a turn; may be a refusal.
        if let Some(s) = error_line_signal(l, msg) {
            facts.signal = Some(s);
        }
        if facts.turn == TurnStatus::Unknown {
            facts.turn = TurnStatus::Open;
        }
        return;
    }
    let Some(msg) = msg else {
        facts.skipped_lines += 1;
        return;
    };
    facts.signal = None;
    if let Some(m) = msg.model.as_deref().filter(|m| *m != "<synthetic>") {
        facts.model = Some(m.to_string());
    }
    count_usage(msg, st);
    let asks = match &msg.content {
        Content::Blocks(bs) => bs.iter().find_map(|b| match b.name.as_deref() {
            Some("AskUserQuestion") if b.kind.as_deref() == Some("tool_use") => {
                Some(WaitReason::Question)
            }
            Some("ExitPlanMode") if b.kind.as_deref() == Some("tool_use") => {
                Some(WaitReason::PlanApproval)
            }
            _ => None,
        }),
        Content::Text(_) => None,
    };
    facts.turn = match (msg.stop_reason.as_deref(), asks) {
        (Some("end_turn" | "stop_sequence" | "stop"), _) => TurnStatus::Done { key },
        (None | Some("tool_use"), Some(reason)) => TurnStatus::WaitingOnUser { key, reason },
        _ => TurnStatus::Open,
    };
}

fn count_usage(msg: &Message, st: &mut State) {
    let Some(u) = msg.usage.as_ref().and_then(ObjOr::obj).copied() else {
        return;
    };
    let total = u.input_tokens.0
        + u.output_tokens.0
        + u.cache_creation_input_tokens.0
        + u.cache_read_input_tokens.0;
    match msg.id.as_deref() {
        // One response is split over several lines with the same id: keep
        // the largest (final) count once.
        Some(id) => {
            if !st.usage.contains_key(id) {
                st.order.push(id.to_string());
            }
            let slot = st
                .usage
                .entry(id.to_string())
                .or_insert((0, Usage::default()));
            if total >= slot.0 {
                *slot = (total, u);
            }
        }
        None => add_usage(&mut st.no_id_usage, &u),
    }
}

/// The refusal a synthetic `isApiErrorMessage` line carries, if any.
fn error_line_signal(l: &Line, msg: Option<&Message>) -> Option<Signal> {
    let code = match &l.error {
        Some(ObjOr::Other(s)) => s.as_str(),
        _ => "",
    };
    let text = msg
        .map(|m| match &m.content {
            Content::Text(t) => t.clone(),
            Content::Blocks(bs) => bs
                .iter()
                .filter_map(|b| b.text.as_ref().map(|p| p.0.clone()))
                .collect::<Vec<_>>()
                .join("\n"),
        })
        .unwrap_or_default();
    // The codes Claude Code writes (2.1.3xx); other codes (overloaded,
    // server_error, invalid_request, account_on_hold …) are no refusal this
    // module can name, and their text is not searched.
    match code {
        "rate_limit" | "billing_error" => Some(Signal::RateLimited {
            resets_at: usage_limit_reset(&text),
        }),
        "authentication_failed"
        | "oauth_org_not_allowed"
        | "cloud_credential_error"
        | "verification_required" => Some(Signal::AuthRequired),
        "" => text_signal(&text),
        _ => None,
    }
}

/// Signals from the error text alone (older versions wrote no `error` code).
fn text_signal(text: &str) -> Option<Signal> {
    let lower = text.to_ascii_lowercase();
    if let Some(resets_at) = usage_limit_reset(text).map(Some).or_else(|| {
        (lower.contains("usage limit reached")
            || lower.contains("rate limit")
            || lower.contains("hit your")
            || lower.contains("429"))
        .then_some(None)
    }) {
        return Some(Signal::RateLimited { resets_at });
    }
    let auth = lower.contains("/login")
        || lower.contains("invalid api key")
        || lower.contains("authentication_error")
        || lower.contains("oauth token has expired")
        || lower.contains("401");
    auth.then_some(Signal::AuthRequired)
}

/// `Claude AI usage limit reached|<unix seconds>`: the reset time after the bar.
fn usage_limit_reset(text: &str) -> Option<Timestamp> {
    let (_, tail) = text.split_once("usage limit reached|")?;
    let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
    Timestamp::from_second(digits.parse().ok()?).ok()
}

fn system_line(l: &Line, key: String, facts: &mut TailFacts) {
    match l.subtype.as_deref() {
        Some("turn_duration")
            if !matches!(
                facts.turn,
                TurnStatus::Done { .. } | TurnStatus::WaitingOnUser { .. }
            ) && facts.signal.is_none() =>
        {
            facts.turn = TurnStatus::Done { key };
        }
        Some("api_error") => api_error(l, facts),
        _ => {}
    }
}

/// `system/api_error`: while retries remain the turn is open (retrying);
/// the last failed attempt with 429 is rate-limited, with 401 or an
/// `authentication_error` auth required.
fn api_error(l: &Line, facts: &mut TailFacts) {
    let attempt = l.retry_attempt.map(|c| c.0);
    let max = l.max_retries.map(|c| c.0);
    let retrying = matches!((attempt, max), (Some(a), Some(m)) if a < m);
    facts.turn = TurnStatus::Open;
    if retrying {
        facts.signal = None;
        return;
    }
    let Some(ObjOr::Obj(e)) = &l.error else {
        return;
    };
    let mut kinds = Vec::new();
    let mut body = e.error.as_ref().and_then(ObjOr::obj);
    while let Some(b) = body {
        kinds.extend(b.kind.as_deref().map(str::to_string));
        body = b.error.as_deref().and_then(ObjOr::obj);
    }
    let has = |k: &str| kinds.iter().any(|x| x == k);
    facts.signal = match e.status.map(|c| c.0) {
        Some(429) => Some(Signal::RateLimited { resets_at: None }),
        Some(401) => Some(Signal::AuthRequired),
        _ if has("rate_limit_error") => Some(Signal::RateLimited { resets_at: None }),
        _ if has("authentication_error") => Some(Signal::AuthRequired),
        _ => facts.signal,
    };
}

/// Progress during a tool or a subagent: activity; evidence of an open turn
/// only when the tail holds nothing else (hooks also run after a turn ends).
fn progress_line(l: &Line, facts: &mut TailFacts) {
    let kind = l
        .data
        .as_ref()
        .and_then(ObjOr::obj)
        .and_then(|d| d.kind.as_deref());
    if facts.turn == TurnStatus::Unknown && kind.is_some_and(|k| k != "hook_progress") {
        facts.turn = TurnStatus::Open;
    }
}

/// Path facts: the file stem is the session id of that file; a subagent's
/// transcript (`…/subagents/…`, `agent-*.jsonl`) is hidden.
pub(crate) fn from_path(path: &std::path::Path, facts: &mut TailFacts) {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let in_subagents = path.components().any(|c| c.as_os_str() == "subagents");
    facts.session_id = Some(stem.to_string());
    if in_subagents || stem.starts_with("agent-") {
        facts
            .hidden
            .get_or_insert(crate::live::HiddenReason::ClaudeSubagent);
    }
}
