//! Enrichment of a finished capture: match its process trees to sessions
//! (`matching`), then store the parsed sessions, raw transcript copies,
//! trees and bindings, and run what derives from them (correlations).
//!
//! Matching decides; this module only gathers its inputs and stores its
//! result, through the store's read-write handle (`store::CaptureRw`).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use rusqlite::Connection;

use crate::{
    clock::Anchors,
    matching::{
        FallbackSession, FdObservation, PathEvidence, ProcTable, SessionKey, Tree, TreeStatus,
        fd_evidence, match_trees, transcript_writes,
    },
    sessions::{self, DiscoveryOptions},
    store::{
        CaptureRw, StoreError,
        sessions::{self as stored, BindingRow, TreeRow},
    },
};

#[derive(Debug, thiserror::Error)]
pub enum EnrichError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Options for binding at the end of `record` (or re-binding a capture).
#[derive(Debug, Clone)]
pub struct BindOptions {
    /// Homes whose sessions are cwd-fallback candidates.
    pub homes: Vec<PathBuf>,
    /// Copy raw transcripts into the capture.
    pub copy_transcripts: bool,
    /// Byte budget for all transcript copies together.
    pub transcript_budget: u64,
    pub fd_observations: Vec<FdObservation>,
}

impl Default for BindOptions {
    fn default() -> Self {
        BindOptions {
            homes: Vec::new(),
            copy_transcripts: true,
            transcript_budget: DEFAULT_TRANSCRIPT_BUDGET,
            fd_observations: Vec::new(),
        }
    }
}

/// Default budget for raw transcript copies (all sessions together).
pub const DEFAULT_TRANSCRIPT_BUDGET: u64 = 256 * 1024 * 1024;

/// What binding stored.
#[derive(Debug, Clone, Default)]
pub struct BindSummary {
    pub trees: usize,
    pub bound: usize,
    pub sessions: Vec<String>,
    pub transcript_bytes: u64,
    pub notes: Vec<String>,
}

/// The main transcript of a session among the paths that named it.
fn main_path(key: &SessionKey, paths: &[String]) -> Option<PathBuf> {
    let id = &key.1;
    if let Some(p) = paths.iter().find(|p| {
        Path::new(p)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.contains(id.as_str()))
            && !p.contains("/subagents/")
    }) {
        return Some(PathBuf::from(p));
    }
    for p in paths {
        // Claude ≥ 2.1.2 subagents live in <project>/<id>/subagents/…
        if let Some(i) = p.find(&format!("/{id}/subagents/")) {
            return Some(PathBuf::from(format!("{}/{id}.jsonl", &p[..i])));
        }
    }
    paths.first().map(PathBuf::from)
}

/// What runs on the capture once the bindings are committed (record passes
/// `correlate::store_all`): data derived from them, in its own
/// transaction. A parameter, so enrichment does not depend on correlate.
pub type AfterBinding<'a> = &'a dyn Fn(&Connection, &str) -> Result<(), String>;

