//! Capture truth in `record --container` mode, on a real Docker engine: the
//! host suites' workloads of known ground truth run inside a container —
//! the process tree (`workloads/tree.sh`) as the container's init, the file
//! and network workload (`workloads/files_net.py`) and the kernel-paths
//! tricks (`workloads/kernel_paths.py`), the io left open at exit and the
//! non-UTF-8 names workloads in `docker exec`s started after recording
//! began — and their captures pass the host suites' own checks
//! (`agentsight_tests::process_tree`, `agentsight_tests::files_net`), with
//! every path as the container sees it (the scratch directory is mounted
//! at `/t`), the container on every row, and a host process busy at the
//! same time absent. The file and network workload runs under `strace -f`
//! inside the container, so the strace cross-check sees the very run the
//! capture saw.
//!
//! Loss accounting too, each in a container of its own whose init is the
//! workload: the open flood through a 1 MiB ring (captured + lost =
//! generated) and the softirq interleaving (no loss, no gap, every
//! connect's ESTABLISHED transition and every file).
//!
//! The container shares the host's network namespace (`--network host`),
//! so the workload's loopback connects reach the listeners the test owns;
//! its Python is the host's (same Debian release), mounted read-only.

use std::{
    net::TcpListener,
    path::Path,
    process::{Command, Stdio},
    sync::Mutex,
};

use agentsight_tests::{
    docker::{BASE_IMAGE, Container, ensure_base_image, wait_seeded},
    files_net::{
        NON_UTF8_SCRIPT, STRACE_SCRATCH_TRACE, Setup, Unmount, assert_flood_accounted,
        assert_io_left_open_flushed, assert_locked_open_denied, assert_network_matches,
        assert_non_utf8_names_exported, assert_softirq_no_gap, assert_strace_agrees,
        assert_tricks_name_kernel_files, assert_writes_aggregated, expected_sub_rows,
        io_left_open_script, make_path_tricks, rows, setup,
    },
    process_tree::{Tree, check_tree},
    *,
};

/// Where the container sees the test's scratch directory.
const SEEN_AT: &str = "/t";

/// One test at a time: the loss tests load every CPU and overrun a ring,
/// and the truth test binds 127.0.0.1:53.
static SERIAL: Mutex<()> = Mutex::new(());

/// The container's init: waits until the test says go (a FIFO: no exec
/// while it waits), then becomes the tree workload.
fn init_script() -> String {
    format!("read go < {SEEN_AT}/go; exec /bin/sh {SEEN_AT}/tree.sh {SEEN_AT}/work")
}

/// The host's Python, mounted read-only where the workloads call it.
fn python_mounts() -> Vec<String> {
    let real = |p: &str| std::fs::canonicalize(p).unwrap().display().to_string();
    vec![
        format!("{}:/usr/bin/python3:ro", real("/usr/bin/python3")),
        "/usr/lib/python3.11:/usr/lib/python3.11:ro".into(),
        format!(
            "{}:/usr/lib/x86_64-linux-gnu/libexpat.so.1:ro",
            real("/lib/x86_64-linux-gnu/libexpat.so.1")
        ),
    ]
}

/// The host's strace, mounted read-only with the libunwind libraries it
/// links (the base image has its other libraries: same Debian release).
/// It runs inside the container rather than on the host with `strace -f -p`:
/// attaching to a process the container already started would miss its
/// first calls, while run as the workload's parent in the container it
/// traces every call of that workload, under the container's own mount
/// namespace, user and cwd, as the capture records them.
fn strace_mounts() -> Vec<String> {
    let real = |p: &str| std::fs::canonicalize(p).unwrap().display().to_string();
    let mut mounts = vec![format!("{}:/usr/bin/strace:ro", real("/usr/bin/strace"))];
    for lib in [
        "libunwind-ptrace.so.0",
        "libunwind-x86_64.so.8",
        "libunwind.so.8",
    ] {
        let host = format!("/lib/x86_64-linux-gnu/{lib}");
        mounts.push(format!("{}:{host}:ro", real(&host)));
    }
    mounts
}

