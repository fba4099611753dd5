//! Process tree ↔ session matching.
//!
//! Evidence, strongest first, each kept with its kind:
//! 1. `transcript_write`: a process of the tree opened a session transcript
//!    for writing (or renamed/created/truncated it), seen by our own capture;
//! 2. `proc_fd`: the transcript was open in `/proc/PID/fd` at a scan;
//! 3. `sticky`: a live tree that a capture bound earlier, with no contrary
//!    evidence now (used by `agentsight pid`);
//! 4. `cwd_fallback`: same canonical cwd and a start time close to the
//!    session's, accepted only one-to-one; anything ambiguous stays unbound.
//!
//! Path evidence always beats cwd: a tree with path evidence is never
//! cwd-bound, and a session with path evidence is never cwd-bound elsewhere.
//!
//! A tree is the largest subtree around the writing processes that contains
//! no writer of an unrelated session: a wrapper (`sh -c 'agentA & agentB'`)
//! is split into one tree per agent, while one agent process that writes two
//! sessions in turn (`/clear`, resume) is one tree bound to each for its span.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::{Path, PathBuf},
};

use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use crate::{
    sessions::{self, DiscoveryOptions, Provider},
    store::{
        StoreError,
        sessions::{self as stored, BindingRow, TreeRow},
    },
};

#[derive(Debug, thiserror::Error)]
pub enum MatchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path}: {reason}")]
    Open { path: String, reason: String },
}

/// Evidence kinds, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    TranscriptWrite,
    ProcFd,
    Sticky,
    CwdFallback,
}

impl Evidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::TranscriptWrite => "transcript_write",
            Evidence::ProcFd => "proc_fd",
            Evidence::Sticky => "sticky",
            Evidence::CwdFallback => "cwd_fallback",
        }
    }
}

/// One process of a capture, as matching and correlation need it.
#[derive(Debug, Clone)]
pub struct Proc {
    pub id: i64,
    pub pid: u32,
    pub start_mono_ns: u64,
    pub parent: Option<usize>,
    pub end_mono_ns: Option<u64>,
    pub cwd: Option<String>,
    pub argv: Vec<String>,
    pub comm: Option<String>,
    pub uid: Option<u32>,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
}

/// The processes of a capture with parent/child links by index.
#[derive(Debug, Default)]
pub struct ProcTable {
    pub procs: Vec<Proc>,
    pub by_id: HashMap<i64, usize>,
    pub children: Vec<Vec<usize>>,
}

impl ProcTable {
    pub fn load(conn: &Connection) -> rusqlite::Result<Self> {
        let mut st = conn.prepare(
            "SELECT id, pid, start_mono_ns, parent_id, end_mono_ns, cwd, argv, comm, uid, exit_code, signal
             FROM processes ORDER BY start_mono_ns, id",
        )?;
        let rows = st.query_map([], |r| {
            let argv: Option<String> = r.get(6)?;
            Ok((
                Proc {
                    id: r.get(0)?,
                    pid: r.get::<_, i64>(1)? as u32,
                    start_mono_ns: r.get::<_, i64>(2)?.max(0) as u64,
                    parent: None,
                    end_mono_ns: r.get::<_, Option<i64>>(4)?.map(|v| v.max(0) as u64),
                    cwd: r.get(5)?,
                    argv: argv
                        .and_then(|a| serde_json::from_str(&a).ok())
                        .unwrap_or_default(),
                    comm: r.get(7)?,
                    uid: r.get::<_, Option<i64>>(8)?.map(|u| u as u32),
                    exit_code: r.get(9)?,
                    signal: r.get(10)?,
                },
                r.get::<_, Option<i64>>(3)?,
            ))
        })?;
        let mut t = ProcTable::default();
        let mut parents = Vec::new();
        for row in rows {
            let (p, parent_id) = row?;
            t.by_id.insert(p.id, t.procs.len());
            t.procs.push(p);
            parents.push(parent_id);
        }
        t.children = vec![Vec::new(); t.procs.len()];
        for (i, parent_id) in parents.into_iter().enumerate() {
            if let Some(pi) = parent_id.and_then(|id| t.by_id.get(&id).copied())
                && pi != i
            {
                t.procs[i].parent = Some(pi);
                t.children[pi].push(i);
            }
        }
        Ok(t)
    }