/// Matches the finished capture at `path`, and stores into it the parsed
/// sessions, raw transcript copies, trees and bindings, then runs `after`.
pub fn bind_and_store(
    path: &Path,
    opts: &BindOptions,
    after: AfterBinding,
) -> Result<BindSummary, EnrichError> {
    let rw = CaptureRw::open(path)?;
    let (conn, shown) = (rw.conn(), rw.path.as_str());
    let qe = |e: rusqlite::Error| rw.query_err(e);
    stored::ensure_schema(conn, shown)?;
    conn.execute_batch("BEGIN").map_err(qe)?;
    stored::clear(conn, shown)?;
    let procs = ProcTable::load(conn).map_err(qe)?;
    let anchors = Anchors::load(conn).map_err(qe)?;
    for o in &opts.fd_observations {
        let start = procs
            .alive(o.pid, o.mono_ns)
            .map(|i| procs.procs[i].start_mono_ns)
            .unwrap_or(0);
        stored::insert_proc_fd(conn, shown, o.pid, start, o.mono_ns, &o.path)?;
    }
    let mut evidence = transcript_writes(conn, &procs).map_err(qe)?;
    evidence.extend(fd_evidence(&opts.fd_observations, &procs));
    let mut summary = BindSummary::default();
    let fallback = fallback_sessions(&anchors, &opts.homes, &mut summary.notes);
    let trees = match_trees(&procs, &anchors, &evidence, &fallback);
    let mut sessions = SessionStore {
        rw: &rw,
        budget: if opts.copy_transcripts {
            opts.transcript_budget
        } else {
            0
        },
        copy: opts.copy_transcripts,
        summary: &mut summary,
        rows: HashMap::new(),
    };
    for b in trees.iter().flat_map(|t| &t.bindings) {
        sessions.store(&b.key, &evidence, &fallback)?;
    }
    let session_rows = sessions.rows;
    store_trees(&rw, &procs, &trees, &session_rows, &mut summary)?;
    conn.execute_batch("COMMIT").map_err(qe)?;
    // Derived data (correlations): computed from what was just stored, in
    // its own transaction, so a failure here leaves the bindings intact.
    if let Err(e) = after(conn, shown) {
        summary.notes.push(format!("correlations not stored: {e}"));
    }
    Ok(summary)
}

/// cwd-fallback candidates: sessions of the given homes active during the
/// capture (by its first and last clock anchors).
fn fallback_sessions(
    anchors: &Anchors,
    homes: &[PathBuf],
    notes: &mut Vec<String>,
) -> Vec<FallbackSession> {
    let (Some(first), Some(last)) = (
        anchors.0.first().map(|a| a.1 / 1_000_000),
        anchors.0.last().map(|a| a.1 / 1_000_000),
    ) else {
        return Vec::new();
    };
    let mut fallback = Vec::new();
    for home in homes {
        let d = DiscoveryOptions {
            home: Some(home.clone()),
            ..Default::default()
        };
        let list = match sessions::discover(&d) {
            Ok(list) => list,
            Err(e) => {
                notes.push(format!("sessions under {}: {e}", home.display()));
                continue;
            }
        };
        for s in list {
            let (Some(cwd), Some(start)) = (s.cwd.clone(), s.start_ms) else {
                continue;
            };
            if s.updated_ms + 5_000 < first || start > last + 5_000 {
                continue;
            }
            fallback.push(FallbackSession {
                key: (s.provider, s.session_id.clone()),
                path: s.path.clone(),
                cwd,
                start_ms: start,
                end_ms: Some(s.updated_ms),
            });
        }
    }
    fallback
}

/// Stores each bound session once (parsed, with raw copies of its
/// transcripts within the byte budget).
struct SessionStore<'a> {
    rw: &'a CaptureRw,
    /// Bytes of transcript copies still allowed.
    budget: u64,
    copy: bool,
    summary: &'a mut BindSummary,
    /// Session → its `sessions` row.
    rows: HashMap<SessionKey, i64>,
}

