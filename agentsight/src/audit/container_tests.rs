//! Container-scoped path rules and findings that name their container,
//! over a synthetic capture holding a host process and a container process
//! that touch the same paths.

use std::path::Path;

use super::{Policy, Strategy, audit_with, render};
use crate::store::{
    Capture,
    synthetic::{EventRow, ProcessRow, SyntheticCapture},
};

const CID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Root `sh` on the host (cwd `/w`) and, in container `dev`, `sh` (pid 7
/// inside); each writes `/w/out.txt`, `/workspace/ok.txt`, `/etc/evil.conf`
/// (host: events 1–3, container: 4–6).
fn capture(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("c.db");
    let mut c = SyntheticCapture::create(&db, "c.db");
    c.meta("complete", "true");
    c.process(&ProcessRow {
        id: 1,
        pid: 100,
        start_mono_ns: 10,
        origin: "root",
        argv: &["sh", "host.sh"],
        cwd: Some("/w"),
        ..Default::default()
    });
    c.process(&ProcessRow {
        id: 2,
        pid: 200,
        start_mono_ns: 20,
        origin: "seeded",
        argv: &["sh", "work.sh"],
        cwd: Some("/workspace"),
        ..Default::default()
    });
    c.put_in_container(&[2], CID, "dev", "base:1");
    c.put_in_namespaces(2, 4026532000, 4026532001, 7);
    let paths = ["/w/out.txt", "/workspace/ok.txt", "/etc/evil.conf"];
    for (i, (pid, path)) in [1, 1, 1, 2, 2, 2]
        .iter()
        .zip(paths.iter().chain(paths.iter()))
        .enumerate()
    {
        let id = i as i64 + 1;
        let real_pid = if *pid == 1 { 100 } else { 200 };
        c.event(&write_event(
            id,
            real_pid,
            *pid,
            path,
            "write,create,truncate",
        ));
    }
    drop(c);
    db
}

/// Event `id` (the next row), an `openat` of `path` for writing by `sh`
/// (process row `process_id`), at `id` µs.
fn write_event<'a>(
    id: i64,
    pid: i64,
    process_id: i64,
    path: &'a str,
    flags: &'a str,
) -> EventRow<'a> {
    EventRow {
        mono_ns: id * 1000,
        wall_ns: 1_764_464_523_000_000_000 + id * 1000,
        kind: "openat",
        pid,
        ppid: 1,
        process_id: Some(process_id),
        comm: Some("sh"),
        path: Some(path),
        flags: Some(flags),
        result: 3,
        ..Default::default()
    }
}

const BASE: &str = "workspace = \"/w\"\nhome = \"/home/u\"\nunexplained_activity = \"ignore\"\nclaims_mismatch = \"ignore\"\n";
const SCOPED: &str = "[container.writes]\nallow = [\"/workspace/**\"]\n";

fn run(policy: &str) -> (tempfile::TempDir, super::Report) {
    let dir = tempfile::tempdir().unwrap();
    let db = capture(dir.path());
    let cap = Capture::open(&db).unwrap();
    let p = Policy::parse(policy, "policy.toml").unwrap();
    let r = audit_with(&cap, &p, Strategy::default()).unwrap();
    assert_eq!(
        r.findings.len(),
        audit_with(&cap, &p, Strategy::PerFindingQueries)
            .unwrap()
            .findings
            .len()
    );
    (dir, r)
}

/// (rule, message, event ids, container label) of every finding.
fn brief(r: &super::Report) -> Vec<(String, String, Vec<i64>, Option<String>)> {
    r.findings
        .iter()
        .map(|f| {
            (
                f.rule.clone(),
                f.message.clone(),
                f.evidence.event_ids.clone(),
                f.container.as_ref().map(|c| c.label()),
            )
        })
        .collect()
}

fn b(
    rule: &str,
    msg: &str,
    ids: &[i64],
    c: Option<&str>,
) -> (String, String, Vec<i64>, Option<String>) {
    (rule.into(), msg.into(), ids.to_vec(), c.map(str::to_string))
}

/// With `[container]`: the host's rules judge events 1–3 only, the
/// container's 4–6 only — `/w/out.txt` is allowed on the host, not in the
/// container; `/workspace/ok.txt` the reverse; both `/etc/evil.conf`s are
/// denied, each by its own scope's default.
#[test]
fn scoped_rules_judge_each_side_by_its_own_paths() {
    let (_d, r) = run(&format!("{BASE}{SCOPED}"));
    assert_eq!(
        brief(&r),
        vec![
            b(
                "write-outside-allowed",
                "write outside the allowed roots: /workspace/ok.txt",
                &[2],
                None
            ),
            b(
                "denied-path",
                "write of denied path /etc/evil.conf",
                &[3],
                None
            ),
            b(
                "write-outside-allowed",
                "write outside the allowed roots: /w/out.txt",
                &[4],
                Some("dev (0123456789ab)")
            ),
            b(
                "denied-path",
                "write of denied path /etc/evil.conf",
                &[6],
                Some("dev (0123456789ab)")
            ),
        ]
    );
    let f = &r.findings[3];
    assert_eq!(f.evidence.matched.as_deref(), Some("/etc/**"));
    assert_eq!(f.process.as_ref().map(|p| p.pid), Some(200));
}

/// Without `[container]`: the container's events are judged by no path
/// rule, and a note says so; the host's verdicts are unchanged.
#[test]
fn unscoped_rules_are_the_hosts_only() {
    let (_d, r) = run(BASE);
    assert_eq!(
        brief(&r),
        vec![
            b(
                "write-outside-allowed",
                "write outside the allowed roots: /workspace/ok.txt",
                &[2],
                None
            ),
            b(
                "denied-path",
                "write of denied path /etc/evil.conf",
                &[3],
                None
            ),
            b(
                "audit-note",
                "3 file event(s) of processes in containers not judged by the path rules: the policy has no [container] table (the top-level path rules are the host's)",
                &[],
                None
            ),
        ]
    );
}