    /// `root` and all its descendants.
    pub fn subtree(&self, root: usize) -> Vec<usize> {
        let mut out = vec![root];
        let mut i = 0;
        while i < out.len() {
            out.extend_from_slice(&self.children[out[i]]);
            i += 1;
        }
        out
    }

    /// Processes with no parent in the capture, in start order.
    pub fn roots(&self) -> Vec<usize> {
        (0..self.procs.len())
            .filter(|&i| self.procs[i].parent.is_none())
            .collect()
    }

    /// The process with `pid` alive at `mono_ns`.
    pub fn alive(&self, pid: u32, mono_ns: u64) -> Option<usize> {
        self.procs.iter().rposition(|p| {
            p.pid == pid
                && p.start_mono_ns <= mono_ns.saturating_add(1_000_000_000)
                && p.end_mono_ns.is_none_or(|e| e >= mono_ns)
        })
    }
}

/// The capture's monotonic↔wall anchors.
#[derive(Debug, Clone, Default)]
pub struct Anchors(pub Vec<(u64, i64)>);

impl Anchors {
    pub fn load(conn: &Connection) -> rusqlite::Result<Self> {
        let mut st = conn.prepare("SELECT mono_ns, wall_ns FROM clock_anchors ORDER BY mono_ns")?;
        let v = st
            .query_map([], |r| {
                Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Anchors(v))
    }

    /// Wall time (ns since the epoch) of a monotonic time, from the newest
    /// anchor at or before it (the first anchor for earlier times).
    pub fn wall_ns(&self, mono_ns: u64) -> i64 {
        let i = self.0.partition_point(|(m, _)| *m <= mono_ns);
        let Some(&(m, w)) = self.0.get(i.saturating_sub(1)) else {
            return mono_ns as i64;
        };
        w + (mono_ns as i64 - m as i64)
    }

    pub fn wall_ms(&self, mono_ns: u64) -> i64 {
        self.wall_ns(mono_ns).div_euclid(1_000_000)
    }

    /// Monotonic time of a wall time in ms.
    pub fn mono_of_ms(&self, wall_ms: i64) -> u64 {
        let wall_ns = wall_ms.saturating_mul(1_000_000);
        let i = self.0.partition_point(|(_, w)| *w <= wall_ns);
        let Some(&(m, w)) = self.0.get(i.saturating_sub(1)) else {
            return 0;
        };
        (m as i64 + (wall_ns - w)).max(0) as u64
    }
}

/// A session identity: provider and id.
pub type SessionKey = (Provider, String);

/// One piece of path evidence: a process and a transcript path.
#[derive(Debug, Clone)]
pub struct PathEvidence {
    pub proc: usize,
    pub key: SessionKey,
    pub kind: Evidence,
    pub path: String,
    pub mono_ns: u64,
    pub count: i64,
}

/// A `/proc/PID/fd` observation made while recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdObservation {
    pub pid: u32,
    pub mono_ns: u64,
    pub path: String,
}

