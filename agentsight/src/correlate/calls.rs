//! Phase 2, the calls: each timed tool call of the transcript with what it
//! claims (its command's script, the paths it names, made absolute) and its
//! windows on the capture's clock.

use std::collections::HashSet;
use std::path::{Component, PathBuf};

use super::{ARGV_SEARCH_MS, report::Op, shell};
use crate::{
    clock::Anchors,
    sessions::{AgentSession, PathAccess, Provider, ToolCategory, ToolEvent},
};

pub(super) struct Call {
    /// The call's index in the session's tools.
    pub idx: usize,
    /// Where the exec of its own command is looked for (± ARGV_SEARCH_MS).
    pub lo_mono: u64,
    pub hi_mono: u64,
    /// Its window ± the measured tolerance: every weaker attribution.
    pub win_lo: u64,
    pub win_hi: u64,
    pub start_ms: i64,
    /// `start_ms` on the capture's clock.
    pub start_mono: u64,
    pub end_ms: Option<i64>,
    pub script: Option<String>,
    pub paths: Vec<(String, PathAccess)>,
    /// The agent starts no process for this call ([`starts_no_process`]).
    pub no_process: bool,
}

/// Lexical normalisation (`.`/`..`) of `p`, joined to `base` when relative.
fn absolute(p: &str, base: Option<&str>) -> String {
    let joined = match base {
        Some(b) if !p.starts_with('/') => PathBuf::from(b).join(p),
        _ => PathBuf::from(p),
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out.display().to_string()
}

/// Where tool `i`'s window ends: its result, else the next call's start,
/// else the session's end.
fn window_end(session: &AgentSession, i: usize) -> Option<i64> {
    let tools = &session.tools;
    tools[i].end_ms.or_else(|| {
        tools[i + 1..]
            .iter()
            .find_map(|n| n.start_ms)
            .or(session.end_ms)
    })
}

/// The session's timed calls, with their argv search windows; the own
/// windows are set by [`set_windows`] once the skew is measured.
pub(super) fn calls_of(session: &AgentSession, anchors: &Anchors) -> Vec<Call> {
    let base_cwd = session.cwd.as_deref();
    let mut calls: Vec<Call> = Vec::new();
    for (i, t) in session.tools.iter().enumerate() {
        let Some(start) = t.start_ms else { continue };
        let end = window_end(session, i);
        let cwd = t.cwd.as_deref().or(base_cwd);
        calls.push(Call {
            idx: i,
            lo_mono: anchors.mono_of_ms(start - ARGV_SEARCH_MS),
            hi_mono: end
                .map(|e| anchors.mono_of_ms(e + ARGV_SEARCH_MS))
                .unwrap_or(u64::MAX),
            // Set once the argv matches have measured the skew.
            win_lo: 0,
            win_hi: u64::MAX,
            start_ms: start,
            start_mono: anchors.mono_of_ms(start),
            end_ms: t.end_ms,
            script: (t.category == ToolCategory::Shell)
                .then(|| t.command.as_deref().map(shell::claimed_script))
                .flatten()
                .filter(|s| !s.is_empty()),
            paths: t
                .paths
                .iter()
                .map(|p| (absolute(&p.path, cwd), p.access))
                .collect(),
            no_process: starts_no_process(session.provider, t),
        });
    }
    calls
}

/// Every path some call names.
pub(super) fn claimed_paths(calls: &[Call]) -> HashSet<&str> {
    calls
        .iter()
        .flat_map(|c| c.paths.iter().map(|(p, _)| p.as_str()))
        .collect()
}

/// Sets each call's own window: its span widened by `tolerance_ms`.
pub(super) fn set_windows(
    calls: &mut [Call],
    session: &AgentSession,
    anchors: &Anchors,
    tolerance_ms: i64,
) {
    for c in calls.iter_mut() {
        c.win_lo = anchors.mono_of_ms(c.start_ms - tolerance_ms);
        c.win_hi = window_end(session, c.idx)
            .map(|e| anchors.mono_of_ms(e + tolerance_ms))
            .unwrap_or(u64::MAX);
    }
}

/// The call that names `path` and whose window holds `mono` (the latest
/// started, if several do). A directory made (`mkdir`) is the call's too
/// when the call names a path inside it: an edit tool creating
/// `data/numbers.txt` makes `data/` first. Only calls `eligible` accepts
/// are candidates.
pub(super) fn claiming_call(
    calls: &[Call],
    mono: u64,
    path: &str,
    op: Op,
    eligible: impl Fn(&Call) -> bool,
) -> Option<usize> {
    let names = |cp: &str| {
        cp == path
            || (op == Op::Mkdir
                && cp.len() > path.len()
                && cp.starts_with(path)
                && cp.as_bytes()[path.len()] == b'/')
    };
    calls
        .iter()
        .enumerate()
        .filter(|(_, c)| eligible(c) && c.win_lo <= mono && mono <= c.win_hi)
        .filter(|(_, c)| c.paths.iter().any(|(cp, _)| names(cp)))
        .max_by_key(|(_, c)| c.start_ms)
        .map(|(ci, _)| ci)
}

/// Calls the agent never starts a process for, so a helper it starts
/// during one (Claude Code's `git` probes and shell snapshot, Codex's git
/// probes before each request, Qwen Code's `git rev-parse` branch probe)
/// is not theirs: an MCP call (its server acts for it) and the
/// `tool_search` of Codex and Qwen Code, which they answer in-process.
fn starts_no_process(provider: Provider, t: &ToolEvent) -> bool {
    t.mcp.is_some()
        || (matches!(provider, Provider::Codex | Provider::Qwen) && t.name == "tool_search")
}

/// The latest started call whose own window holds `mono`, among the calls
/// the agent may start a process for ([`starts_no_process`]).
pub(super) fn window_call(calls: &[Call], mono: u64) -> Option<usize> {
    calls
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.no_process && c.win_lo <= mono && mono <= c.win_hi)
        .max_by_key(|(_, c)| c.start_ms)
        .map(|(ci, _)| ci)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(idx: usize, start_ms: i64, (win_lo, win_hi): (u64, u64), paths: &[&str]) -> Call {
        Call {
            idx,
            lo_mono: 0,
            hi_mono: u64::MAX,
            win_lo,
            win_hi,
            start_ms,
            start_mono: 0,
            end_ms: None,
            script: None,
            paths: paths
                .iter()
                .map(|p| (p.to_string(), PathAccess::Write))
                .collect(),
            no_process: false,
        }
    }

    #[test]
    fn paths_are_made_absolute_lexically() {
        assert_eq!(absolute("../b/./c.txt", Some("/w/a")), "/w/b/c.txt");
        assert_eq!(absolute("/etc/x", Some("/w")), "/etc/x");
        assert_eq!(absolute("x", None), "x");
    }

    #[test]
    fn the_latest_call_naming_a_path_in_its_window_claims_it() {
        let calls = [
            call(0, 10, (100, 200), &["/w/a.txt"]),
            call(1, 20, (150, 300), &["/w/a.txt", "/w/data/n.txt"]),
        ];
        assert_eq!(
            claiming_call(&calls, 160, "/w/a.txt", Op::Write, |_| true),
            Some(1)
        );
        assert_eq!(
            claiming_call(&calls, 120, "/w/a.txt", Op::Write, |_| true),
            Some(0)
        );
        assert_eq!(
            claiming_call(&calls, 400, "/w/a.txt", Op::Write, |_| true),
            None
        );
        // A directory made for a named file is the call's; other ops on it are not.
        assert_eq!(
            claiming_call(&calls, 160, "/w/data", Op::Mkdir, |_| true),
            Some(1)
        );
        assert_eq!(
            claiming_call(&calls, 160, "/w/data", Op::Write, |_| true),
            None
        );
        assert_eq!(
            claiming_call(&calls, 160, "/w/dat", Op::Mkdir, |_| true),
            None
        );
        assert_eq!(window_call(&calls, 160), Some(1));
        assert_eq!(window_call(&calls, 50), None);
    }

    #[test]
    fn no_mcp_call_owns_a_window() {
        let mut calls = [call(0, 10, (100, 300), &[]), call(1, 20, (150, 200), &[])];
        calls[1].no_process = true;
        // Inside both windows: the built-in call, though it started first.
        assert_eq!(window_call(&calls, 160), Some(0));
        calls[0].no_process = true;
        assert_eq!(window_call(&calls, 160), None);
    }

    #[test]
    fn codex_and_qwen_tool_search_and_mcp_calls_start_no_process() {
        let tool = |name: &str, mcp: bool| -> ToolEvent {
            let mut v = serde_json::json!({"prompt_index": 0, "subagent": null, "name": name,
                "category": "search", "call_id": null, "command": null, "cwd": null,
                "status": "ok", "start_ms": 1, "end_ms": 2, "paths": [], "domains": []});
            if mcp {
                v["mcp"] = serde_json::json!({"server": "fs", "tool": "write_file"});
            }
            serde_json::from_value(v).unwrap()
        };
        assert!(starts_no_process(
            Provider::Codex,
            &tool("tool_search", false)
        ));
        assert!(starts_no_process(
            Provider::Qwen,
            &tool("tool_search", false)
        ));
        assert!(!starts_no_process(
            Provider::Claude,
            &tool("tool_search", false)
        ));
        assert!(!starts_no_process(
            Provider::Codex,
            &tool("exec_command", false)
        ));
        assert!(starts_no_process(
            Provider::Gemini,
            &tool("mcp_fs_write_file", true)
        ));
    }
}
