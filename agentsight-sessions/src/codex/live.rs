//! Live turn rules for Codex rollouts
//! (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`).
//!
//! `event_msg` markers: `task_started` / `turn_started` / `user_message`
//! (and their namespaced `…/` forms) open a turn, `task_complete` /
//! `turn_complete` / `turn/completed` end it, `turn_aborted` ends it as an
//! interrupt. `token_count.rate_limits` in all three shapes (flat
//! `primary_used_percent`, nested with `resets_in_seconds`, nested with
//! `resets_at`) says rate-limited at ≥ 100 % or with
//! `rate_limit_reached_type`; `error.codex_error_info` says
//! `usage_limit_exceeded` (rate-limited) or `unauthorized` (auth required).
//! Line 1 (`session_meta`) gives the id, cwd and whether the rollout is a
//! subagent's or `codex exec`'s (hidden).

use jiff::Timestamp;
use serde_json::Value;

use super::wire;
use crate::de::{Content, LStr, ObjOr};
use crate::live::{
    HiddenReason, PROMPT_CHARS, Signal, TailFacts, TokenTotals, TurnStatus, WaitReason, line_key,
    newest, parse_time,
};

type Line = wire::Line<wire::Tail>;
type Payload = wire::Payload<wire::Tail>;

/// Record kinds newer Codex versions write that this reader does not use:
/// known, so not counted as skipped; written during a turn, so activity.
const KNOWN_UNUSED: &[&str] = &[
    "token_usage_record",
    "inter_agent_communication",
    "agent_response_observation",
    "retained_context",
    "world_state",
    "security_risk_score",
    "realtime_item",
];

/// Context Codex injects as user messages: not a person's prompt.
const INJECTED: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "<skills_instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
];

pub(crate) fn read(lines: &[&str], begin: bool, facts: &mut TailFacts) {
    for (i, line) in lines.iter().enumerate() {
        let Ok(l) = serde_json::from_str::<Line>(line) else {
            facts.skipped_lines += 1;
            continue;
        };
        let Some(ObjOr::Obj(p)) = &l.payload else {
            facts.skipped_lines += 1;
            continue;
        };
        let time = l.timestamp.as_deref().and_then(parse_time);
        match l.kind.as_deref().unwrap_or("") {
            // Forks and subagents copy the parent's meta later in the file:
            // only the file's own first line counts.
            "session_meta" if begin && i == 0 => apply_meta(p, facts),
            "session_meta" => {}
            "turn_context" => {
                newest(&mut facts.last_activity, time);
                take(&mut facts.cwd, &p.cwd);
                take(&mut facts.model, &p.model);
            }
            "event_msg" => event(line, p, time, begin, facts),
            "response_item" => {
                newest(&mut facts.last_activity, time);
                response_item(line, p, begin, facts);
            }
            "compacted" => newest(&mut facts.last_activity, time),
            k if KNOWN_UNUSED.contains(&k) => newest(&mut facts.last_activity, time),
            _ => facts.skipped_lines += 1,
        }
    }
}

fn take(slot: &mut Option<String>, v: &LStr) {
    if let Some(s) = v.as_deref().filter(|s| !s.is_empty()) {
        *slot = Some(s.to_string());
    }
}

/// Line 1 read apart from the tail ([`crate::live::read_tail`]).
pub(crate) fn apply_first_line(text: &str, facts: &mut TailFacts) {
    match serde_json::from_str::<Line>(text) {
        Ok(Line {
            kind,
            payload: Some(ObjOr::Obj(p)),
            ..
        }) if kind.as_deref() == Some("session_meta") => apply_meta(&p, facts),
        _ => facts.skipped_lines += 1,
    }
}

fn apply_meta(p: &Payload, facts: &mut TailFacts) {
    take(&mut facts.session_id, &p.id);
    if facts.cwd.is_none() {
        take(&mut facts.cwd, &p.cwd);
    }
    let subagent = match &p.source {
        Some(Value::Object(m)) => m.contains_key("subagent"),
        _ => false,
    } || p.thread_source.as_deref() == Some("subagent");
    let exec = p.originator.as_deref() == Some("codex_exec")
        || matches!(&p.source, Some(Value::String(s)) if s == "exec");
    if subagent {
        facts.hidden = Some(HiddenReason::CodexSubagent);
    } else if exec {
        facts.hidden = Some(HiddenReason::CodexExec);
    }
}

