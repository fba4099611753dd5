//! A real agent CLI inside a container (issue 14): the pinned Codex's native
//! binary runs in a `--network host` container of the test base image,
//! started with `docker exec` under `agentsight record --container NAME
//! --docker-container NAME -- docker exec …`, against the scripted model
//! server on the host's loopback. The capture binds the Codex tree in the
//! container to the session read inside the container through this build's
//! bridge, by the tree's own transcript writes, and `correlate` explains
//! every tool call exactly as for a host run: the same checks as
//! `e2e_agents.rs` (`agentsight_tests::e2e_check`), the same scenarios.
//!
//! The run's home, workspace and TMPDIR are mounted into the container at
//! the same paths, so the expected paths are the host run's; the host side
//! never reads them here (sessions, session show and correlate go through
//! the bridge).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use agentsight_tests::{
    bin,
    codex_container::{codex_path, start_the_container},
    docker::{Container, docker_user, ensure_base_image},
    e2e::{Agent, Outcome, Run},
    e2e_check::*,
    sv, test_user,
};
use serde_json::Value;

/// `agentsight record --user agentsight-docker --all-users --container NAME
/// --agent auto --docker-container NAME -o DB -- docker exec -i --user UID:GID NAME <the
/// CLI's command line>` (the command runs as a user of the `docker` group,
/// never as root; the CLI as the test user in the container); returns its
/// outcome and the capture. The CLI's command line is the host run's (`env -i -C WORK …
/// codex exec …`) with the container's Codex on PATH.
fn record_in_the_container(run: &Run, name: &str) -> (Outcome, PathBuf) {
    let (uid, gid) = test_user();
    let db = run.server_dir.join("capture.db");
    let start = std::time::Instant::now();
    let out = Command::new(bin())
        .args(["record", "--quiet", "--user", docker_user(), "--all-users"])
        .args(["--container", name, "--agent", "auto"])
        .args(["--docker-container", name, "-o"])
        .arg(&db)
        .args(["--", "docker", "exec", "-i", "--user"])
        .arg(format!("{uid}:{gid}"))
        .arg(name)
        .args(run.cli_command_with_path(&codex_path()))
        .current_dir(&run.server_dir)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .stdin(Stdio::null())
        .output()
        .expect("run agentsight record");
    let outcome = Outcome {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    };
    (outcome, db)
}

