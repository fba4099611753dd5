//! Where Cursor keeps agent transcripts and how they are named:
//! `~/.cursor/projects/<project>/agent-transcripts/<id>.jsonl` or
//! `…/<id>/<id>.jsonl`, subagents in `…/<id>/subagents/<x>.jsonl`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::discovery::Scanner;
use crate::provider::WatchLayout;

pub(crate) fn roots(home: &Path, _use_env: bool) -> Vec<PathBuf> {
    vec![home.join(".cursor/projects")]
}

/// Both layouts under each project's `agent-transcripts/`; a project named
/// like the empty window is marked (a session there has a twin elsewhere).
/// A parent is as fresh as its newest subagent transcript, in
/// `<id>/subagents/`: looked for only where the listing holds `<id>` (a
/// thousand flat sessions are a thousand failed opens otherwise).
pub(crate) fn scan_root(root: &Path, scan: &mut Scanner) {
    for proj in scan.read_dir(root) {
        if !scan.is_dir(&proj) {
            continue;
        }
        let empty = proj.file_name().to_string_lossy().contains("empty-window");
        let at = proj.path().join("agent-transcripts");
        let entries = scan.read_dir(&at);
        let names: HashSet<OsString> = entries.iter().map(|e| e.file_name()).collect();
        for e in &entries {
            let n = e.file_name();
            let n = n.to_string_lossy().to_string();
            // Taken, and `<id>/` may hold subagents.
            let may_have_subagents = if n.ends_with(".jsonl") {
                scan.push_file(e, empty)
                    && Path::new(&e.file_name())
                        .file_stem()
                        .is_some_and(|stem| names.contains(stem))
            } else if scan.is_dir(e) {
                scan.push_nested(e.path().join(format!("{n}.jsonl")), empty)
            } else {
                false
            };
            if may_have_subagents {
                scan.freshen_last(super::subagent_files);
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
