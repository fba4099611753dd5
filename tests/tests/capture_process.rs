//! Root test: record a process-tree workload whose ground truth is known and
//! assert every exec's argv, cwd, parent and every exit status exactly.

use std::{path::Path, process::Command};

use agentsight_tests::{
    process_tree::{Tree, check_tree},
    *,
};

#[test]
fn records_process_tree_exactly() {
    require_root();
    let run = TreeRun::record();
    let conn = open(&run.db);
    assert_eq!(meta(&conn, "complete").as_deref(), Some("true"));
    // The script is the command record started.
    let root = processes(&conn)
        .into_iter()
        .find(|p| p.origin == "root")
        .expect("root process");
    assert_eq!(root.argv, sv(&["/bin/sh", &run.script, &run.work]));
    check_tree(
        &conn,
        &Tree {
            root_argv: root.argv,
            root_cwd: run.dir.display().to_string(),
            work: run.work.clone(),
            uid: run.uid,
            outside_pid: run.outside_pid,
        },
    );
    let _ = std::fs::remove_dir_all(&run.dir);
}

/// The tree workload (workloads/tree.sh) recorded as the test user, while a
/// process outside the tree keeps exec'ing.
struct TreeRun {
    dir: std::path::PathBuf,
    db: std::path::PathBuf,
    uid: u32,
    script: String,
    work: String,
    outside_pid: i64,
}

impl TreeRun {
    fn record() -> TreeRun {
        let (uid, _) = test_user();
        let dir = scratch("tree");
        let work = dir.join("work");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        let script = dir.join("tree.sh");
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/tree.sh"),
            &script,
        )
        .unwrap();
        for p in [&work, &work.join("sub")] {
            nix::unistd::chown(p.as_path(), Some(uid.into()), None).unwrap();
        }
        let work = work.display().to_string();
        // A process outside the tracked tree, busy exec'ing the whole time.
        let mut outside = Command::new("/bin/sh")
            .args([
                "-c",
                "while :; do /bin/echo outside-marker >/dev/null; /bin/sleep 0.05; done",
            ])
            .spawn()
            .unwrap();
        let db = dir.join("tree.db");
        let script = script.display().to_string();
        let out = record(&db, &[], &["/bin/sh", &script, &work]);
        let _ = outside.kill();
        let _ = outside.wait();
        assert_exit_0(&out);
        TreeRun {
            dir,
            db,
            uid,
            script,
            work,
            outside_pid: i64::from(outside.id()),
        }
    }
}
