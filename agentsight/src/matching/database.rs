//! Evidence from a session store shared by many sessions: opencode (≥ 1.2)
//! keeps every session in one SQLite database (`opencode.db`, WAL), so a
//! write to it names no session. A process that wrote the database (or held
//! it open at a `/proc` scan) is bound to the sessions the database says
//! were active while it lived, in its cwd: the provider's reader lists them
//! (`DbSession`, passed in as `resolve`, so matching stays pure).
//!
//! Rules: a child session (`parent_id`, a subagent) binds as its root
//! session; a session two overlapping writer processes could both have
//! written is left to neither (ambiguous, as the cwd fallback does);
//! writers one after the other (a resumed session) each bind it.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use super::{Evidence, FdObservation, PathEvidence, ProcTable, canonical};
use crate::{
    clock::Anchors,
    sessions::Provider,
    store::{CaptureReader, StoreError},
};

/// One session row of a shared database, as the provider's reader lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbSession {
    pub id: String,
    /// The session's working directory, as the agent stored it.
    pub directory: Option<String>,
    pub parent_id: Option<String>,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// Lists the sessions of a database created or updated in `[from_ms, to_ms]`.
pub type Resolve<'a> = &'a dyn Fn(Provider, &Path, i64, i64) -> Vec<DbSession>;

/// A process of the capture that wrote (or held open) a shared database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbTouch {
    pub proc: usize,
    pub provider: Provider,
    /// The database file (its `-wal` named by the database).
    pub db: PathBuf,
    pub mono_ns: u64,
    pub count: i64,
    pub kind: Evidence,
}

/// The database a path belongs to, if it is a provider's shared session
/// store: opencode's `<data>/opencode/opencode.db` or `opencode-<channel>.db`
/// (and its `-wal`). The names are opencode's (1.2 … 1.18, verified on
/// 1.18.33); `OPENCODE_DB` may put it elsewhere under another name, which
/// only the cwd fallback then binds.
pub fn shared_database(path: &str) -> Option<(Provider, PathBuf)> {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let db = path.strip_suffix("-wal").unwrap_or(path);
    let p = Path::new(db);
    let name = p.file_name()?.to_str()?;
    let dir = p.parent()?.file_name()?.to_str()?;
    let channel_db = name
        .strip_prefix("opencode-")
        .and_then(|r| r.strip_suffix(".db"))
        .is_some_and(|c| !c.is_empty() && !c.contains('.'));
    (dir == "opencode" && (name == "opencode.db" || channel_db))
        .then(|| (Provider::Opencode, p.to_path_buf()))
}

/// Writes of shared databases by processes of the capture, and `/proc` fd
/// observations of them (an agent adopted after it opened the database).
pub fn database_touches(
    cap: CaptureReader,
    procs: &ProcTable,
    fd_obs: &[FdObservation],
) -> Result<Vec<DbTouch>, StoreError> {
    let mut agg: BTreeMap<(usize, PathBuf, Evidence), (Provider, u64, i64)> = BTreeMap::new();
    for w in cap.database_like_writes()? {
        let (Some((provider, db)), Some(&proc)) =
            (shared_database(&w.path), procs.by_id.get(&w.process_id))
        else {
            continue;
        };
        let mono = w.first_mono_ns.max(0) as u64;
        let e = agg
            .entry((proc, db, Evidence::DatabaseWrite))
            .or_insert((provider, mono, 0));
        e.1 = e.1.min(mono);
        e.2 += w.count;
    }
    for o in fd_obs {
        let (Some((provider, db)), Some(proc)) =
            (shared_database(&o.path), procs.alive(o.pid, o.mono_ns))
        else {
            continue;
        };
        let e = agg
            .entry((proc, db, Evidence::ProcFd))
            .or_insert((provider, o.mono_ns, 0));
        e.1 = e.1.min(o.mono_ns);
        e.2 += 1;
    }
    let touches = agg
        .into_iter()
        .map(|((proc, db, kind), (provider, mono_ns, count))| DbTouch {
            proc,
            provider,
            db,
            mono_ns,
            count,
            kind,
        })
        .collect();
    Ok(without_inherited_fds(procs, touches))
}

