//! `agentsight top` against real files: a fixture home whose transcripts (in
//! the agents' real formats) are dated relative to the test's clock, so each
//! session's state is known; the `--json` stream over appends, new files and
//! rename-on-write; the polling fallback under a real inotify watch limit;
//! the full-screen UI in tmux; and no network system call at all.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use agentsight_tests::bin;
use serde_json::Value;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/top");

/// A fresh directory the unprivileged test user can read (mode 0755).
fn scratch(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = std::env::temp_dir().join(format!("agentsight-top-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn rfc3339(unix_s: i64) -> String {
    jiff::Timestamp::from_second(unix_s)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%S.000Z")
        .to_string()
}

/// Replaces the fixture's time placeholders: `@T-N@` (RFC 3339, N s ago),
/// `@MS-N@` (epoch ms, N s ago), `@U+N@` (epoch s, N s ahead).
fn fill(text: &str, now: i64) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('@') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let Some(j) = tail.find('@') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let key = &tail[..j];
        let num = |p: &str| key.strip_prefix(p).and_then(|n| n.parse::<i64>().ok());
        let rep = if let Some(n) = num("T-") {
            Some(rfc3339(now - n))
        } else if let Some(n) = num("MS-") {
            Some(((now - n) * 1000).to_string())
        } else {
            num("U+").map(|n| (now + n).to_string())
        };
        match rep {
            Some(r) => {
                out.push_str(&r);
                rest = &tail[j + 1..];
            }
            None => {
                out.push('@');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

fn set_age(path: &Path, now: i64, secs: i64) {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs((now - secs) as u64);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

fn copy_tree(from: &Path, to: &Path, now: i64) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst, now);
        } else {
            let text = std::fs::read_to_string(e.path()).unwrap();
            std::fs::write(&dst, fill(&text, now)).unwrap();
            set_age(&dst, now, 1);
        }
    }
}

/// The fixture home, dated relative to now, with the mtimes of ages.txt.
fn fixture_home(name: &str) -> (PathBuf, i64) {
    let dir = scratch(name);
    let home = dir.join("home");
    let now = now_s();
    copy_tree(&Path::new(FIXTURE).join("home"), &home, now);
    let ages = std::fs::read_to_string(Path::new(FIXTURE).join("ages.txt")).unwrap();
    for l in ages
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (p, s) = l.rsplit_once(' ').unwrap();
        set_age(&home.join(p), now, s.parse().unwrap());
    }
    (home, now)
}

