//! `show` and `export` on real captures, and on files that are not captures.

use std::process::Command;

use serde_json::json;

use agentsight_tests::*;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin()).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn show_and_export_read_a_capture_without_changing_it() {
    require_root();
    let dir = scratch("views");
    let db = dir.join("v.db");
    let out = record(
        &db,
        &[],
        &[
            "/bin/sh",
            "-c",
            "/bin/echo one >/dev/null; /bin/sh -c 'exit 2'; exit 0",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let before = std::fs::read(&db).unwrap();
    let db_s = db.display().to_string();

    let (code, text, _) = run(&["show", "--db", &db_s]);
    assert_eq!(code, Some(0));
    assert!(
        text.contains("LOSS      0 events lost in the kernel; 0 missing by sequence number"),
        "{text}"
    );
    assert!(text.contains("programs  5 attached, 0 failed"), "{text}");
    let counts = text.lines().find(|l| l.starts_with("events    ")).unwrap();
    for part in ["exec 3,", "exit 3,", "fork 2,"] {
        assert!(counts.contains(part), "{counts}");
    }
    // `echo one >/dev/null`: the shell's write of "one\n" to /dev/null, summed.
    assert!(
        text.contains("files written (bytes, writes)\n  /dev/null  (4, 1)\n"),
        "{text}"
    );
    assert!(text.contains("/bin/echo one  ["), "{text}");
    assert!(
        text.contains("/bin/sh -c 'exit 2'  [") && text.contains("exit 2]"),
        "{text}"
    );

    let (code, jsonl, _) = run(&["export", "--db", &db_s, "--format", "jsonl"]);
    assert_eq!(code, Some(0));
    let all: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut last = 0;
    for e in &all {
        for key in ["ts", "mono_ns", "kind", "pid", "ppid", "tid", "comm", "uid"] {
            assert!(e.get(key).is_some(), "{key} missing in {e}");
        }
        let ts = e["ts"].as_str().unwrap();
        assert!(ts.ends_with('Z') && ts.len() == 30, "ts {ts}");
        let mono = e["mono_ns"].as_u64().unwrap();
        assert!(mono >= last);
        last = mono;
    }
    // The process lifecycle, in order (file events interleave; checked elsewhere).
    let events: Vec<&serde_json::Value> = all
        .iter()
        .filter(|e| matches!(e["kind"].as_str(), Some("exec" | "fork" | "exit")))
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        vec![
            "exec", "fork", "exec", "exit", "fork", "exec", "exit", "exit"
        ]
    );
    assert_eq!(events[2]["argv"], serde_json::json!(["/bin/echo", "one"]));
    assert_eq!(
        events[2]["cwd"],
        serde_json::json!(dir.display().to_string())
    );
    assert_eq!(events[6]["exit_code"], serde_json::json!(2));

    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "a view modified the capture"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_files_get_one_line_errors_naming_them() {
    let dir = std::env::temp_dir().join(format!("agentsight-badfiles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.db");
    std::fs::write(
        &garbage,
        b"this is not a database at all, just text\n".repeat(200),
    )
    .unwrap();
    let other = dir.join("other.db");
    let c = rusqlite::Connection::open(&other).unwrap();
    c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    drop(c);
    let empty = dir.join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let missing = dir.join("missing.db");
    for (file, needle) in [
        (&garbage, "not an agentsight capture"),
        (&other, "not an agentsight capture"),
        (&empty, "not an agentsight capture"),
        (&missing, "no such file"),
    ] {
        let f = file.display().to_string();
        for cmd in [
            vec!["show", "--db", &f],
            vec!["export", "--db", &f, "--format", "jsonl"],
        ] {
            let (code, stdout, stderr) = run(&cmd);
            assert_eq!(code, Some(2), "{cmd:?}");
            assert!(stdout.is_empty());
            assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
            assert!(stderr.contains(&f) && stderr.contains(needle), "{stderr}");
        }
    }
    assert!(!missing.exists(), "a view created a file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_capture_is_reported() {
    require_root();
    let dir = scratch("trunc");
    let db = dir.join("t.db");
    let out = record(
        &db,
        &[],
        &[
            "/bin/sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8; do /bin/true $i; done",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let bytes = std::fs::read(&db).unwrap();
    let cut = dir.join("cut.db");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let f = cut.display().to_string();
    let (code, _, stderr) = run(&["show", "--db", &f]);
    assert_eq!(code, Some(2));
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&f), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// OTLP/JSON spans of an `export --format otlp-json` file, each with its
/// attributes as a map (`attributes.KEY` → value) and its events' names,
/// file paths and reasons.
fn otlp_spans(path: &std::path::Path) -> Vec<serde_json::Value> {
    let value = |v: &serde_json::Value| {
        let (k, x) = v.as_object().unwrap().iter().next().unwrap();
        match k.as_str() {
            "intValue" => serde_json::json!(x.as_str().unwrap().parse::<i64>().unwrap()),
            _ => x.clone(),
        }
    };
    let attrs = |a: &serde_json::Value| -> serde_json::Map<String, serde_json::Value> {
        a.as_array()
            .unwrap()
            .iter()
            .map(|kv| (kv["key"].as_str().unwrap().to_string(), value(&kv["value"])))
            .collect()
    };
    let mut out = Vec::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let d: serde_json::Value = serde_json::from_str(line).unwrap();
        for rs in d["resourceSpans"].as_array().unwrap() {
            for ss in rs["scopeSpans"].as_array().unwrap() {
                for sp in ss["spans"].as_array().unwrap() {
                    let events: Vec<serde_json::Value> = sp["events"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| {
                            let mut a = attrs(&e["attributes"]);
                            a.remove("agentsight.event.id");
                            serde_json::json!({"name": e["name"], "attributes": a})
                        })
                        .collect();
                    out.push(serde_json::json!({
                        "name": sp["name"],
                        "attributes": attrs(&sp["attributes"]),
                        "events": events,
                    }));
                }
            }
        }
    }
    out
}

/// A recorded session with a stdio MCP server (tests/workloads/mcp_agent.py:
/// a scripted Claude Code whose configured filesystem server rewrites the
/// existing notes.txt through a temp file renamed onto it, then a Bash
/// `cat`), read through every view: `correlate --json`, `session show`
/// (text and JSON), the HTML report, OTLP and Perfetto all name the call's
/// server, and its write and rename are the call's (`mcp_server`).
#[test]
fn an_mcp_call_and_its_server_through_every_view() {
    require_root();
    let r = record_mcp_run();
    let cat_pid = check_mcp_correlate(&r);
    check_mcp_session_show(&r);
    check_mcp_report(&r);
    check_mcp_otlp(&r);
    check_mcp_perfetto(&r, cat_pid);
}

/// A recorded session with a stdio MCP server, and what the views must
/// name: see [`an_mcp_call_and_its_server_through_every_view`].
struct McpRun {
    dir: std::path::PathBuf,
    db_s: String,
    home_s: String,
    sid: &'static str,
    server_pid: i64,
    agent_pid: i64,
    notes_s: String,
    tmp: String,
    arguments: serde_json::Value,
    server_s: String,
    work_s: String,
    command: Vec<String>,
}

fn record_mcp_run() -> McpRun {
    let (uid, gid) = test_user();
    let dir = scratch("views-mcp");
    let (home, work, srv) = (dir.join("home"), dir.join("work"), dir.join("srv"));
    for d in [&home, &work, &srv] {
        std::fs::create_dir_all(d).unwrap();
    }
    let notes = work.join("notes.txt");
    std::fs::write(&notes, "before MCP\n").unwrap();
    // The workload under a name the tool knows as the reference filesystem
    // server, configured in the home's user scope.
    let workload = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/mcp_agent.py");
    let server = srv.join("mcp-server-filesystem");
    std::os::unix::fs::symlink(&workload, &server).unwrap();
    let (server_s, work_s) = (server.display().to_string(), work.display().to_string());
    let command = vec!["python3".to_string(), server_s.clone(), work_s.clone()];
    std::fs::write(
        home.join(".claude.json"),
        json!({"mcpServers": {"fs": {"command": "python3", "args": [&server_s, &work_s]}}})
            .to_string(),
    )
    .unwrap();
    for p in [&home, &work, &srv, &notes, &home.join(".claude.json")] {
        nix::unistd::chown(p.as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    let sid = "3f6b1c2e-0000-4000-8000-00000000f300";
    let db = dir.join("mcp.db");
    let (home_s, db_s) = (home.display().to_string(), db.display().to_string());
    let out = record(
        &db,
        &[],
        &[
            "python3",
            &workload.display().to_string(),
            "agent",
            "--home",
            &home_s,
            "--cwd",
            &work_s,
            "--session-id",
            sid,
            "--server",
            &server_s,
        ],
    );
    assert_exit_0(&out);
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "rewritten through MCP\n"
    );
    let server_pid: i64 = open(&db)
        .query_row(
            "SELECT pid FROM processes WHERE argv = ?1",
            [json!(command).to_string()],
            |r| r.get(0),
        )
        .unwrap();
    let agent_pid: i64 = open(&db)
        .query_row("SELECT pid FROM processes WHERE origin = 'root'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let notes_s = notes.display().to_string();
    let tmp = format!("{notes_s}.0a1b2c3d.tmp");
    let arguments = json!({"content": "rewritten through MCP\n", "path": "notes.txt"});
    McpRun {
        dir,
        db_s,
        home_s,
        sid,
        server_pid,
        agent_pid,
        notes_s,
        tmp,
        arguments,
        server_s,
        work_s,
        command,
    }
}

/// `correlate --json`: the call's server and exactly its write and rename;
/// returns the pid of the Bash call's `cat`.
fn check_mcp_correlate(r: &McpRun) -> i64 {
    let McpRun {
        db_s,
        sid,
        server_pid,
        notes_s,
        tmp,
        command,
        ..
    } = r;
    let server_pid = *server_pid;
    // correlate --json: the call's server and exactly its write and rename.
    let (code, c, err) = run(&["correlate", sid, "--db", db_s, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let c: serde_json::Value = serde_json::from_str(&c).unwrap();
    let tools: Vec<&serde_json::Value> = c["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap())
        .collect();
    assert_eq!(tools.len(), 2);
    let call = tools[0];
    assert_eq!(call["name"], "mcp__fs__write_file");
    assert_eq!(
        call["mcp"],
        json!({"server": "fs", "tool": "write_file", "transport": "stdio",
               "kind": "filesystem", "pid": server_pid, "command": command})
    );
    assert_eq!(call["paths"], json!([{"path": notes_s, "access": "write"}]));
    let acts: Vec<(String, String, Option<String>, String, i64)> = tools
        .iter()
        .flat_map(|t| t["activity"].as_array().unwrap())
        .filter(|a| a["op"] != "exec")
        .map(|a| {
            (
                a["op"].as_str().unwrap().to_string(),
                a["path"].as_str().unwrap().to_string(),
                a["old_path"].as_str().map(str::to_string),
                a["reason"].as_str().unwrap().to_string(),
                a["pid"].as_i64().unwrap(),
            )
        })
        .collect();
    let cat_pid = tools[1]["activity"][0]["pid"].as_i64().unwrap();
    let s = |x: &str| x.to_string();
    assert_eq!(
        acts,
        vec![
            (s("write"), tmp.clone(), None, s("mcp_server"), server_pid),
            (
                s("rename"),
                notes_s.clone(),
                Some(tmp.clone()),
                s("mcp_server"),
                server_pid
            ),
            (s("read"), notes_s.clone(), None, s("argv_match"), cat_pid),
        ]
    );
    assert_eq!(tools[1]["mcp"], serde_json::Value::Null);
    assert_eq!(
        c["flags"],
        json!({"claimed_not_observed": [], "observed_not_claimed": [], "mismatches": [], "late": []})
    );
    let runtime: Vec<(&str, u64)> = c["runtime_activity"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["program"].as_str().unwrap(), g["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(runtime, vec![("mcp server fs", 1)]);
    cat_pid
}

fn check_mcp_session_show(r: &McpRun) {
    let McpRun {
        home_s,
        sid,
        arguments,
        ..
    } = r;
    // session show: the call's server/tool and its arguments.
    let (code, text, err) = run(&["session", "show", sid, "--home", home_s]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" ok ")).collect();
    assert_eq!(
        lines,
        vec![
            r#"  [0] mcp__fs__write_file (mcp fs/write_file) ok            {"content":"rewritten through MCP\n","path":"notes.txt"}"#,
            "  [0] Bash           ok            cat notes.txt",
        ]
    );
    let (code, j, err) = run(&["session", "show", sid, "--home", home_s, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(
        j["tools"][0]["mcp"],
        json!({"server": "fs", "tool": "write_file", "arguments": arguments})
    );
    assert_eq!(j["tools"][1].get("mcp"), None);
}

fn check_mcp_report(r: &McpRun) {
    let McpRun {
        dir,
        db_s,
        server_pid,
        server_s,
        work_s,
        ..
    } = r;
    let server_pid = *server_pid;
    // The report: the call's MCP server table, its activity as mcp_server.
    let html_path = dir.join("r.html");
    let (code, _, err) = run(&[
        "report",
        "--db",
        db_s,
        "-o",
        &html_path.display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let html = std::fs::read_to_string(&html_path).unwrap();
    let table = format!(
        "<h4>MCP server</h4><table class=\"mcp\"><tr><th>server</th><td><code>fs</code></td></tr>\
         <tr><th>tool</th><td><code>write_file</code></td></tr><tr><th>transport</th><td>stdio</td></tr>\
         <tr><th>kind</th><td>filesystem</td></tr><tr><th>process</th><td>pid {server_pid} \
         <code>python3 {server_s} {work_s}</code></td></tr><tr><th>arguments</th><td><code>\
         {{&quot;content&quot;:&quot;rewritten through MCP\\n&quot;,&quot;path&quot;:&quot;notes.txt&quot;}}\
         </code></td></tr></table>"
    );
    assert_eq!(html.matches(&table).count(), 1, "{html}");
    assert_eq!(html.matches("<h4>MCP server</h4>").count(), 1);
}

fn check_mcp_otlp(r: &McpRun) {
    let McpRun {
        dir,
        db_s,
        server_pid,
        notes_s,
        tmp,
        ..
    } = r;
    let server_pid = *server_pid;
    // OTLP: the call's execute_tool span and its server's two file events.
    let otlp = dir.join("o.jsonl");
    let (code, _, err) = run(&[
        "export",
        "--db",
        db_s,
        "--format",
        "otlp-json",
        "-o",
        &otlp.display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let spans = otlp_spans(&otlp);
    let span = spans
        .iter()
        .find(|sp| sp["name"] == "execute_tool mcp__fs__write_file")
        .unwrap();
    let a = &span["attributes"];
    for (k, v) in [
        ("gen_ai.tool.type", json!("extension")),
        ("mcp.method.name", json!("tools/call")),
        ("network.transport", json!("pipe")),
        ("agentsight.mcp.server", json!("fs")),
        ("agentsight.mcp.tool", json!("write_file")),
        ("agentsight.mcp.transport", json!("stdio")),
        ("agentsight.mcp.server.kind", json!("filesystem")),
        ("agentsight.mcp.server.pid", json!(server_pid)),
        ("agentsight.correlate.activity", json!(2)),
    ] {
        assert_eq!(a[k], v, "{k}: {span}");
    }
    // Content only with --capture-content.
    assert_eq!(a.get("agentsight.mcp.server.command"), None, "{span}");
    assert_eq!(
        span["events"],
        json!([
            {"name": "file.write", "attributes": {"process.pid": server_pid, "file.path": tmp,
             "agentsight.attribution.reason": "mcp_server"}},
            {"name": "file.rename", "attributes": {"process.pid": server_pid, "file.path": notes_s,
             "agentsight.file.old_path": tmp, "agentsight.attribution.reason": "mcp_server"}},
        ])
    );
    let bash = spans
        .iter()
        .find(|sp| sp["name"] == "execute_tool Bash")
        .unwrap();
    assert_eq!(bash["attributes"]["gen_ai.tool.type"], "function");
    assert_eq!(bash["attributes"].get("agentsight.mcp.server"), None);
}

fn check_mcp_perfetto(r: &McpRun, cat_pid: i64) {
    let McpRun {
        dir,
        db_s,
        server_pid,
        agent_pid,
        arguments,
        server_s,
        work_s,
        ..
    } = r;
    let (server_pid, agent_pid) = (*server_pid, *agent_pid);
    // Perfetto: the call's slice names its server; the server's process
    // track is named after it.
    let trace = dir.join("t.pftrace");
    let (code, _, err) = run(&[
        "export",
        "--db",
        db_s,
        "--format",
        "perfetto",
        "-o",
        &trace.display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let out = Command::new(python::interpreter())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("perfetto/check_trace.py"))
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["errors"], json!([]));
    assert_eq!(
        d["mcp_slices"],
        json!([{"name": "mcp__fs__write_file", "mcp_server": "fs", "mcp_tool": "write_file",
                "mcp_transport": "stdio", "mcp_server_kind": "filesystem",
                "mcp_server_pid": server_pid,
                "mcp_server_command": format!("python3 {server_s} {work_s}"),
                "arguments": arguments.to_string()}])
    );
    let names: Vec<(i64, &str)> = d["process_tracks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t[0].as_i64().unwrap(), t[2].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        vec![
            (agent_pid, "python3"),
            (server_pid, "mcp fs"),
            (cat_pid, "cat")
        ]
    );
}
