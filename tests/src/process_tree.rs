//! The process-tree workload of known ground truth (`workloads/tree.sh`)
//! and its checks, shared by the host capture test
//! (`tests/capture_process.rs`) and the `--container` one
//! (`tests/container_truth.rs`): the same rows, with argv and cwd as the
//! recorded process saw them.

use std::collections::{BTreeSet, HashMap};

use rusqlite::Connection;

use crate::{ExecRow, ProcRow, execs, processes, sv};

/// The tree workload's call of execve(path, NULL, NULL) (see workloads/tree.sh).
pub const NULL_ARGV_EXEC: &str =
    r#"import ctypes; ctypes.CDLL(None).execve(b"/nonexistent/null-argv", None, None)"#;

/// One recorded run of `/bin/sh tree.sh WORK`, as the script saw it.
pub struct Tree {
    /// The script's exec: `/bin/sh SCRIPT WORK`.
    pub root_argv: Vec<String>,
    /// The script's cwd.
    pub root_cwd: String,
    /// The WORK it was given (it holds `sub`).
    pub work: String,
    /// The user it ran as.
    pub uid: u32,
    /// A process busy exec'ing outside the tree meanwhile.
    pub outside_pid: i64,
}

impl Tree {
    fn sub(&self) -> String {
        format!("{}/sub", self.work)
    }
}

/// Checks a capture of the tree workload exactly: every exec's argv and cwd,
/// the cut and failed ones, parents, exit codes and signals, the fork
/// without exec, the re-parented orphan, nothing of the outside process and
/// no loss. Only the script's own tree is compared (a container's capture
/// also holds the container's other work).
pub fn check_tree(conn: &Connection, run: &Tree) {
    let procs = processes(conn);
    let execs = execs(conn);
    // Nothing from outside the tree.
    assert!(
        execs
            .iter()
            .all(|e| !e.argv.iter().any(|a| a.contains("outside-marker"))),
        "an untracked process leaked into the capture"
    );
    assert!(execs.iter().all(|e| e.pid != run.outside_pid));
    let tree = tree_of(&procs, &run.root_argv);
    let execs: Vec<ExecRow> = execs
        .into_iter()
        .filter(|e| tree.contains(&e.process_id))
        .collect();
    // The orphan's execs race with the main script: check them separately.
    let (orphan, main): (Vec<&ExecRow>, Vec<&ExecRow>) = execs.iter().partition(|e| {
        e.argv == sv(&["/bin/sleep", "0.3"]) || e.argv == sv(&["/bin/echo", "orphan"])
    });
    check_execs_in_order(run, &main);
    check_cut_and_failed_execs(&main);
    check_parents_and_exits(run, &procs, &main);
    check_reparented_orphan(&procs, &orphan);
    check_zero_loss(conn);
}

/// The row ids of the process whose argv is `root_argv` and of every
/// process forked below it.
fn tree_of(procs: &[ProcRow], root_argv: &[String]) -> BTreeSet<i64> {
    let root = procs
        .iter()
        .find(|p| p.argv == root_argv)
        .unwrap_or_else(|| panic!("no process with argv {root_argv:?}"));
    let mut tree = BTreeSet::from([root.id]);
    loop {
        let before = tree.len();
        for p in procs {
            if p.parent_id.is_some_and(|id| tree.contains(&id)) {
                tree.insert(p.id);
            }
        }
        if tree.len() == before {
            return tree;
        }
    }
}

/// A successful exec keeps the first 4096 bytes of the argv the program
/// got: "/bin/true", 1..=1038 (4093 bytes with terminators) and the first
/// 3 bytes of "1039".
fn true_2000() -> Vec<String> {
    let mut argv = vec!["/bin/true".to_string()];
    argv.extend((1..=1038).map(|i| i.to_string()));
    argv.push("103".into());
    argv
}

/// A failed exec keeps at most 64 arguments.
fn failed_100() -> Vec<String> {
    let mut argv = vec!["/nonexistent/prog".to_string()];
    argv.extend((1..=63).map(|i| i.to_string()));
    argv
}