fn turn_key(raw: &str, p: &Payload) -> String {
    [&p.turn_id, &p.id, &p.item_id, &p.call_id]
        .iter()
        .find_map(|v| v.as_deref().filter(|s| !s.is_empty()))
        .map_or_else(|| line_key(raw), str::to_string)
}

fn event(raw: &str, p: &Payload, time: Option<Timestamp>, begin: bool, facts: &mut TailFacts) {
    let kind = p.kind.as_deref().unwrap_or("");
    // `codex/event/task_started` and similar namespaced forms.
    let base = kind.rsplit('/').next().unwrap_or(kind);
    match (kind, base) {
        (_, "task_started" | "turn_started") | ("turn/started", _) => {
            facts.turn = TurnStatus::Open;
            facts.signal = None;
        }
        (_, "user_message") => {
            facts.turn = TurnStatus::Open;
            facts.signal = None;
            if begin && facts.first_prompt.is_none() {
                facts.first_prompt = p
                    .message
                    .as_deref()
                    .map(|m| crate::util::preview(m, PROMPT_CHARS));
            }
        }
        (_, "task_complete" | "turn_complete") | ("turn/completed", _) => {
            facts.turn = TurnStatus::Done {
                key: turn_key(raw, p),
            };
            // A turn that ended on a refusal carries it here.
            if let Some(s) = error_signal(p.error.as_ref().and_then(|e| e.get("codex_error_info")))
            {
                raise(facts, s);
            }
        }
        (_, "turn_aborted") => {
            facts.turn = TurnStatus::WaitingOnUser {
                key: turn_key(raw, p),
                reason: WaitReason::Interrupted,
            };
        }
        (_, "token_count") => {
            token_count(p, time, facts);
            // A rate-limit-only refresh (`info: null`) is not activity.
            if p.info.as_ref().is_some_and(|v| !v.is_null()) {
                newest(&mut facts.last_activity, time);
            }
            return;
        }
        (_, "error") => {
            if let Some(s) = error_signal(p.codex_error_info.as_ref()) {
                raise(facts, s);
            }
        }
        (_, "agent_message") => facts.signal = None,
        _ => {}
    }
    newest(&mut facts.last_activity, time);
}

/// A user `message` item is a prompt (Codex 0.169 writes no `user_message`
/// event) unless it is injected context; other items are mid-turn evidence
/// when the markers are older than the tail. Codex's `request_user_input`
/// tool waits on the person until its output arrives.
fn response_item(raw: &str, p: &Payload, begin: bool, facts: &mut TailFacts) {
    match (p.kind.as_deref().unwrap_or(""), p.role.as_deref()) {
        ("message", Some("user")) => {
            let text = first_text(p);
            if INJECTED.iter().any(|t| text.starts_with(t)) {
                return;
            }
            if begin && facts.first_prompt.is_none() && !text.is_empty() {
                facts.first_prompt = Some(crate::util::preview(text, PROMPT_CHARS));
            }
            facts.turn = TurnStatus::Open;
            facts.signal = None;
        }
        ("message", Some("developer" | "system")) => {}
        ("function_call", _) if p.name.as_deref() == Some("request_user_input") => {
            facts.turn = TurnStatus::WaitingOnUser {
                key: turn_key(raw, p),
                reason: WaitReason::Question,
            };
        }
        ("function_call_output", _) if matches!(facts.turn, TurnStatus::WaitingOnUser { .. }) => {
            facts.turn = TurnStatus::Open;
        }
        _ if facts.turn == TurnStatus::Unknown => facts.turn = TurnStatus::Open,
        _ => {}
    }
}

fn first_text(p: &Payload) -> &str {
    let text = match &p.content {
        Some(Content::Text(t)) => Some(t.as_str()),
        Some(Content::Blocks(bs)) => bs
            .iter()
            .find_map(|b| b.text.as_ref().map(|t| t.0.as_str())),
        None => None,
    };
    text.unwrap_or("").trim()
}

