//! What a real agent run with MCP servers must show (issue 28), on top of
//! [`crate::e2e_check`]'s checks: each MCP call attributed exactly its
//! server's activity on the paths the test knows (reason `mcp_server`), none
//! of it in a built-in call, the claims of a lying server flagged, a remote
//! server's call explained by the agent's connect to it, precision and
//! recall of the attribution over the run's calls, and the audit naming the
//! MCP call in its findings.
//!
//! Scenario keys read here (beside `turns` and `expect`): `mcp_servers`
//! (configured by `Run`), `mcp_http` (netns.sh starts
//! `tests/e2e/mcp/http_server.js` on [`MCP_HTTP_PORT`]);
//! `expect.claimed_not_observed`
//! (workspace paths correlate must flag so), `expect.remote_notes` (what the
//! HTTP server's notes file must hold).

use std::{
    collections::{BTreeSet, HashSet},
    fs,
    path::{Component, Path, PathBuf},
    process::Command,
};

use serde_json::Value;

use crate::{
    e2e::{Agent, Run},
    e2e_check::{acts_by, audit_json, glob, intent_calls, tools_of},
};

/// The reasons a stdio server's activity is its call's: `mcp_server`, or,
/// on the call's claimed paths, `path_match`/`via_rename` as for built-in
/// tools (correlate's rule since fb4174e). Whose activity it is (the
/// server's process tree) is checked separately.
pub const SERVER_REASONS: &[&str] = &["mcp_server", "path_match", "via_rename"];

fn server_reason(a: &Value) -> bool {
    SERVER_REASONS.contains(&a["reason"].as_str().unwrap_or(""))
}

/// The streamable-HTTP MCP server's port inside the run's namespace.
pub const MCP_HTTP_PORT: u16 = 8790;

/// `, "127.0.0.1:8790"` for a scenario with the HTTP MCP server (the
/// connection a policy must declare), else nothing.
pub fn declared_remote(run: &Run) -> String {
    if run.scenario.json["mcp_http"] == true {
        format!(", \"127.0.0.1:{MCP_HTTP_PORT}\"")
    } else {
        String::new()
    }
}

/// Whether the scenario configures MCP servers.
pub fn is_mcp_scenario(run: &Run) -> bool {
    run.scenario.json["mcp_servers"].is_object()
}