/// `top --once --json` as the unprivileged test user (the fixture home is
/// world-readable): what every user without root sees.
fn top_once(home: &Path, extra: &[&str]) -> Value {
    let (uid, gid) = agentsight_tests::test_user();
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--clear-groups")
        .arg(bin())
        .args(["top", "--once", "--json", "--home"])
        .arg(home)
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// (provider, session_id, state, title) of each row, in order.
fn rows(v: &Value) -> Vec<(String, String, String, String)> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["provider"].as_str().unwrap().to_string(),
                r["session_id"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
                r["title"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn row<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["session_id"] == id)
        .unwrap_or_else(|| panic!("no row {id} in {v}"))
}

fn t4(p: &str, id: &str, state: &str, title: &str) -> (String, String, String, String) {
    (p.into(), id.into(), state.into(), title.into())
}

const C1: &str = "11111111-0000-4000-8000-000000000001";
const C2: &str = "22222222-0000-4000-8000-000000000002";
const C3: &str = "33333333-0000-4000-8000-000000000003";
const C4: &str = "44444444-0000-4000-8000-000000000004";
const C5: &str = "55555555-0000-4000-8000-000000000005";
const C6: &str = "66666666-0000-4000-8000-000000000006";
const XF1: &str = "019d0000-0000-7000-8000-0000000000f1";
const XE2: &str = "019d0000-0000-7000-8000-0000000000e2";
const XD3: &str = "019d0000-0000-7000-8000-0000000000d3";
const G1: &str = "9b2e4f10-0000-4000-8000-0000000000c1";
const C1_PATH: &str = ".claude/projects/-home-dev-shop/11111111-0000-4000-8000-000000000001.jsonl";
const C4_PATH: &str = ".claude/projects/-home-dev-shop/44444444-0000-4000-8000-000000000004.jsonl";
const C5_PATH: &str = ".claude/projects/-home-dev-api/55555555-0000-4000-8000-000000000005.jsonl";
const C6_PATH: &str = ".claude/projects/-home-dev-api/66666666-0000-4000-8000-000000000006.jsonl";
const XE2_PATH: &str = ".codex/sessions/2026/12/01/rollout-2026-12-01T09-10-00-019d0000-0000-7000-8000-0000000000e2.jsonl";
const U1: &str = "7c0de000-1111-4222-8333-444455556666";

fn default_rows() -> Vec<(String, String, String, String)> {
    vec![
        t4("codex", XD3, "rate_limited", "Upgrade the bundler"),
        t4("claude", C3, "rate_limited", "Refactor the payment module"),
        t4("claude", C1, "your_turn", "Checkout test fix"),
        t4(
            "cursor",
            U1,
            "your_turn",
            "fix the broken links in the docs",
        ),
        t4(
            "codex",
            XF1,
            "your_turn",
            "Add request ids to the access log",
        ),
        t4("gemini", G1, "working", "Why is the web build slow?"),
        t4(
            "claude",
            C2,
            "working",
            "Add a dark mode toggle to the header",
        ),
    ]
}

#[test]
fn once_json_lists_states_titles_and_hides_what_it_should() {
    let (home, now) = fixture_home("once");
    let v = top_once(&home, &[]);
    assert_eq!(rows(&v), default_rows(), "{v:#}");
    assert_eq!(v["degraded"], Value::Null);
    assert_eq!(v["kernel"], false);
    assert_eq!(v["kernel_error"], Value::Null);
    assert_eq!(v["candidates"], 11);
    assert_eq!(v["not_listed"]["idle"], 2);
    assert_eq!(v["not_listed"]["hidden"], 2);
    assert_eq!(v["not_listed"]["unreadable"], 0);
    // Why each is left out, with its transcripts.
    let p = |rel: &str| home.join(rel).display().to_string();
    assert_eq!(
        v["hidden_reasons"],
        serde_json::json!([
            {"reason": "idle", "count": 2, "paths": [p(C5_PATH), p(C6_PATH)]},
            {"reason": "archived", "count": 1, "paths": [p(C4_PATH)]},
            {"reason": "exec", "count": 1, "paths": [p(XE2_PATH)]},
        ])
    );
    // The corrupt desktop file is skipped and counted; nothing else changes.
    assert_eq!(v["desktop_skipped"], 1);

    // Desktop join: title from the desktop app; the activity clock and the
    // model from the transcript.
    let c1 = row(&v, C1);
    assert_eq!(c1["title_source"], "desktop");
    assert_eq!(c1["cwd"], "/home/dev/shop");
    assert_eq!(c1["model"], "claude-opus-4-5-20251101");
    assert_eq!(c1["last_activity"], rfc3339(now - 20).replace(".000Z", "Z"));
    // Unprivileged: kernel columns are null, never zero.
    assert_eq!(c1["kernel"], Value::Null);
    // Tokens in = input + cache reads + cache writes, out = output.
    assert_eq!(c1["tokens"]["input"], 12 + 300 + 5000 + 20 + 100 + 5300);
    assert_eq!(c1["tokens"]["output"], 60 + 40);
    assert_eq!(row(&v, C2)["title_source"], "first_prompt");
    // Codex rate limit: the reset time the rollout gives.
    assert_eq!(
        row(&v, XD3)["resets_at"],
        rfc3339(now + 3600).replace(".000Z", "Z")
    );
    // Codex tokens: input includes the cached part.
    assert_eq!(row(&v, XF1)["tokens"]["input"], 12000);
    assert_eq!(row(&v, XF1)["tokens"]["output"], 900);
    // Cursor transcripts record no usage: null, not zero.
    assert_eq!(row(&v, U1)["tokens"], Value::Null);

    // --all: idle and hidden too; the open tool call that was already
    // 400 s old when top started is idle, never stalled.
    let all = top_once(&home, &["--all"]);
    let states: Vec<(String, String)> = all["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["session_id"].as_str().unwrap().to_string(),
                format!("{}/{}", r["state"].as_str().unwrap(), r["hidden"]),
            )
        })
        .collect();
    let find = |id: &str| states.iter().find(|(i, _)| i == id).unwrap().1.clone();
    assert_eq!(states.len(), 11, "{all:#}");
    assert_eq!(find(C4), "your_turn/\"archived\"");
    assert_eq!(find(XE2), "working/\"exec\"");
    assert_eq!(find(C5), "idle/null");
    assert_eq!(find(C6), "idle/null");

    // --provider.
    let codex = top_once(&home, &["--provider", "codex"]);
    assert_eq!(
        rows(&codex),
        vec![
            t4("codex", XD3, "rate_limited", "Upgrade the bundler"),
            t4(
                "codex",
                XF1,
                "your_turn",
                "Add request ids to the access log"
            ),
        ]
    );
    assert_eq!(codex["not_listed"]["other_provider"], 8);
    let reasons: Vec<(String, u64, usize)> = codex["hidden_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["reason"].as_str().unwrap().to_string(),
                r["count"].as_u64().unwrap(),
                r["paths"].as_array().unwrap().len(),
            )
        })
        .collect();
    // Paths are the first three by name, whatever the count.
    assert_eq!(
        reasons,
        vec![("exec".into(), 1, 1), ("other_provider".into(), 8, 3)]
    );
}

