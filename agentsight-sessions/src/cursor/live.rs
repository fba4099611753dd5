//! Live turn rules for Cursor agent transcripts
//! (`~/.cursor/projects/<slug>/agent-transcripts/…`). Proposed rules (no
//! reference implementation). JSONL lines carry no timestamps, model or
//! usage: the activity clock is the file's mtime (the caller's). A
//! `turn_ended` line ends the turn (`status: error` with an abort message is
//! an interrupt); a message line after it opens the next. Cursor writes no
//! rate-limit or auth record anyone has found, so these two states cannot
//! be expressed. Legacy `.txt` transcripts (`user:` / `assistant:` blocks)
//! have no turn marker: only a fresh write (working) can be told.

use super::wire::{self, TailBlock};
use crate::de::{Content, ObjOr};
use crate::live::{PROMPT_CHARS, TailFacts, TurnStatus, WaitReason, line_key};

type Line = wire::Line<TailBlock>;
type Message = wire::Message<TailBlock>;

pub(crate) fn read(lines: &[&str], begin: bool, facts: &mut TailFacts) {
    // Legacy plain-text transcript: nothing to parse line by line.
    if lines
        .first()
        .is_some_and(|l| !l.trim_start().starts_with('{'))
    {
        return;
    }
    for line in lines {
        let Ok(l) = serde_json::from_str::<Line>(line) else {
            facts.skipped_lines += 1;
            continue;
        };
        if l.kind.as_deref() == Some("turn_ended") {
            let key = line_key(line);
            let aborted = l.status.as_deref() == Some("error")
                && l.error
                    .as_deref()
                    .is_some_and(|e| e.to_ascii_lowercase().contains("abort"));
            facts.turn = if aborted {
                TurnStatus::WaitingOnUser {
                    key,
                    reason: WaitReason::Interrupted,
                }
            } else {
                TurnStatus::Done { key }
            };
            continue;
        }
        match (l.role.as_deref(), l.message.as_ref().and_then(ObjOr::obj)) {
            (Some(role @ ("user" | "assistant")), Some(m)) => {
                facts.turn = TurnStatus::Open;
                if role == "user" && begin && facts.first_prompt.is_none() {
                    facts.first_prompt = prompt_text(m);
                }
                if let Some(cwd) = shell_cwd(m) {
                    facts.cwd = Some(cwd);
                }
            }
            _ => facts.skipped_lines += 1,
        }
    }
}

fn prompt_text(m: &Message) -> Option<String> {
    let text = match &m.content {
        Content::Text(t) => t.clone(),
        Content::Blocks(bs) => bs
            .iter()
            .find(|b| b.kind.as_deref() == Some("text"))
            .and_then(|b| b.text.as_ref())
            .map(|p| p.0.clone())?,
    };
    let t = text.trim();
    let t = t.strip_prefix("<user_query>").unwrap_or(t);
    let t = t.strip_suffix("</user_query>").unwrap_or(t);
    Some(crate::util::preview(t.trim(), PROMPT_CHARS))
}

fn shell_cwd(m: &Message) -> Option<String> {
    let Content::Blocks(bs) = &m.content else {
        return None;
    };
    bs.iter().rev().find_map(|b| {
        b.input
            .as_ref()
            .and_then(ObjOr::obj)
            .and_then(|i| i.working_directory.0.clone())
    })
}

/// Path facts: the file stem is the session id of that file; a subagent's
/// transcript (`…/subagents/…`) is hidden.
pub(crate) fn from_path(path: &std::path::Path, facts: &mut TailFacts) {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let in_subagents = path.components().any(|c| c.as_os_str() == "subagents");
    facts.session_id = Some(stem.to_string());
    if in_subagents {
        facts
            .hidden
            .get_or_insert(crate::live::HiddenReason::CursorSubagent);
    }
}
