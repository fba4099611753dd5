//! Where opencode keeps its database: `$XDG_DATA_HOME/opencode/` (default
//! `~/.local/share/opencode/`), `opencode.db` or `opencode-<channel>.db`
//! (a release channel's own database), each with its `-wal` and `-shm`.

use std::path::{Path, PathBuf};

use crate::discovery::Scanner;
use crate::provider::WatchLayout;
use crate::util::env_abs;

/// The data directory (`use_env`: `XDG_DATA_HOME`, and the directory of
/// `OPENCODE_DB` when it names an `opencode*.db` elsewhere).
pub(crate) fn roots(home: &Path, use_env: bool) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if use_env {
        if let Some(db) = env_abs("OPENCODE_DB")
            && let Some(dir) = db.parent()
        {
            v.push(dir.to_path_buf());
        }
        if let Some(x) = env_abs("XDG_DATA_HOME") {
            v.push(x.join("opencode"));
        }
    }
    let d = home.join(".local/share/opencode");
    if !v.contains(&d) {
        v.push(d);
    }
    v
}

/// A database file name: `opencode.db`, `opencode-<channel>.db`.
pub(crate) fn is_db_name(name: &str) -> bool {
    name == "opencode.db"
        || name
            .strip_prefix("opencode-")
            .and_then(|r| r.strip_suffix(".db"))
            .is_some_and(|c| !c.is_empty())
}

/// The databases directly in the root (legacy J1 `storage/` JSON trees are
/// not read).
pub(crate) fn scan_root(root: &Path, scan: &mut Scanner) {
    for e in scan.read_dir(root) {
        if e.file_name().to_str().is_some_and(is_db_name) {
            scan.push_file(&e, false);
        }
    }
}

/// A database or its `-wal`/`-shm`/`-journal` is of this layout but names
/// no one session.
pub(crate) fn id_for_path(path: &Path, _comps: &[&str]) -> Option<Option<String>> {
    let name = path.file_name()?.to_str()?;
    let base = ["-wal", "-shm", "-journal"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name);
    is_db_name(base).then_some(None)
}

/// The database directly under the root.
pub(crate) fn is_transcript(rel: &[&str]) -> bool {
    matches!(rel, [f] if is_db_name(f))
}

/// Only the root itself.
pub(crate) fn watch(_root: &Path) -> WatchLayout {
    WatchLayout {
        depth: 0,
        project_subdir: None,
    }
}