/// The bound tree's root is the container's Codex, labelled as the agent;
/// the capture's processes are the container's and the host's `docker
/// exec` client only.
fn check_the_tree_is_the_containers(db: &Path, c: &Container, name: &str, corr: &Value) {
    let conn = agentsight_tests::open(db);
    let root_pid = corr["bindings"][0]["root_pid"].as_i64().unwrap();
    let (container_id, container_name): (Option<String>, Option<String>) = conn
        .query_row(
            "SELECT container_id, container_name FROM processes WHERE pid = ?1",
            [root_pid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (container_id.as_deref(), container_name.as_deref()),
        (Some(c.id.as_str()), Some(name))
    );
    // The tree's root is the Codex process (after `env`'s exec), run as
    // the test user in the container.
    let argv0: String = conn
        .query_row(
            "SELECT json_extract(argv, '$[0]') FROM processes WHERE pid = ?1",
            [root_pid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(argv0, "codex");
    // `--agent auto` recognised the agent inside the container: its row,
    // and no other, is labelled (Codex's tool processes exec'd shells).
    let labelled: Vec<(i64, String)> = conn
        .prepare("SELECT pid, agent FROM processes WHERE agent IS NOT NULL")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(labelled, vec![(root_pid, "codex".to_owned())]);
    let show = Command::new(bin())
        .args(["show", "--db"])
        .arg(db)
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    let line = show
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{root_pid} ")))
        .unwrap_or_else(|| panic!("no line for {root_pid}: {show}"));
    assert!(line.contains(" [agent codex]"), "{line}");
    // Host processes: only the `docker exec` client the recording started.
    let mut st = conn
        .prepare(
            "SELECT DISTINCT json_extract(argv, '$[0]') FROM processes WHERE container_id IS NULL",
        )
        .unwrap();
    let host: Vec<Option<String>> = st
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(host, vec![Some("docker".to_owned())]);
    // The session came in through the bridge, and meta names it.
    let meta = agentsight_tests::meta(&conn, "container_sessions").unwrap();
    let list: Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(
        list,
        serde_json::json!([{
            "container_id": c.id,
            "container_name": name,
            "provider": "codex",
            "session_id": corr["session"]["session_id"],
        }])
    );
}

fn check_codex_in_a_container(scenario: &str) {
    agentsight_tests::require_root();
    ensure_base_image();
    let mut run = Run::prepare(Agent::Codex, scenario);
    let _server = run.start_server();
    let name = format!("agentsight-test-codex-{scenario}-{}", std::process::id());
    run.docker_container = Some(name.clone());
    let c = start_the_container(&run, &name);

    let (out, db) = record_in_the_container(&run, &name);
    // The same checks as a host run: the transcript through the bridge.
    let id = verify(&run, out);
    assert_no_loss(&db);
    let corr = run.correlate(&id, &db);
    let dump = summarize(&corr);
    assert_eq!(corr["session_source"], "container", "{dump}");
    // Beside the Codex tree, bound to nothing: the container's init, and
    // the host's `docker exec` client the recording started.
    let mut client = sv(&["docker", "exec", "-i", "--user"]);
    client.push(format!("{}:{}", test_user().0, test_user().1));
    client.push(name.clone());
    client.extend(run.cli_command_with_path(&codex_path()));
    verify_correlation_beside(
        &run,
        &id,
        &corr,
        &dump,
        &[(sv(&["sleep", "600"]), Some(name.as_str())), (client, None)],
    );
    check_the_tree_is_the_containers(&db, &c, &name, &corr);
    audit_container_writes_pass(&run, &db);
}

/// The container's half of the host runs' strict audit: with the
/// container's own path rules (`[container.writes]`: the run's workspace,
/// TMPDIR and Codex's state directory, as the container sees them — the
/// same paths here), no file or executable finding names the container;
/// without the workspace, the edit scenario's write is found, in it.
fn audit_container_writes_pass(run: &Run, db: &Path) {
    assert_eq!(container_file_errors(run, db, true), Vec::<String>::new());
    if run.scenario.name == "edit" {
        let hello = run.work.join("hello.txt").display().to_string();
        let errors = container_file_errors(run, db, false);
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("write-outside-allowed ") && e.contains(&hello)),
            "{errors:#?}"
        );
    }
}

/// `audit --format json` with a `[container.writes]` policy (the workspace
/// allowed or not): the container's file and executable errors, as `RULE
/// PATH: MESSAGE`.
fn container_file_errors(run: &Run, db: &Path, allow_work: bool) -> Vec<String> {
    let policy = run.root.join("container-policy.toml");
    let mut allow: Vec<String> = [
        "/dev/null",
        "/dev/tty",
        "/dev/pts/*",
        "/dev/shm/**",
        "/proc/self/**",
        "/proc/thread-self/**",
    ]
    .map(String::from)
    .to_vec();
    allow.push(format!("{}/**", run.tmp.display()));
    allow.push(format!("{}/.codex/**", run.home.display()));
    if allow_work {
        allow.push(format!("{}/**", run.work.display()));
    }
    std::fs::write(
        &policy,
        format!(
            "[container.writes]\nallow = {allow:?}\n[executables]\ndeny = {:?}\n[network]\nallow = [\"127.0.0.1:{}\"]\n",
            ["curl", "wget", "nc", "ncat", "netcat", "sudo"],
            run.model_port
        ),
    )
    .unwrap();
    let (_, report) = audit_json(db, &policy);
    let name = run.docker_container.as_deref().unwrap();
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["container"]["name"] == name
                && f["severity"] == "error"
                && ["write-outside-allowed", "denied-path", "denied-executable"]
                    .contains(&f["rule"].as_str().unwrap_or(""))
        })
        .map(|f| {
            format!(
                "{} {}: {}",
                f["rule"].as_str().unwrap_or(""),
                f["path"].as_str().unwrap_or(""),
                f["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn codex_edit_in_a_container_under_record() {
    check_codex_in_a_container("edit");
}

#[test]
fn codex_inspect_in_a_container_under_record() {
    check_codex_in_a_container("inspect");
}
