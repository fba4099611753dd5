use super::*;
use crate::matching::{Proc, TreeStatus, match_trees};

const WALL0: i64 = 1_796_217_000_000;
const S: u64 = 1_000_000_000;

fn proc(id: i64, parent: Option<usize>, start_s: u64, end_s: Option<u64>, cwd: &str) -> Proc {
    Proc {
        id,
        pid: 100 + id as u32,
        start_mono_ns: start_s * S,
        parent,
        end_mono_ns: end_s.map(|e| e * S),
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

const DB: &str = "/home/u/.local/share/opencode/opencode.db";

fn touch(proc: usize, at_s: u64) -> DbTouch {
    DbTouch {
        proc,
        provider: Provider::Opencode,
        db: PathBuf::from(DB),
        mono_ns: at_s * S,
        count: 3,
        kind: Evidence::DatabaseWrite,
    }
}

fn row(id: &str, dir: &str, parent: Option<&str>, from_s: i64, to_s: i64) -> DbSession {
    DbSession {
        id: id.into(),
        directory: Some(dir.into()),
        parent_id: parent.map(Into::into),
        created_ms: WALL0 + from_s * 1000,
        updated_ms: WALL0 + to_s * 1000,
    }
}

fn anchors() -> Anchors {
    Anchors(vec![(0, WALL0 * 1_000_000)])
}

/// (pid, status, [(session, evidence, from_s)]) of each tree.
type Got = Vec<(u32, &'static str, Vec<(String, &'static str, u64)>)>;

fn bound(t: &ProcTable, ev: &[PathEvidence]) -> Got {
    match_trees(t, &anchors(), ev, &[])
        .iter()
        .map(|tree| {
            (
                t.procs[tree.root].pid,
                tree.status.as_str(),
                tree.bindings
                    .iter()
                    .map(|b| (b.key.1.clone(), b.evidence.as_str(), b.from_mono_ns / S))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn shared_database_names() {
    let got: Vec<Option<String>> = [
        DB,
        "/home/u/.local/share/opencode/opencode.db-wal",
        "/home/u/.local/share/opencode/opencode-beta.db",
        "/home/u/.local/share/opencode/opencode.db-shm",
        "/home/u/.local/share/other/opencode.db",
        "/home/u/.copilot/session-store.db",
        "/home/u/.local/share/opencode/opencode-.db",
    ]
    .iter()
    .map(|p| shared_database(p).map(|(_, db)| db.display().to_string()))
    .collect();
    assert_eq!(
        got,
        vec![
            Some(DB.into()),
            Some(DB.into()),
            Some("/home/u/.local/share/opencode/opencode-beta.db".into()),
            None,
            None,
            None,
            None,
        ]
    );
}

/// record → opencode (writes the db) → bash: bound to the session of its
/// cwd active while it lived; a subagent's child session binds as its
/// parent; another cwd's session and one from before are not taken.
#[test]
fn writer_bound_to_its_cwds_session_child_as_parent() {
    let t = table(vec![
        proc(1, None, 10, Some(60), "/w"),
        proc(2, Some(0), 11, Some(59), "/w"),
        proc(3, Some(1), 20, Some(21), "/w"),
    ]);
    let listed = vec![
        row("ses_a", "/w", None, 12, 58),
        row("ses_sub", "/w", Some("ses_a"), 30, 40),
        row("ses_other_dir", "/x", None, 12, 58),
        row("ses_old", "/w", None, -500, 5),
    ];
    let asked = std::cell::RefCell::new(Vec::new());
    let resolve = |p: Provider, db: &Path, from: i64, to: i64| {
        asked
            .borrow_mut()
            .push((p, db.display().to_string(), from - WALL0, to - WALL0));
        listed.clone()
    };
    let ev = database_evidence(&t, &anchors(), &[touch(1, 12)], &resolve);
    assert_eq!(
        asked.into_inner(),
        vec![(Provider::Opencode, DB.to_string(), 10_000, 60_000)]
    );
    assert_eq!(
        ev.iter()
            .map(|e| (
                e.proc,
                e.key.1.as_str(),
                e.kind,
                e.path.as_str(),
                e.mono_ns / S
            ))
            .collect::<Vec<_>>(),
        vec![
            (1, "ses_a", Evidence::DatabaseWrite, DB, 12),
            (1, "ses_a", Evidence::DatabaseWrite, DB, 30),
        ]
    );
    assert_eq!(
        bound(&t, &ev),
        // The tree climbs to the wrapper, as for a transcript writer.
        vec![(101, "bound", vec![("ses_a".into(), "database_write", 10)])]
    );
}

/// Two opencode processes at once in one cwd: both sessions could be
/// either's, so neither tree is bound; run one after the other (a resume
/// of the same session), each is bound to it.
#[test]
fn concurrent_writers_ambiguous_sequential_each_bound() {
    let together = table(vec![
        proc(1, None, 10, Some(60), "/w"),
        proc(2, None, 11, Some(50), "/w"),
    ]);
    let listed = vec![
        row("ses_a", "/w", None, 12, 45),
        row("ses_b", "/w", None, 13, 49),
    ];
    let resolve = |_: Provider, _: &Path, _: i64, _: i64| listed.clone();
    let ev = database_evidence(
        &together,
        &anchors(),
        &[touch(0, 12), touch(1, 13)],
        &resolve,
    );
    assert!(ev.is_empty(), "{ev:?}");
    assert_eq!(
        bound(&together, &ev),
        vec![(101, "unmatched", vec![]), (102, "unmatched", vec![])]
    );

    let apart = table(vec![
        proc(1, None, 10, Some(20), "/w"),
        proc(2, None, 30, Some(40), "/w"),
    ]);
    let listed = vec![row("ses_a", "/w", None, 11, 39)];
    let resolve = |_: Provider, _: &Path, _: i64, _: i64| listed.clone();
    let ev = database_evidence(&apart, &anchors(), &[touch(0, 11), touch(1, 31)], &resolve);
    assert_eq!(
        bound(&apart, &ev),
        vec![
            (101, "bound", vec![("ses_a".into(), "database_write", 10)]),
            (102, "bound", vec![("ses_a".into(), "database_write", 30)]),
        ]
    );
}

/// One process running two sessions in turn (a new session in the TUI) is
/// one tree bound to each from its creation.
#[test]
fn one_writer_two_sessions_in_turn() {
    let t = table(vec![proc(1, None, 10, None, "/w")]);
    let listed = vec![
        row("ses_a", "/w", None, 11, 20),
        row("ses_b", "/w", None, 25, 40),
    ];
    let resolve = |_: Provider, _: &Path, _: i64, to: i64| {
        assert_eq!(to, i64::MAX, "a running writer's window is open-ended");
        listed.clone()
    };
    let ev = database_evidence(&t, &anchors(), &[touch(0, 11)], &resolve);
    let got = bound(&t, &ev);
    assert_eq!(
        got,
        vec![(
            101,
            "bound",
            vec![
                ("ses_a".into(), "database_write", 10),
                ("ses_b".into(), "database_write", 25)
            ]
        )]
    );
    assert_eq!(TreeStatus::Bound, "bound");
}

/// opencode writes the database; its `git` child, caught by a `/proc` scan
/// between fork and exec, still holds the descriptor: the tree is bound by
/// the write, never by the child's inherited fd. An unrelated process that
/// only holds the database open keeps its own fd evidence.
#[test]
fn a_childs_inherited_descriptor_adds_nothing_to_the_write() {
    let t = table(vec![
        proc(1, None, 10, Some(60), "/w"),
        proc(2, Some(0), 20, Some(21), "/w"),
        proc(3, None, 70, Some(80), "/w"),
    ]);
    let fd = |proc: usize, at_s: u64| DbTouch {
        kind: Evidence::ProcFd,
        count: 1,
        ..touch(proc, at_s)
    };
    let kept = without_inherited_fds(&t, vec![touch(0, 11), fd(0, 12), fd(1, 20), fd(2, 71)]);
    let kinds: Vec<(usize, &str)> = kept.iter().map(|k| (k.proc, k.kind.as_str())).collect();
    assert_eq!(kinds, vec![(0, "database_write"), (2, "proc_fd")]);
    let listed = vec![
        row("ses_a", "/w", None, 12, 58),
        row("ses_b", "/w", None, 71, 79),
    ];
    let resolve = |_: Provider, _: &Path, _: i64, _: i64| listed.clone();
    let ev = database_evidence(&t, &anchors(), &kept, &resolve);
    assert_eq!(
        bound(&t, &ev),
        vec![
            (101, "bound", vec![("ses_a".into(), "database_write", 10)]),
            (103, "bound", vec![("ses_b".into(), "proc_fd", 70)]),
        ]
    );
}
