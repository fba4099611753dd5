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

/// The session id of a path of this layout. Only a transcript names its
/// session: `…/session-state/<id>/events.jsonl` or `…/session-state/<id>.jsonl`.
/// The other files of a session directory (`inuse.<pid>.lock`,
/// `rewind-file-snapshots/tracking.json`, `files/…`, `workspace.yaml`) and
/// the resume locks `.session-operation-locks/<id>.lock` are of the layout
/// but name no session (`Some(None)`): a process writing them is no
/// evidence that it writes the transcript (a resume or a snapshot tool may
/// touch them), and `record`'s binding must rest on the transcript itself.
pub(crate) fn id_for_path(_path: &Path, comps: &[&str]) -> Option<Option<String>> {
    let i = comps.iter().rposition(|c| *c == STATE)?;
    match &comps[i + 1..] {
        [dir, f] if is_id(dir) => Some((*f == EVENTS).then(|| (*dir).to_string())),
        [f] => Some(
            f.strip_suffix(".jsonl")
                .filter(|s| is_id(s))
                .map(str::to_string),
        ),
        [dir, ..] if is_id(dir) || *dir == LOCKS => Some(None),
        // Deeper under a `session-state` that is not Copilot's: not ours.
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0b5bd1e4-5a9f-4a39-9d53-4bd2e5c6a0f1";

    fn of(p: &str) -> Option<Option<String>> {
        let comps: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
        id_for_path(Path::new(p), &comps)
    }

    #[test]
    fn session_files_are_of_the_layout_but_only_the_transcript_names_it() {
        let dir = format!("/home/u/.copilot/session-state/{ID}");
        assert_eq!(
            of(&format!("{dir}/events.jsonl")),
            Some(Some(ID.to_string()))
        );
        assert_eq!(
            of(&format!("/h/session-state/{ID}.jsonl")),
            Some(Some(ID.to_string()))
        );
        for p in [
            format!("{dir}/inuse.77.lock"),
            format!("{dir}/rewind-file-snapshots/tracking.json"),
            format!("{dir}/files/a/b.jsonl"),
            format!("/h/session-state/.session-operation-locks/{ID}.lock"),
            "/h/session-state/notes.jsonl".to_string(),
        ] {
            assert_eq!(of(&p), Some(None), "{p}");
        }
        // Deeper under a `session-state` directory that is not Copilot's.
        assert_eq!(of("/srv/session-state/u/x/y.jsonl"), None);
        assert_eq!(of("/srv/session-state"), None);
    }
}
