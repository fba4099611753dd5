//! `agentsight report` and `record --report` (issue 16 §1), checked in a real
//! browser: Debian's headless Chromium loads the report of a real Claude Code
//! run recorded under agentsight (scenario `report`: a Write and a command
//! whose path and argv carry `<script>`, a failing check, a background job
//! that writes after its call returned), dumps the DOM, and the test asserts
//! it against the run's ground truth and `correlate --json`; a screenshot is
//! kept under target/report-artifacts/.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use agentsight_tests::{
    bin,
    e2e::{Agent, Run},
    require_root, scratch,
};

const CHROMIUM: &str = "/usr/bin/chromium";

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/report-artifacts");
    std::fs::create_dir_all(&dir).expect("create target/report-artifacts");
    dir
}

/// Headless Chromium on `page` with `what` (`--dump-dom`, `--screenshot=…`);
/// a fresh profile, no network of its own, bounded by `timeout`.
fn chromium(page: &Path, what: &[&str]) -> Output {
    let profile = tempfile_dir("chromium-profile");
    let out = Command::new("timeout")
        .arg("60")
        .arg(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(what)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium {what:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn tempfile_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("agentsight-report-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

fn report(db: &Path, out: &Path) -> Output {
    Command::new(bin())
        .arg("report")
        .arg("--db")
        .arg(db)
        .arg("-o")
        .arg(out)
        .output()
        .expect("run agentsight report")
}

/// The flag words correlate gives each tool call, as the page's `data-flags`.
fn expected_flags(c: &Value, tool_index: u64) -> String {
    let has = |key: &str| {
        c["flags"][key]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["tool_index"] == tool_index)
    };
    let mut w = Vec::new();
    for (key, word) in [
        ("claimed_not_observed", "claimed-not-observed"),
        ("mismatches", "mismatch"),
        ("late", "late"),
    ] {
        if has(key) {
            w.push(word);
        }
    }
    w.join(" ")
}

/// A call's anchor in the page: `call-` and its native id (`correlate
/// --json`'s `call_id`) percent-encoded; Claude's `toolu_…` ids need none.
fn call_anchor(t: &Value) -> String {
    let id = t["call_id"].as_str().expect("every Claude call has an id");
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b)),
        "{id}"
    );
    format!("call-{id}")
}

/// The `<details class="call …">` opening tag of call `t` of session 0.
fn call_tag<'d>(dom: &'d str, t: &Value) -> &'d str {
    let id = format!("id=\"{}\"", call_anchor(t));
    let at = dom
        .find(&id)
        .unwrap_or_else(|| panic!("call {t} missing from the DOM"));
    let start = dom[..at].rfind('<').unwrap();
    let end = at + dom[at..].find('>').unwrap();
    &dom[start..=end]
}

#[test]
fn claude_run_report_in_a_real_browser() {
    require_root();
    let run = Run::prepare(Agent::Claude, "report");
    let (out, db) = run.run_recorded();
    assert!(out.status.success(), "recorded run failed: {}", out.stderr);
    let sessions = run.sessions();
    let id = sessions[0]["session_id"].as_str().unwrap().to_owned();
    let c = run.correlate(&id, &db);
    let tools: Vec<&Value> = c["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap())
        .collect();
    // Ground truth: the scenario's five calls, the third failing with 3,
    // the fourth's background write flagged late.
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Write", "Bash", "Bash", "Bash", "Bash"]);
    assert_eq!(expected_flags(&c, 3), "late");

    let page = run.server_dir.join("report.html");
    let r = report(&db, &page);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::metadata(&page).unwrap().mode() & 0o777, 0o600);

    let dom = String::from_utf8(chromium(&page, &["--dump-dom"]).stdout).unwrap();
    check_dom(&dom, &c, &tools);

    check_findings_linked(&run, &db);

    let shot = artifacts().join("claude-report.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1500",
        ],
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    eprintln!("report: screenshot kept at {}", shot.display());
}

/// With `--policy`, every finding of `audit --format json` is listed, in
/// order, and each link it has points to an element of the page.
fn check_findings_linked(run: &Run, db: &Path) {
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/policy.toml");
    let audit = Command::new(bin())
        .args(["audit", "--format", "json", "--db"])
        .arg(db)
        .arg("--policy")
        .arg(&policy)
        .output()
        .expect("run agentsight audit");
    let findings: Value = serde_json::from_slice(&audit.stdout).expect("audit json");
    let findings = findings["findings"].as_array().unwrap();
    assert!(
        !findings.is_empty(),
        "the run has findings under examples/policy.toml"
    );
    let page = run.server_dir.join("report-policy.html");
    let r = Command::new(bin())
        .arg("report")
        .arg("--db")
        .arg(db)
        .arg("-o")
        .arg(&page)
        .arg("--policy")
        .arg(&policy)
        .output()
        .expect("run agentsight report --policy");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let dom = String::from_utf8(chromium(&page, &["--dump-dom"]).stdout).unwrap();
    assert_eq!(dom.matches("<tr class=\"finding ").count(), findings.len());
    let mut linked = 0;
    for (i, f) in findings.iter().enumerate() {
        let row_at = dom
            .find(&format!("id=\"finding-{i}\""))
            .unwrap_or_else(|| panic!("finding {i} missing"));
        let row = &dom[row_at..row_at + dom[row_at..].find("</tr>").unwrap()];
        assert!(row.contains(&format!("<td>{}</td>", f["rule"].as_str().unwrap())));
        if let Some(at) = row.find("href=\"#") {
            let target = &row[at + 7..at + 7 + row[at + 7..].find('"').unwrap()];
            assert!(
                dom.contains(&format!("id=\"{target}\"")),
                "finding {i} links to {target}"
            );
            linked += 1;
        }
    }
    assert!(linked > 0, "no finding linked to a row");
}

