//! Where Cursor keeps agent transcripts and how they are named:
//! `~/.cursor/projects/<project>/agent-transcripts/<id>.jsonl` or
//! `…/<id>/<id>.jsonl`, subagents in `…/<id>/subagents/<x>.jsonl`.

use std::path::{Path, PathBuf};

use crate::Provider;
use crate::discovery::{Candidate, Scanner, mtime_ms};
use crate::provider::WatchLayout;

pub(crate) fn roots(home: &Path, _use_env: bool) -> Vec<PathBuf> {
    vec![home.join(".cursor/projects")]
}

/// Both layouts under each project's `agent-transcripts/`; a project named
/// like the empty window is marked (a session there has a twin elsewhere).
pub(crate) fn scan_root(root: &Path, scan: &mut Scanner) {
    for proj in scan.read_dir(root) {
        if !scan.is_dir(&proj) {
            continue;
        }
        let empty = proj.file_name().to_string_lossy().contains("empty-window");
        let at = proj.path().join("agent-transcripts");
        for e in scan.read_dir(&at) {
            let n = e.file_name();
            let n = n.to_string_lossy().to_string();
            if n.ends_with(".jsonl") {
                scan.push_file(&e, empty);
            } else if scan.is_dir(&e) {
                scan.push_nested(e.path().join(format!("{n}.jsonl")), empty);
            }
        }
    }
}

/// A Cursor parent is as fresh as its newest subagent transcript.
// The table's signature: Codex's fix-up removes candidates.
#[allow(clippy::ptr_arg)]
pub(crate) fn after_scan(cands: &mut Vec<Candidate>, stat: bool) {
    for c in cands
        .iter_mut()
        .filter(|c| stat && c.provider == Provider::Cursor)
    {
        for f in super::subagent_files(&c.path) {
            if let Ok(m) = std::fs::metadata(&f) {
                c.updated_ms = c.updated_ms.max(mtime_ms(&m));
            }
        }
    }
}

/// A `.jsonl` under `agent-transcripts`: the flat or nested transcript, or
/// a subagent's (mapped to its parent).
pub(crate) fn id_for_path(path: &Path, comps: &[&str]) -> Option<Option<String>> {
    let name = path.file_name()?.to_str()?;
    if !(name.ends_with(".jsonl") && comps.contains(&"agent-transcripts")) {
        return None;
    }
    Some(session_id(comps))
}

fn session_id(comps: &[&str]) -> Option<String> {
    let i = comps.iter().rposition(|c| *c == "agent-transcripts")?;
    match &comps[i + 1..] {
        [f] => Some(f.strip_suffix(".jsonl")?.to_string()),
        [d, _] => Some((*d).to_string()),
        [d, "subagents", _] => Some((*d).to_string()),
        _ => None,
    }
}

/// `<project>/agent-transcripts/<id>.jsonl` or `…/<id>/<id>.jsonl`.
pub(crate) fn is_transcript(rel: &[&str]) -> bool {
    match rel {
        [_, "agent-transcripts", f] => f.ends_with(".jsonl"),
        [_, "agent-transcripts", d, f] => *f == format!("{d}.jsonl"),
        _ => false,
    }
}

/// `<project>/agent-transcripts/<id>`.
pub(crate) fn watch(_root: &Path) -> WatchLayout {
    WatchLayout {
        depth: 3,
        project_subdir: Some("agent-transcripts"),
    }
}