/// Sets a refusal; an error without a reset time keeps the reset the
/// preceding `token_count` gave for the same limit.
fn raise(facts: &mut TailFacts, s: Signal) {
    facts.signal = match (facts.signal, s) {
        (
            Some(Signal::RateLimited { resets_at: Some(r) }),
            Signal::RateLimited { resets_at: None },
        ) => Some(Signal::RateLimited { resets_at: Some(r) }),
        _ => Some(s),
    };
}

fn error_signal(info: Option<&Value>) -> Option<Signal> {
    let (name, inner) = match info? {
        Value::String(s) => (s.as_str(), None),
        Value::Object(m) => {
            let (k, v) = m.iter().next()?;
            (k.as_str(), Some(v))
        }
        _ => return None,
    };
    let status = inner
        .and_then(|v| v.get("http_status_code"))
        .and_then(Value::as_u64);
    match (name, status) {
        ("usage_limit_exceeded", _) | (_, Some(429)) => {
            Some(Signal::RateLimited { resets_at: None })
        }
        ("unauthorized", _) | (_, Some(401)) => Some(Signal::AuthRequired),
        _ => None,
    }
}

fn token_count(p: &Payload, time: Option<Timestamp>, facts: &mut TailFacts) {
    if let Some(total) = p
        .info
        .as_ref()
        .and_then(|i| i.get("total_token_usage"))
        .filter(|v| v.is_object())
    {
        let n = |k: &str| total.get(k).and_then(Value::as_u64).unwrap_or(0);
        let cached = n("cached_input_tokens");
        facts.tokens = TokenTotals {
            input: n("input_tokens").saturating_sub(cached),
            output: n("output_tokens"),
            cache_read: cached,
            cache_creation: 0,
            whole_session: true,
        };
    }
    match p.rate_limits.as_ref() {
        Some(rl) if rl.is_object() => match limit_reached(rl, time) {
            Some(s) => facts.signal = Some(s),
            // Limits below 100 %: any older refusal is over.
            None => {
                if matches!(facts.signal, Some(Signal::RateLimited { .. })) {
                    facts.signal = None;
                }
            }
        },
        _ => {}
    }
}

/// A window at ≥ 100 % or `rate_limit_reached_type` set ⇒ rate-limited; the
/// reset of the exhausted window (the later one when both are).
fn limit_reached(rl: &Value, time: Option<Timestamp>) -> Option<Signal> {
    let mut hit = rl
        .get("rate_limit_reached_type")
        .is_some_and(|v| !v.is_null());
    let mut resets: Option<Timestamp> = None;
    for w in ["primary", "secondary"] {
        let (used, reset) = match rl.get(w) {
            Some(win) if win.is_object() => {
                let used = win.get("used_percent").and_then(Value::as_f64);
                let reset = win
                    .get("resets_at")
                    .and_then(Value::as_i64)
                    .and_then(|s| Timestamp::from_second(s).ok())
                    .or_else(|| relative(win.get("resets_in_seconds"), time));
                (used, reset)
            }
            // The 2025-09 flat shape.
            _ => (
                rl.get(format!("{w}_used_percent")).and_then(Value::as_f64),
                relative(rl.get(format!("{w}_resets_in_seconds")), time),
            ),
        };
        if used.is_some_and(|u| u >= 100.0) {
            hit = true;
            resets = resets.max(reset);
        }
    }
    hit.then_some(Signal::RateLimited { resets_at: resets })
}

fn relative(secs: Option<&Value>, time: Option<Timestamp>) -> Option<Timestamp> {
    let s = secs?.as_i64()?;
    time?.checked_add(jiff::SignedDuration::from_secs(s)).ok()
}

/// Path facts: without a `session_meta` id, the thread id that ends the
/// rollout's name.
pub(crate) fn from_path(path: &std::path::Path, facts: &mut TailFacts) {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if facts.session_id.is_none() && stem.len() >= 36 {
        facts.session_id = stem.get(stem.len() - 36..).map(str::to_string);
    }
}