/// Directories the test user writes in: `trace` (strace's output), `io`
/// (the io left open at exit workload) and `raw` (the non-UTF-8 names).
fn add_the_user_dirs(s: &Setup) {
    let (uid, gid) = test_user();
    for d in ["trace", "io", "raw"] {
        let p = s.dir.join(d);
        std::fs::create_dir(&p).unwrap();
        nix::unistd::chown(p.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
}

/// Adds the tree workload beside the file workload's scratch files:
/// `tree.sh`, `work/sub` (the test user's) and the init's FIFO.
fn add_the_tree_workload(s: &Setup) {
    let (uid, gid) = test_user();
    let work = s.dir.join("work");
    std::fs::create_dir_all(work.join("sub")).unwrap();
    for p in [&work, &work.join("sub")] {
        nix::unistd::chown(p.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/tree.sh"),
        s.dir.join("tree.sh"),
    )
    .unwrap();
    let fifo = s.dir.join("go");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    nix::unistd::chown(&fifo, Some(uid.into()), Some(gid.into())).unwrap();
}

/// Adds the kernel-paths workload in `kp/` (its path tricks, the bind
/// mount included, made before the container starts so its mount
/// namespace gets them); the guard unmounts.
fn add_the_kernel_paths_workload(s: &Setup) -> Unmount {
    let (uid, gid) = test_user();
    let kp = s.dir.join("kp");
    std::fs::create_dir(&kp).unwrap();
    nix::unistd::chown(&kp, Some(uid.into()), Some(gid.into())).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/kernel_paths.py"),
        kp.join("kernel_paths.py"),
    )
    .unwrap();
    make_path_tricks(&kp)
}

/// Starts the container as the test user, the scratch directory at `/t`.
fn start_the_container(s: &Setup, name: &str) -> Container {
    let (uid, gid) = test_user();
    let user = format!("{uid}:{gid}");
    let scratch = format!("{}:{SEEN_AT}", s.dir.display());
    let mut mounts = python_mounts();
    mounts.extend(strace_mounts());
    let init = init_script();
    let mut args: Vec<&str> = vec!["--user", &user, "-w", SEEN_AT, "-v", &scratch];
    for m in &mounts {
        args.extend(["-v", m]);
    }
    args.extend([BASE_IMAGE, "sh", "-c", &init]);
    Container::run_on("host", name, &args)
}

/// A host process busy exec'ing and writing a host file the whole time.
fn start_a_host_loop(s: &Setup) -> std::process::Child {
    Command::new("/bin/sh")
        .args([
            "-c",
            &format!(
                "while :; do /bin/echo outside-marker > {}/host.txt; /bin/sleep 0.05; done",
                s.dir.display()
            ),
        ])
        .spawn()
        .unwrap()
}

/// `docker exec --user UID:GID -w /t NAME ARGS…` as the test user; it
/// must succeed. Its output.
fn exec_as_the_user(c: &Container, args: &[String]) -> std::process::Output {
    let (uid, gid) = test_user();
    let out = Command::new("docker")
        .args(["exec", "--user", &format!("{uid}:{gid}"), "-w", SEEN_AT])
        .arg(&c.name)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit_0(&out);
    out
}

/// Records the container: once its init is seeded, the `docker exec`
/// workloads run one after the other, then the init is told to go; the
/// recording ends by itself when the container stops.
fn record_the_container(s: &Setup, c: &Container, db: &Path) {
    let rec = Command::new(bin())
        .args(["record", "--quiet", "--duration", "60s", "-o"])
        .arg(db)
        .args(["--container", &c.name])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let init_pid: u32 = c.inspect("{{.State.Pid}}").parse().unwrap();
    wait_seeded(db, init_pid);
    let mut traced = sv(&[
        "/usr/bin/strace",
        "-f",
        "-qq",
        "-e",
        STRACE_SCRATCH_TRACE,
        "-o",
        &format!("{SEEN_AT}/trace/strace.txt"),
    ]);
    traced.extend(s.args_seen_at(SEEN_AT));
    let out = exec_as_the_user(c, &traced);
    // The workload prints the refused connect's result.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "111\n");
    exec_as_the_user(
        c,
        &sv(&[
            "/usr/bin/python3",
            &format!("{SEEN_AT}/kp/kernel_paths.py"),
            &format!("{SEEN_AT}/kp"),
        ]),
    );
    let io = io_left_open_script(&format!("{SEEN_AT}/io"));
    for (n, prefix) in [("3", "few"), ("40", "many")] {
        exec_as_the_user(c, &sv(&["/usr/bin/python3", "-c", &io, n, prefix]));
    }
    let raw = format!("{SEEN_AT}/raw");
    exec_as_the_user(c, &sv(&["/usr/bin/python3", "-c", NON_UTF8_SCRIPT, &raw]));
    std::fs::write(s.dir.join("go"), "go\n").unwrap();
    let out = rec.wait_with_output().unwrap();
    assert_exit_0(&out);
}

/// Every process and every event is the container's.
fn check_every_row_is_the_containers(conn: &rusqlite::Connection, c: &Container) {
    assert_eq!(meta(conn, "complete").as_deref(), Some("true"));
    assert_eq!(
        meta(conn, "end_reason").as_deref(),
        Some("every container stopped")
    );
    let others: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM processes
             WHERE container_id IS NOT ?1 OR container_name IS NOT ?2 OR container_image IS NOT ?3",
            [&c.id, &c.name, BASE_IMAGE],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(others, 0, "process rows without the container");
    let (events, theirs): (i64, i64) = conn
        .query_row(
            "SELECT COUNT(*), COUNT(p.container_id) FROM events e
             JOIN processes p ON p.id = e.process_id WHERE p.container_id = ?1",
            [&c.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let all: i64 = conn
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert!(events > 0);
    assert_eq!((events, theirs), (all, all), "events outside the container");
}

/// The file workload's rows, its paths as the container sees them.
fn check_the_file_and_network_truth(conn: &rusqlite::Connection, s: &Setup) {
    let sub = format!("{SEEN_AT}/sub");
    assert_eq!(rows(conn, &sub), expected_sub_rows(&sub));
    assert_locked_open_denied(conn, SEEN_AT);
    assert_writes_aggregated(conn, &sub);
    assert_network_matches(conn, s, &format!("{SEEN_AT}/agent.sock"));
    // Nothing under the host's own path of the scratch directory: the host
    // loop's writes are not there, and the container's are not renamed.
    let host_paths: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM events WHERE path LIKE ?1 || '%' OR real_path LIKE ?1 || '%'",
            [s.dir.display().to_string()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(host_paths, 0);
    // The file the kernel opened is named as the container sees it too:
    // its dentry walk stops at the process's root, not the host's.
    let opened: Vec<(String, Option<String>, Option<String>)> = conn
        .prepare(
            "SELECT path, real_path, real_path_status FROM events
             WHERE kind = 'openat' AND result >= 0 AND path LIKE ?1 || '/sub%' ORDER BY mono_ns",
        )
        .unwrap()
        .query_map([SEEN_AT], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let sub = format!("{SEEN_AT}/sub");
    let complete = |p: &str| {
        (
            p.to_owned(),
            Some(p.to_owned()),
            Some("complete".to_owned()),
        )
    };
    assert_eq!(
        opened,
        vec![
            complete(&format!("{sub}/rel.txt")),
            complete(&sub),
            complete(&format!("{sub}/viadirfd.txt")),
        ]
    );
    // The workload's own exec: the `docker exec` process, as the container
    // sees its argv and cwd.
    let exec = execs(conn)
        .into_iter()
        .find(|e| e.argv.get(1).is_some_and(|a| a.ends_with("files_net.py")))
        .expect("the docker exec's exec");
    assert_eq!(exec.argv, s.args_seen_at(SEEN_AT));
    assert_eq!(exec.cwd, SEEN_AT);
}

#[test]
fn container_capture_passes_the_host_capture_truth() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    ensure_base_image();
    let s = setup("ctruth");
    add_the_tree_workload(&s);
    let unmount = add_the_kernel_paths_workload(&s);
    add_the_user_dirs(&s);
    let name = format!("agentsight-test-truth-{}", std::process::id());
    let c = start_the_container(&s, &name);
    let mut host = start_a_host_loop(&s);
    let db = s.dir.join("truth.db");
    record_the_container(&s, &c, &db);
    let _ = host.kill();
    let _ = host.wait();

    let conn = open(&db);
    check_every_row_is_the_containers(&conn, &c);
    check_the_file_and_network_truth(&conn, &s);
    assert_tricks_name_kernel_files(&conn, &s.dir.join("kp"), &format!("{SEEN_AT}/kp"));
    assert_strace_agrees(&std::fs::read_to_string(s.dir.join("trace/strace.txt")).unwrap());
    assert_io_left_open_flushed(&conn, &format!("{SEEN_AT}/io"));
    let export = Command::new(bin())
        .args(["export", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_exit_0(&export);
    assert_non_utf8_names_exported(
        &String::from_utf8_lossy(&export.stdout),
        &format!("{SEEN_AT}/raw"),
    );
    let (uid, _) = test_user();
    check_tree(
        &conn,
        &Tree {
            root_argv: sv(&[
                "/bin/sh",
                &format!("{SEEN_AT}/tree.sh"),
                &format!("{SEEN_AT}/work"),
            ]),
            root_cwd: SEEN_AT.to_owned(),
            work: format!("{SEEN_AT}/work"),
            uid,
            outside_pid: i64::from(host.id()),
        },
    );
    drop(conn);
    drop(c);
    drop(unmount);
    let _ = std::fs::remove_dir_all(&s.dir);
}

/// Runs a container (scratch `dir` at `/t`, the test user, on `network`,
/// with `mounts`) whose init's child shell stops itself, then, continued,
/// `exec`s `command`; records it with `extra` record options from while
/// that child is stopped until the container stops. Stopped rather than
/// waiting on a FIFO or a polled file: a redirection's dup2/close or a
/// poller's children would be captured events of the container besides
/// the workload's, and the flood's check admits none (`kill` and `wait4`
/// are not captured syscalls). A child, because the kernel drops the
/// signals a namespace's init sends itself.
fn record_an_init_workload(
    dir: &Path,
    (name, network): (&str, &str),
    mounts: &[String],
    command: &str,
    extra: &[&str],
) -> Container {
    let (uid, gid) = test_user();
    let user = format!("{uid}:{gid}");
    let scratch = format!("{}:{SEEN_AT}", dir.display());
    let init = format!("/bin/sh -c 'kill -STOP $$; exec {command}'; exit $?");
    let mut args: Vec<&str> = vec!["--user", &user, "-w", SEEN_AT, "-v", &scratch];
    for m in mounts {
        args.extend(["-v", m]);
    }
    args.extend([BASE_IMAGE, "sh", "-c", &init]);
    let c = Container::run_on(network, name, &args);
    let init_pid: i32 = c.inspect("{{.State.Pid}}").parse().unwrap();
    let stopped = wait_stopped_child(init_pid);
    let db = dir.join("c.db");
    let rec = Command::new(bin())
        .args(["record", "--quiet", "--duration", "120s", "-o"])
        .arg(&db)
        .args(extra)
        .args(["--container", &c.name])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_seeded(&db, init_pid as u32);
    wait_seeded(&db, stopped as u32);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(stopped),
        nix::sys::signal::Signal::SIGCONT,
    )
    .unwrap();
    let out = rec.wait_with_output().unwrap();
    assert_exit_0(&out);
    c
}

/// Waits (≤ 15 s) until the child of `parent` is stopped (state `T` in
/// its `/proc/PID/stat`); its pid.
fn wait_stopped_child(parent: i32) -> i32 {
    let start = std::time::Instant::now();
    loop {
        let child: Option<i32> =
            std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
                .ok()
                .and_then(|c| c.split_whitespace().next()?.parse().ok());
        let stat = child
            .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
            .unwrap_or_default();
        // The state follows the parenthesised command name.
        if let Some(pid) = child
            && stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T'))
        {
            return pid;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(15),
            "no stopped child of {parent}: {stat}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn container_flood_counts_captured_plus_lost_equal_generated() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    ensure_base_image();
    let dir = scratch("cflood");
    const N: u64 = 300_000;
    const FLOODED: &str = "/nonexistent-agentsight-flood";
    static_open_flood(&dir, N, FLOODED);
    let name = format!("agentsight-test-flood-{}", std::process::id());
    // A 1 MiB ring so the flood overruns it: loss must be counted, never silent.
    let c = record_an_init_workload(
        &dir,
        (&name, "none"),
        &[],
        &format!("{SEEN_AT}/flood"),
        &["--ring-mib", "1"],
    );
    let conn = open(&dir.join("c.db"));
    check_every_row_is_the_containers(&conn, &c);
    let (captured, lost) = assert_flood_accounted(&conn, N, FLOODED);
    assert!(lost > 0, "a 1 MiB ring holds the whole flood");
    eprintln!("container flood: {N} generated, {captured} captured, {lost} lost (1 MiB ring)");
    drop(conn);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn container_softirq_interleaving_leaves_no_gap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    ensure_base_image();
    let dir = scratch("csoftirq");
    const CONNECTS: usize = 1500;
    const FILES: usize = 4000;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept and drop, so the backlog never fills and no connect waits.
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            drop(conn);
        }
    });
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/seq_stress.py"),
        dir.join("seq_stress.py"),
    )
    .unwrap();
    let name = format!("agentsight-test-softirq-{}", std::process::id());
    let c = record_an_init_workload(
        &dir,
        (&name, "host"),
        &python_mounts(),
        &format!("/usr/bin/python3 {SEEN_AT}/seq_stress.py {SEEN_AT} {port} {CONNECTS} {FILES}"),
        &[],
    );
    let cpus = std::thread::available_parallelism().unwrap().get();
    let conn = open(&dir.join("c.db"));
    check_every_row_is_the_containers(&conn, &c);
    assert_softirq_no_gap(&conn, SEEN_AT, port, (CONNECTS, FILES), cpus);
    eprintln!(
        "container seq stress: {cpus} CPUs, {} connects and {} files, 0 lost, 0 gaps",
        CONNECTS * cpus,
        FILES * cpus
    );
    drop(conn);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}
