//! The hidden `agentsight bridge` of the built binary, driven over
//! stdin/stdout against a fixture home: each method, each error code the
//! bridge can produce, the frame bounds, the version handshake, and that the
//! home's credential files never cross.
// The fixture helpers live with the session parsers' own tests.
#[path = "../../agentsight-sessions/tests/sessions_common/mod.rs"]
mod sessions_common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentsight");
const VERSION: &str = env!("CARGO_PKG_VERSION");
const CLAUDE_ID: &str = "bbbbbbbb-0000-4000-8000-000000000002";
const MIB8: usize = 8 * 1024 * 1024;

/// A running bridge and its pipes.
struct BridgeProc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl BridgeProc {
    fn start(home: &Path) -> Self {
        let mut child = Command::new(BIN)
            .arg("bridge")
            .env("HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start agentsight bridge");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        BridgeProc {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends one raw line (a `\n` is added) and returns the raw answer line.
    fn raw(&mut self, line: &[u8]) -> String {
        let w = self.stdin.as_mut().expect("stdin open");
        w.write_all(line).expect("write request");
        w.write_all(b"\n").expect("write newline");
        w.flush().expect("flush");
        let mut answer = String::new();
        let n = self.stdout.read_line(&mut answer).expect("read answer");
        assert!(n > 0, "bridge closed its output");
        assert!(answer.ends_with('\n'), "{answer}");
        answer.pop();
        answer
    }

    fn ask(&mut self, req: Value) -> Value {
        let line = serde_json::to_vec(&req).expect("encode");
        serde_json::from_str(&self.raw(&line)).expect("answer is JSON")
    }

    /// Closes stdin; the bridge must exit 0 without writing anything more.
    fn finish(mut self) {
        drop(self.stdin.take());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).expect("read rest");
        assert_eq!(rest, "");
        let status = self.child.wait().expect("wait");
        assert_eq!(status.code(), Some(0));
    }
}

fn cli_json(args: &[&str], home: &Path) -> Value {
    let o = Command::new(BIN)
        .args(args)
        .arg("--home")
        .arg(home)
        .output()
        .expect("run agentsight");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON output")
}

fn err(code: &str, message: &str) -> Value {
    json!({"Err": {"code": code, "message": message}})
}

#[test]
fn each_method_answers_like_the_local_commands() {
    let home = sessions_common::home();
    let mut b = BridgeProc::start(home.path());
    assert_eq!(
        b.ask(json!({"method": "bridge/hello", "params": {"version": VERSION}})),
        json!({"Ok": {"version": VERSION, "protocol": 1}})
    );
    // The list is what `sessions --json` prints, the same rows and fields.
    for limit in [1, 3, 25] {
        let want = cli_json(
            &["sessions", "--json", "--limit", &limit.to_string()],
            home.path(),
        );
        assert_eq!(want.as_array().map(Vec::len), Some(limit.min(12)));
        assert_eq!(
            b.ask(json!({"method": "sessions/list", "params": {"limit": limit}})),
            json!({"Ok": {"sessions": want}})
        );
    }
    let want = cli_json(&["session", "show", CLAUDE_ID, "--json"], home.path());
    assert_eq!(
        b.ask(json!({"method": "session/get", "params": {"session_id": CLAUDE_ID}})),
        json!({"Ok": {"session": want}})
    );
    // Exact lookup: a prefix the local command would accept is not the id.
    assert_eq!(
        b.ask(json!({"method": "session/get", "params": {"session_id": "bbbbbbbb"}})),
        err("not_found", "session bbbbbbbb not found")
    );
    assert_eq!(
        b.ask(json!({"method": "session/get", "params": {"session_id": "nope"}})),
        err("not_found", "session nope not found")
    );
    assert_eq!(
        b.ask(json!({"method": "session/message",
            "params": {"session_id": CLAUDE_ID, "message": "  run the tests again \n"}})),
        err("failed", "messaging is not enabled")
    );
    // Not enabled: refused before any lookup, a known and an unknown id alike.
    assert_eq!(
        b.ask(json!({"method": "session/message",
            "params": {"session_id": "nope", "message": "hi"}})),
        err("failed", "messaging is not enabled")
    );
    assert_eq!(
        b.ask(json!({"method": "session/message",
            "params": {"session_id": CLAUDE_ID, "message": " \t\n"}})),
        err("invalid_params", "message is empty")
    );
    assert_eq!(
        b.ask(json!({"method": "session/message",
            "params": {"session_id": CLAUDE_ID, "message": "m".repeat(65_537)}})),
        err(
            "invalid_params",
            "message of 65537 bytes exceeds 65536 bytes"
        )
    );
    // 65 536 bytes is the largest message; then messaging is what refuses.
    assert_eq!(
        b.ask(json!({"method": "session/message",
            "params": {"session_id": CLAUDE_ID, "message": "m".repeat(65_536)}})),
        err("failed", "messaging is not enabled")
    );
    b.finish();
}

#[test]
fn malformed_requests_are_invalid_and_the_bridge_keeps_serving() {
    let home = sessions_common::home();
    let mut b = BridgeProc::start(home.path());
    let cases: [(&[u8], &str); 7] = [
        (
            b"{",
            "invalid request: EOF while parsing an object at line 1 column 1",
        ),
        (
            b"",
            "invalid request: EOF while parsing a value at line 1 column 0",
        ),
        (
            b"\xff\xfe",
            "invalid request: expected value at line 1 column 1",
        ),
        (
            br#"{"method":"session/delete","params":{"session_id":"x"}}"#,
            "invalid request: unknown variant `session/delete`, expected one of `sessions/list`, `session/get`, `session/message`, `bridge/hello` at line 1 column 26",
        ),
        (
            br#"{"method":"sessions/list","params":{"limit":"3"}}"#,
            "invalid request: invalid type: string \"3\", expected usize at line 1 column 47",
        ),
        (
            br#"{"method":"session/get","params":{}}"#,
            "invalid request: missing field `session_id` at line 1 column 35",
        ),
        (
            br#"{"method":"session/get","params":{"session_id":"x","extra":1}}"#,
            "invalid request: unknown field `extra`, expected `session_id` at line 1 column 58",
        ),
    ];
    for (line, message) in cases {
        let answer: Value = serde_json::from_str(&b.raw(line)).expect("JSON");
        assert_eq!(
            answer,
            err("invalid_request", message),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    assert_eq!(
        b.ask(json!({"method": "sessions/list", "params": {"limit": 1}}))["Ok"]["sessions"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    b.finish();
}

#[test]
fn version_mismatch_is_refused_naming_both() {
    let home = sessions_common::home();
    let mut b = BridgeProc::start(home.path());
    assert_eq!(
        b.ask(json!({"method": "bridge/hello", "params": {"version": "0.0.0-other"}})),
        err(
            "failed",
            &format!(
                "version mismatch: host agentsight 0.0.0-other, container agentsight {VERSION}; install the same version in both"
            )
        )
    );
    b.finish();
}

#[test]
fn oversized_requests_are_consumed_and_answered() {
    let home = sessions_common::home();
    let mut b = BridgeProc::start(home.path());
    let list1 = br#"{"method":"sessions/list","params":{"limit":1}}"#;
    // 9 MiB of request, then the bridge still answers the next one.
    let mut big = list1.to_vec();
    big.resize(9 * 1024 * 1024, b' ');
    assert_eq!(
        serde_json::from_str::<Value>(&b.raw(&big)).expect("JSON"),
        err(
            "request_too_large",
            "request of 9437185 bytes exceeds the 8388608 byte frame limit"
        )
    );
    let want =
        json!({"Ok": {"sessions": cli_json(&["sessions", "--json", "--limit", "1"], home.path())}});
    assert_eq!(
        serde_json::from_str::<Value>(&b.raw(list1)).expect("JSON"),
        want
    );
    // The bound counts the `\n`: 8 MiB with it is served, one byte more is not.
    let mut fits = list1.to_vec();
    fits.resize(MIB8 - 1, b' ');
    assert_eq!(
        serde_json::from_str::<Value>(&b.raw(&fits)).expect("JSON"),
        want
    );
    fits.push(b' ');
    assert_eq!(
        serde_json::from_str::<Value>(&b.raw(&fits)).expect("JSON"),
        err(
            "request_too_large",
            "request of 8388609 bytes exceeds the 8388608 byte frame limit"
        )
    );
    b.finish();
}

/// A Claude transcript whose parsed session is over 8 MiB as JSON: one
/// prompt of 2 MiB (the parser's text budget) of a control character that
/// JSON spells in six bytes.
fn write_big_session(home: &Path, id: &str) -> std::path::PathBuf {
    let dir = home.join(".claude/projects/-home-dev-big");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join(format!("{id}.jsonl"));
    let text = "\u{1}".repeat(2 * 1024 * 1024);
    let rec = json!({
        "type": "user", "uuid": "00000000-0000-4000-8000-000000000100",
        "parentUuid": null, "isSidechain": false, "userType": "external",
        "cwd": "/home/dev/big", "sessionId": id, "version": "1.0.98",
        "timestamp": "2026-05-02T10:00:00.000Z",
        "message": {"role": "user", "content": text},
    });
    let body = format!("{rec}\n");
    std::fs::write(&path, body).expect("write transcript");
    path
}

#[test]
fn oversized_responses_are_replaced_and_the_bridge_keeps_serving() {
    let home = sessions_common::home();
    let id = "dddddddd-0000-4000-8000-000000000004";
    let path = write_big_session(home.path(), id);
    // The size the bridge would have sent: the same session, serialized.
    let session = agentsight::sessions::parse_file(agentsight::sessions::Provider::Claude, &path)
        .expect("parse the big session");
    let bytes = serde_json::to_vec(&json!({"Ok": {"session": session}}))
        .expect("encode")
        .len()
        + 1;
    assert!(bytes > MIB8, "{bytes}");
    let mut b = BridgeProc::start(home.path());
    assert_eq!(
        b.ask(json!({"method": "session/get", "params": {"session_id": id}})),
        err(
            "response_too_large",
            &format!("response of {bytes} bytes exceeds the 8388608 byte frame limit")
        )
    );
    assert_eq!(
        b.ask(json!({"method": "session/get", "params": {"session_id": CLAUDE_ID}}))["Ok"]["session"]
            ["session_id"],
        CLAUDE_ID
    );
    b.finish();
}

#[test]
fn credential_files_never_cross() {
    let home = sessions_common::home();
    let marker = "agentsight-test-credential-5f0c1e9a7b";
    let claude = format!(
        r#"{{"claudeAiOauth":{{"accessToken":"sk-ant-oat01-{marker}","refreshToken":"sk-ant-ort01-{marker}","expiresAt":1799999999000}}}}"#
    );
    let codex = format!(
        r#"{{"OPENAI_API_KEY":"sk-proj-{marker}","tokens":{{"id_token":"eyJ{marker}","access_token":"at-{marker}","refresh_token":"rt-{marker}","account_id":"acct-{marker}"}}}}"#
    );
    std::fs::write(home.path().join(".claude/.credentials.json"), &claude).expect("write");
    std::fs::write(home.path().join(".codex/auth.json"), &codex).expect("write");
    let mut b = BridgeProc::start(home.path());
    let mut answers = vec![
        b.raw(
            serde_json::to_string(&json!({"method": "sessions/list", "params": {"limit": 25}}))
                .expect("encode")
                .as_bytes(),
        ),
    ];
    let list: Value = serde_json::from_str(&answers[0]).expect("JSON");
    let ids: Vec<String> = list["Ok"]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["session_id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(ids.len(), 12);
    for id in &ids {
        let line = json!({"method": "session/get", "params": {"session_id": id}}).to_string();
        let a = b.raw(line.as_bytes());
        assert!(a.starts_with(r#"{"Ok":{"session":"#), "{id}: {a}");
        answers.push(a);
        let line = json!({"method": "session/message",
            "params": {"session_id": id, "message": "hi"}})
        .to_string();
        answers.push(b.raw(line.as_bytes()));
    }
    for name in [".credentials.json", "auth.json", ".claude", ".codex/auth"] {
        let a = b.ask(json!({"method": "session/get", "params": {"session_id": name}}));
        assert_eq!(a, err("not_found", &format!("session {name} not found")));
    }
    b.finish();
    for a in &answers {
        assert!(!a.contains(marker), "{a}");
    }
}