/// A session root wrote into a user's home (its transcript is root's file)
/// is not read — by design, a transcript must be the home owner's — and is
/// no longer counted "idle" while it is being written: the snapshot says
/// why it is not listed and names it, in `--json` and in the footer line
/// of `--plain`.
#[test]
fn a_transcript_not_owned_by_the_home_owner_is_named_not_idle() {
    let (home, now) = fixture_home("owner");
    let (uid, gid) = agentsight_tests::test_user();
    let st = Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(&home)
        .status()
        .unwrap();
    assert!(st.success());
    // The Claude session that would be "your turn", written by root.
    let c1 = home.join(C1_PATH);
    std::os::unix::fs::chown(&c1, Some(0), Some(0)).unwrap();
    set_age(&c1, now, 1);
    let v = top_once(&home, &[]);
    let want: Vec<_> = default_rows().into_iter().filter(|r| r.1 != C1).collect();
    assert_eq!(rows(&v), want, "{v:#}");
    assert_eq!(v["not_listed"]["idle"], 2);
    assert_eq!(v["not_listed"]["unreadable"], 1);
    let p = |rel: &str| home.join(rel).display().to_string();
    assert_eq!(
        v["hidden_reasons"],
        serde_json::json!([
            {"reason": "idle", "count": 2, "paths": [p(C5_PATH), p(C6_PATH)]},
            {"reason": "archived", "count": 1, "paths": [p(C4_PATH)]},
            {"reason": "exec", "count": 1, "paths": [p(XE2_PATH)]},
            {"reason": "not_owner", "count": 1, "paths": [p(C1_PATH)]},
        ])
    );
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--clear-groups")
        .arg(bin())
        .args(["top", "--once", "--plain", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().last(),
        Some(
            format!(
                "not listed: 2 idle, 1 archived, 1 codex exec, 1 not the home owner's file ({})",
                p(C1_PATH)
            )
            .as_str()
        ),
        "{text}"
    );
}

#[test]
fn a_missing_home_is_one_line_and_status_2() {
    let out = Command::new(bin())
        .args(["top", "--once", "--json", "--home", "/nonexistent/home"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/home"), "{err}");
}

/// A running `top --json`, its lines read on a thread.
struct Stream {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Stream {
    fn start(cmd: &mut Command) -> Stream {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Stream { child, lines }
    }

    /// The first snapshot that satisfies `ok`, within `limit`.
    fn wait_for(&self, limit: Duration, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + limit;
        let mut last = String::new();
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let v: Value = serde_json::from_str(&l).unwrap();
                    if ok(&v) {
                        return v;
                    }
                    last = l;
                }
                Err(_) => break,
            }
        }
        panic!("no snapshot with {what} within {limit:?}; last: {last}");
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Child process ids of `pid` (all its threads').
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let c = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(c.split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
    }
    out
}

fn state_of(v: &Value, id: &str) -> Option<String> {
    v["rows"]
        .as_array()?
        .iter()
        .find(|r| r["session_id"] == id)
        .map(|r| r["state"].as_str().unwrap_or("").to_string())
}

fn append(path: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(line.as_bytes()).unwrap();
    f.write_all(b"\n").unwrap();
}

fn end_turn_line(id: &str, cwd: &str, uuid: &str, ts: &str) -> String {
    format!(
        r#"{{"type":"assistant","uuid":"{uuid}","parentUuid":null,"isSidechain":false,"userType":"external","cwd":"{cwd}","sessionId":"{id}","version":"2.1.233","gitBranch":"main","timestamp":"{ts}","requestId":"req_{uuid}","message":{{"id":"msg_{uuid}","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"text","text":"Done."}}],"stop_reason":"end_turn","stop_sequence":null,"usage":{{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":7,"service_tier":"standard"}}}}}}"#
    )
}

fn user_line(id: &str, cwd: &str, uuid: &str, ts: &str, text: &str) -> String {
    format!(
        r#"{{"type":"user","uuid":"{uuid}","parentUuid":null,"isSidechain":false,"userType":"external","cwd":"{cwd}","sessionId":"{id}","version":"2.1.233","gitBranch":"main","timestamp":"{ts}","message":{{"role":"user","content":"{text}"}}}}"#
    )
}

/// Asserts the stream follows an append, a new file in a new project
/// directory, and rename-on-write of a desktop file and a transcript.
fn follow_changes(s: &Stream, home: &Path) {
    let limit = Duration::from_secs(5);
    let shop = home.join(".claude/projects/-home-dev-shop");
    // Append: the streaming session finishes its turn.
    let c2 = shop.join(format!("{C2}.jsonl"));
    append(
        &c2,
        &end_turn_line(C2, "/home/dev/shop", "u2-0003", &rfc3339(now_s())),
    );
    let v = s.wait_for(limit, "C2 your_turn", |v| {
        state_of(v, C2).as_deref() == Some("your_turn")
    });
    assert_eq!(row(&v, C2)["tokens"]["output"], 25 + 7);
    // A new project directory and a new transcript in it.
    let id = "77777777-0000-4000-8000-000000000007";
    let dir = home.join(".claude/projects/-home-dev-new");
    std::fs::create_dir(&dir).unwrap();
    let path = dir.join(format!("{id}.jsonl"));
    std::fs::write(
        &path,
        user_line(
            id,
            "/home/dev/new",
            "u7-1",
            &rfc3339(now_s()),
            "Start a new service",
        ) + "\n",
    )
    .unwrap();
    // The write is not atomic: a snapshot may show the file half written
    // (working, no prompt yet); the one after the write must have both.
    s.wait_for(limit, "the new session working, titled", |v| {
        state_of(v, id).as_deref() == Some("working")
            && row(v, id)["title"] == "Start a new service"
    });
    // A new Codex day directory (local midnight) and a rollout in it.
    let day = home.join(".codex/sessions/2026/12/02");
    std::fs::create_dir(&day).unwrap();
    let xid = "019d0000-0000-7000-8000-0000000000a4";
    let t = rfc3339(now_s());
    std::fs::write(
        day.join(format!("rollout-2026-12-02T00-00-05-{xid}.jsonl")),
        format!(
            concat!(
                r#"{{"timestamp":"{t}","type":"session_meta","payload":{{"id":"{x}","timestamp":"{t}","cwd":"/home/dev/night","originator":"codex_cli_rs","cli_version":"0.169.0","source":"cli","model_provider":"openai"}}}}"#,
                "\n",
                r#"{{"timestamp":"{t}","type":"event_msg","payload":{{"type":"task_started","turn_id":"019d0000-0001-7000-8000-0000000000a4","model_context_window":258400}}}}"#,
                "\n",
                r#"{{"timestamp":"{t}","type":"event_msg","payload":{{"type":"user_message","message":"Rotate the logs","images":[]}}}}"#,
                "\n"
            ),
            t = t,
            x = xid
        ),
    )
    .unwrap();
    s.wait_for(limit, "the rollout in the new day directory, titled", |v| {
        state_of(v, xid).as_deref() == Some("working") && row(v, xid)["title"] == "Rotate the logs"
    });
    // Rename-on-write of the desktop file: a new title.
    let desk = home.join(".config/Claude/claude-code-sessions/org-7f1e/ws-31a0");
    let target = desk.join("local_9a1f3c2e-1111-4000-8000-00000000d001.json");
    let text = std::fs::read_to_string(&target)
        .unwrap()
        .replace("Checkout test fix", "Checkout test fixed");
    let tmp = desk.join(".local_tmp.json");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &target).unwrap();
    s.wait_for(limit, "the renamed title", |v| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["session_id"] == C1 && r["title"] == "Checkout test fixed")
    });
    // Rename-on-write of a transcript: Claude 1 gets a new prompt.
    let c1 = shop.join(format!("{C1}.jsonl"));
    let mut text = std::fs::read_to_string(&c1).unwrap();
    text.push_str(&user_line(
        C1,
        "/home/dev/shop",
        "u1-9",
        &rfc3339(now_s()),
        "One more test",
    ));
    text.push('\n');
    let tmp = shop.join(".c1.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &c1).unwrap();
    s.wait_for(limit, "C1 working after the rename", |v| {
        state_of(v, C1).as_deref() == Some("working")
    });
}

#[test]
fn json_stream_follows_appends_new_files_and_renames() {
    let (home, _) = fixture_home("stream");
    let s = Stream::start(
        Command::new(bin())
            .args(["top", "--json", "--no-kernel", "--home"])
            .arg(&home),
    );
    let first = s.wait_for(Duration::from_secs(10), "the first snapshot", |_| true);
    assert_eq!(rows(&first), default_rows());
    assert_eq!(first["degraded"], Value::Null);
    assert!(first["watched_dirs"].as_u64().unwrap() >= 8, "{first}");
    follow_changes(&s, &home);
}

/// A relative `--home` (`./home` from its parent) follows the same changes:
/// inotify names absolute paths, so the home is made absolute once, where
/// the arguments are parsed (before, only the first snapshot was right).
#[test]
fn json_stream_with_a_relative_home_follows_changes() {
    let (home, _) = fixture_home("relhome");
    let s = Stream::start(
        Command::new(bin())
            .current_dir(home.parent().unwrap())
            .args(["top", "--json", "--no-kernel", "--home", "./home"]),
    );
    let first = s.wait_for(Duration::from_secs(10), "the first snapshot", |_| true);
    assert_eq!(rows(&first), default_rows());
    assert_eq!(first["degraded"], Value::Null);
    let c2 = row(&first, C2)["path"].as_str().unwrap().to_string();
    assert_eq!(
        Path::new(&c2),
        // The cwd is physical: canonical, were the temporary directory a link.
        home.canonicalize()
            .unwrap()
            .join(format!(".claude/projects/-home-dev-shop/{C2}.jsonl"))
    );
    follow_changes(&s, &home);
}

/// Runs `top` in a new user namespace whose inotify watch limit is 3 (a
/// real kernel limit, per user namespace, that leaves the machine's alone).
fn in_userns_with_watch_limit(limit: u32, args: &[&str], home: &Path) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--user", "--map-root-user", "sh", "-c"])
        .arg(format!(
            "echo {limit} > /proc/sys/user/max_inotify_watches && exec \"$0\" \"$@\""
        ))
        .arg(bin())
        .args(args)
        .args(["--no-kernel", "--home"])
        .arg(home);
    c
}

