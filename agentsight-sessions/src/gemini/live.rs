//! Live turn rules for Gemini CLI chats
//! (`~/.gemini/tmp/<project>/chats/session-*.json[l]`). Proposed rules (no
//! reference implementation): the format has no finish reason, so the
//! newest message decides. A `user` message opens a turn; a `gemini`
//! message with a tool call `awaiting_approval` waits on the person, one
//! with a call `validating` / `scheduled` / `executing` (or all calls done,
//! their results going back to the model) keeps it open, one with a
//! cancelled call was interrupted, one without tool calls ends the turn when
//! it has text (without text it is a call not recorded yet: open).
//! An `error` message ends the turn; its text alone says rate-limited or
//! auth required (fragile: the only local source). `info` / `warning`
//! messages are activity only.
//!
//! `.jsonl` (≥ v0.39) is an event log: messages are re-appended when they
//! change (last write wins, first position kept), `$set` patches metadata
//! (`$set.messages` replaces the list), `$rewindTo` deletes a message and
//! all after it. The tail is replayed; a rewind to a message older than the
//! tail clears everything the tail had. Legacy `.json` is one record.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use super::wire::{self, Meta, RewindLine, SetLine};
use crate::Provider;
use crate::de::{Content, ObjOr};
use crate::live::{
    HiddenReason, PROMPT_CHARS, Signal, TailFacts, TokenTotals, TurnStatus, WaitReason, newest,
    parse_time,
};

type Msg = wire::Msg<wire::Tail>;

/// The replayed message list: order of first appearance, last write wins.
#[derive(Default)]
struct Replay {
    order: Vec<String>,
    by_id: HashMap<String, Msg>,
}

impl Replay {
    fn put(&mut self, m: Msg) {
        let Some(id) = m.id.0.clone() else { return };
        if !self.by_id.contains_key(&id) {
            self.order.push(id.clone());
        }
        self.by_id.insert(id, m);
    }

    fn replace(&mut self, msgs: Vec<ObjOr<Msg>>) {
        *self = Replay::default();
        for m in msgs.into_iter().filter_map(|m| match m {
            ObjOr::Obj(m) => Some(m),
            ObjOr::Other(_) => None,
        }) {
            self.put(m);
        }
    }

    fn rewind(&mut self, id: &str) {
        match self.order.iter().position(|x| x == id) {
            Some(i) => {
                for gone in self.order.drain(i..) {
                    self.by_id.remove(&gone);
                }
            }
            None => *self = Replay::default(),
        }
    }

    fn messages(&self) -> impl Iterator<Item = &Msg> {
        self.order.iter().filter_map(|id| self.by_id.get(id))
    }
}

fn apply_meta(m: &Meta, facts: &mut TailFacts) {
    if let Some(id) = m.session_id.as_deref() {
        facts.session_id = Some(id.to_string());
    }
    if m.kind.as_deref() == Some("subagent") {
        facts.hidden = Some(HiddenReason::GeminiSubagent);
    }
    newest(
        &mut facts.last_activity,
        m.last_updated.as_deref().and_then(parse_time),
    );
}

pub(crate) fn read(lines: &[&str], begin: bool, facts: &mut TailFacts) {
    let mut replay = Replay::default();
    for line in lines {
        if let Ok(m) = serde_json::from_str::<Msg>(line)
            && m.id.0.is_some()
        {
            replay.put(m);
        } else if let Ok(s) = serde_json::from_str::<SetLine>(line) {
            if let ObjOr::Obj(mut meta) = s.set {
                if let Some(msgs) = meta.messages.take() {
                    replay.replace(msgs);
                }
                apply_meta(&meta, facts);
            }
        } else if let Ok(r) = serde_json::from_str::<RewindLine>(line) {
            replay.rewind(&r.rewind_to);
        } else if let Ok(mut meta) = serde_json::from_str::<Meta>(line)
            && meta.session_id.0.is_some()
        {
            // The metadata line, or a migrated legacy record on one line.
            if let Some(msgs) = meta.messages.take() {
                replay.replace(msgs);
            }
            apply_meta(&meta, facts);
        } else {
            facts.skipped_lines += 1;
        }
    }
    conclude(replay.messages(), begin, facts);
}

/// Line 1 read apart from the tail: the metadata line.
pub(crate) fn apply_first_line(text: &str, facts: &mut TailFacts) {
    match serde_json::from_str::<Meta>(text) {
        Ok(m) if m.session_id.0.is_some() => {
            // Only the identity: its messages (a migrated record) are older
            // than the tail and its `lastUpdated` may be stale.
            facts
                .session_id
                .get_or_insert_with(|| m.session_id.0.clone().unwrap_or_default());
            if m.kind.as_deref() == Some("subagent") {
                facts.hidden = Some(HiddenReason::GeminiSubagent);
            }
        }
        _ => facts.skipped_lines += 1,
    }
}

/// A whole legacy `.json` record given as bytes; `None` when `bytes` are
/// not one JSON object with a `messages` list (then they are JSONL).
pub(crate) fn read_legacy_bytes(bytes: &[u8]) -> Option<TailFacts> {
    let meta: Meta = serde_json::from_slice(bytes).ok()?;
    meta.messages.as_ref()?;
    Some(legacy_facts(meta))
}

