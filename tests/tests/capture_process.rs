//! Root test: record a process-tree workload whose ground truth is known and
//! assert every exec's argv, cwd, parent and every exit status exactly.

use std::{path::Path, process::Command};

use agentsight_tests::{process_tree::check_tree, *};

#[test]
fn records_process_tree_exactly() {
    require_root();
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
    let work_s = work.display().to_string();

    // A process outside the tracked tree, busy exec'ing the whole time.
    let mut outside = Command::new("/bin/sh")
        .args([
            "-c",
            "while :; do /bin/echo outside-marker >/dev/null; /bin/sleep 0.05; done",
        ])
        .spawn()
        .unwrap();

    let db = dir.join("tree.db");
    let script_s = script.display().to_string();
    let out = record(&db, &[], &["/bin/sh", &script_s, &work_s]);
    let _ = outside.kill();
    let _ = outside.wait();
    assert_exit_0(&out);

    let conn = open(&db);
    assert_eq!(meta(&conn, "complete").as_deref(), Some("true"));
    let root = processes(&conn)
        .into_iter()
        .find(|p| p.origin == "root")
        .expect("root process");
    assert_eq!(root.argv, sv(&["/bin/sh", &script_s, &work_s]));
    check_tree(
        &conn,
        &root.argv,
        &dir.display().to_string(),
        &work_s,
        uid,
        outside.id(),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
