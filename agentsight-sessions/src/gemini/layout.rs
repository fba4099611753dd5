//! Where Gemini CLI keeps chats and how they are named:
//! `~/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<8 chars>.json[l]`
//! (the 8 characters begin the session id, which is in the header),
//! subagent chats in `chats/<parent session id>/<x>.jsonl`.

use std::path::{Path, PathBuf};

use crate::discovery::Scanner;
use crate::provider::IndexId;
use crate::provider::WatchLayout;
use crate::util::env_abs;

/// `$GEMINI_CLI_HOME/.gemini/tmp` (an absolute `GEMINI_CLI_HOME` only).
pub(crate) fn roots(home: &Path, use_env: bool) -> Vec<PathBuf> {
    let gh = if use_env {
        env_abs("GEMINI_CLI_HOME").unwrap_or_else(|| home.to_path_buf())
    } else {
        home.to_path_buf()
    };
    vec![gh.join(".gemini/tmp")]
}

pub(crate) fn scan_root(root: &Path, scan: &mut Scanner) {
    for proj in scan.read_dir(root) {
        if !scan.is_dir(&proj) {
            continue;
        }
        for f in scan.read_dir(&proj.path().join("chats")) {
            let n = f.file_name();
            let n = n.to_string_lossy();
            if n.starts_with("session-") && (n.ends_with(".json") || n.ends_with(".jsonl")) {
                scan.push_file(&f, false);
            }
        }
    }
}

/// A `.json[l]` under `tmp/…/chats`: a subagent chat maps to its parent, a
/// session file is identified by its header.
pub(crate) fn id_for_path(path: &Path, comps: &[&str]) -> Option<Option<String>> {
    let name = path.file_name()?.to_str()?;
    let chat = name.ends_with(".json") || name.ends_with(".jsonl");
    if !(chat && comps.contains(&"chats") && comps.contains(&"tmp")) {
        return None;
    }
    Some(session_id(path, name, comps))
}

fn session_id(path: &Path, name: &str, comps: &[&str]) -> Option<String> {
    let i = comps.iter().rposition(|c| *c == "chats")?;
    if comps.len() == i + 3 {
        // chats/<parentSessionId>/<sub>.jsonl
        return Some(comps[i + 1].to_string());
    }
    if name.starts_with("session-") {
        return super::header_session_id(path);
    }
    None
}

/// Filed under the 8 characters of the id in the name; the header is read
/// only when a lookup matches them.
pub(crate) fn index_id(path: &Path) -> IndexId {
    if let Some(p) = name_prefix(path) {
        return IndexId::Prefix(p);
    }
    super::header_session_id(path).map_or(IndexId::None, IndexId::Id)
}

pub(crate) fn verify_id(path: &Path, id: &str) -> bool {
    super::header_session_id(path).as_deref() == Some(id)
}

/// `session-<YYYY-MM-DDTHH-MM>-<8 chars>.json[l]` → the 8 characters.
fn name_prefix(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    let tail = stem.rsplit('-').next()?;
    (tail.len() == 8 && stem.starts_with("session-")).then(|| tail.to_string())
}

/// `<project>/chats/session-*.json[l]`.
pub(crate) fn is_transcript(rel: &[&str]) -> bool {
    matches!(rel, [_, "chats", name]
        if name.starts_with("session-") && (name.ends_with(".json") || name.ends_with(".jsonl")))
}

/// `<project>/chats`.
pub(crate) fn watch(_root: &Path) -> WatchLayout {
    WatchLayout {
        depth: 2,
        project_subdir: Some("chats"),
    }
}