/// Every exec, in order, with its cwd (failed execs included).
fn check_execs_in_order(run: &Tree, main: &[&ExecRow]) {
    let sub = &run.sub();
    let true_2000 = true_2000();
    let failed_100 = failed_100();
    let expected: Vec<(&str, Vec<String>, String)> = vec![
        ("exec", run.root_argv.clone(), run.root_cwd.clone()),
        ("exec", sv(&["/bin/echo", "hello", "world"]), sub.clone()),
        (
            "exec",
            sv(&["/bin/sh", "-c", "cd /tmp && exec /bin/true nested"]),
            sub.clone(),
        ),
        ("exec", sv(&["/bin/true", "nested"]), "/tmp".into()),
        (
            "exec",
            sv(&["/bin/sh", "-c", "/bin/sh -c \"exit 7\"; exit $?"]),
            sub.clone(),
        ),
        ("exec", sv(&["/bin/sh", "-c", "exit 7"]), sub.clone()),
        (
            "exec",
            sv(&[
                "/bin/sh",
                "-c",
                "( /bin/sleep 0.3; /bin/echo orphan >/dev/null ) & exit 0",
            ]),
            sub.clone(),
        ),
        ("exec", sv(&["/usr/bin/seq", "1", "2000"]), sub.clone()),
        ("exec", true_2000.clone(), sub.clone()),
        ("exec", sv(&["/usr/bin/seq", "1", "100"]), sub.clone()),
        ("exec_failed", failed_100.clone(), sub.clone()),
        (
            "exec",
            sv(&["/usr/bin/python3", "-c", NULL_ARGV_EXEC]),
            sub.clone(),
        ),
        ("exec_failed", vec![], sub.clone()),
        ("exec", sv(&["/bin/sh", "-c", "kill -9 $$"]), sub.clone()),
        ("exec", sv(&["/bin/sleep", "0.8"]), sub.clone()),
    ];
    let got: Vec<(&str, Vec<String>, String)> = main
        .iter()
        .map(|e| (e.kind.as_str(), e.argv.clone(), e.cwd.clone()))
        .collect();
    assert_eq!(got, expected);
    assert!(
        main.iter()
            .all(|e| e.cwd_status == "complete" && e.uid == i64::from(run.uid))
    );
}

/// Truncation is marked on exactly the two cut argvs (argc still tells how
/// many arguments the program got); failed execs keep their errno and name;
/// binaries are resolved.
fn check_cut_and_failed_execs(main: &[&ExecRow]) {
    let true_2000 = true_2000();
    let failed_100 = failed_100();
    let big = main.iter().find(|e| e.argv == true_2000).unwrap();
    assert_eq!(big.argc, Some(2001));
    let truncated: Vec<&Vec<String>> = main
        .iter()
        .filter(|e| e.argv_truncated)
        .map(|e| &e.argv)
        .collect();
    assert_eq!(truncated, vec![&true_2000, &failed_100]);

    // The failed exec: ENOENT, the name as given.
    let failed = main.iter().find(|e| e.kind == "exec_failed").unwrap();
    assert_eq!(failed.errno.as_deref(), Some("ENOENT"));
    assert_eq!(failed.filename, "/nonexistent/prog");
    // execve(path, NULL, NULL) fails with no arguments, not with an
    // unreadable argv.
    let null_argv = main.iter().rfind(|e| e.kind == "exec_failed").unwrap();
    assert_eq!(
        (
            null_argv.filename.as_str(),
            null_argv.errno.as_deref(),
            null_argv.argv_incomplete
        ),
        ("/nonexistent/null-argv", Some("ENOENT"), false)
    );
    assert!(main.iter().all(|e| !e.argv_incomplete));

    // Resolved binaries.
    let echo = main.iter().find(|e| e.argv[0] == "/bin/echo").unwrap();
    let real_echo = std::fs::canonicalize("/bin/echo")
        .unwrap()
        .display()
        .to_string();
    assert_eq!(echo.exe.as_deref(), Some(real_echo.as_str()));
}