impl SessionStore<'_> {
    fn store(
        &mut self,
        key: &SessionKey,
        evidence: &[PathEvidence],
        fallback: &[FallbackSession],
    ) -> Result<(), StoreError> {
        if self.rows.contains_key(key) {
            return Ok(());
        }
        let mut paths: Vec<String> = evidence
            .iter()
            .filter(|e| &e.key == key)
            .map(|e| e.path.clone())
            .collect();
        if let Some(p) = fallback.iter().find(|f| &f.key == key) {
            paths.push(p.path.display().to_string());
        }
        paths.sort();
        paths.dedup();
        let Some(main) = main_path(key, &paths) else {
            return Ok(());
        };
        let session = match sessions::parse_file(key.0, &main) {
            Ok(s) => s,
            Err(e) => {
                self.summary.notes.push(format!("session {}: {e}", key.1));
                let mut s = sessions::AgentSession::new(key.0, key.1.clone(), main.clone());
                s.stats.first_error = Some(e.to_string());
                s
            }
        };
        let (conn, shown) = (self.rw.conn(), self.rw.path.as_str());
        let row = stored::insert_session(conn, shown, &session)?;
        self.rows.insert(key.clone(), row);
        self.summary.sessions.push(key.1.clone());
        if !self.copy {
            return Ok(());
        }
        let mut files: Vec<String> = vec![main.display().to_string()];
        files.extend(paths.iter().cloned());
        for sub in &session.subagents {
            files.push(sub.source_path.display().to_string());
        }
        files.sort();
        files.dedup();
        for f in files {
            self.copy_transcript(row, &f)?;
        }
        Ok(())
    }

    /// Copies one transcript file into the capture, as much as the budget
    /// allows (a part copy is noted).
    fn copy_transcript(&mut self, session_row: i64, f: &str) -> Result<(), StoreError> {
        // A regular file, not through a link, the home owner's.
        let file = match sessions::util::open_regular(Path::new(f)) {
            Ok(file) => file,
            Err(sessions::SessionError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(());
            }
            Err(e) => {
                self.summary
                    .notes
                    .push(format!("transcript not copied: {e}"));
                return Ok(());
            }
        };
        let Ok(meta) = file.metadata() else {
            return Ok(());
        };
        let size = meta.len();
        let take = size.min(self.budget);
        let content = match read_prefix(file, take) {
            Ok(c) => c,
            Err(e) => {
                self.summary.notes.push(format!("cannot copy {f}: {e}"));
                return Ok(());
            }
        };
        self.budget -= content.len() as u64;
        self.summary.transcript_bytes += content.len() as u64;
        if (content.len() as u64) < size {
            self.summary.notes.push(format!(
                "transcript {f} copied only in part ({} of {size} bytes): copy budget spent",
                content.len()
            ));
        }
        let (conn, shown) = (self.rw.conn(), self.rw.path.as_str());
        stored::insert_transcript(conn, shown, session_row, f, size, &content)
    }
}

/// Stores every tree and the bindings of those whose session was stored.
fn store_trees(
    rw: &CaptureRw,
    procs: &ProcTable,
    trees: &[Tree],
    session_rows: &HashMap<SessionKey, i64>,
    summary: &mut BindSummary,
) -> Result<(), StoreError> {
    let (conn, shown) = (rw.conn(), rw.path.as_str());
    for t in trees {
        let p = &procs.procs[t.root];
        let tree_id = stored::insert_tree(
            conn,
            shown,
            &TreeRow {
                id: 0,
                root_process_id: p.id,
                root_pid: p.pid as i64,
                root_start_mono_ns: p.start_mono_ns as i64,
                status: t.status.to_string(),
                note: t.note.clone(),
            },
        )?;
        summary.trees += 1;
        if t.status == TreeStatus::Bound {
            summary.bound += 1;
        }
        for b in &t.bindings {
            let Some(&session_row) = session_rows.get(&b.key) else {
                continue;
            };
            stored::insert_binding(
                conn,
                shown,
                &BindingRow {
                    tree_id,
                    session_row,
                    evidence: b.evidence.as_str().to_string(),
                    evidence_count: b.evidence_count,
                    evidence_process_id: b.evidence_proc.map(|i| procs.procs[i].id),
                    evidence_path: b.evidence_path.clone(),
                    first_evidence_mono_ns: b.first_evidence_mono_ns.map(|v| v as i64),
                    from_mono_ns: b.from_mono_ns as i64,
                    to_mono_ns: b.to_mono_ns.map(|v| v as i64),
                },
            )?;
        }
    }
    Ok(())
}

fn read_prefix(f: std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    f.take(max).read_to_end(&mut out)?;
    Ok(out)
}
