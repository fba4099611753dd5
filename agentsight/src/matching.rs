//! Process tree ↔ session matching.
//!
//! Evidence, strongest first, each kept with its kind:
//! 1. `transcript_write`: a process of the tree opened a session transcript
//!    for writing (or renamed/created/truncated it), seen by our own capture;
//! 2. `proc_fd`: the transcript was open in `/proc/PID/fd` at a scan;
//!    `database_write`: a process wrote a session store shared by many
//!    sessions (opencode's database), which lists the sessions of its cwd
//!    active while the process lived (`database`);
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

use serde::Serialize;

pub mod database;
pub mod mcp;

use crate::{
    clock::Anchors,
    sessions::{self, Provider},
    store::{CaptureReader, StoreError, read},
};

crate::vocabulary::vocabulary! {
    /// Evidence kinds, strongest first.
    Evidence {
        TranscriptWrite => "transcript_write",
        ProcFd => "proc_fd",
        DatabaseWrite => "database_write",
        Sticky => "sticky",
        CwdFallback => "cwd_fallback",
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
    pub fn load(cap: CaptureReader) -> Result<Self, StoreError> {
        Ok(Self::of_records(cap.processes()?))
    }

    /// The table of these process rows (as [`read::processes`] orders them).
    pub fn of_records(records: Vec<read::ProcessRecord>) -> Self {
        let rows = records.into_iter().map(|r| {
            (
                Proc {
                    id: r.id,
                    pid: r.pid as u32,
                    start_mono_ns: r.start_mono_ns.max(0) as u64,
                    parent: None,
                    end_mono_ns: r.end_mono_ns.map(|v| v.max(0) as u64),
                    cwd: r.cwd,
                    argv: r.argv,
                    comm: r.comm,
                    uid: r.uid.map(|u| u as u32),
                    exit_code: r.exit_code,
                    signal: r.signal,
                },
                r.parent_id,
            )
        });
        let mut t = ProcTable::default();
        let mut parents = Vec::new();
        for (p, parent_id) in rows {
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
        t
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
    cap: CaptureReader,
    procs: &ProcTable,
) -> Result<Vec<PathEvidence>, StoreError> {
    let rows = cap.transcript_like_writes()?;
    let mut ids: HashMap<String, Option<SessionKey>> = HashMap::new();
    let mut out = Vec::new();
    for read::FileWrite {
        process_id,
        path,
        first_mono_ns,
        count,
    } in rows
    {
        let key = ids
            .entry(path.clone())
            .or_insert_with(|| sessions::session_id_for_path(Path::new(&path)))
            .clone();
        let (Some(key), Some(&proc)) = (key, procs.by_id.get(&process_id)) else {
            continue;
        };
        out.push(PathEvidence {
            proc,
            key,
            kind: Evidence::TranscriptWrite,
            path,
            mono_ns: first_mono_ns.max(0) as u64,
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

crate::vocabulary::vocabulary! {
    /// What matching concluded for a tree.
    TreeStatus {
        Bound => "bound",
        Unmatched => "unmatched",
        /// Several cwd candidates: left unbound.
        Ambiguous => "ambiguous",
    }
}

/// Compared with the stored text (`trees.status`).
impl PartialEq<&str> for TreeStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A tree after matching.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tree {
    pub root: usize,
    pub status: TreeStatus,
    pub note: Option<String>,
    pub bindings: Vec<Binding>,
}

/// Canonical form of a cwd for comparison (symlinks resolved when the
/// directory still exists, trailing slashes dropped).
pub(crate) fn canonical(dir: &str) -> String {
    std::fs::canonicalize(dir)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| dir.trim_end_matches('/').to_string())
}

/// How far a tree's start may be from its session's start for a cwd match.
pub const CWD_START_SLACK_MS: i64 = 10 * 60 * 1000;

/// Matches trees to sessions. Pure: all inputs come from the capture (or
/// /proc) and the session files; the result says which evidence decided.
/// The ladder: path evidence first (transcript writes, /proc fds), then the
/// cwd fallback, one-to-one, for sessions with no path evidence.
pub fn match_trees(
    procs: &ProcTable,
    anchors: &Anchors,
    evidence: &[PathEvidence],
    fallback: &[FallbackSession],
) -> Vec<Tree> {
    let keys = SessionKeys::of(evidence);
    let roots = writer_roots(procs, evidence, &keys);
    let mut trees: Vec<Tree> = unit_trees(procs, &roots)
        .into_iter()
        .map(|u| match roots.get(&u) {
            Some(sessions) => bind_by_path(procs, u, sessions, evidence, &keys),
            None => Tree {
                root: u,
                status: TreeStatus::Unmatched,
                note: Some("no transcript evidence".into()),
                bindings: Vec::new(),
            },
        })
        .collect();
    bind_by_cwd(procs, anchors, &mut trees, fallback, &keys);
    trees
}

/// The sessions that have path evidence, each with a small index.
struct SessionKeys(Vec<SessionKey>);

impl SessionKeys {
    fn of(evidence: &[PathEvidence]) -> Self {
        let mut keys: Vec<SessionKey> = evidence.iter().map(|e| e.key.clone()).collect();
        keys.sort();
        keys.dedup();
        Self(keys)
    }

    fn index(&self, k: &SessionKey) -> usize {
        self.0.binary_search(k).unwrap_or(0)
    }

    fn contains(&self, k: &SessionKey) -> bool {
        self.0.binary_search(k).is_ok()
    }
}

/// Every process in tree order (each root's subtree, parents first).
fn tree_order(procs: &ProcTable) -> Vec<usize> {
    let mut order: Vec<usize> = Vec::with_capacity(procs.procs.len());
    for r in procs.roots() {
        order.extend(procs.subtree(r));
    }
    order
}

/// Rung 1, path evidence: each writer's tree root, with the sessions
/// written under it. From a writer, climb while the parent's subtree holds
/// no writer of a session this writer does not write.
fn writer_roots(
    procs: &ProcTable,
    evidence: &[PathEvidence],
    keys: &SessionKeys,
) -> BTreeMap<usize, BTreeSet<usize>> {
    let n = procs.procs.len();
    let mut own: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for e in evidence {
        own[e.proc].insert(keys.index(&e.key));
    }
    // Sessions written anywhere in each subtree, children before parents.
    let mut under: Vec<BTreeSet<usize>> = own.clone();
    for &i in tree_order(procs).iter().rev() {
        if let Some(p) = procs.procs[i].parent {
            let child = std::mem::take(&mut under[i]);
            under[p].extend(child.iter().copied());
            under[i] = child;
        }
    }
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
    root_sessions
}

/// The unit trees, in start order: the writers' roots, and the maximal
/// subtrees holding none. A root found for one writer may sit inside
/// another's (both write S): the outermost is kept.
fn unit_trees(procs: &ProcTable, roots: &BTreeMap<usize, BTreeSet<usize>>) -> Vec<usize> {
    let bound_roots: BTreeSet<usize> = roots.keys().copied().collect();
    let mut contains_bound = vec![false; procs.procs.len()];
    for &i in tree_order(procs).iter().rev() {
        if bound_roots.contains(&i) {
            contains_bound[i] = true;
        }
        if contains_bound[i]
            && let Some(p) = procs.procs[i].parent
        {
            contains_bound[p] = true;
        }
    }
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
    units
}

/// A tree bound by path evidence to the sessions written in it, each for
/// its span: the first session from the tree's start, each later one from
/// its first evidence; each ends where the next begins.
fn bind_by_path(
    procs: &ProcTable,
    u: usize,
    sessions: &BTreeSet<usize>,
    evidence: &[PathEvidence],
    keys: &SessionKeys,
) -> Tree {
    let members: BTreeSet<usize> = procs.subtree(u).into_iter().collect();
    let mut bs: Vec<Binding> = sessions
        .iter()
        .map(|&k| {
            let ev: Vec<&PathEvidence> = evidence
                .iter()
                .filter(|e| keys.index(&e.key) == k && members.contains(&e.proc))
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
                key: keys.0[k].clone(),
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
    Tree {
        root: u,
        status: TreeStatus::Bound,
        note: None,
        bindings: bs,
    }
}

/// Rung 2, cwd fallback, one-to-one, for sessions with no path evidence:
/// an unmatched tree with exactly one candidate that has no other tree is
/// bound; one with several stays unbound and says why.
fn bind_by_cwd(
    procs: &ProcTable,
    anchors: &Anchors,
    trees: &mut [Tree],
    fallback: &[FallbackSession],
    keys: &SessionKeys,
) {
    let fb: Vec<&FallbackSession> = fallback.iter().filter(|s| !keys.contains(&s.key)).collect();
    let (cands_of_tree, cands_of_sess) = cwd_candidates(procs, anchors, trees, &fb);
    for ti in 0..trees.len() {
        match cands_of_tree[ti].as_slice() {
            [] => {}
            [si] if cands_of_sess[*si].len() == 1 => {
                let s = fb[*si];
                let root = trees[ti].root;
                trees[ti].status = TreeStatus::Bound;
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
                trees[ti].status = TreeStatus::Ambiguous;
                trees[ti].note = Some(format!(
                    "same cwd as several candidates, left unbound: {}",
                    names.join(", ")
                ));
            }
        }
    }
}

/// Candidates of each unmatched tree (sessions of the same canonical cwd
/// that started close to it while it ran) and, per session, its trees.
fn cwd_candidates(
    procs: &ProcTable,
    anchors: &Anchors,
    trees: &[Tree],
    fb: &[&FallbackSession],
) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let mut cands_of_tree: Vec<Vec<usize>> = vec![Vec::new(); trees.len()];
    let mut cands_of_sess: Vec<Vec<usize>> = vec![Vec::new(); fb.len()];
    for (ti, t) in trees.iter().enumerate() {
        if t.status != TreeStatus::Unmatched {
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
    (cands_of_tree, cands_of_sess)
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
            let transcript = (t.ends_with(".jsonl") || t.ends_with(".json"))
                && sessions::session_id_for_path(&target).is_some();
            if !transcript && database::shared_database(t).is_none() {
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
                    t2.status.as_str(),
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
                .map(|t| (t.status.as_str(), t.bindings.first().map(|b| b.evidence)))
                .collect::<Vec<_>>(),
            vec![
                ("unmatched", None),
                ("bound", Some(Evidence::TranscriptWrite))
            ]
        );
    }
}
