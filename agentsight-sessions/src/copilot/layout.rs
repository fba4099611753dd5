//! Where Copilot CLI keeps sessions and how they are named:
//! `<root>/<session id>/events.jsonl` (≥ 0.0.378, verified on 1.0.102) and
//! the flat `<root>/<session id>.jsonl` of 0.0.342–0.0.377 (same records),
//! `<root>` = `~/.copilot/session-state` (`$COPILOT_HOME/session-state`).
//! The ≤ 0.0.341 `history-session-state/` JSON files are not read.

use std::path::{Path, PathBuf};

use crate::discovery::Scanner;
use crate::provider::{IndexId, WatchLayout};
use crate::util::env_abs;

/// The directory holding the sessions.
const STATE: &str = "session-state";

/// The session file inside a session directory.
const EVENTS: &str = "events.jsonl";

/// The directory of per-session operation locks beside the sessions.
const LOCKS: &str = ".session-operation-locks";

/// `$COPILOT_HOME/session-state` (an absolute `COPILOT_HOME` only), then
/// `~/.copilot/session-state`.
pub(crate) fn roots(home: &Path, use_env: bool) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if use_env && let Some(h) = env_abs("COPILOT_HOME") {
        v.push(h.join(STATE));
    }
    let default = home.join(".copilot").join(STATE);
    if !v.contains(&default) {
        v.push(default);
    }
    v
}

/// A session id as Copilot writes it: a UUID (36 characters of hex and
/// dashes). Its other entries (`.session-operation-locks`) are not sessions.
fn is_id(name: &str) -> bool {
    name.len() == 36 && name.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

pub(crate) fn scan_root(root: &Path, scan: &mut Scanner) {
    for e in scan.read_dir(root) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if is_id(name) && scan.is_dir(&e) {
            scan.push_nested(e.path().join(EVENTS), false);
        } else if name.strip_suffix(".jsonl").is_some_and(is_id) {
            scan.push_file(&e, false);
        }
    }
}

/// The session id of a path of this layout: `…/session-state/<id>/…`
/// (the events file, the lock files, anything a process writes there),
/// `…/session-state/.session-operation-locks/<id>.lock` or
/// `…/session-state/<id>.jsonl`.
pub(crate) fn id_for_path(_path: &Path, comps: &[&str]) -> Option<Option<String>> {
    let i = comps.iter().rposition(|c| *c == STATE)?;
    let next = *comps.get(i + 1)?;
    if next == LOCKS && comps.len() == i + 3 {
        // `.session-operation-locks/<id>.lock`, taken around a resume.
        let stem = comps[i + 2].strip_suffix(".lock").filter(|s| is_id(s));
        return Some(stem.map(str::to_string));
    }
    if comps.len() > i + 2 {
        return Some(is_id(next).then(|| next.to_string()));
    }
    Some(
        next.strip_suffix(".jsonl")
            .filter(|s| is_id(s))
            .map(str::to_string),
    )
}

/// The id of a scanned transcript: its directory's name or its stem.
pub(crate) fn candidate_id(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let id = if name == EVENTS {
        path.parent()?.file_name()?.to_str()?
    } else {
        name.strip_suffix(".jsonl")?
    };
    is_id(id).then(|| id.to_string())
}

pub(crate) fn index_id(path: &Path) -> IndexId {
    candidate_id(path).map_or(IndexId::None, IndexId::Id)
}

/// `<id>/events.jsonl` or `<id>.jsonl`, relative to the root.
pub(crate) fn is_transcript(rel: &[&str]) -> bool {
    match rel {
        [dir, f] => *f == EVENTS && is_id(dir),
        [f] => f.strip_suffix(".jsonl").is_some_and(is_id),
        _ => false,
    }
}

/// The session directories.
pub(crate) fn watch(_root: &Path) -> WatchLayout {
    WatchLayout {
        depth: 1,
        project_subdir: None,
    }
}