#[test]
fn watch_limit_falls_back_to_polling_and_says_so() {
    let (home, _) = fixture_home("limit");
    let out = in_userns_with_watch_limit(3, &["top", "--once", "--json"], &home)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["degraded"], "polling");
    assert!(
        v["degraded_reason"]
            .as_str()
            .unwrap()
            .contains("inotify watch limit"),
        "{v}"
    );
    assert_eq!(v["watched_dirs"], 0);
    // The states are the same as with watches.
    assert_eq!(rows(&v), default_rows());
    // And they stay current: polling follows the same changes.
    let s = Stream::start(&mut in_userns_with_watch_limit(
        3,
        &["top", "--json"],
        &home,
    ));
    let first = s.wait_for(Duration::from_secs(10), "the first snapshot", |_| true);
    assert_eq!(first["degraded"], "polling");
    follow_changes(&s, &home);
}

#[test]
fn top_makes_no_network_calls() {
    let (home, _) = fixture_home("strace");
    let dir = home.parent().unwrap().to_path_buf();
    let log = dir.join("strace.log");
    let mut child = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=network", "-o"])
        .arg(&log)
        .arg(bin())
        .args(["top", "--json", "--no-kernel", "--home"])
        .arg(&home)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    // Kept open to the end: a closed stdout ends `top`.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut first).unwrap();
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(rows(&v), default_rows());
    // Let it run through a change and a few ticks.
    let c2 = home.join(format!(".claude/projects/-home-dev-shop/{C2}.jsonl"));
    append(
        &c2,
        &end_turn_line(C2, "/home/dev/shop", "u2-0003", &rfc3339(now_s())),
    );
    std::thread::sleep(Duration::from_secs(3));
    // SIGTERM to top itself (strace's child): it ends cleanly, status 0.
    let top_pid = children(child.id())[0];
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(top_pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    // The append was seen (the stream did its work under strace).
    let last: Value = serde_json::from_str(rest.lines().last().unwrap()).unwrap();
    assert_eq!(state_of(&last, C2).as_deref(), Some("your_turn"), "{rest}");
    // No socket at all: not even a local one.
    let trace = std::fs::read_to_string(&log).unwrap();
    for call in [
        "socket(",
        "socketpair(",
        "connect(",
        "sendto(",
        "sendmsg(",
        "sendmmsg(",
    ] {
        assert!(!trace.contains(call), "{call} in:\n{trace}");
    }
}
