//! The Claude desktop app's bookkeeping files
//! (`<userData>/claude-code-sessions/<account>/<workspace>/local_<uuid>.json`,
//! and Cowork's `local-agent-mode-sessions/…`), joined to Claude Code
//! transcripts on `cliSessionId`. The store only decorates rows: a missing,
//! unreadable or corrupt file is skipped and counted, and changes nothing
//! else.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Deserialize;

/// The bookkeeping files are small; anything bigger is not one.
const MAX_DESKTOP_FILE: u64 = 1024 * 1024;
/// `<account>/<workspace>/local_*.json`: two levels below the store, one
/// spare for layouts not seen yet.
const MAX_DEPTH: usize = 3;

/// One desktop session, as its `local_*.json` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DesktopEntry {
    pub title: Option<String>,
    /// `isArchived`: hidden unless the person asks for archived sessions.
    pub archived: bool,
    /// `lastActivityAt` (epoch milliseconds in the file).
    pub last_activity_at: Option<Timestamp>,
    pub cwd: Option<String>,
    pub model: Option<String>,
}

/// Desktop entries keyed by `cliSessionId` (= the transcript's file stem).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesktopIndex {
    pub by_cli_session: HashMap<String, DesktopEntry>,
    /// Files that could not be read or parsed, or lacked `cliSessionId`.
    pub skipped: u32,
    /// Cowork entries with a `sessionType` (internal or scheduled sessions),
    /// left out on purpose.
    pub hidden: u32,
}

impl DesktopIndex {
    pub fn get(&self, cli_session_id: &str) -> Option<&DesktopEntry> {
        self.by_cli_session.get(cli_session_id)
    }
}

/// The desktop app's data directory on Linux: `<home>/.config/Claude` (the
/// Electron default, unverified for an official Linux build; callers may
/// override it).
pub fn default_user_data_dir(home: &Path) -> PathBuf {
    home.join(".config").join("Claude")
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    cli_session_id: Option<String>,
    title: Option<String>,
    is_archived: Option<bool>,
    last_activity_at: Option<serde_json::Value>,
    cwd: Option<String>,
    model: Option<String>,
    session_type: Option<serde_json::Value>,
}

enum Parsed {
    Entry(String, DesktopEntry),
    Hidden,
}

fn parse(bytes: &[u8]) -> Option<Parsed> {
    let raw: Raw = serde_json::from_slice(bytes).ok()?;
    if raw.session_type.is_some_and(|v| !v.is_null()) {
        return Some(Parsed::Hidden);
    }
    let id = raw.cli_session_id.filter(|s| !s.is_empty())?;
    Some(Parsed::Entry(
        id,
        DesktopEntry {
            title: raw.title.filter(|t| !t.trim().is_empty()),
            archived: raw.is_archived.unwrap_or(false),
            last_activity_at: raw
                .last_activity_at
                .as_ref()
                .and_then(super::registry::as_time),
            cwd: raw.cwd,
            model: raw.model,
        },
    ))
}

/// Loads every `local_*.json` under `<user_data_dir>/claude-code-sessions`
/// and `<user_data_dir>/local-agent-mode-sessions`. Never fails: a missing
/// directory gives an empty index. Two files naming one `cliSessionId`: the
/// newer `lastActivityAt` wins.
pub fn load(user_data_dir: &Path) -> DesktopIndex {
    let mut idx = DesktopIndex::default();
    for store in ["claude-code-sessions", "local-agent-mode-sessions"] {
        walk(&user_data_dir.join(store), 0, &mut idx);
    }
    idx
}

fn walk(dir: &Path, depth: usize, idx: &mut DesktopIndex) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for ent in rd.flatten() {
        let Ok(ft) = ent.file_type() else { continue };
        let path = ent.path();
        let name = ent.file_name();
        let name = name.to_string_lossy();
        if ft.is_dir() && depth < MAX_DEPTH {
            walk(&path, depth + 1, idx);
        } else if ft.is_file() && name.starts_with("local_") && name.ends_with(".json") {
            add_file(&path, idx);
        }
    }
}

fn add_file(path: &Path, idx: &mut DesktopIndex) {
    let parsed = crate::safefs::read_small(path, MAX_DESKTOP_FILE)
        .ok()
        .and_then(|b| parse(&b));
    match parsed {
        None => idx.skipped += 1,
        Some(Parsed::Hidden) => idx.hidden += 1,
        Some(Parsed::Entry(id, e)) => match idx.by_cli_session.get(&id) {
            Some(old) if old.last_activity_at >= e.last_activity_at => {}
            _ => {
                idx.by_cli_session.insert(id, e);
            }
        },
    }
}