/// `p` without `.` and `..` components (the file need not exist).
fn normalized(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// An MCP argument path as the server resolves it: `{{CWD}}` is the
/// workspace, `{{TMP}}` the run's TMPDIR, a relative path is the
/// workspace's (the server's first root).
pub fn arg_path(run: &Run, p: &str) -> String {
    let p = p
        .replace("{{CWD}}", &run.work.display().to_string())
        .replace("{{TMP}}", &run.tmp.display().to_string());
    normalized(&run.work.join(p)).display().to_string()
}

/// The scenario's intents, in call order.
fn intents(run: &Run) -> Vec<Value> {
    run.scenario.json["turns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["calls"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// The configured URL of server `name`, when it is a remote one.
fn remote_url(run: &Run, name: &str) -> Option<String> {
    run.scenario.json["mcp_servers"][name]["url"]
        .as_str()
        .map(str::to_string)
}

/// The workspace paths the scenario says correlate flags as claimed but not
/// observed (a lying server's writes).
fn lied_paths(run: &Run) -> Vec<String> {
    run.scenario.json["expect"]["claimed_not_observed"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| arg_path(run, p.as_str().unwrap()))
        .collect()
}

/// What a filesystem-server call must do, as (the ops that show it, the
/// path): `write_file` a write (or the rename of its temp file onto the
/// path; `edit_file` likewise), `read_text_file`/`read_file` a read,
/// `list_directory` a read of the directory. `None`: a tool whose effect
/// the test does not know.
fn fs_effect(run: &Run, intent: &Value) -> Option<(&'static [&'static str], String)> {
    let m = &intent["mcp"];
    let path = m["arguments"]["path"].as_str()?;
    let ops: &'static [&'static str] = match m["tool"].as_str()? {
        // Both write an existing file as `<path>.<hex>.tmp` renamed onto it.
        "write_file" | "edit_file" => &["write", "rename"],
        "read_text_file" | "read_file" | "list_directory" => &["read"],
        _ => return None,
    };
    Some((ops, arg_path(run, path)))
}

/// A path of the call's own file: the file itself, or the server's temp
/// sibling for a write of an existing file (`<path>.<hex>.tmp`).
fn on_path(a: &Value, path: &str) -> bool {
    let tmp = format!("{path}.*.tmp");
    [&a["path"], &a["old_path"]]
        .iter()
        .filter_map(|p| p.as_str())
        .any(|p| p == path || glob(&tmp, p))
}

/// The directories filesystem server `server` is allowed: those on its
/// command line (after `{{MCP_FS}}`), and the workspace for a CLI that
/// answers the server's MCP `roots/list` with it (Claude Code, Gemini CLI,
/// opencode, Qwen Code: each declares the `roots` capability and answers
/// with the workspace alone, seen on the pins' `initialize` and
/// `roots/list` traffic; the server then replaces its directories by the
/// roots). Codex and Copilot CLI 1.0.102 declare no `roots`: the server
/// keeps its arguments.
fn server_roots(run: &Run, server: &str) -> Vec<String> {
    let args = run.scenario.json["mcp_servers"][server]["args"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut roots: Vec<String> = args
        .iter()
        .filter_map(Value::as_str)
        .skip_while(|a| *a != "{{MCP_FS}}")
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .map(|a| arg_path(run, a))
        .collect();
    if matches!(
        run.agent,
        Agent::Claude | Agent::Gemini | Agent::Opencode | Agent::Qwen
    ) {
        roots.push(run.work.display().to_string());
    }
    roots
}

/// A read of one of the server's allowed directories: the server resolves
/// every path argument against them (its path validation), so the read is
/// its work inside the call, whatever path the call names.
fn root_read(run: &Run, server: &str, a: &Value) -> bool {
    a["op"] == "read"
        && a["path"]
            .as_str()
            .is_some_and(|p| server_roots(run, server).iter().any(|r| r == p))
}

/// A call's server: the process the CLI started runs a wrapper (the lying
/// server) when its command names `liar.js`; the activity is then its
/// child's.
fn wrapped(t: &Value) -> bool {
    t["mcp"]["command"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|a| a.as_str().is_some_and(|a| a.ends_with("/liar.js")))
}

/// One MCP call of the transcript: its server as configured and found, and
/// exactly the activity the test knows (checked per call; the server's
/// whole process tree is [`verify_mcp`]'s).
pub fn assert_mcp_call(run: &Run, i: usize, t: &Value, intent: &Value, ctx: &str) {
    let m = &intent["mcp"];
    let server = m["server"].as_str().unwrap();
    let info = &t["mcp"];
    assert_eq!(info["server"], server, "call {i}: mcp.server: {ctx}");
    assert_eq!(info["tool"], m["tool"], "call {i}: mcp.tool: {ctx}");
    let acts = t["activity"].as_array().unwrap();
    if let Some(url) = remote_url(run, server) {
        assert_eq!(info["transport"], "http", "call {i}: {ctx}");
        assert_eq!(info["url"], url.as_str(), "call {i}: mcp.url: {ctx}");
        // Nothing but the agent's connects to the server.
        let connects = acts
            .iter()
            .filter(|a| {
                a["op"] == "connect"
                    && a["addr"] == "127.0.0.1"
                    && a["port"] == MCP_HTTP_PORT
                    && a["reason"] == "mcp_server"
            })
            .count();
        assert!(
            connects >= 1,
            "call {i}: no mcp_server connect to {url}: {ctx}"
        );
        assert_eq!(connects, acts.len(), "call {i}: only its connects: {ctx}");
        return;
    }
    assert_eq!(info["transport"], "stdio", "call {i}: mcp.transport: {ctx}");
    assert_eq!(info["kind"], "filesystem", "call {i}: mcp.kind: {ctx}");
    let pid = info["pid"].as_u64();
    assert!(pid.is_some(), "call {i}: the server's pid: {ctx}");
    for a in acts {
        assert!(server_reason(a), "call {i}: reason: {a}: {ctx}");
    }
    let writes: Vec<&Value> = acts
        .iter()
        .filter(|a| {
            matches!(
                a["op"].as_str(),
                Some("write" | "rename" | "delete" | "mkdir")
            )
        })
        .collect();
    if intent["status"] == "failed" {
        assert_eq!(
            writes,
            Vec::<&Value>::new(),
            "call {i}: a refused call wrote: {ctx}"
        );
        assert_eq!(t["status"], "failed", "call {i}: {ctx}");
        return;
    }
    let Some((ops, path)) = fs_effect(run, intent) else {
        return;
    };
    if lied_paths(run).contains(&path) {
        assert_eq!(
            acts,
            &Vec::<Value>::new(),
            "call {i}: the lie did something: {ctx}"
        );
        return;
    }
    for a in acts {
        assert!(
            on_path(a, &path) || root_read(run, server, a),
            "call {i}: not on {path} nor a read of the server's root: {a}: {ctx}"
        );
    }
    // By the server process itself (the wrapped server is its child).
    let own = |a: &Value| wrapped(t) || a["pid"].as_u64() == pid;
    assert!(
        acts_by(acts, SERVER_REASONS).into_iter().any(|a| own(a)
            && ops.contains(&a["op"].as_str().unwrap_or(""))
            && a["path"] == path.as_str()),
        "call {i}: no mcp_server {ops:?} of {path} by the server: {ctx}"
    );
}

/// `claimed_not_observed`: exactly the scenario's lies (none elsewhere),
/// each a claim of the MCP call that made it.
pub fn assert_claimed_not_observed(run: &Run, c: &Value, ctx: &str) {
    let flagged = c["flags"]["claimed_not_observed"].as_array().unwrap();
    let lied = lied_paths(run);
    assert_eq!(
        flagged.len(),
        lied.len(),
        "claimed_not_observed: want {lied:?}: {ctx}"
    );
    for p in &lied {
        let write = mcp_tool_of(run.agent, c, "write_file", p);
        assert!(
            flagged.iter().any(|f| {
                f["detail"].as_str().is_some_and(|d| d.contains(p.as_str()))
                    && f["call_id"] == write["call_id"]
                    && f["name"] == write["name"]
            }),
            "{p} not flagged claimed_not_observed on its write_file: {ctx}"
        );
    }
}

/// The MCP call of `tool` on `path` (an argument path).
fn mcp_tool_of<'a>(agent: Agent, c: &'a Value, tool: &str, path: &str) -> &'a Value {
    intent_calls(agent, tools_of(c))
        .into_iter()
        .find(|t| {
            t["mcp"]["tool"] == tool
                && t["paths"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["path"] == path)
        })
        .unwrap_or_else(|| panic!("no MCP {tool} call claiming {path}"))
}

