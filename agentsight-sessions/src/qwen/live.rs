//! Live turn rules for Qwen Code chats (`…/projects/<project>/chats/
//! <sessionId>.jsonl`). Qwen Code 0.24.4 keeps no lock or registry file for
//! a headless run (the `chats/<id>.runtime.json` sidecar its code knows was
//! not written by `qwen -p`): liveness is the process, the state is the
//! newest turn record. A `user` prompt opens a turn; an `assistant` record
//! with a `functionCall` keeps it open (its results go back to the model),
//! as does a `tool_result`; an `assistant` record with text and no call
//! ends it. A `ui_telemetry` `qwen-code.api_error` (written once the CLI
//! gave up retrying) ends the turn: HTTP 429 / `RateLimitError` is
//! rate-limited, 401 / 403 / `AuthenticationError` auth required. Other
//! `system` records are bookkeeping. The format cannot say that a tool waits
//! for an approval (nothing is written until the call completes) nor that
//! the model is streaming.

use std::path::Path;

use super::wire::Line;
use crate::de::ObjOr;
use crate::live::{PROMPT_CHARS, Signal, TailFacts, TokenTotals, TurnStatus, newest, parse_time};

pub(crate) fn read(lines: &[&str], begin: bool, facts: &mut TailFacts) {
    let mut tokens = TokenTotals {
        whole_session: begin,
        ..TokenTotals::default()
    };
    for line in lines {
        let Ok(l) = serde_json::from_str::<Line>(line) else {
            facts.skipped_lines += 1;
            continue;
        };
        if let Some(id) = l.session_id.as_deref() {
            facts.session_id = Some(id.to_string());
        }
        if let Some(cwd) = l.cwd.as_deref() {
            facts.cwd = Some(cwd.to_string());
        }
        let ts = l.timestamp.as_deref().and_then(parse_time);
        let key = l.uuid.0.clone().unwrap_or_default();
        let side = l.is_sidechain == Some(true);
        match l.kind.as_deref().unwrap_or("") {
            "user" if !side => {
                newest(&mut facts.last_activity, ts);
                if begin && facts.first_prompt.is_none() {
                    let t = super::text_of(&l, false);
                    facts.first_prompt = Some(crate::util::preview(t.trim(), PROMPT_CHARS));
                }
                facts.turn = TurnStatus::Open;
                facts.signal = None;
            }
            "assistant" => {
                newest(&mut facts.last_activity, ts);
                if let Some(m) = l.model.as_deref() {
                    facts.model = Some(m.to_string());
                }
                if let Some(u) = l.usage_metadata.as_ref().and_then(ObjOr::obj) {
                    let (input, output, cached, _) = u.split();
                    tokens.input += input;
                    tokens.output += output;
                    tokens.cache_read += cached;
                }
                if !side {
                    let calls = super::parts(&l).any(|p| p.part.function_call.is_some());
                    facts.turn = if calls {
                        TurnStatus::Open
                    } else {
                        TurnStatus::Done { key }
                    };
                    facts.signal = None;
                }
            }
            "user" | "tool_result" => {
                newest(&mut facts.last_activity, ts);
                if !side {
                    facts.turn = TurnStatus::Open;
                }
            }
            "system" => {
                if let Some(sig) = api_error(&l) {
                    newest(&mut facts.last_activity, ts);
                    facts.signal = sig;
                    facts.turn = TurnStatus::Done { key };
                }
            }
            _ => facts.skipped_lines += 1,
        }
    }
    facts.tokens = tokens;
}

/// `Some(signal)` for an API error record (the signal `None` when it is
/// neither a rate limit nor an auth refusal).
fn api_error(l: &Line) -> Option<Option<Signal>> {
    if l.subtype.as_deref() != Some("ui_telemetry") {
        return None;
    }
    let ev = l.system_payload.as_ref()?.obj()?.ui_event.as_ref()?.obj()?;
    if ev.name.as_deref() != Some("qwen-code.api_error") {
        return None;
    }
    let ty = ev.error_type.as_deref().unwrap_or("");
    Some(match ev.status() {
        Some(429) => Some(Signal::RateLimited { resets_at: None }),
        Some(401 | 403) => Some(Signal::AuthRequired),
        _ if ty == "RateLimitError" => Some(Signal::RateLimited { resets_at: None }),
        _ if ty == "AuthenticationError" => Some(Signal::AuthRequired),
        _ => None,
    })
}

/// The file stem is the session id.
pub(crate) fn from_path(path: &Path, facts: &mut TailFacts) {
    if let Some(id) = crate::provider::stem_id(path) {
        facts.session_id.get_or_insert(id);
    }
}