/// Parents and exit statuses, including a fork without exec.
fn check_parents_and_exits(run: &Tree, procs: &[ProcRow], main: &[&ExecRow]) {
    let by_id: HashMap<i64, &ProcRow> = procs.iter().map(|p| (p.id, p)).collect();
    let true_2000 = true_2000();
    let uid = run.uid;
    // Parents: every exec'd process hangs off the root script.
    let proc_of = |argv: &[String]| -> &ProcRow {
        procs
            .iter()
            .find(|p| p.argv == argv)
            .unwrap_or_else(|| panic!("no process with argv {argv:?}"))
    };
    let root = proc_of(&run.root_argv);
    assert_eq!(root.exit_code, Some(0));
    assert_eq!(root.uid, Some(uid as i64));
    for argv in [
        sv(&["/bin/echo", "hello", "world"]),
        sv(&["/bin/sh", "-c", "/bin/sh -c \"exit 7\"; exit $?"]),
        sv(&["/bin/sh", "-c", "kill -9 $$"]),
        true_2000.clone(),
    ] {
        assert_eq!(
            proc_of(&argv).parent_id,
            Some(root.id),
            "parent of {argv:?}"
        );
    }
    let exit7 = proc_of(&sv(&["/bin/sh", "-c", "exit 7"]));
    assert_eq!(exit7.exit_code, Some(7));
    let outer7 = proc_of(&sv(&["/bin/sh", "-c", "/bin/sh -c \"exit 7\"; exit $?"]));
    assert_eq!(exit7.parent_id, Some(outer7.id));
    assert_eq!(outer7.exit_code, Some(7));
    let killed = proc_of(&sv(&["/bin/sh", "-c", "kill -9 $$"]));
    assert_eq!((killed.exit_code, killed.signal), (None, Some(9)));
    assert_eq!(proc_of(&sv(&["/bin/true", "nested"])).exit_code, Some(0));

    // Fork without exec: a child of the root that never exec'd and exited 3.
    let forked_only: Vec<&ProcRow> = procs
        .iter()
        .filter(|p| p.parent_id == Some(root.id) && p.exec_count == 0)
        .collect();
    let codes: Vec<Option<i64>> = forked_only.iter().map(|p| p.exit_code).collect();
    // `( exit 3 )` exits 3; the failed exec's child exits 127 after ENOENT.
    assert!(
        codes.contains(&Some(3)),
        "fork without exec missing: {codes:?}"
    );
    assert!(
        codes.contains(&Some(127)),
        "failed-exec child missing: {codes:?}"
    );
    let failed = main.iter().find(|e| e.kind == "exec_failed").unwrap();
    let failed_child = by_id[&failed.process_id];
    assert_eq!(failed_child.exit_code, Some(127));
    assert_eq!(failed_child.parent_id, Some(root.id));
}

/// The re-parented grandchild: forked by a subshell of the `& exit 0`
/// shell, it outlived that shell; it keeps its fork parent, while the
/// kernel's ppid at its exec is the reaper.
fn check_reparented_orphan(procs: &[ProcRow], orphan: &[&ExecRow]) {
    let by_id: HashMap<i64, &ProcRow> = procs.iter().map(|p| (p.id, p)).collect();
    let proc_of = |argv: &[String]| -> &ProcRow {
        procs
            .iter()
            .find(|p| p.argv == argv)
            .unwrap_or_else(|| panic!("no process with argv {argv:?}"))
    };
    assert_eq!(orphan.len(), 2, "orphan execs: {orphan:?}");
    let spawner = proc_of(&sv(&[
        "/bin/sh",
        "-c",
        "( /bin/sleep 0.3; /bin/echo orphan >/dev/null ) & exit 0",
    ]));
    assert_eq!(spawner.exit_code, Some(0));
    let echo_orphan = orphan.iter().find(|e| e.argv[0] == "/bin/echo").unwrap();
    let orphan_proc = by_id[&echo_orphan.process_id];
    let subshell = by_id[&orphan_proc.parent_id.unwrap_or(orphan_proc.id)];
    let lineage_ok =
        orphan_proc.parent_id == Some(spawner.id) || subshell.parent_id == Some(spawner.id);
    assert!(lineage_ok, "orphan lineage lost: {orphan_proc:?}");
    assert_ne!(
        echo_orphan.ppid, spawner.pid,
        "expected re-parenting after the spawner exited"
    );
    assert_eq!(orphan_proc.exit_code, Some(0));
}

/// Zero loss, recorded as zero.
fn check_zero_loss(conn: &Connection) {
    let lost: i64 = conn
        .query_row("SELECT COALESCE(SUM(lost), 0) FROM loss", [], |r| r.get(0))
        .unwrap();
    assert_eq!(lost, 0);
    let gaps: i64 = conn
        .query_row("SELECT COUNT(*) FROM gaps", [], |r| r.get(0))
        .unwrap();
    assert_eq!(gaps, 0);
}