/// The capture's process ids of the process `pid` and its descendants
/// (by the stored parent links, read through the store).
fn subtree(db: &Path, pid: u64) -> HashSet<i64> {
    let procs = agentsight::store::Capture::open(db)
        .expect("open capture")
        .processes()
        .expect("processes");
    let mut out: HashSet<i64> = procs
        .iter()
        .filter(|p| p.pid == pid as i64)
        .map(|p| p.id)
        .collect();
    loop {
        let before = out.len();
        for p in &procs {
            if p.parent_id.is_some_and(|q| out.contains(&q)) {
                out.insert(p.id);
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// Every attributed activity counted against what the test knows.
#[derive(Debug, Default)]
struct Tally {
    attributed: usize,
    expected_attributed: usize,
    expected: usize,
    found: usize,
    unexpected: Vec<String>,
    missing: Vec<String>,
}

/// Everything of a recorded MCP scenario beyond the per-call checks: the
/// servers' process trees, files, the HTTP server's log, precision and
/// recall, the audit.
pub fn verify_mcp(run: &Run, c: &Value, db: &Path, ctx: &str) {
    let agent = run.agent;
    let calls = intent_calls(agent, tools_of(c));
    let intents = intents(run);
    let servers: HashSet<i64> = calls
        .iter()
        .filter_map(|t| t["mcp"]["pid"].as_u64())
        .collect::<BTreeSet<u64>>()
        .into_iter()
        .flat_map(|pid| subtree(db, pid))
        .collect();
    let by_server = |a: &Value| {
        a["process_id"]
            .as_i64()
            .is_some_and(|p| servers.contains(&p))
    };
    let mut tally = Tally::default();
    for (i, (t, intent)) in calls.iter().zip(&intents).enumerate() {
        let acts = t["activity"].as_array().unwrap();
        let is_mcp = intent["mcp"].is_object();
        let stdio = is_mcp && remote_url(run, intent["mcp"]["server"].as_str().unwrap()).is_none();
        for a in acts {
            if is_mcp && stdio {
                assert!(by_server(a), "call {i}: not the server's: {a}: {ctx}");
            } else if !is_mcp {
                assert!(
                    !by_server(a),
                    "call {i}: an MCP server's activity in a built-in call: {a}: {ctx}"
                );
            }
        }
        tally_call(run, t, intent, &by_server, &mut tally);
    }
    // Codex's and Qwen Code's searches: attributed activity there counts
    // against precision.
    for t in tools_of(c)
        .iter()
        .filter(|t| !calls.iter().any(|x| std::ptr::eq(*x, **t)))
    {
        for a in t["activity"].as_array().unwrap() {
            tally.attributed += 1;
            tally.unexpected.push(format!("{} {}", t["name"], a));
        }
    }
    assert_precision_recall(&tally, ctx);
    assert_refused_wrote_nothing(run, c, &intents, ctx);
    if let Some(notes) = run.scenario.json["expect"]["remote_notes"].as_str() {
        assert_remote_server_used(run, notes, ctx);
    }
    audit_names_mcp_call(run, db, c, ctx);
    audit_mcp_server_not_allowed(run, db, c, ctx);
}

/// A test of one activity.
type Test<'a> = Box<dyn Fn(&Value) -> bool + 'a>;

/// Counts one call's attributed activities (expected or not) and whether
/// the one activity the test knows it must show is there.
fn tally_call(
    run: &Run,
    t: &Value,
    intent: &Value,
    by_server: &dyn Fn(&Value) -> bool,
    tally: &mut Tally,
) {
    let acts = t["activity"].as_array().unwrap();
    let name = t["name"].as_str().unwrap_or("?");
    let reason_in = |a: &Value, r: &[&str]| r.contains(&a["reason"].as_str().unwrap_or(""));
    // (is this activity expected, is this the activity that must be there)
    let (expected, key): (Test, Test) = if let Some(m) = intent["mcp"].as_object() {
        if remote_url(run, m["server"].as_str().unwrap()).is_some() {
            let connect = |a: &Value| {
                a["reason"] == "mcp_server"
                    && a["op"] == "connect"
                    && a["addr"] == "127.0.0.1"
                    && a["port"] == MCP_HTTP_PORT
            };
            (Box::new(connect), Box::new(connect))
        } else {
            match fs_effect(run, intent) {
                Some((ops, path))
                    if intent["status"] != "failed" && !lied_paths(run).contains(&path) =>
                {
                    let p = path.clone();
                    let server = m["server"].as_str().unwrap();
                    (
                        Box::new(move |a: &Value| {
                            server_reason(a)
                                && by_server(a)
                                && (on_path(a, &p) || root_read(run, server, a))
                        }),
                        Box::new(move |a: &Value| {
                            server_reason(a)
                                && by_server(a)
                                && a["path"] == path.as_str()
                                && ops.contains(&a["op"].as_str().unwrap_or(""))
                        }),
                    )
                }
                // Refused, lied or unknown: nothing is expected.
                _ => (Box::new(|_: &Value| false), Box::new(|_: &Value| false)),
            }
        }
    } else if intent["shell"].is_string() || t["category"] == "shell" {
        // Besides its command, a built-in call has the agent's helpers
        // started in its window (`time_window`: Claude Code's shell
        // snapshot at its first Bash call, its git probes), as correlate
        // has always given them; never the server's activity.
        (
            Box::new(move |a: &Value| {
                reason_in(a, &["argv_match", "descendant", "time_window"]) && !by_server(a)
            }),
            Box::new(move |a: &Value| a["reason"] == "argv_match" && a["op"] == "exec"),
        )
    } else {
        (
            Box::new(move |a: &Value| {
                reason_in(
                    a,
                    &["path_match", "via_rename", "time_window", "descendant"],
                ) && !by_server(a)
            }),
            Box::new(move |a: &Value| a["reason"] == "path_match"),
        )
    };
    let knows_key = !(intent["mcp"].is_object()
        && (intent["status"] == "failed"
            || remote_url(run, intent["mcp"]["server"].as_str().unwrap()).is_none()
                && fs_effect(run, intent).is_none_or(|(_, p)| lied_paths(run).contains(&p))));
    for a in acts {
        tally.attributed += 1;
        if expected(a) {
            tally.expected_attributed += 1;
        } else {
            tally
                .unexpected
                .push(format!("{name}: {}", crate::e2e_check::activity_line(a)));
        }
    }
    if knows_key {
        tally.expected += 1;
        if acts.iter().any(&key) {
            tally.found += 1;
        } else {
            tally.missing.push(format!("{name} #{}", t["tool_index"]));
        }
    }
}

/// Recall 100 %, precision ≥ 95 %, both printed.
fn assert_precision_recall(t: &Tally, ctx: &str) {
    let precision = if t.attributed == 0 {
        100.0
    } else {
        100.0 * t.expected_attributed as f64 / t.attributed as f64
    };
    let recall = if t.expected == 0 {
        100.0
    } else {
        100.0 * t.found as f64 / t.expected as f64
    };
    eprintln!(
        "e2e mcp: precision {precision:.1} % ({} of {} attributed expected), recall {recall:.1} % ({} of {} expected found)",
        t.expected_attributed, t.attributed, t.found, t.expected
    );
    assert_eq!(
        t.found, t.expected,
        "recall: missing {:#?}: {ctx}",
        t.missing
    );
    assert!(
        t.expected_attributed * 100 >= t.attributed * 95,
        "precision {precision:.1} %: unexpected {:#?}: {ctx}",
        t.unexpected
    );
}

/// A refused call's path: written by nobody (no activity on it anywhere in
/// the correlation), absent on disk.
fn assert_refused_wrote_nothing(run: &Run, c: &Value, intents: &[Value], ctx: &str) {
    let refused: Vec<String> = intents
        .iter()
        .filter(|i| i["mcp"].is_object() && i["status"] == "failed")
        .filter_map(|i| i["mcp"]["arguments"]["path"].as_str())
        .map(|p| arg_path(run, p))
        .collect();
    if refused.is_empty() {
        return;
    }
    let mut everything: Vec<&Value> = Vec::new();
    for t in tools_of(c) {
        everything.extend(t["activity"].as_array().unwrap());
    }
    everything.extend(c["flags"]["observed_not_claimed"].as_array().unwrap());
    for g in c["runtime_activity"].as_array().unwrap() {
        everything.extend(g["activity"].as_array().unwrap());
    }
    for p in &refused {
        assert!(!Path::new(p).exists(), "{p} written: {ctx}");
        let on: Vec<&&Value> = everything
            .iter()
            .filter(|a| on_path(a, p) && a["op"] != "read")
            .collect();
        assert!(on.is_empty(), "a write of the refused {p}: {on:#?}: {ctx}");
    }
}

/// The HTTP server really ran the call: its notes file and a logged
/// `tools/call` of `write_note`.
fn assert_remote_server_used(run: &Run, notes: &str, ctx: &str) {
    let got = fs::read_to_string(run.server_dir.join("mcp-http/notes.txt")).unwrap_or_default();
    assert_eq!(got, notes, "the HTTP MCP server's notes: {ctx}");
    let log = fs::read_to_string(run.server_dir.join("mcp-http.jsonl")).unwrap_or_default();
    let calls = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["body"]["method"] == "tools/call" && e["body"]["params"]["name"] == "write_note"
        })
        .count();
    assert_eq!(calls, 1, "tools/call write_note requests: {log}\n{ctx}");
}

/// `[denied_paths] read` naming the file an MCP `read_text_file` read: a
/// `denied-path` finding attributed to that call (`mcp_server`), its text
/// naming the call's tool name and id.
fn audit_names_mcp_call(run: &Run, db: &Path, c: &Value, ctx: &str) {
    let calls = intent_calls(run.agent, tools_of(c));
    let Some((t, path)) = calls.iter().zip(intents(run)).find_map(|(t, i)| {
        (i["mcp"]["tool"] == "read_text_file" && i["status"] != "failed")
            .then(|| Some((*t, arg_path(run, i["mcp"]["arguments"]["path"].as_str()?))))
            .flatten()
    }) else {
        return;
    };
    let policy = run.root.join("mcp-denied-read.toml");
    fs::write(
        &policy,
        format!(
            "home = {:?}\n[denied_paths]\nread = [{path:?}]\n",
            run.home.display().to_string()
        ),
    )
    .unwrap();
    let (_, report) = audit_json(db, &policy);
    let findings: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["rule"] == "denied-path"
                && f["session"]["call_id"] == t["call_id"]
                && SERVER_REASONS.contains(&f["session"]["reason"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(
        findings.len(),
        1,
        "one denied-path finding on the MCP call {}: {report:#}\n{ctx}",
        t["name"]
    );
    assert_eq!(findings[0]["path"], path.as_str(), "{ctx}");
    let text = audit_text(db, &policy);
    let (name, id) = (t["name"].as_str().unwrap(), t["call_id"].as_str().unwrap());
    assert!(
        text.lines().any(|l| l.contains(name) && l.contains(id)),
        "the audit's text does not name {name} ({id}):\n{text}\n{ctx}"
    );
}

/// `[mcp] allowed_servers = ["other"]`: an `mcp-server-not-allowed` finding
/// naming each stdio server the run used, `mcp-remote-undeclared` each
/// remote one.
fn audit_mcp_server_not_allowed(run: &Run, db: &Path, c: &Value, ctx: &str) {
    let used: BTreeSet<&str> = tools_of(c)
        .iter()
        .filter_map(|t| t["mcp"]["server"].as_str())
        .collect();
    let policy = run.root.join("mcp-other-only.toml");
    fs::write(
        &policy,
        format!(
            "home = {:?}\n[mcp]\nallowed_servers = [\"other\"]\n",
            run.home.display().to_string()
        ),
    )
    .unwrap();
    let (_, report) = audit_json(db, &policy);
    for s in &used {
        // A stdio server not allowed by name; a remote one whose URL the
        // policy does not declare (audit's `[mcp]` rules, 85dcaab).
        let rule = if remote_url(run, s).is_some() {
            "mcp-remote-undeclared"
        } else {
            "mcp-server-not-allowed"
        };
        let messages: Vec<&str> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["rule"] == rule)
            .filter_map(|f| f["message"].as_str())
            .collect();
        assert!(
            messages.iter().any(|m| names(m, s)),
            "no {rule} finding naming {s}: {report:#}\n{ctx}"
        );
    }
    assert!(!used.is_empty(), "no MCP call with a server: {ctx}");
}

/// Whether `text` names `word` as a whole word (not inside a longer name).
fn names(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .any(|w| w == word)
}

/// `agentsight audit --format text` of `db` with `policy`.
fn audit_text(db: &Path, policy: &Path) -> String {
    let out = Command::new(crate::bin())
        .args(["audit", "--format", "text", "--db"])
        .arg(db)
        .arg("--policy")
        .arg(policy)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}