/// Drops the fd observations a write already explains: a process seen
/// writing the database is named by that write, and so is its tree — a
/// child caught between fork and exec still holds the writer's descriptor
/// (opencode's `git` children), which is no evidence of its own.
pub(super) fn without_inherited_fds(procs: &ProcTable, touches: Vec<DbTouch>) -> Vec<DbTouch> {
    let writers: Vec<(usize, PathBuf)> = touches
        .iter()
        .filter(|t| t.kind == Evidence::DatabaseWrite)
        .map(|t| (t.proc, t.db.clone()))
        .collect();
    touches
        .into_iter()
        .filter(|t| {
            t.kind == Evidence::DatabaseWrite
                || !writers
                    .iter()
                    .any(|(w, db)| *db == t.db && related(procs, *w, t.proc))
        })
        .collect()
}

/// Session evidence from database touches: each touching process gets the
/// root sessions of its cwd active while it lived, unless another touching
/// process alive at the same time could have written them too.
pub fn database_evidence(
    procs: &ProcTable,
    anchors: &Anchors,
    touches: &[DbTouch],
    resolve: Resolve<'_>,
) -> Vec<PathEvidence> {
    // Each touching process's life in wall ms (a running one: open-ended).
    let life = |t: &DbTouch| {
        let p = &procs.procs[t.proc];
        (
            anchors.wall_ms(p.start_mono_ns),
            p.end_mono_ns.map_or(i64::MAX, |e| anchors.wall_ms(e)),
        )
    };
    let mut out = Vec::new();
    let mut dbs: Vec<(Provider, &PathBuf)> = touches.iter().map(|t| (t.provider, &t.db)).collect();
    dbs.sort();
    dbs.dedup();
    for (provider, db) in dbs {
        let mine: Vec<&DbTouch> = touches
            .iter()
            .filter(|t| t.provider == provider && &t.db == db)
            .collect();
        let from = mine.iter().map(|t| life(t).0).min().unwrap_or(0);
        let to = mine.iter().map(|t| life(t).1).max().unwrap_or(i64::MAX);
        let listed = resolve(
            provider,
            db,
            from.saturating_sub(SLACK_MS),
            to.saturating_add(SLACK_MS),
        );
        for s in &listed {
            let Some(dir) = s.directory.as_deref().map(canonical) else {
                continue;
            };
            let writers: Vec<&DbTouch> = mine
                .iter()
                .copied()
                .filter(|t| {
                    let (a, b) = life(t);
                    let cwd = procs.procs[t.proc].cwd.as_deref().map(canonical);
                    cwd.as_deref() == Some(dir.as_str())
                        && s.updated_ms.saturating_add(SLACK_MS) >= a
                        && s.created_ms <= b.saturating_add(SLACK_MS)
                })
                .collect();
            let key = (provider, root_of(s, &listed));
            for w in &writers {
                let (a, b) = life(w);
                let overlapped = writers.iter().any(|o| {
                    let (c, d) = life(o);
                    !related(procs, o.proc, w.proc) && c < b && a < d
                });
                if overlapped {
                    continue;
                }
                out.push(PathEvidence {
                    proc: w.proc,
                    key: key.clone(),
                    kind: w.kind,
                    path: db.display().to_string(),
                    mono_ns: anchors.mono_of_ms(s.created_ms).max(w.mono_ns),
                    count: w.count,
                });
            }
        }
    }
    out
}

/// One process is the other or an ancestor of it (one agent's tree).
fn related(procs: &ProcTable, a: usize, b: usize) -> bool {
    let above = |mut x: usize, y: usize| loop {
        if x == y {
            return true;
        }
        match procs.procs[x].parent {
            Some(p) => x = p,
            None => return false,
        }
    };
    above(a, b) || above(b, a)
}

/// How far a session's times may lie outside its writer's life: the agent
/// stamps rows with its own clock, read around the process's exec and exit.
const SLACK_MS: i64 = 1_000;

/// The root of a session's parent chain among the listed sessions (a parent
/// not listed is still the native id the child names).
fn root_of(s: &DbSession, listed: &[DbSession]) -> String {
    let mut id = &s.id;
    let mut parent = s.parent_id.as_ref();
    // Bounded: a cycle in stored data must not hang the binding.
    for _ in 0..=listed.len() {
        let Some(p) = parent else { break };
        id = p;
        parent = listed
            .iter()
            .find(|x| &x.id == p)
            .and_then(|x| x.parent_id.as_ref());
    }
    id.clone()
}

#[cfg(test)]
mod tests;
