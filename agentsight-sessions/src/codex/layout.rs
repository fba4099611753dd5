//! Where Codex keeps rollouts and how they are named:
//! `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl` (early
//! versions: flat in `sessions/`), archived ones flat in `archived_sessions/`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::Provider;
use crate::discovery::{Candidate, Scanner};
use crate::provider::IndexId;
use crate::provider::WatchLayout;
use crate::util::env_abs;

/// `$CODEX_HOME` when absolute (and honoured), else `~/.codex`.
pub(crate) fn home(home: &Path, use_env: bool) -> PathBuf {
    if use_env && let Some(p) = env_abs("CODEX_HOME") {
        return p;
    }
    home.join(".codex")
}

pub(crate) fn roots(home_dir: &Path, use_env: bool) -> Vec<PathBuf> {
    let ch = home(home_dir, use_env);
    vec![ch.join("sessions"), ch.join("archived_sessions")]
}

/// `sessions/YYYY/MM/DD/rollout-*.jsonl` plus early flat files; archived
/// rollouts are flat.
pub(crate) fn scan_root(root: &Path, scan: &mut Scanner) {
    let archived = root.file_name().is_some_and(|n| n == "archived_sessions");
    let mut stack = vec![(root.to_path_buf(), 0u32)];
    while let Some((dir, depth)) = stack.pop() {
        for e in scan.read_dir(&dir) {
            let n = e.file_name();
            let n = n.to_string_lossy();
            if n.starts_with("rollout-") && n.ends_with(".jsonl") {
                scan.push_file(&e, false);
            } else if !archived && depth < 3 && scan.is_dir(&e) {
                stack.push((e.path(), depth + 1));
            }
        }
    }
}

/// Prefer `sessions/` over `archived_sessions/` for the same rollout file.
pub(crate) fn after_scan(cands: &mut Vec<Candidate>, _stat: bool) {
    let mut seen: HashSet<std::ffi::OsString> = HashSet::new();
    cands.retain(|c| {
        if c.provider != Provider::Codex {
            return true;
        }
        let archived = c
            .path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "archived_sessions");
        match c.path.file_name() {
            Some(n) if archived => !seen.contains(n),
            Some(n) => {
                seen.insert(n.to_os_string());
                true
            }
            None => true,
        }
    });
}

/// A `rollout-*.jsonl` under `sessions` or `archived_sessions`: the id is
/// in the name.
pub(crate) fn id_for_path(path: &Path, comps: &[&str]) -> Option<Option<String>> {
    let name = path.file_name()?.to_str()?;
    let rollout = name.starts_with("rollout-") && name.ends_with(".jsonl");
    if !(rollout && (comps.contains(&"sessions") || comps.contains(&"archived_sessions"))) {
        return None;
    }
    Some(super::id_from_file_name(path))
}

/// `session_meta.id` from the bounded header.
pub(crate) fn candidate_id(path: &Path) -> Option<String> {
    super::read_header(path).ok().and_then(|h| h.id)
}

/// The id in the name, else the header's.
pub(crate) fn index_id(path: &Path) -> IndexId {
    super::id_from_file_name(path)
        .or_else(|| candidate_id(path))
        .map_or(IndexId::None, IndexId::Id)
}

pub(crate) fn verify_id(path: &Path, id: &str) -> bool {
    candidate_id(path).as_deref() == Some(id)
}

/// A rollout at most `YYYY/MM/DD/` deep.
pub(crate) fn is_transcript(rel: &[&str]) -> bool {
    rel.len() <= 4
        && rel
            .last()
            .is_some_and(|name| name.starts_with("rollout-") && name.ends_with(".jsonl"))
}

/// `sessions/YYYY/MM/DD`; `archived_sessions` is flat.
pub(crate) fn watch(root: &Path) -> WatchLayout {
    let archived = root.file_name().is_some_and(|n| n == "archived_sessions");
    WatchLayout {
        depth: if archived { 0 } else { 3 },
        project_subdir: None,
    }
}