/// Transcript paths written by processes of the capture.
pub fn transcript_writes(
    conn: &Connection,
    procs: &ProcTable,
) -> rusqlite::Result<Vec<PathEvidence>> {
    // The LIKE filters keep this to a handful of rows on large captures; the
    // shape check (`session_id_for_path`) then runs on distinct paths only.
    let mut st = conn.prepare(
        "SELECT process_id, path, MIN(mono_ns), COUNT(*) FROM events
         WHERE kind IN ('open','openat','openat2','creat','rename','renameat','renameat2','link','linkat','truncate')
           AND result >= 0 AND process_id IS NOT NULL
           AND (path LIKE '%.jsonl' OR path LIKE '%.json')
           AND (kind NOT IN ('open','openat','openat2')
                OR flags LIKE '%write%' OR flags LIKE '%create%' OR flags LIKE '%trunc%')
         GROUP BY process_id, path",
    )?;
    let rows: Vec<(i64, String, i64, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut ids: HashMap<String, Option<SessionKey>> = HashMap::new();
    let mut out = Vec::new();
    for (pid, path, mono, count) in rows {
        let key = ids
            .entry(path.clone())
            .or_insert_with(|| sessions::session_id_for_path(Path::new(&path)))
            .clone();
        let (Some(key), Some(&proc)) = (key, procs.by_id.get(&pid)) else {
            continue;
        };
        out.push(PathEvidence {
            proc,
            key,
            kind: Evidence::TranscriptWrite,
            path,
            mono_ns: mono.max(0) as u64,
            count,
        });
    }
    Ok(out)
}

/// Turns `/proc/PID/fd` observations into evidence on capture processes.
pub fn fd_evidence(obs: &[FdObservation], procs: &ProcTable) -> Vec<PathEvidence> {
    let mut agg: BTreeMap<(usize, String), (SessionKey, u64, i64)> = BTreeMap::new();
    for o in obs {
        let Some(key) = sessions::session_id_for_path(Path::new(&o.path)) else {
            continue;
        };
        let Some(proc) = procs.alive(o.pid, o.mono_ns) else {
            continue;
        };
        let e = agg
            .entry((proc, o.path.clone()))
            .or_insert((key, o.mono_ns, 0));
        e.1 = e.1.min(o.mono_ns);
        e.2 += 1;
    }
    agg.into_iter()
        .map(|((proc, path), (key, mono_ns, count))| PathEvidence {
            proc,
            key,
            kind: Evidence::ProcFd,
            path,
            mono_ns,
            count,
        })
        .collect()
}

/// A session that has no path evidence but may be cwd-bound.
#[derive(Debug, Clone)]
pub struct FallbackSession {
    pub key: SessionKey,
    pub path: PathBuf,
    pub cwd: String,
    pub start_ms: i64,
    pub end_ms: Option<i64>,
}

/// One binding of a tree to a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    pub key: SessionKey,
    pub evidence: Evidence,
    pub evidence_count: i64,
    /// Index of the earliest process that gave the evidence.
    pub evidence_proc: Option<usize>,
    pub evidence_path: Option<String>,
    pub first_evidence_mono_ns: Option<u64>,
    pub from_mono_ns: u64,
    pub to_mono_ns: Option<u64>,
}

/// A tree after matching.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tree {
    pub root: usize,
    /// `bound`, `unmatched` or `ambiguous`.
    pub status: &'static str,
    pub note: Option<String>,
    pub bindings: Vec<Binding>,
}

/// Canonical form of a cwd for comparison (symlinks resolved when the
/// directory still exists, trailing slashes dropped).
fn canonical(dir: &str) -> String {
    std::fs::canonicalize(dir)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| dir.trim_end_matches('/').to_string())
}

/// How far a tree's start may be from its session's start for a cwd match.
pub const CWD_START_SLACK_MS: i64 = 10 * 60 * 1000;

