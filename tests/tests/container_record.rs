//! Root tests of `record --container` on a real Docker engine: the
//! container's processes (its init's tree and a `docker exec` started after
//! recording began) are captured with the container on every process row;
//! a host process running at the same time is not; bad names and missing
//! containers fail before anything is loaded.

use std::{
    os::unix::fs::MetadataExt,
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use agentsight_tests::{
    docker::{BASE_IMAGE, Container, ensure_base_image, wait_seeded},
    *,
};

/// The container's init: waits for the `docker exec` below to say go, then
/// runs its known workload and ends (so the recording ends with it).
const INIT: &str = "mkdir -p /work; while [ ! -e /work/go ]; do sleep 0.05; done; \
                    echo one > /work/f1.txt; cat /etc/hostname; /bin/true; sleep 3";
/// Started with `docker exec` once recording runs: prints its pid as the
/// container sees it, writes f2, says go, and lives on a little.
const EXEC: &str = "echo $$; echo two > /work/f2.txt; touch /work/go; sleep 2";

/// One process row with its container and namespace columns.
#[derive(Debug)]
struct Identity {
    pid: i64,
    origin: String,
    argv: Vec<String>,
    exec_count: i64,
    container: (Option<String>, Option<String>, Option<String>),
    pid_ns: Option<i64>,
    mnt_ns: Option<i64>,
    ns_pid: Option<i64>,
}

fn identities(conn: &rusqlite::Connection) -> Vec<Identity> {
    let mut st = conn
        .prepare(
            "SELECT pid, origin, argv, container_id, container_name, container_image, pid_ns,
                    mnt_ns, ns_pid, exec_count FROM processes ORDER BY id",
        )
        .unwrap();
    st.query_map([], |r| {
        let argv: Option<String> = r.get(2)?;
        Ok(Identity {
            pid: r.get(0)?,
            origin: r.get(1)?,
            argv: argv
                .and_then(|a| serde_json::from_str(&a).ok())
                .unwrap_or_default(),
            container: (r.get(3)?, r.get(4)?, r.get(5)?),
            pid_ns: r.get(6)?,
            mnt_ns: r.get(7)?,
            ns_pid: r.get(8)?,
            exec_count: r.get(9)?,
        })
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// One recorded run of the container: its identity and namespaces, what
/// its `docker exec` printed, and the host loop running beside it.
struct Recorded {
    c: Container,
    name: String,
    init_pid: u32,
    pid_ns: i64,
    mnt_ns: i64,
    /// The pid the `docker exec` shell printed (as the container sees it).
    exec_ns_pid: i64,
    host_pid: u32,
    host_file: PathBuf,
    dir: PathBuf,
    db: PathBuf,
}

/// Starts the container, a busy host loop, and `record --container`; runs
/// the `docker exec` once the init is seeded, and waits for the recording
/// to end by itself when the container stops.
fn record_the_container_beside_a_host_loop() -> Recorded {
    let name = format!("agentsight-test-rec-{}", std::process::id());
    let c = Container::run(&name, &[BASE_IMAGE, "sh", "-c", INIT]);
    let init_pid: u32 = c.inspect("{{.State.Pid}}").parse().unwrap();
    let ns = |kind: &str| {
        std::fs::metadata(format!("/proc/{init_pid}/ns/{kind}"))
            .unwrap()
            .ino() as i64
    };
    let (pid_ns, mnt_ns) = (ns("pid"), ns("mnt"));

    let dir = scratch("container");
    // A host process busy at the same time: never captured.
    let host_file = dir.join("host.txt");
    let mut host = Command::new("/bin/sh")
        .args([
            "-c",
            &format!(
                "while :; do echo x > {}; sleep 0.05; done",
                host_file.display()
            ),
        ])
        .spawn()
        .unwrap();

    let db = dir.join("container.db");
    let rec = Command::new(bin())
        .args(["record", "--quiet", "--duration", "60s", "-o"])
        .arg(&db)
        .args(["--container", &name])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_seeded(&db, init_pid);
    let out = c.exec(&["sh", "-c", EXEC]);
    assert_exit_0(&out);
    let exec_ns_pid: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    // The recording ends by itself once the container has stopped.
    let out = rec.wait_with_output().unwrap();
    let _ = host.kill();
    let _ = host.wait();
    assert_exit_0(&out);
    Recorded {
        c,
        name,
        init_pid,
        pid_ns,
        mnt_ns,
        exec_ns_pid,
        host_pid: host.id(),
        host_file,
        dir,
        db,
    }
}

/// The capture is complete, ended with the container, and every process
/// row is the container's; the init and the `docker exec` shell have their
/// namespaces and the pids they have in them.
fn check_every_row_is_the_containers(r: &Recorded, conn: &rusqlite::Connection) -> Vec<Identity> {
    let (init_pid, pid_ns, mnt_ns) = (r.init_pid, r.pid_ns, r.mnt_ns);
    assert_eq!(meta(conn, "complete").as_deref(), Some("true"));
    assert_eq!(
        meta(conn, "end_reason").as_deref(),
        Some("every container stopped")
    );
    let procs = identities(conn);
    let ours = (
        Some(r.c.id.clone()),
        Some(r.name.clone()),
        Some(BASE_IMAGE.to_owned()),
    );
    // Every process row is the container's: nothing of the host.
    assert!(procs.len() >= 5, "{procs:#?}");
    for p in &procs {
        assert_eq!(p.container, ours, "{p:?}");
        assert_ne!(p.pid, i64::from(r.host_pid), "{p:?}");
    }
    // The init, seeded from /proc: pid 1 in its namespaces.
    let init = procs
        .iter()
        .find(|p| p.pid == i64::from(init_pid))
        .expect("the init's row");
    assert_eq!(init.origin, "seeded");
    assert_eq!(init.argv, sv(&["sh", "-c", INIT]));
    assert_eq!(
        (init.pid_ns, init.mnt_ns, init.ns_pid),
        (Some(pid_ns), Some(mnt_ns), Some(1))
    );
    // The `docker exec` shell, tracked from its exec: the pid it printed.
    let exec = procs
        .iter()
        .find(|p| p.argv == sv(&["sh", "-c", EXEC]))
        .expect("the docker exec's row");
    // Its pid namespace and pid come from the kernel's exec record; its
    // mount namespace only from /proc, which the writer reads when it stores
    // the exec — on a loaded machine that can be after the 2 s shell is gone
    // (then NULL, never another namespace's).
    assert_eq!(
        (exec.pid_ns, exec.ns_pid),
        (Some(pid_ns), Some(r.exec_ns_pid))
    );
    assert!(exec.mnt_ns.is_none_or(|n| n == mnt_ns), "{exec:?}");
    procs
}

/// Namespace ids, where read, are the container's; every process that
/// exec'd has its pid namespace and pid in it.
fn check_namespace_columns_of_every_row(r: &Recorded, procs: &[Identity]) {
    let (init_pid, pid_ns, mnt_ns) = (r.init_pid, r.pid_ns, r.mnt_ns);
    // The kernel reads them at the exec, so even `/bin/true`, gone at once,
    // has them.
    for p in procs {
        assert!(p.pid_ns.is_none_or(|n| n == pid_ns), "{p:?}");
        assert!(p.mnt_ns.is_none_or(|n| n == mnt_ns), "{p:?}");
        if p.exec_count > 0 || p.origin == "seeded" {
            assert_eq!(p.pid_ns, Some(pid_ns), "{p:?}");
            assert!(
                p.ns_pid
                    .is_some_and(|n| n > 1 || p.pid == i64::from(init_pid)),
                "{p:?}"
            );
        }
    }
    let true_row = procs
        .iter()
        .find(|p| p.argv == sv(&["/bin/true"]))
        .expect("the /bin/true row");
    assert!(true_row.ns_pid.is_some(), "{true_row:?}");
}

/// The workload, with paths as the container sees them: its opens and
/// execs are there, the host loop's file is not, and the init wrote f1.
fn check_the_workload_as_the_container_sees_it(r: &Recorded, conn: &rusqlite::Connection) {
    let paths_of = |kind: &str| -> Vec<(String, String)> {
        let mut st = conn
            .prepare(
                "SELECT e.path, p.container_name FROM events e JOIN processes p ON p.id = e.process_id
                 WHERE e.kind = ?1 AND e.path IS NOT NULL ORDER BY e.mono_ns",
            )
            .unwrap();
        st.query_map([kind], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let opens = paths_of("openat");
    for path in ["/work/f1.txt", "/etc/hostname", "/work/f2.txt", "/work/go"] {
        assert!(
            opens.contains(&(path.to_owned(), r.name.clone())),
            "{path} not opened in the container: {opens:?}"
        );
    }
    let host_path = r.host_file.display().to_string();
    assert!(
        !opens.iter().any(|(p, _)| *p == host_path),
        "the host loop was captured"
    );
    let execs = execs(conn);
    let exec_argvs: Vec<Vec<String>> = execs.iter().map(|e| e.argv.clone()).collect();
    for argv in [
        sv(&["cat", "/etc/hostname"]),
        sv(&["/bin/true"]),
        sv(&["sh", "-c", EXEC]),
    ] {
        assert!(exec_argvs.contains(&argv), "{argv:?} not in {exec_argvs:?}");
    }
    let f1_writer = conn
        .query_row(
            "SELECT p.pid FROM events e JOIN processes p ON p.id = e.process_id
             WHERE e.kind = 'io' AND e.path = '/work/f1.txt' AND e.bytes = 4",
            [],
            |r| r.get::<_, i64>(0),
        )
        .expect("the write of 'one\\n' to /work/f1.txt");
    assert_eq!(f1_writer, i64::from(r.init_pid));
}

/// `show` names the container at the init's root.
fn check_show_names_the_container_at_the_init(r: &Recorded) {
    let (c, name, init_pid) = (&r.c, &r.name, r.init_pid);
    let show = Command::new(bin())
        .args(["show", "--db"])
        .arg(&r.db)
        .output()
        .unwrap();
    assert_exit_0(&show);
    let show = String::from_utf8_lossy(&show.stdout);
    let short: String = c.id.chars().take(12).collect();
    let note = format!("[container {name} {short} image {BASE_IMAGE}, pid 1 in it]");
    assert!(
        show.lines()
            .any(|l| l.trim_start().starts_with(&format!("{init_pid} ")) && l.ends_with(&note)),
        "{show}"
    );
}

/// `export` puts the container on every event, and the init's namespace
/// pid and pid namespace on its events.
fn check_export_puts_the_container_on_every_event(r: &Recorded) {
    let (c, name, init_pid) = (&r.c, &r.name, r.init_pid);
    let export = Command::new(bin())
        .args(["export", "--db"])
        .arg(&r.db)
        .output()
        .unwrap();
    assert_exit_0(&export);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&export.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty());
    for l in &lines {
        assert_eq!(l["container_id"], serde_json::json!(c.id), "{l}");
        assert_eq!(l["container_name"], serde_json::json!(name), "{l}");
        assert_eq!(l["container_image"], serde_json::json!(BASE_IMAGE), "{l}");
    }
    let init_line = lines
        .iter()
        .find(|l| l["pid"] == serde_json::json!(init_pid))
        .expect("an event of the init");
    assert_eq!(init_line["ns_pid"], serde_json::json!(1));
    assert_eq!(init_line["pid_ns"], serde_json::json!(r.pid_ns));
}

#[test]
fn container_processes_and_a_later_docker_exec_carry_the_container() {
    require_root();
    ensure_base_image();
    let r = record_the_container_beside_a_host_loop();
    let conn = open(&r.db);
    let procs = check_every_row_is_the_containers(&r, &conn);
    check_namespace_columns_of_every_row(&r, &procs);
    check_the_workload_as_the_container_sees_it(&r, &conn);
    check_show_names_the_container_at_the_init(&r);
    check_export_puts_the_container_on_every_event(&r);
    let Recorded { c, dir, .. } = r;
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `record` with `args` and expects a one-line error, exit status 2,
/// and no capture left behind (nothing was created or loaded).
fn refused(args: &[&str], expect: &str) {
    refused_env(args, &[], expect)
}

/// [`refused`] with environment variables (e.g. a sudo caller).
fn refused_env(args: &[&str], env: &[(&str, String)], expect: &str) {
    let dir = scratch("container-refused");
    let db = dir.join("refused.db");
    let out = Command::new(bin())
        .args(["record", "-o"])
        .arg(&db)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(expect), "{err}");
    assert!(!db.exists(), "a capture was created");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_containers_and_hostile_names_fail_before_loading() {
    require_root();
    agentsight_tests::docker::ensure_daemon();
    refused(
        &["--container", "agentsight-no-such-container"],
        "--container agentsight-no-such-container: no such container",
    );
    refused(
        &["--container", "--privileged"],
        "--container \"--privileged\": not a container name or id",
    );
    refused(
        &["--container", "a/b"],
        "--container \"a/b\": not a container name or id",
    );
    // Under sudo a container (everyone's processes in it) needs --all-users.
    let (uid, gid) = test_user();
    refused_env(
        &["--container", "agentsight-no-such-container"],
        &[
            ("SUDO_UID", uid.to_string()),
            ("SUDO_GID", gid.to_string()),
            ("SUDO_USER", TEST_USER.to_string()),
        ],
        "under sudo that needs --all-users",
    );
    // A stopped container is refused too.
    ensure_base_image();
    let name = format!("agentsight-test-stopped-{}", std::process::id());
    let c = Container::run(&name, &[BASE_IMAGE, "true"]);
    let start = Instant::now();
    while c.inspect("{{.State.Running}}") != "false" {
        assert!(start.elapsed() < Duration::from_secs(15));
        std::thread::sleep(Duration::from_millis(100));
    }
    refused(
        &["--container", &name],
        &format!("--container {name}: the container is not running"),
    );
}

/// `record --container NAME --agent auto`: the agent inside the container
/// (a binary named like one, `gemini`) is labelled by the host's rules; an
/// agent-named process on the host is not adopted (with `--container`,
/// `--agent` only labels); the recording still ends with the container.
#[test]
fn agent_auto_labels_the_agent_in_a_container_and_ends_with_it() {
    require_root();
    ensure_base_image();
    let name = format!("agentsight-test-agentlabel-{}", std::process::id());
    let init = "cp /bin/sleep /usr/local/bin/gemini; while [ ! -e /go ]; do sleep 0.05; done; \
                gemini 0.5; /bin/true";
    let c = Container::run(&name, &[BASE_IMAGE, "sh", "-c", init]);
    let init_pid: u32 = c.inspect("{{.State.Pid}}").parse().unwrap();
    let dir = scratch("agentlabel");
    // An agent-named process on the host, running all along.
    let host_gemini = dir.join("gemini");
    std::fs::copy("/bin/sleep", &host_gemini).unwrap();
    let mut host = Command::new(&host_gemini).arg("30").spawn().unwrap();
    let db = dir.join("label.db");
    let rec = Command::new(bin())
        .args(["record", "--quiet", "--duration", "60s", "-o"])
        .arg(&db)
        .args(["--container", &name, "--agent", "auto"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_seeded(&db, init_pid);
    assert_exit_0(&c.exec(&["touch", "/go"]));
    let out = rec.wait_with_output().unwrap();
    let _ = host.kill();
    let _ = host.wait();
    assert_exit_0(&out);
    let conn = open(&db);
    assert_eq!(
        meta(&conn, "end_reason").as_deref(),
        Some("every container stopped")
    );
    let labelled: Vec<(String, String, Option<String>)> = conn
        .prepare("SELECT argv, agent, container_name FROM processes WHERE agent IS NOT NULL")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        labelled,
        vec![(
            r#"["gemini","0.5"]"#.to_owned(),
            "gemini".to_owned(),
            Some(name.clone())
        )]
    );
    let host_rows: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM processes WHERE pid = ?1 OR container_id IS NULL",
            [host.id()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(host_rows, 0, "a host process was adopted");
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}
