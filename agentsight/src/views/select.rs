//! Which capture a command reads when none is named: the `*.db` captures of
//! a directory, newest first, and the first of them that holds a session.

use std::path::{Path, PathBuf};

use crate::store::{Capture, sessions::StoredSession};

/// Captures in `dir`, newest first.
pub fn captures_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "db"))
                // Regular files only (following a link): anyone can leave a
                // FIFO named `x.db` in /tmp. `Capture::open` checks again on
                // the opened file.
                .filter_map(|e| {
                    let m = std::fs::metadata(e.path()).ok()?;
                    m.is_file().then_some(())?;
                    Some((m.modified().ok()?, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|b| std::cmp::Reverse(b.0));
    v.into_iter().map(|(_, p)| p).collect()
}

/// The newest capture in `dir` that stored a session whose id starts with
/// `id`, with those sessions; captures that cannot be opened are skipped.
pub fn newest_holding(dir: &Path, id: &str) -> Option<(Capture, Vec<StoredSession>)> {
    captures_in(dir).into_iter().find_map(|p| {
        let cap = Capture::open_quick(&p).ok()?;
        let stored = cap.stored_sessions(id).unwrap_or_default();
        (!stored.is_empty()).then_some((cap, stored))
    })
}
