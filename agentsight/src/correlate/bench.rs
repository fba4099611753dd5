//! Synthetic captures for `cargo xtask bench correlate`, written with the
//! real store schema, and a naive baseline to time against.
//!
//! The capture models one long agent session: a runtime process makes
//! `calls` shell tool calls six seconds apart; each runs `bash -c CMD` with
//! three children; every process loads libraries (open/io/close of reads),
//! writes work files, and the runtime writes its transcript and talks to its
//! API. Rows are generated until the requested event count is reached.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};

use crate::{
    sessions::{
        AgentSession, PathAccess, Prompt, Provider, ToolCategory, ToolEvent, ToolPath, ToolStatus,
    },
    store::{
        self, StoreError,
        sessions::{self as stored, BindingRow, TreeRow},
    },
};

const MONO0: i64 = 1_000_000_000_000;
const WALL0: i64 = 1_800_000_000_000_000_000;
const CALL_GAP_NS: i64 = 6_000_000_000;
pub const SESSION_ID: &str = "b0b0b0b0-0000-4000-8000-00000000bench";

fn qe(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::Query {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// Writes a capture of about `events` events with `calls` tool calls;
/// returns the number of events written.
pub fn synthesize(path: &Path, events: u64, calls: usize) -> Result<u64, StoreError> {
    let conn = store::create(path)?;
    let e = qe(path);
    conn.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN")
        .map_err(&e)?;
    // Every fifth call is a Write done by the runtime, with no processes.
    let per_call = (events * 5 / (4 * calls.max(1) as u64)).max(20);
    let duration = calls as i64 * CALL_GAP_NS + CALL_GAP_NS;
    let mut t = 0i64;
    while t <= duration {
        conn.execute(
            "INSERT INTO clock_anchors (label, mono_ns, wall_ns) VALUES ('periodic', ?1, ?2)",
            params![MONO0 + t, WALL0 + t],
        )
        .map_err(&e)?;
        t += 10_000_000_000;
    }
    let home = "/home/dev";
    let cwd = "/home/dev/proj";
    let transcript = format!("{home}/.claude/projects/-home-dev-proj/{SESSION_ID}.jsonl");
    let mut proc_st = conn
        .prepare(
            "INSERT INTO processes (id, pid, start_mono_ns, parent_id, ppid, origin, comm, argv, cwd, exec_count, end_mono_ns, exit_code)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1, ?10, 0)",
        )
        .map_err(&e)?;
    let mut ev_st = conn
        .prepare(
            "INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, tid, ppid, uid, gid, comm, process_id,
                 argv, cwd, path, flags, result, fd, bytes, read_bytes, family, addr, port)
             VALUES (?1, ?2, ?3, 0, ?4, ?5, ?5, ?6, 1000, 1000, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
        )
        .map_err(&e)?;
    let mut seq = 0i64;
    let mut written = 0u64;
    let root_argv = serde_json::json!(["node", "/usr/lib/claude/cli.js"]).to_string();
    proc_st
        .execute(params![
            1,
            1000,
            MONO0,
            None::<i64>,
            1,
            "root",
            "node",
            root_argv,
            cwd,
            MONO0 + duration
        ])
        .map_err(&e)?;
    let mut session = AgentSession::new(
        Provider::Claude,
        SESSION_ID.into(),
        PathBuf::from(&transcript),
    );
    session.cwd = Some(cwd.into());
    session.start_ms = Some(WALL0 / 1_000_000);
    session.end_ms = Some((WALL0 + duration) / 1_000_000);
    let mut next_id = 2i64;
    let mut next_pid = 2000i64;
    #[allow(clippy::too_many_arguments)]
    fn ev(
        st: &mut rusqlite::Statement,
        seq: &mut i64,
        mono: i64,
        kind: &str,
        pid: i64,
        ppid: i64,
        comm: &str,
        process_id: i64,
        argv: Option<&str>,
        path: Option<&str>,
        flags: Option<&str>,
        result: i64,
        addr: Option<(&str, i64)>,
    ) -> rusqlite::Result<()> {
        *seq += 1;
        st.execute(params![
            mono,
            WALL0 + (mono - MONO0),
            kind,
            *seq,
            pid,
            ppid,
            comm,
            process_id,
            argv,
            argv.map(|_| "/home/dev/proj"),
            path,
            flags,
            result,
            Some(3),
            (kind == "io").then_some(4096),
            (kind == "io").then_some(8192),
            addr.map(|_| "ipv4"),
            addr.map(|a| a.0),
            addr.map(|a| a.1),
        ])?;
        Ok(())
    }
    for c in 0..calls {
        let t0 = MONO0 + c as i64 * CALL_GAP_NS + 1_000_000_000;
        let cmd = format!("python3 build.py --step {c} && grep -c ok out-{c}.log");
        let out = format!("{cwd}/out-{c}.log");
        session.tools.push(ToolEvent {
            prompt_index: Some(c / 50),
            subagent: None,
            name: if c % 5 == 4 {
                "Write".into()
            } else {
                "Bash".into()
            },
            category: if c % 5 == 4 {
                ToolCategory::Edit
            } else {
                ToolCategory::Shell
            },
            call_id: Some(format!("toolu_{c:05}")),
            command: (c % 5 != 4).then(|| cmd.clone()),
            command_truncated: false,
            cwd: None,
            status: ToolStatus::Ok,
            exit_code: None,
            start_ms: Some((WALL0 + (t0 - MONO0)) / 1_000_000),
            end_ms: Some((WALL0 + (t0 - MONO0) + 3_000_000_000) / 1_000_000),
            paths: if c % 5 == 4 {
                vec![ToolPath::new(
                    format!("{cwd}/notes-{c}.md"),
                    PathAccess::Write,
                )]
            } else {
                Vec::new()
            },
            domains: Vec::new(),
        });
        if c % 50 == 0 {
            session.prompts.push(Prompt::new(
                c / 50,
                Some((WALL0 + (t0 - MONO0)) / 1_000_000 - 500),
                format!("step {c}"),
            ));
        }
        // The runtime: transcript appends, an API connection, library reads.
        let mut m = t0 - 200_000_000;
        ev(
            &mut ev_st,
            &mut seq,
            m,
            "openat",
            1000,
            1,
            "node",
            1,
            None,
            Some(&transcript),
            Some("write,create,append"),
            20,
            None,
        )
        .map_err(&e)?;
        ev(
            &mut ev_st,
            &mut seq,
            m + 1000,
            "connect",
            1000,
            1,
            "node",
            1,
            None,
            None,
            None,
            -115,
            Some(("10.0.0.1", 443)),
        )
        .map_err(&e)?;
        written += 2;
        if c % 5 == 4 {
            let p = format!("{cwd}/notes-{c}.md");
            ev(
                &mut ev_st,
                &mut seq,
                t0 + 1_000_000,
                "openat",
                1000,
                1,
                "node",
                1,
                None,
                Some(&p),
                Some("write,create,truncate"),
                21,
                None,
            )
            .map_err(&e)?;
            written += 1;
        }
        let budget = per_call.saturating_sub(3);
        // The call's processes: bash, python3, grep, and a helper.
        let procs = [
            ("bash", serde_json::json!(["bash", "-c", cmd]).to_string()),
            (
                "python3",
                serde_json::json!(["python3", "build.py", "--step", c.to_string()]).to_string(),
            ),
            (
                "grep",
                serde_json::json!(["grep", "-c", "ok", format!("out-{c}.log")]).to_string(),
            ),
            ("sh", serde_json::json!(["sh", "-c", "true"]).to_string()),
        ];
        let each = budget / procs.len() as u64;
        let mut parent = (1i64, 1000i64);
        for (k, (comm, argv)) in procs.iter().enumerate() {
            if c % 5 == 4 {
                break;
            }
            let (id, pid) = (next_id, next_pid);
            next_id += 1;
            next_pid += 1;
            m = t0 + 2_000_000 + k as i64 * 10_000_000;
            let ppid_row = if k == 0 { 1 } else { parent.0 };
            let ppid = if k == 0 { 1000 } else { parent.1 };
            proc_st
                .execute(params![
                    id,
                    pid,
                    m,
                    ppid_row,
                    ppid,
                    "fork",
                    comm,
                    argv,
                    cwd,
                    m + 2_500_000_000
                ])
                .map_err(&e)?;
            ev(
                &mut ev_st, &mut seq, m, "fork", ppid, 1, "node", ppid_row, None, None, None, 0,
                None,
            )
            .map_err(&e)?;
            ev(
                &mut ev_st,
                &mut seq,
                m + 1000,
                "exec",
                pid,
                ppid,
                comm,
                id,
                Some(argv),
                None,
                None,
                0,
                None,
            )
            .map_err(&e)?;
            let mut n = 2u64;
            let mut j = 0i64;
            while n + 3 <= each {
                let mm = m + 10_000 + j * 2_000;
                let lib = format!("/usr/lib/x86_64-linux-gnu/lib{}.so", j % 40);
                let (path, flags) = if j % 25 == 7 {
                    (out.clone(), "write,create,truncate")
                } else {
                    (lib, "read,cloexec")
                };
                ev(
                    &mut ev_st,
                    &mut seq,
                    mm,
                    "openat",
                    pid,
                    ppid,
                    comm,
                    id,
                    None,
                    Some(&path),
                    Some(flags),
                    3,
                    None,
                )
                .map_err(&e)?;
                ev(
                    &mut ev_st,
                    &mut seq,
                    mm + 500,
                    "io",
                    pid,
                    ppid,
                    comm,
                    id,
                    None,
                    Some(&path),
                    None,
                    0,
                    None,
                )
                .map_err(&e)?;
                ev(
                    &mut ev_st,
                    &mut seq,
                    mm + 600,
                    "close",
                    pid,
                    ppid,
                    comm,
                    id,
                    None,
                    Some(&path),
                    None,
                    0,
                    None,
                )
                .map_err(&e)?;
                n += 3;
                j += 1;
            }
            ev(
                &mut ev_st,
                &mut seq,
                m + 2_400_000_000,
                "exit",
                pid,
                ppid,
                comm,
                id,
                None,
                None,
                None,
                0,
                None,
            )
            .map_err(&e)?;
            written += n + 1;
            if k == 0 {
                parent = (id, pid);
            }
        }
        if written >= events {
            break;
        }
    }
    drop(ev_st);
    drop(proc_st);
    session.prompt_count = session.prompts.len();
    session.tool_count = session.tools.len();
    let shown = path.display().to_string();
    let row = stored::insert_session(&conn, &shown, &session)?;
    let tree = stored::insert_tree(
        &conn,
        &shown,
        &TreeRow {
            id: 0,
            root_process_id: 1,
            root_pid: 1000,
            root_start_mono_ns: MONO0,
            status: "bound".into(),
            note: None,
        },
    )?;
    stored::insert_binding(
        &conn,
        &shown,
        &BindingRow {
            tree_id: tree,
            session_row: row,
            evidence: "transcript_write".into(),
            evidence_count: calls as i64,
            evidence_process_id: Some(1),
            evidence_path: Some(transcript.clone()),
            first_evidence_mono_ns: Some(MONO0),
            from_mono_ns: MONO0,
            to_mono_ns: Some(MONO0 + duration),
        },
    )?;
    conn.execute_batch(store::INDEXES).map_err(&e)?;
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('complete', 'true')",
        [],
    )
    .map_err(&e)?;
    conn.execute_batch("COMMIT; PRAGMA journal_mode=DELETE;")
        .map_err(&e)?;
    conn.query_row("SELECT COUNT(*) FROM events", [], |r| r.get::<_, i64>(0))
        .map(|n| n as u64)
        .map_err(&e)
}

/// The naive baseline: read every event row (no index, no kind filter),
/// then test every call against every event (window, argv, path).
/// Returns the number of attributions found.
pub fn naive(conn: &Connection, session: &AgentSession) -> rusqlite::Result<u64> {
    struct Row {
        wall_ms: i64,
        argv: Option<Vec<String>>,
        path: Option<String>,
    }
    let mut st = conn.prepare("SELECT * FROM events")?;
    let cols: Vec<String> = st.column_names().iter().map(|c| c.to_string()).collect();
    let ix = |name: &str| cols.iter().position(|c| c == name).unwrap_or(0);
    let (iw, ik, ia, ip) = (ix("wall_ns"), ix("kind"), ix("argv"), ix("path"));
    let mut all: Vec<Row> = Vec::new();
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let kind: String = r.get(ik)?;
        all.push(Row {
            wall_ms: r.get::<_, i64>(iw)? / 1_000_000,
            argv: if kind == "exec" {
                r.get::<_, Option<String>>(ia)?
                    .and_then(|a| serde_json::from_str(&a).ok())
            } else {
                None
            },
            path: r.get(ip)?,
        });
    }
    let mut found = 0u64;
    for t in &session.tools {
        let (Some(s), Some(e)) = (t.start_ms, t.end_ms) else {
            continue;
        };
        let script = t.command.as_deref().map(super::shell::claimed_script);
        for r in &all {
            if r.wall_ms < s - super::ARGV_SEARCH_MS || r.wall_ms > e + super::ARGV_SEARCH_MS {
                continue;
            }
            if let (Some(v), Some(sc)) = (&r.argv, &script)
                && super::shell::argv_matches(v, sc).is_some()
            {
                found += 1;
            } else if let Some(p) = &r.path
                && t.paths.iter().any(|tp| &tp.path == p)
            {
                found += 1;
            }
        }
    }
    Ok(found)
}
