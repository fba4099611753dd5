//! The live tail reader of Copilot CLI's `events.jsonl`.
//!
//! - working: a prompt, `assistant.turn_start`, an `assistant.message` with
//!   tool requests, or a tool execution is the newest turn record;
//! - your turn: `assistant.turn_end` after an `assistant.message` without
//!   tool requests, or `session.shutdown` (the process ended its run);
//! - interrupted: `abort`;
//! - rate limited / auth: `session.error` (`errorType: "rate_limit"` or
//!   status 429 verified on 1.0.102; 401/403 or an `authentication` type as
//!   auth); no retry time is recorded.
//!
//! Records a subagent (`task` tool) wrote carry `agentId`: they count for
//! activity and tokens, but its own turns do not end the parent's (the
//! parent's `task` call is still running). Liveness (`inuse.<pid>.lock`,
//! left behind by a killed process) is not read here.

use std::collections::HashSet;
use std::path::Path;

use super::wire::{Data, Line};
use crate::de::ObjOr;
use crate::live::{
    PROMPT_CHARS, Signal, TailFacts, TokenTotals, TurnStatus, WaitReason, line_key, newest,
    parse_time,
};

pub(crate) fn read(lines: &[&str], begin: bool, facts: &mut TailFacts) {
    let mut tokens = TokenTotals {
        whole_session: begin,
        ..TokenTotals::default()
    };
    let mut seen = HashSet::new();
    // The key of the newest assistant message that asked for no tool: the
    // turn it ends.
    let mut answered: Option<String> = None;
    for line in lines {
        let Ok(l) = serde_json::from_str::<Line>(line) else {
            facts.skipped_lines += 1;
            continue;
        };
        let Some(kind) = l.kind.as_deref() else {
            facts.skipped_lines += 1;
            continue;
        };
        let d = l.data().cloned().unwrap_or_default();
        if let Some(u) = d.usage.as_ref().and_then(ObjOr::obj)
            && kind == "session.usage_record"
            && u.key().is_none_or(|k| seen.insert(k))
        {
            let t = u.normalized();
            tokens.input += t.input;
            tokens.output += t.output;
            tokens.cache_read += t.cache_read;
            tokens.cache_creation += t.cache_creation;
        }
        newest(
            &mut facts.last_activity,
            l.timestamp.as_deref().and_then(parse_time),
        );
        let key = l.id.0.clone().unwrap_or_else(|| line_key(line));
        if l.agent_id.0.is_some() {
            continue;
        }
        apply(kind, &d, key, begin, &mut answered, facts);
    }
    facts.tokens = tokens;
}

/// One main-agent record's effect on the facts.
fn apply(
    kind: &str,
    d: &Data,
    key: String,
    begin: bool,
    answered: &mut Option<String>,
    facts: &mut TailFacts,
) {
    match kind {
        "session.start" | "session.resume" => {
            if let Some(id) = d.session_id.as_deref() {
                facts.session_id = Some(id.to_string());
            }
            if let Some(cwd) = d.context.as_ref().and_then(|c| c.obj()?.cwd.0.clone()) {
                facts.cwd = Some(cwd);
            }
            if let Some(m) = d.selected_model.as_deref() {
                facts.model = Some(m.to_string());
            }
        }
        "session.model_change" => {
            if let Some(m) = d.new_model.as_deref() {
                facts.model = Some(m.to_string());
            }
        }
        "user.message" => {
            if begin && facts.first_prompt.is_none() {
                let t = d.content.as_deref().unwrap_or("").trim();
                facts.first_prompt = Some(crate::util::preview(t, PROMPT_CHARS));
            }
            facts.turn = TurnStatus::Open;
            facts.signal = None;
            *answered = None;
        }
        "assistant.turn_start" | "tool.execution_start" | "tool.execution_complete" => {
            facts.turn = TurnStatus::Open;
        }
        "assistant.message" => {
            if let Some(m) = d.model.as_deref() {
                facts.model = Some(m.to_string());
            }
            let asks = d.tool_requests.as_ref().is_some_and(|r| !r.is_empty());
            *answered = (!asks).then_some(key);
            facts.turn = TurnStatus::Open;
            facts.signal = None;
        }
        "assistant.turn_end" => {
            if let Some(k) = answered.clone() {
                facts.turn = TurnStatus::Done { key: k };
            }
        }
        // The run ended: a turn still open ends here; an answer, an error
        // or an interrupt keeps its own key.
        "session.shutdown" if matches!(facts.turn, TurnStatus::Open | TurnStatus::Unknown) => {
            facts.turn = TurnStatus::Done {
                key: answered.clone().unwrap_or(key),
            };
        }
        "session.error" => {
            facts.signal = error_signal(d);
            facts.turn = TurnStatus::Done { key };
        }
        "abort" => {
            facts.turn = TurnStatus::WaitingOnUser {
                key,
                reason: WaitReason::Interrupted,
            };
        }
        _ => {}
    }
}

/// A `session.error` as a refusal signal: a rate limit (type or 429), a
/// refused login (type or 401/403); other errors are none.
fn error_signal(d: &Data) -> Option<Signal> {
    let ty = d.error_type.as_deref().unwrap_or("");
    let status = d.status_code.as_ref().and_then(serde_json::Value::as_u64);
    if ty == "rate_limit" || ty == "quota" || status == Some(429) {
        Some(Signal::RateLimited { resets_at: None })
    } else if ty.contains("auth") || matches!(status, Some(401 | 403)) {
        Some(Signal::AuthRequired)
    } else {
        None
    }
}

/// Nothing the path says beyond the id, which the records carry.
pub(crate) fn from_path(path: &Path, facts: &mut TailFacts) {
    if facts.session_id.is_none() {
        facts.session_id = super::layout::candidate_id(path);
    }
}