/// Matches trees to sessions. Pure: all inputs come from the capture (or
/// /proc) and the session files; the result says which evidence decided.
pub fn match_trees(
    procs: &ProcTable,
    anchors: &Anchors,
    evidence: &[PathEvidence],
    fallback: &[FallbackSession],
) -> Vec<Tree> {
    let n = procs.procs.len();
    let mut keys: Vec<SessionKey> = evidence.iter().map(|e| e.key.clone()).collect();
    keys.sort();
    keys.dedup();
    let key_ix = |k: &SessionKey| keys.binary_search(k).unwrap_or(0);
    let mut own: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for e in evidence {
        own[e.proc].insert(key_ix(&e.key));
    }
    // Sessions written anywhere in each subtree, children before parents.
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for r in procs.roots() {
        order.extend(procs.subtree(r));
    }
    let mut under: Vec<BTreeSet<usize>> = own.clone();
    for &i in order.iter().rev() {
        if let Some(p) = procs.procs[i].parent {
            let child = std::mem::take(&mut under[i]);
            under[p].extend(child.iter().copied());
            under[i] = child;
        }
    }
    // Each writer's tree root: climb while the parent's subtree holds no
    // writer of a session this writer does not write.
    let mut root_sessions: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for (w, mine) in own.iter().enumerate() {
        if mine.is_empty() {
            continue;
        }
        let mut a = w;
        while let Some(p) = procs.procs[a].parent {
            if under[p].is_subset(mine) {
                a = p;
            } else {
                break;
            }
        }
        root_sessions.entry(a).or_default().extend(mine.iter());
    }
    // A root found for one writer may sit inside another's (both write S):
    // keep the outermost.
    let bound_roots: BTreeSet<usize> = root_sessions.keys().copied().collect();
    let mut contains_bound = vec![false; n];
    for &i in order.iter().rev() {
        if bound_roots.contains(&i) {
            contains_bound[i] = true;
        }
        if contains_bound[i]
            && let Some(p) = procs.procs[i].parent
        {
            contains_bound[p] = true;
        }
    }
    // Unit trees: bound roots, and maximal subtrees holding none.
    let mut units: Vec<usize> = Vec::new();
    let mut stack: Vec<usize> = procs.roots();
    stack.reverse();
    while let Some(i) = stack.pop() {
        if bound_roots.contains(&i) || !contains_bound[i] {
            units.push(i);
        } else {
            for &c in procs.children[i].iter().rev() {
                stack.push(c);
            }
        }
    }
    units.sort_by_key(|&i| (procs.procs[i].start_mono_ns, i));

    let mut trees: Vec<Tree> = Vec::new();
    for &u in &units {
        let Some(sess) = root_sessions.get(&u) else {
            trees.push(Tree {
                root: u,
                status: "unmatched",
                note: Some("no transcript evidence".into()),
                bindings: Vec::new(),
            });
            continue;
        };
        let members: BTreeSet<usize> = procs.subtree(u).into_iter().collect();
        let mut bs: Vec<Binding> = sess
            .iter()
            .map(|&k| {
                let ev: Vec<&PathEvidence> = evidence
                    .iter()
                    .filter(|e| key_ix(&e.key) == k && members.contains(&e.proc))
                    .collect();
                let kind = ev
                    .iter()
                    .map(|e| e.kind)
                    .min()
                    .unwrap_or(Evidence::TranscriptWrite);
                let first = ev
                    .iter()
                    .filter(|e| e.kind == kind)
                    .min_by_key(|e| e.mono_ns);
                Binding {
                    key: keys[k].clone(),
                    evidence: kind,
                    evidence_count: ev.iter().filter(|e| e.kind == kind).map(|e| e.count).sum(),
                    evidence_proc: first.map(|e| e.proc),
                    evidence_path: first.map(|e| e.path.clone()),
                    first_evidence_mono_ns: first.map(|e| e.mono_ns),
                    from_mono_ns: 0,
                    to_mono_ns: None,
                }
            })
            .collect();
        bs.sort_by_key(|b| b.first_evidence_mono_ns);
        // Spans: the first session from the tree's start; each later one
        // from its first evidence; each ends where the next begins.
        let starts: Vec<u64> = bs
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if i == 0 {
                    procs.procs[u].start_mono_ns
                } else {
                    b.first_evidence_mono_ns.unwrap_or(0)
                }
            })
            .collect();
        for (i, b) in bs.iter_mut().enumerate() {
            b.from_mono_ns = starts[i];
            b.to_mono_ns = starts.get(i + 1).copied().or(procs.procs[u].end_mono_ns);
        }
        trees.push(Tree {
            root: u,
            status: "bound",
            note: None,
            bindings: bs,
        });
    }

    // cwd fallback, one-to-one, for sessions with no path evidence.
    let fb: Vec<&FallbackSession> = fallback
        .iter()
        .filter(|s| keys.binary_search(&s.key).is_err())
        .collect();
    let mut cands_of_tree: Vec<Vec<usize>> = vec![Vec::new(); trees.len()];
    let mut cands_of_sess: Vec<Vec<usize>> = vec![Vec::new(); fb.len()];
    for (ti, t) in trees.iter().enumerate() {
        if t.status != "unmatched" {
            continue;
        }
        let p = &procs.procs[t.root];
        let Some(cwd) = p.cwd.as_deref().map(canonical) else {
            continue;
        };
        let start_ms = anchors.wall_ms(p.start_mono_ns);
        let end_ms = p.end_mono_ns.map(|e| anchors.wall_ms(e));
        for (si, s) in fb.iter().enumerate() {
            let alive = end_ms.is_none_or(|e| e + 5_000 >= s.start_ms);
            let close = (s.start_ms - start_ms).abs() <= CWD_START_SLACK_MS
                && start_ms <= s.start_ms + 5_000;
            if alive && close && canonical(&s.cwd) == cwd {
                cands_of_tree[ti].push(si);
                cands_of_sess[si].push(ti);
            }
        }
    }
    for ti in 0..trees.len() {
        match cands_of_tree[ti].as_slice() {
            [] => {}
            [si] if cands_of_sess[*si].len() == 1 => {
                let s = fb[*si];
                let root = trees[ti].root;
                trees[ti].status = "bound";
                trees[ti].note = None;
                trees[ti].bindings.push(Binding {
                    key: s.key.clone(),
                    evidence: Evidence::CwdFallback,
                    evidence_count: 1,
                    evidence_proc: Some(root),
                    evidence_path: Some(s.path.display().to_string()),
                    first_evidence_mono_ns: None,
                    from_mono_ns: procs.procs[root].start_mono_ns,
                    to_mono_ns: procs.procs[root].end_mono_ns,
                });
            }
            many => {
                let mut names: Vec<String> = many.iter().map(|&si| fb[si].key.1.clone()).collect();
                for &si in many {
                    for &other in &cands_of_sess[si] {
                        if other != ti {
                            names.push(format!(
                                "tree of pid {}",
                                procs.procs[trees[other].root].pid
                            ));
                        }
                    }
                }
                names.dedup();
                trees[ti].status = "ambiguous";
                trees[ti].note = Some(format!(
                    "same cwd as several candidates, left unbound: {}",
                    names.join(", ")
                ));
            }
        }
    }
    trees
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
/// transaction. A parameter, so matching does not depend on correlate
/// (which depends on matching).
pub type AfterBinding<'a> = &'a dyn Fn(&Connection, &str) -> Result<(), String>;