/// Scoped rules with ids of their own are listed as rules and fire under
/// them; the host's keep theirs.
#[test]
fn scoped_rules_can_have_their_own_ids() {
    let policy = format!(
        "{BASE}[container.writes]\nid = \"container-write\"\nseverity = \"warning\"\nallow = [\"/workspace/**\", \"/etc/**\"]\n[container.denied_paths]\nwrite = []\n"
    );
    let (_d, r) = run(&policy);
    let rules: Vec<&str> = r.rules.iter().map(|x| x.id.as_str()).collect();
    assert!(rules.contains(&"container-write"), "{rules:?}");
    assert_eq!(
        brief(&r),
        vec![
            b(
                "write-outside-allowed",
                "write outside the allowed roots: /workspace/ok.txt",
                &[2],
                None
            ),
            b(
                "denied-path",
                "write of denied path /etc/evil.conf",
                &[3],
                None
            ),
            b(
                "container-write",
                "write outside the allowed roots: /w/out.txt",
                &[4],
                Some("dev (0123456789ab)")
            ),
        ]
    );
}

/// The container is in every format, and only on the container's findings.
#[test]
fn every_format_names_the_container() {
    let (_d, r) = run(&format!("{BASE}{SCOPED}"));
    let j = render::json(&r);
    let fs = j["findings"].as_array().unwrap();
    assert!(fs[0].get("container").is_none());
    assert!(fs[1].get("container").is_none());
    assert_eq!(
        fs[3]["container"],
        serde_json::json!({"name": "dev", "id": "0123456789ab"})
    );
    let text = render::text(&r);
    assert_eq!(
        text.matches("    container dev (0123456789ab)\n").count(),
        2
    );
    let sarif = render::sarif(&r);
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert!(results[0]["properties"].get("container").is_none());
    assert_eq!(results[3]["properties"]["container"]["name"], "dev");
    assert!(
        results[3]["message"]["text"]
            .as_str()
            .unwrap()
            .contains(". Container: dev (0123456789ab)")
    );
    super::tests::assert_sarif_valid(&sarif);
    let junit = render::junit(&r);
    assert_eq!(
        junit.matches("\n  container: dev (0123456789ab)").count(),
        2
    );
}

#[test]
fn container_globs_must_be_the_containers_paths() {
    for (glob, line) in [("~/x/**", 3), ("${workspace}/**", 3), ("${tmpdir}/**", 3)] {
        let src = format!("[container.writes]\nallow = [\n  \"{glob}\",\n]\n");
        assert_eq!(
            Policy::parse(&src, "p.toml").unwrap_err().to_string(),
            format!(
                "p.toml:{line}: container path glob {glob:?} must start with / or **/ (paths as the container sees them; ~, ${{workspace}} and ${{tmpdir}} are host places)"
            )
        );
    }
    let p = Policy::parse("[container]\n", "p.toml").unwrap();
    let c = p.container.unwrap();
    assert_eq!(c.writes.allow.len(), 8);
    assert_eq!(
        c.denied_paths
            .write
            .iter()
            .map(|p| p.text.as_str())
            .collect::<Vec<_>>(),
        ["/etc/**", "**/.env"]
    );
    assert!(Policy::defaults().container.is_none());
}

#[test]
fn container_example_policy_parses() {
    let p = Policy::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/container-policy.toml"),
    )
    .unwrap();
    let c = p.container.unwrap();
    assert_eq!(c.writes.allow[0].text, "/workspace/**");
    assert_eq!(c.writes.allow.len(), 6);
    assert_eq!(c.denied_paths.write.len(), 3);
    assert_eq!(p.workspace.as_deref(), Some("/home/dev/project"));
}

/// Eleven writes under `/srv/x` by the host and eleven by the container:
/// two folded findings, the host's and the container's, never one group.
#[test]
fn folding_keeps_container_and_host_apart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let mut c = SyntheticCapture::create(&db, "c.db");
    c.meta("complete", "true");
    c.process(&ProcessRow {
        id: 1,
        pid: 100,
        start_mono_ns: 10,
        origin: "root",
        argv: &["sh"],
        cwd: Some("/w"),
        ..Default::default()
    });
    c.process(&ProcessRow {
        id: 2,
        pid: 200,
        start_mono_ns: 20,
        origin: "seeded",
        argv: &["sh"],
        container: Some((CID, "dev")),
        ..Default::default()
    });
    for i in 0..22i64 {
        let (proc_id, pid) = if i < 11 { (1, 100) } else { (2, 200) };
        let path = format!("/srv/x/f{}", i % 11);
        c.event(&write_event(i + 1, pid, proc_id, &path, "write,create"));
    }
    drop(c);
    let cap = Capture::open(&db).unwrap();
    let p = Policy::parse(&format!("{BASE}{SCOPED}"), "policy.toml").unwrap();
    let r = audit_with(&cap, &p, Strategy::default()).unwrap();
    let got: Vec<(String, Option<String>, u64)> = r
        .findings
        .iter()
        .map(|f| {
            (
                f.message.clone(),
                f.container.as_ref().map(|c| c.label()),
                f.evidence.count,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "write outside the allowed roots: /srv/x/f0, and 10 more matching /srv/x/* (11 occurrence(s) in 1 process(es))".to_owned(),
                None,
                11
            ),
            (
                "write outside the allowed roots: /srv/x/f0, and 10 more matching /srv/x/* (11 occurrence(s) in 1 process(es))".to_owned(),
                Some("dev (0123456789ab)".to_owned()),
                11
            ),
        ]
    );
}