/// The legacy `.json` file, streamed (message contents are skipped after a
/// short prefix), at most `cap` bytes.
pub(crate) fn read_legacy_file(file: &mut File, cap: u64) -> std::io::Result<TailFacts> {
    use std::io::Read;
    let reader = std::io::BufReader::new(file.take(cap));
    Ok(match serde_json::from_reader::<_, Meta>(reader) {
        Ok(meta) => legacy_facts(meta),
        Err(_) => {
            // Rewritten whole on every change: a torn or corrupt file says
            // nothing this time; the next write will.
            let mut f = TailFacts::empty(Provider::Gemini);
            f.skipped_lines = 1;
            f
        }
    })
}

fn legacy_facts(mut meta: Meta) -> TailFacts {
    let mut facts = TailFacts::empty(Provider::Gemini);
    let mut replay = Replay::default();
    if let Some(msgs) = meta.messages.take() {
        replay.replace(msgs);
    }
    apply_meta(&meta, &mut facts);
    conclude(replay.messages(), true, &mut facts);
    facts
}

fn text_of(m: &Msg) -> String {
    match &m.content {
        Some(Content::Text(t)) => t.clone(),
        Some(Content::Blocks(bs)) => bs
            .iter()
            .filter_map(|b| b.text.as_ref().map(|p| p.0.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        None => String::new(),
    }
}

fn conclude<'a>(msgs: impl Iterator<Item = &'a Msg>, begin: bool, facts: &mut TailFacts) {
    let mut tokens = TokenTotals {
        whole_session: begin,
        ..TokenTotals::default()
    };
    for m in msgs {
        newest(
            &mut facts.last_activity,
            m.timestamp.as_deref().and_then(parse_time),
        );
        for c in m.tool_calls.iter().flatten().filter_map(ObjOr::obj) {
            newest(
                &mut facts.last_activity,
                c.timestamp.as_deref().and_then(parse_time),
            );
        }
        let key = m.id.0.clone().unwrap_or_default();
        match m.kind.as_deref().unwrap_or("") {
            "user" => {
                let t = text_of(m);
                // Gemini CLI injects the workspace context as a first user
                // message at start-up: no prompt, no turn.
                if t.trim_start().starts_with("<session_context>") {
                    continue;
                }
                if begin && facts.first_prompt.is_none() {
                    facts.first_prompt = Some(crate::util::preview(t.trim(), PROMPT_CHARS));
                }
                facts.turn = TurnStatus::Open;
                facts.signal = None;
            }
            "gemini" => {
                if let Some(model) = m.model.as_deref() {
                    facts.model = Some(model.to_string());
                }
                if let Some(ObjOr::Obj(t)) = &m.tokens {
                    tokens.input += (t.input.0.saturating_sub(t.cached.0)) + t.tool.0;
                    tokens.output += t.output.0 + t.thoughts.0;
                    tokens.cache_read += t.cached.0;
                }
                facts.turn = gemini_turn(m, key);
                facts.signal = None;
            }
            "error" => {
                facts.signal = text_signal(&text_of(m));
                facts.turn = TurnStatus::Done { key };
            }
            "info" | "warning" => {}
            _ => facts.skipped_lines += 1,
        }
    }
    facts.tokens = tokens;
}

fn gemini_turn(m: &Msg, key: String) -> TurnStatus {
    let statuses: Vec<&str> = m
        .tool_calls
        .iter()
        .flatten()
        .filter_map(|c| c.obj().and_then(|c| c.status.as_deref()))
        .collect();
    if statuses.contains(&"awaiting_approval") {
        TurnStatus::WaitingOnUser {
            key,
            reason: WaitReason::ToolApproval,
        }
    } else if statuses.is_empty() {
        // Gemini CLI (0.61) records a response when its stream ends but its
        // tool calls only once they completed: a response without text is
        // a call still running (or awaiting approval), not an answer.
        if text_of(m).trim().is_empty() {
            TurnStatus::Open
        } else {
            TurnStatus::Done { key }
        }
    } else if statuses.contains(&"cancelled")
        && statuses
            .iter()
            .all(|s| matches!(*s, "success" | "error" | "cancelled"))
    {
        TurnStatus::WaitingOnUser {
            key,
            reason: WaitReason::Interrupted,
        }
    } else {
        // Running, or finished calls whose results go back to the model.
        TurnStatus::Open
    }
}

/// Quota and auth errors exist only as message text.
fn text_signal(text: &str) -> Option<Signal> {
    let lower = text.to_ascii_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if any(&[
        "429",
        "resource_exhausted",
        "quota",
        "rate limit",
        "ratelimit",
    ]) {
        Some(Signal::RateLimited { resets_at: None })
    } else if any(&[
        "401",
        "unauthenticated",
        "api key not valid",
        "invalid api key",
        "authentication",
        "login",
    ]) {
        Some(Signal::AuthRequired)
    } else {
        None
    }
}

/// Path facts: a chat under `chats/<parent>/` is a subagent's; the project's
/// `.project_root` (≥ v0.29) names the cwd.
pub(crate) fn from_path(path: &Path, facts: &mut TailFacts) {
    let Some(dir) = path.parent() else { return };
    let chats = if dir.file_name().is_some_and(|n| n == "chats") {
        dir
    } else {
        facts.hidden.get_or_insert(HiddenReason::GeminiSubagent);
        match dir.parent() {
            Some(d) if d.file_name().is_some_and(|n| n == "chats") => d,
            _ => return,
        }
    };
    if facts.cwd.is_none()
        && let Some(project) = chats.parent()
        && let Ok(b) = crate::safefs::read_small(&project.join(".project_root"), 64 * 1024)
        && let Ok(s) = String::from_utf8(b)
        && !s.trim().is_empty()
    {
        facts.cwd = Some(s.trim().to_string());
    }
}