/// Matches the finished capture at `path`, and stores into it the parsed
/// sessions, raw transcript copies, trees and bindings, then runs `after`.
pub fn bind_and_store(
    path: &Path,
    opts: &BindOptions,
    after: AfterBinding,
) -> Result<BindSummary, MatchError> {
    let shown = path.display().to_string();
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(|e| {
            MatchError::Open {
                path: shown.clone(),
                reason: e.to_string(),
            }
        })?;
    let qe = |e: rusqlite::Error| {
        MatchError::Store(StoreError::Query {
            path: shown.clone(),
            reason: e.to_string(),
        })
    };
    stored::ensure_schema(&conn, &shown)?;
    conn.execute_batch("BEGIN").map_err(qe)?;
    stored::clear(&conn, &shown)?;
    let procs = ProcTable::load(&conn).map_err(qe)?;
    let anchors = Anchors::load(&conn).map_err(qe)?;
    for o in &opts.fd_observations {
        let start = procs
            .alive(o.pid, o.mono_ns)
            .map(|i| procs.procs[i].start_mono_ns)
            .unwrap_or(0);
        stored::insert_proc_fd(&conn, &shown, o.pid, start, o.mono_ns, &o.path)?;
    }
    let mut evidence = transcript_writes(&conn, &procs).map_err(qe)?;
    evidence.extend(fd_evidence(&opts.fd_observations, &procs));

    // cwd-fallback candidates: sessions of the given homes active during the
    // capture.
    let (first, last) = (
        anchors.0.first().map(|a| a.1 / 1_000_000),
        anchors.0.last().map(|a| a.1 / 1_000_000),
    );
    let mut fallback: Vec<FallbackSession> = Vec::new();
    let mut summary = BindSummary::default();
    if let (Some(first), Some(last)) = (first, last) {
        for home in &opts.homes {
            let d = DiscoveryOptions {
                home: Some(home.clone()),
                ..Default::default()
            };
            match sessions::discover(&d) {
                Ok(list) => {
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
                Err(e) => summary
                    .notes
                    .push(format!("sessions under {}: {e}", home.display())),
            }
        }
    }
    let trees = match_trees(&procs, &anchors, &evidence, &fallback);

    // Parse and store each bound session once.
    let mut session_rows: HashMap<SessionKey, i64> = HashMap::new();
    let mut budget = if opts.copy_transcripts {
        opts.transcript_budget
    } else {
        0
    };
    for t in &trees {
        for b in &t.bindings {
            if session_rows.contains_key(&b.key) {
                continue;
            }
            let mut paths: Vec<String> = evidence
                .iter()
                .filter(|e| e.key == b.key)
                .map(|e| e.path.clone())
                .collect();
            if let Some(p) = fallback.iter().find(|f| f.key == b.key) {
                paths.push(p.path.display().to_string());
            }
            paths.sort();
            paths.dedup();
            let Some(main) = main_path(&b.key, &paths) else {
                continue;
            };
            let session = match sessions::parse_file(b.key.0, &main) {
                Ok(s) => s,
                Err(e) => {
                    summary.notes.push(format!("session {}: {e}", b.key.1));
                    let mut s = sessions::AgentSession::new(b.key.0, b.key.1.clone(), main.clone());
                    s.stats.first_error = Some(e.to_string());
                    s
                }
            };
            let row = stored::insert_session(&conn, &shown, &session)?;
            session_rows.insert(b.key.clone(), row);
            summary.sessions.push(b.key.1.clone());
            let mut files: Vec<String> = vec![main.display().to_string()];
            files.extend(paths.iter().cloned());
            for sub in &session.subagents {
                files.push(sub.source_path.display().to_string());
            }
            files.sort();
            files.dedup();
            for f in files {
                if !opts.copy_transcripts {
                    continue;
                }
                // A regular file, not through a link, the home owner's.
                let file = match sessions::util::open_regular(Path::new(&f)) {
                    Ok(file) => file,
                    Err(sessions::SessionError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        continue;
                    }
                    Err(e) => {
                        summary.notes.push(format!("transcript not copied: {e}"));
                        continue;
                    }
                };
                let Ok(meta) = file.metadata() else {
                    continue;
                };
                let size = meta.len();
                let take = size.min(budget);
                let content = match read_prefix(file, take) {
                    Ok(c) => c,
                    Err(e) => {
                        summary.notes.push(format!("cannot copy {f}: {e}"));
                        continue;
                    }
                };
                budget -= content.len() as u64;
                summary.transcript_bytes += content.len() as u64;
                if (content.len() as u64) < size {
                    summary.notes.push(format!(
                        "transcript {f} copied only in part ({} of {size} bytes): copy budget spent",
                        content.len()
                    ));
                }
                stored::insert_transcript(&conn, &shown, row, &f, size, &content)?;
            }
        }
    }
    for t in &trees {
        let p = &procs.procs[t.root];
        let tree_id = stored::insert_tree(
            &conn,
            &shown,
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
        if t.status == "bound" {
            summary.bound += 1;
        }
        for b in &t.bindings {
            let Some(&session_row) = session_rows.get(&b.key) else {
                continue;
            };
            stored::insert_binding(
                &conn,
                &shown,
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
    conn.execute_batch("COMMIT").map_err(qe)?;
    // Derived data (correlations): computed from what was just stored, in
    // its own transaction, so a failure here leaves the bindings intact.
    if let Err(e) = after(&conn, &shown) {
        summary.notes.push(format!("correlations not stored: {e}"));
    }
    Ok(summary)
}

fn read_prefix(f: std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    f.take(max).read_to_end(&mut out)?;
    Ok(out)
}

/// Reads the fd tables of `pids` and keeps the targets that are session
/// transcripts. Called from `record`'s main loop; a process that exits
/// meanwhile is simply skipped.
pub fn scan_fds(pids: &[u32], mono_ns: u64, out: &mut Vec<FdObservation>) {
    for &pid in pids {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for e in dir.flatten() {
            let Ok(target) = std::fs::read_link(e.path()) else {
                continue;
            };
            let Some(t) = target.to_str() else { continue };
            if !(t.ends_with(".jsonl") || t.ends_with(".json")) {
                continue;
            }
            if sessions::session_id_for_path(&target).is_none() {
                continue;
            }
            // One observation per (pid, path) is enough evidence; later
            // scans only add noise.
            if out.iter().any(|o| o.pid == pid && o.path == t) {
                continue;
            }
            out.push(FdObservation {
                pid,
                mono_ns,
                path: t.to_string(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(id: i64, pid: u32, parent: Option<usize>, start: u64, cwd: &str) -> Proc {
        Proc {
            id,
            pid,
            start_mono_ns: start,
            parent,
            end_mono_ns: None,
            cwd: Some(cwd.into()),
            argv: Vec::new(),
            comm: None,
            uid: None,
            exit_code: None,
            signal: None,
        }
    }

    fn table(procs: Vec<Proc>) -> ProcTable {
        let mut t = ProcTable {
            by_id: procs.iter().enumerate().map(|(i, p)| (p.id, i)).collect(),
            children: vec![Vec::new(); procs.len()],
            procs,
        };
        for i in 0..t.procs.len() {
            if let Some(p) = t.procs[i].parent {
                t.children[p].push(i);
            }
        }
        t
    }

    fn ev(proc: usize, id: &str, mono: u64) -> PathEvidence {
        PathEvidence {
            proc,
            key: (Provider::Claude, id.into()),
            kind: Evidence::TranscriptWrite,
            path: format!("/h/.claude/projects/-w/{id}.jsonl"),
            mono_ns: mono,
            count: 1,
        }
    }

    /// sh → {agentA → bash, agentB, other}: A and B split, other unmatched.
    #[test]
    fn concurrent_agents_split_and_unmatched_reported() {
        let t = table(vec![
            proc(1, 10, None, 0, "/w"),
            proc(2, 11, Some(0), 1, "/w"),
            proc(3, 12, Some(0), 2, "/w"),
            proc(4, 13, Some(1), 3, "/w"),
            proc(5, 14, Some(0), 4, "/w"),
        ]);
        let a = Anchors(vec![(0, 1_000_000_000_000)]);
        let trees = match_trees(&t, &a, &[ev(1, "A", 5), ev(2, "B", 6)], &[]);
        let got: Vec<(u32, &str, Vec<String>)> = trees
            .iter()
            .map(|t2| {
                (
                    t.procs[t2.root].pid,
                    t2.status,
                    t2.bindings.iter().map(|b| b.key.1.clone()).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (11, "bound", vec!["A".to_string()]),
                (12, "bound", vec!["B".to_string()]),
                (14, "unmatched", vec![]),
            ]
        );
    }

    /// One agent writing two sessions in turn is one tree bound to each.
    #[test]
    fn one_tree_two_sessions_over_time() {
        let t = table(vec![
            proc(1, 10, None, 100, "/w"),
            proc(2, 11, Some(0), 200, "/w"),
        ]);
        let a = Anchors(vec![(0, 0)]);
        let trees = match_trees(&t, &a, &[ev(0, "A", 300), ev(0, "B", 900)], &[]);
        assert_eq!(trees.len(), 1);
        let spans: Vec<(String, u64, Option<u64>)> = trees[0]
            .bindings
            .iter()
            .map(|b| (b.key.1.clone(), b.from_mono_ns, b.to_mono_ns))
            .collect();
        assert_eq!(
            spans,
            vec![("A".into(), 100, Some(900)), ("B".into(), 900, None)]
        );
    }

    /// cwd fallback is one-to-one; two trees in the same cwd stay unbound.
    #[test]
    fn cwd_fallback_only_when_unambiguous() {
        let wall0 = 1_700_000_000_000i64;
        let a = Anchors(vec![(0, wall0 * 1_000_000)]);
        let fb = |id: &str| FallbackSession {
            key: (Provider::Codex, id.into()),
            path: PathBuf::from(format!("/h/.codex/sessions/rollout-{id}.jsonl")),
            cwd: "/nonexistent/w".into(),
            start_ms: wall0 + 1_000,
            end_ms: None,
        };
        let one = table(vec![proc(1, 10, None, 0, "/nonexistent/w")]);
        let trees = match_trees(&one, &a, &[], &[fb("S")]);
        assert_eq!(trees[0].status, "bound");
        assert_eq!(trees[0].bindings[0].evidence, Evidence::CwdFallback);

        let two = table(vec![
            proc(1, 10, None, 0, "/nonexistent/w"),
            proc(2, 11, None, 1, "/nonexistent/w"),
        ]);
        let trees = match_trees(&two, &a, &[], &[fb("S")]);
        assert_eq!(
            trees.iter().map(|t| t.status).collect::<Vec<_>>(),
            vec!["ambiguous", "ambiguous"]
        );
        // Path evidence beats cwd: the tree that wrote S is bound by it and
        // the other stays unmatched.
        let trees = match_trees(
            &two,
            &a,
            &[PathEvidence {
                key: (Provider::Codex, "S".into()),
                ..ev(1, "S", 5)
            }],
            &[fb("S")],
        );
        assert_eq!(
            trees
                .iter()
                .map(|t| (t.status, t.bindings.first().map(|b| b.evidence)))
                .collect::<Vec<_>>(),
            vec![
                ("unmatched", None),
                ("bound", Some(Evidence::TranscriptWrite))
            ]
        );
    }
}
