//! Where Claude Code keeps transcripts and how they are named:
//! `<root>/<encoded cwd>/<session id>.jsonl`, subagents in
//! `<session id>/subagents/**/agent-<id>.jsonl` (≥ 2.1.2) or
//! `agent-<id>.jsonl` beside the parent (2.0.x, whose id is in the header).

use std::path::{Path, PathBuf};

use crate::discovery::Scanner;
use crate::provider::WatchLayout;
use crate::util::env_abs;

/// `CLAUDE_CONFIG_DIR` (a comma-separated list, each `…/projects` or the
/// directory holding it), then the XDG and the classic location.
pub(crate) fn roots(home: &Path, use_env: bool) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if use_env && let Ok(dirs) = std::env::var("CLAUDE_CONFIG_DIR") {
        for d in dirs.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let d = PathBuf::from(d);
            if d.file_name().is_some_and(|n| n == "projects") {
                v.push(d);
            } else {
                v.push(d.join("projects"));
            }
        }
    }
    let xdg = if use_env {
        env_abs("XDG_CONFIG_HOME")
    } else {
        None
    };
    v.push(
        xdg.unwrap_or_else(|| home.join(".config"))
            .join("claude/projects"),
    );
    v.push(home.join(".claude/projects"));
    v
}

/// `<root>/<project>/<id>.jsonl`, subagent files (`agent-*`) left out.
pub(crate) fn scan_root(root: &Path, scan: &mut Scanner) {
    for proj in scan.read_dir(root) {
        if !scan.is_dir(&proj) {
            continue;
        }
        for f in scan.read_dir(&proj.path()) {
            let n = f.file_name();
            let n = n.to_string_lossy();
            if n.ends_with(".jsonl") && !n.starts_with("agent-") {
                scan.push_file(&f, false);
            }
        }
    }
}

/// A `.jsonl` under a `projects` directory; subagent files map to their
/// parent session.
pub(crate) fn id_for_path(path: &Path, comps: &[&str]) -> Option<Option<String>> {
    let name = path.file_name()?.to_str()?;
    if !(name.ends_with(".jsonl") && comps.contains(&"projects")) {
        return None;
    }
    Some(session_id(path, comps))
}

fn session_id(path: &Path, comps: &[&str]) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    let i = comps.iter().rposition(|c| *c == "projects")?;
    match &comps[i + 1..] {
        [_, f] if !f.starts_with("agent-") => Some(stem.to_string()),
        [_, _] => super::header_session_id(path),
        [_, sid, "subagents", ..] => Some((*sid).to_string()),
        _ => None,
    }
}

/// `<project>/<session>.jsonl`, not a 2.0.x `agent-*.jsonl`.
pub(crate) fn is_transcript(rel: &[&str]) -> bool {
    matches!(rel, [_, name] if name.ends_with(".jsonl") && !name.starts_with("agent-"))
}

/// The project directories.
pub(crate) fn watch(_root: &Path) -> WatchLayout {
    WatchLayout {
        depth: 1,
        project_subdir: None,
    }
}
