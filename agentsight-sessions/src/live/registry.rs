//! Claude Code's live registry, `~/.claude/sessions/<pid>.json`:
//! undocumented and version-dependent, so every field but `sessionId` and
//! `pid` is optional and an unrecognised `status` is kept as
//! [`Status::Other`] (shown as unknown, never idle). The transcript stays the
//! source of the state; the registry confirms liveness or demotes it.

use std::collections::HashMap;
use std::path::Path;

use jiff::Timestamp;
use serde::Deserialize;

use super::ProcessTruth;

/// Registry files are a few hundred bytes; more than this is not one.
const MAX_REGISTRY_FILE: u64 = 64 * 1024;

/// The registry's `status` word.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Status {
    Busy,
    Waiting,
    Idle,
    /// Any other value, kept verbatim.
    Other(String),
}

impl Status {
    pub fn from_word(w: &str) -> Status {
        match w {
            "busy" => Status::Busy,
            "waiting" => Status::Waiting,
            "idle" => Status::Idle,
            other => Status::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Status::Busy => "busy",
            Status::Waiting => "waiting",
            Status::Idle => "idle",
            Status::Other(w) => w,
        }
    }
}

/// One registry file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub pid: u32,
    /// `sessionId` = the transcript's file stem.
    pub session_id: String,
    /// `procStart`: start time in clock ticks since boot, as field 22 of
    /// `/proc/<pid>/stat`.
    pub proc_start: Option<u64>,
    pub status: Option<Status>,
    /// `waitingFor` beside `status: waiting` (Claude Code 2.1.3xx: `input
    /// needed`, `dialog open`, a permission dialog's own words…), verbatim.
    pub waiting_for: Option<String>,
    pub cwd: Option<String>,
    pub name: Option<String>,
    pub version: Option<String>,
    pub started_at: Option<Timestamp>,
    pub updated_at: Option<Timestamp>,
}

/// Why a registry file was not used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("not a JSON object: {0}")]
    Json(String),
    #[error("no {0} field")]
    Missing(&'static str),
}

/// Lenient shape: numbers may come as strings, times as epoch ms or text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    pid: Option<serde_json::Value>,
    session_id: Option<String>,
    proc_start: Option<serde_json::Value>,
    status: Option<String>,
    waiting_for: Option<String>,
    cwd: Option<String>,
    name: Option<String>,
    version: Option<String>,
    started_at: Option<serde_json::Value>,
    updated_at: Option<serde_json::Value>,
}

fn as_u64(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A time as epoch milliseconds (number or digit string) or RFC 3339 text.
pub(crate) fn as_time(v: &serde_json::Value) -> Option<Timestamp> {
    let ms = match v {
        serde_json::Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        serde_json::Value::String(s) => match s.trim().parse::<i64>() {
            Ok(ms) => Some(ms),
            Err(_) => crate::util::parse_ts(s),
        },
        _ => None,
    }?;
    Timestamp::from_millisecond(ms).ok()
}

/// Parses one registry file's bytes.
pub fn parse(bytes: &[u8]) -> Result<Entry, RegistryError> {
    let raw: Raw = serde_json::from_slice(bytes).map_err(|e| RegistryError::Json(e.to_string()))?;
    let session_id = raw
        .session_id
        .filter(|s| !s.is_empty())
        .ok_or(RegistryError::Missing("sessionId"))?;
    let pid = raw
        .pid
        .as_ref()
        .and_then(as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or(RegistryError::Missing("pid"))?;
    Ok(Entry {
        pid,
        session_id,
        proc_start: raw.proc_start.as_ref().and_then(as_u64),
        status: raw.status.as_deref().map(Status::from_word),
        waiting_for: raw.waiting_for.filter(|w| !w.is_empty()),
        cwd: raw.cwd,
        name: raw.name,
        version: raw.version,
        started_at: raw.started_at.as_ref().and_then(as_time),
        updated_at: raw.updated_at.as_ref().and_then(as_time),
    })
}

/// Field 22 (`starttime`) of a `/proc/<pid>/stat` line. The command name
/// (field 2) may hold spaces and parentheses, so fields are counted after
/// the last `)`.
pub fn stat_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ")": field 3 (state) is the first; starttime is field 22.
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

impl Entry {
    /// Liveness from `<proc_root>/<pid>/stat`: alive when the pid exists and
    /// its start time equals `procStart`; a dead or reused pid is
    /// [`ProcessTruth::Exited`]; without `procStart` a live pid is trusted.
    /// An unreadable stat other than "no such process" says nothing.
    pub fn process_truth(&self, proc_root: &Path) -> ProcessTruth {
        let path = proc_root.join(self.pid.to_string()).join("stat");
        match std::fs::read_to_string(&path) {
            Ok(stat) => match (self.proc_start, stat_start_time(&stat)) {
                (Some(want), Some(got)) if want != got => ProcessTruth::Exited,
                (Some(_), None) => ProcessTruth::Unknown,
                _ => ProcessTruth::Alive,
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ProcessTruth::Exited,
            Err(_) => ProcessTruth::Unknown,
        }
    }

    fn newer_than(&self, other: &Entry) -> bool {
        (self.updated_at, self.started_at, self.proc_start)
            > (other.updated_at, other.started_at, other.proc_start)
    }
}

/// All registry entries of a `sessions/` directory, keyed by session id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    /// One entry per session: the newest by `updatedAt` when several
    /// processes claim one session (a resume in a second terminal).
    pub by_session: HashMap<String, Entry>,
    /// Files that could not be read or parsed.
    pub skipped: u32,
}

/// Loads `<dir>/*.json` (regular files only, not followed through links).
/// Never fails: a missing or unreadable directory is empty.
pub fn load(dir: &Path) -> Registry {
    let mut reg = Registry::default();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return reg;
    };
    for ent in rd.flatten() {
        let path = ent.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let entry = crate::safefs::read_small(&path, MAX_REGISTRY_FILE)
            .ok()
            .and_then(|b| parse(&b).ok());
        let Some(entry) = entry else {
            reg.skipped += 1;
            continue;
        };
        match reg.by_session.get(&entry.session_id) {
            Some(old) if !entry.newer_than(old) => {}
            _ => {
                reg.by_session.insert(entry.session_id.clone(), entry);
            }
        }
    }
    reg
}
