//! Root tests of `audit` with container-scoped path rules on a real Docker
//! engine: a container's workload writes `/workspace/ok.txt` and
//! `/etc/evil.conf` inside the container; a `[container]` policy allowing
//! writes only under `/workspace/**` gives exactly one finding, the
//! `/etc/evil.conf` write, carrying the container. The same policy over a
//! host capture of the same paths gives the host rules' verdicts only.

use std::{
    io::Write,
    path::Path,
    process::{Command, Output, Stdio},
};

use agentsight_tests::{
    docker::{BASE_IMAGE, Container, ensure_base_image, wait_seeded},
    *,
};
use serde_json::Value;

/// Waits until `/workspace/go` exists (created by a `docker exec` once the
/// recorder runs), then writes the two files and ends.
const INIT: &str = "mkdir -p /workspace; while [ ! -e /workspace/go ]; do sleep 0.05; done; \
                    echo ok > /workspace/ok.txt; echo evil > /etc/evil.conf; sleep 1";

/// The host's workspace is elsewhere: `/workspace` is not in it.
const POLICY: &str = "workspace = \"/srv/agentsight-host-workspace\"\nhome = \"/root\"\n\
                      unexplained_activity = \"ignore\"\nclaims_mismatch = \"ignore\"\n\n\
                      [container.writes]\nallow = [\"/workspace/**\"]\n";

fn audit(db: &Path, policy: &Path, format: &str) -> Output {
    Command::new(bin())
        .args(["audit", "--db"])
        .arg(db)
        .arg("--policy")
        .arg(policy)
        .args(["--format", format])
        .output()
        .expect("run agentsight audit")
}

/// (rule, message, the finding's `container` as written) of every finding.
fn briefs(report: &Value) -> Vec<(String, String, Option<Value>)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
                f.get("container").cloned(),
            )
        })
        .collect()
}

#[test]
fn container_scoped_policy_judges_the_containers_paths_only() {
    require_root();
    ensure_base_image();
    let dir = scratch("container-audit");
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();

    let name = format!("agentsight-test-audit-{}", std::process::id());
    let c = Container::run(&name, &[BASE_IMAGE, "sh", "-c", INIT]);
    let init_pid: u32 = c.inspect("{{.State.Pid}}").parse().unwrap();
    let db = dir.join("container.db");
    let rec = Command::new(bin())
        .args(["record", "--quiet", "--duration", "60s", "-o"])
        .arg(&db)
        .args(["--container", &name])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_seeded(&db, init_pid);
    assert_exit_0(&c.exec(&["touch", "/workspace/go"]));
    let out = rec.wait_with_output().unwrap();
    assert_exit_0(&out);

    let out = audit(&db, &policy, "json");
    // Exit 1: an error-level finding.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let short: String = c.id.chars().take(12).collect();
    assert_eq!(
        briefs(&report),
        vec![(
            "denied-path".to_owned(),
            "write of denied path /etc/evil.conf".to_owned(),
            Some(serde_json::json!({"name": name, "id": short})),
        )],
        "{report:#}"
    );
    let f = &report["findings"][0];
    assert_eq!(f["evidence"]["matched"], "/etc/**");
    assert_eq!(
        f["process"]["argv"],
        serde_json::json!(["sh", "-c", INIT]),
        "{f:#}"
    );
    // The same finding in the text report, with its container.
    let text = audit(&db, &policy, "text");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("ERROR [denied-path] write of denied path /etc/evil.conf\n")
            && text.contains(&format!("    container {name} ({short})\n")),
        "{text}"
    );
    drop(c);

    // The same paths written by a host process (in a private mount
    // namespace, tmpfs over /etc and /workspace: the host's files stay as
    // they are): the host rules' verdicts, no container.
    let made_workspace = !Path::new("/workspace").exists();
    if made_workspace {
        std::fs::create_dir("/workspace").unwrap();
    }
    let fifo = dir.join("go.fifo");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    let script = format!(
        "mount -t tmpfs none /workspace && mount -t tmpfs none /etc && read x < {} && \
         echo ok > /workspace/ok.txt && echo evil > /etc/evil.conf",
        fifo.display()
    );
    let mut host = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let hdb = dir.join("host.db");
    let rec = Command::new(bin())
        .args(["record", "--quiet", "--duration", "4s", "-o"])
        .arg(&hdb)
        .args(["--pid", &host.id().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_seeded(&hdb, host.id());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .and_then(|mut f| f.write_all(b"go\n"))
        .unwrap();
    let hs = host.wait().unwrap();
    let out = rec.wait_with_output().unwrap();
    if made_workspace {
        let _ = std::fs::remove_dir("/workspace");
    }
    assert!(hs.success());
    assert_exit_0(&out);
    let out = audit(&hdb, &policy, "json");
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        briefs(&report),
        vec![
            (
                "write-outside-allowed".to_owned(),
                "write outside the allowed roots: /workspace/ok.txt".to_owned(),
                None
            ),
            (
                "denied-path".to_owned(),
                "write of denied path /etc/evil.conf".to_owned(),
                None
            ),
        ],
        "{report:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