fn check_dom(dom: &str, c: &Value, tools: &[&Value]) {
    // No script came from the capture: ours is the only one, and every
    // hostile string is text.
    assert_eq!(dom.matches("<script").count(), 1, "a script was injected");
    assert!(!dom.contains("<img"));
    for text in [
        "&lt;script&gt;alert('prompt')&lt;/script&gt;",
        "snippet&lt;script&gt;alert('path')&lt;script&gt;.html",
        "&lt;script&gt;alert(\"argv\")&lt;/script&gt;",
        "echo&lt;script&gt;alert(3)&lt;script&gt;.txt",
    ] {
        assert!(dom.contains(text), "{text} not shown as text");
    }
    // LOSS, prominent and zero (the recording lost nothing).
    assert!(dom.contains(
        "<section id=\"loss\" class=\"loss zero\"><h2>LOSS: none (0 events lost, 0 missing)</h2>"
    ));
    // Every tool call, with exactly the flags correlate gives it; the
    // failing check marked failed.
    assert_eq!(dom.matches("<details class=\"call ").count(), tools.len());
    for t in tools {
        let i = t["tool_index"].as_u64().unwrap();
        let tag = call_tag(dom, t);
        assert!(
            tag.contains(&format!("data-flags=\"{}\"", expected_flags(c, i))),
            "call {i}: {tag}"
        );
        assert_eq!(
            tag.contains("status-failed"),
            t["status"] == "failed",
            "call {i}: {tag}"
        );
        assert!(tag.contains(&format!("data-tool-index=\"{i}\"")), "{tag}");
        // Its native id shown, as correlate --json and OTLP give it.
        assert!(dom.contains(&format!(
            "<code class=\"call-id\">{}</code>",
            t["call_id"].as_str().unwrap()
        )));
        // Drawn on the timeline, linked to its details.
        let anchor = call_anchor(t);
        assert!(dom.contains(&format!("<a href=\"#{anchor}\"><g class=\"call-row\"")));
    }
    assert!(call_tag(dom, tools[2]).contains("status-failed"));
    // The late write is listed, marked, under its call.
    assert_eq!(
        dom.matches("class=\"act write late\"").count(),
        c["flags"]["late"].as_array().unwrap().len()
    );
    // A clean run: nothing unexplained; Claude Code's own activity outside
    // every call (its model-API connection among it) is listed apart, one
    // row per program, not flagged.
    let unexplained = c["flags"]["observed_not_claimed"].as_array().unwrap();
    assert!(unexplained.is_empty(), "{unexplained:#?}");
    assert_eq!(dom.matches("<tr class=\"flag-unexplained\"").count(), 0);
    assert!(dom.contains("<span class=\"badge unexplained\">unexplained 0</span>"));
    let groups = c["runtime_activity"].as_array().unwrap();
    assert!(groups.iter().any(|g| {
        g["by"] == "runtime"
            && g["activity"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["op"] == "connect")
    }));
    assert_eq!(
        dom.matches("<tr class=\"runtime-group\">").count(),
        groups.len()
    );
    // The agent's writes to its own state are listed, not flagged.
    let books = c["agent_bookkeeping"].as_array().unwrap();
    assert!(!books.is_empty());
    let table = &dom[dom.find("<table class=\"bookkeeping\">").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(table.matches("<tr>").count(), books.len() + 1);
    // Each exec'd process of a call links to the process tree.
    for t in tools {
        for a in t["activity"].as_array().unwrap() {
            if a["op"] == "exec" {
                assert!(dom.contains(&format!("id=\"proc-{}\"", a["process_id"])));
            }
        }
    }
}

#[test]
fn record_report_writes_the_page_and_bad_input_fails_cleanly() {
    require_root();
    let dir = scratch("record-report");
    let db = dir.join("run.db");
    let page = dir.join("run.html");
    let out = agentsight_tests::record(
        &db,
        &["--report", page.to_str().unwrap()],
        &["sh", "-c", "echo '<script>alert(1)</script>' > /dev/null"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = std::fs::metadata(&page).expect("record --report wrote the page");
    assert_eq!(meta.mode() & 0o777, 0o600);
    // Created as the user who invoked sudo, like the capture.
    assert_eq!(meta.uid(), agentsight_tests::test_user().0);
    assert_eq!(std::fs::metadata(&db).unwrap().uid(), meta.uid());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h2>LOSS: "));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert_eq!(html.matches("<script").count(), 1);

    // A capture that is not there: one line, exit 2, no page left behind.
    let missing = dir.join("missing.html");
    let r = report(&dir.join("nope.db"), &missing);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("agentsight: error: "), "{err}");
    assert!(!missing.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
