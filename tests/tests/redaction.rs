//! Secrets in shared artifacts (issue 33 §3): a recorded command passes
//! planted secrets of each kind through `env` assignments, options, a
//! header, URLs and bare key formats in argv. The HTML report (`record
//! --report` and `report`) and the Perfetto trace show none of them by
//! default; the capture's `export --format jsonl` and `--no-redact` show
//! them all.

use std::path::Path;
use std::process::{Command, Output};

use agentsight_tests::{assert_exit_0, bin, require_root, scratch};

/// Each planted secret value (the list the unit tests plant too).
fn secrets() -> Vec<String> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/redaction/planted-secrets.txt");
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `env` sets two secrets and two plain variables, then `sh` execs `true`
/// with options, a header, URLs and key formats as its argv.
const COMMAND: [&str; 24] = [
    "env",
    "HOLDOUT_OPENAI_KEY=plantedvalue1",
    "PATH=/usr/bin:/bin",
    "KEYBOARD=us",
    "GH_TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "sh",
    "-c",
    "exec /bin/true \"$@\"",
    "agent",
    "--api-key",
    "plantedvalue2",
    "--password=plantedvalue3",
    "--model",
    "gpt-5",
    "-H",
    "Authorization: Bearer plantedvalue8",
    "https://alice:plantedvalue4@git.example.com/r.git",
    "https://h.example/cb?access_token=plantedvalue5&x=1",
    "https://h.example/cb?token=plantedvalue6",
    "https://h.example/cb?api_key=plantedvalue7",
    "sk-proj-Q7x9Lm2Np4Rt6Vw8Yz0Ab1Cd",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "AKIAZ7Q3EXAMPLE4K2LM xoxb-2719-8xq3-plantedslack",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlcGxhbnRlZA",
];

fn agentsight(args: &[&str], db: &Path) -> Output {
    Command::new(bin())
        .args(args)
        .arg("--db")
        .arg(db)
        .output()
        .expect("run agentsight")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn holds(hay: &[u8], s: &str) -> bool {
    hay.windows(s.len()).any(|w| w == s.as_bytes())
}

#[test]
fn planted_secrets_reach_no_shared_artifact_unless_asked() {
    require_root();
    let dir = scratch("redaction");
    let db = dir.join("run.db");
    let page = dir.join("run.html");
    let out = agentsight_tests::record(&db, &["--report", page.to_str().unwrap()], &COMMAND);
    assert_exit_0(&out);

    // The report record --report wrote, and report's: redacted, the plain
    // variables and options kept.
    let plain = dir.join("plain.html");
    assert_exit_0(&agentsight(&["report", "-o", plain.to_str().unwrap()], &db));
    for html in [read(&page), read(&plain)] {
        for s in &secrets() {
            assert!(!holds(&html, s), "{s} in the report");
        }
        let html = String::from_utf8(html).unwrap();
        assert!(html.contains(
            "env HOLDOUT_OPENAI_KEY=‹redacted› PATH=/usr/bin:/bin KEYBOARD=us GH_TOKEN=‹redacted› sh"
        ));
        assert!(html.contains("--api-key ‹redacted› --password=‹redacted› --model gpt-5"));
    }
    // The Perfetto trace: protobuf holds its strings as raw bytes, so a
    // byte search sees every text of it.
    let trace = dir.join("run.pftrace");
    let t = trace.to_str().unwrap();
    assert_exit_0(&agentsight(
        &["export", "--format", "perfetto", "-o", t],
        &db,
    ));
    let bytes = read(&trace);
    for s in &secrets() {
        assert!(!holds(&bytes, s), "{s} in the trace");
    }
    assert!(holds(&bytes, "GH_TOKEN=‹redacted›"));

    // The capture's jsonl and --no-redact: every secret, exactly.
    let jsonl = agentsight(&["export", "--format", "jsonl"], &db);
    assert_exit_0(&jsonl);
    let exact = dir.join("exact.html");
    assert_exit_0(&agentsight(
        &["report", "--no-redact", "-o", exact.to_str().unwrap()],
        &db,
    ));
    assert_exit_0(&agentsight(
        &["export", "--format", "perfetto", "--no-redact", "-o", t],
        &db,
    ));
    for hay in [jsonl.stdout, read(&exact), read(&trace)] {
        for s in &secrets() {
            assert!(holds(&hay, s), "{s} missing where asked for");
        }
        assert!(!holds(&hay, "‹redacted›"));
    }

    // --no-redact where nothing is redacted: one line, exit 2.
    let out = agentsight(&["export", "--format", "jsonl", "--no-redact"], &db);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "agentsight: error: --no-redact applies to --format perfetto (jsonl is never redacted)\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
