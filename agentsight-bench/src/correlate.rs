//! Synthetic captures for `cargo xtask bench correlate`, written with the
//! real store schema, and a naive baseline to time against.
//!
//! The capture models one long agent session: a runtime process makes
//! `calls` shell tool calls six seconds apart; each runs `bash -c CMD` with
//! three children; every process loads libraries (open/io/close of reads),
//! writes work files, and the runtime writes its transcript and talks to its
//! API. Rows are generated until the requested event count is reached.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, Statement, params};

use agentsight::{
    correlate::{ARGV_SEARCH_MS, shell},
    sessions::{
        AgentSession, PathAccess, Prompt, Provider, ToolCategory, ToolEvent, ToolPath, ToolStatus,
    },
    store::{
        CaptureRw, StoreError,
        sessions::{BindingRow, TreeRow},
    },
};

const MONO0: i64 = 1_000_000_000_000;
const WALL0: i64 = 1_800_000_000_000_000_000;
const CALL_GAP_NS: i64 = 6_000_000_000;
pub const SESSION_ID: &str = "b0b0b0b0-0000-4000-8000-00000000bench";
const HOME: &str = "/home/dev";
const CWD: &str = "/home/dev/proj";
/// The runtime: process row 1, pid 1000.
const RUNTIME: Proc = Proc {
    id: 1,
    pid: 1000,
    ppid: 1,
};

fn qe(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::Query {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// A synthetic process: its row id, pid and parent's pid.
#[derive(Clone, Copy)]
struct Proc {
    id: i64,
    pid: i64,
    ppid: i64,
}

/// One event row; what is not set stays NULL (`result` 0).
#[derive(Default)]
struct Ev<'a> {
    mono: i64,
    kind: &'a str,
    comm: &'a str,
    argv: Option<&'a str>,
    path: Option<&'a str>,
    flags: Option<&'a str>,
    result: i64,
    addr: Option<(&'a str, i64)>,
}

/// The event and process inserts, with the running sequence number.
struct Writer<'c> {
    events: Statement<'c>,
    processes: Statement<'c>,
    seq: i64,
}

impl<'c> Writer<'c> {
    fn new(conn: &'c Connection) -> rusqlite::Result<Self> {
        Ok(Writer {
            processes: conn.prepare(
                "INSERT INTO processes (id, pid, start_mono_ns, parent_id, ppid, origin, comm, argv, cwd, exec_count, end_mono_ns, exit_code)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1, ?10, 0)",
            )?,
            events: conn.prepare(
                "INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, tid, ppid, uid, gid, comm, process_id,
                     argv, cwd, path, flags, result, fd, bytes, read_bytes, family, addr, port)
                 VALUES (?1, ?2, ?3, 0, ?4, ?5, ?5, ?6, 1000, 1000, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
            )?,
            seq: 0,
        })
    }

    fn event(&mut self, p: Proc, e: Ev) -> rusqlite::Result<()> {
        self.seq += 1;
        self.events.execute(params![
            e.mono,
            WALL0 + (e.mono - MONO0),
            e.kind,
            self.seq,
            p.pid,
            p.ppid,
            e.comm,
            p.id,
            e.argv,
            e.argv.map(|_| CWD),
            e.path,
            e.flags,
            e.result,
            Some(3),
            (e.kind == "io").then_some(4096),
            (e.kind == "io").then_some(8192),
            e.addr.map(|_| "ipv4"),
            e.addr.map(|a| a.0),
            e.addr.map(|a| a.1),
        ])?;
        Ok(())
    }

    /// A process row: `parent` is (row id, pid), `span` (start, end).
    fn process(
        &mut self,
        p: Proc,
        parent_id: Option<i64>,
        origin: &str,
        (comm, argv): (&str, &str),
        (start, end): (i64, i64),
    ) -> rusqlite::Result<()> {
        self.processes.execute(params![
            p.id, p.pid, start, parent_id, p.ppid, origin, comm, argv, CWD, end
        ])?;
        Ok(())
    }
}

/// The session being synthesized and where its rows go.
struct Synth<'c> {
    w: Writer<'c>,
    session: AgentSession,
    transcript: String,
    /// Event rows each call may use.
    per_call: u64,
    next_id: i64,
    next_pid: i64,
}

/// Writes a capture of about `events` events with `calls` tool calls;
/// returns the number of events written.
pub fn synthesize(path: &Path, events: u64, calls: usize) -> Result<u64, StoreError> {
    let cap = CaptureRw::create(path)?;
    let conn = cap.conn();
    let e = qe(path);
    conn.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN")
        .map_err(&e)?;
    let duration = calls as i64 * CALL_GAP_NS + CALL_GAP_NS;
    write_anchors(conn, duration).map_err(&e)?;
    let transcript = format!("{HOME}/.claude/projects/-home-dev-proj/{SESSION_ID}.jsonl");
    let mut session = AgentSession::new(
        Provider::Claude,
        SESSION_ID.into(),
        PathBuf::from(&transcript),
    );
    session.cwd = Some(CWD.into());
    session.start_ms = Some(WALL0 / 1_000_000);
    session.end_ms = Some((WALL0 + duration) / 1_000_000);
    let mut synth = Synth {
        w: Writer::new(conn).map_err(&e)?,
        session,
        transcript,
        // Every fifth call is a Write done by the runtime, with no processes.
        per_call: (events * 5 / (4 * calls.max(1) as u64)).max(20),
        next_id: 2,
        next_pid: 2000,
    };
    let root_argv = serde_json::json!(["node", "/usr/lib/claude/cli.js"]).to_string();
    synth
        .w
        .process(
            RUNTIME,
            None,
            "root",
            ("node", &root_argv),
            (MONO0, MONO0 + duration),
        )
        .map_err(&e)?;
    let mut written = 0u64;
    for c in 0..calls {
        written += synth.call(c).map_err(&e)?;
        if written >= events {
            break;
        }
    }
    let Synth {
        w,
        mut session,
        transcript,
        ..
    } = synth;
    drop(w);
    session.prompt_count = session.prompts.len();
    session.tool_count = session.tools.len();
    store_binding(&cap, &session, &transcript, calls, duration)?;
    cap.create_indexes()?;
    // The summaries a recorder keeps while storing (written through the
    // view, these rows are counted once here).
    agentsight::store::summary::rebuild(conn).map_err(&e)?;
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

/// A clock anchor every 10 s over the run.
fn write_anchors(conn: &Connection, duration: i64) -> rusqlite::Result<()> {
    let mut t = 0i64;
    while t <= duration {
        conn.execute(
            "INSERT INTO clock_anchors (label, mono_ns, wall_ns) VALUES ('periodic', ?1, ?2)",
            params![MONO0 + t, WALL0 + t],
        )?;
        t += 10_000_000_000;
    }
    Ok(())
}

/// The session, its tree (the runtime's) and their binding, as `record`
/// stores them.
fn store_binding(
    rw: &CaptureRw,
    session: &AgentSession,
    transcript: &str,
    calls: usize,
    duration: i64,
) -> Result<(), StoreError> {
    let row = rw.insert_session(session)?;
    let tree = rw.insert_tree(&TreeRow {
        id: 0,
        root_process_id: RUNTIME.id,
        root_pid: RUNTIME.pid,
        root_start_mono_ns: MONO0,
        status: "bound".into(),
        note: None,
    })?;
    rw.insert_binding(&BindingRow {
        tree_id: tree,
        session_row: row,
        evidence: "transcript_write".into(),
        evidence_count: calls as i64,
        evidence_process_id: Some(RUNTIME.id),
        evidence_path: Some(transcript.to_string()),
        first_evidence_mono_ns: Some(MONO0),
        from_mono_ns: MONO0,
        to_mono_ns: Some(MONO0 + duration),
    })
}

impl Synth<'_> {
    /// Call `c`: its tool event (and prompt), the runtime's events around
    /// it and, for a shell call, its processes; returns the events written.
    fn call(&mut self, c: usize) -> rusqlite::Result<u64> {
        let t0 = MONO0 + c as i64 * CALL_GAP_NS + 1_000_000_000;
        let cmd = format!("python3 build.py --step {c} && grep -c ok out-{c}.log");
        self.tool_event(c, t0, &cmd);
        let mut written = self.runtime_events(c, t0)?;
        if c % 5 == 4 {
            return Ok(written);
        }
        let budget = self.per_call.saturating_sub(3);
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
        let out = format!("{CWD}/out-{c}.log");
        // The first (bash) is the runtime's child, the others bash's.
        let mut parent = RUNTIME;
        for (k, (comm, argv)) in procs.iter().enumerate() {
            let p = Proc {
                id: self.next_id,
                pid: self.next_pid,
                ppid: parent.pid,
            };
            self.next_id += 1;
            self.next_pid += 1;
            let m = t0 + 2_000_000 + k as i64 * 10_000_000;
            self.w.process(
                p,
                Some(parent.id),
                "fork",
                (comm, argv),
                (m, m + 2_500_000_000),
            )?;
            written += self.process_events(p, parent, (comm, argv), (m, each), &out)?;
            if k == 0 {
                parent = p;
            }
        }
        Ok(written)
    }

    /// The transcript's record of call `c` (every fifth a Write of notes),
    /// and a prompt every 50 calls.
    fn tool_event(&mut self, c: usize, t0: i64, cmd: &str) {
        let write = c % 5 == 4;
        let start_ms = (WALL0 + (t0 - MONO0)) / 1_000_000;
        self.session.tools.push(ToolEvent {
            prompt_index: Some(c / 50),
            subagent: None,
            name: if write { "Write" } else { "Bash" }.into(),
            category: if write {
                ToolCategory::Edit
            } else {
                ToolCategory::Shell
            },
            call_id: Some(format!("toolu_{c:05}")),
            command: (!write).then(|| cmd.to_string()),
            command_truncated: false,
            cwd: None,
            status: ToolStatus::Ok,
            exit_code: None,
            start_ms: Some(start_ms),
            end_ms: Some((WALL0 + (t0 - MONO0) + 3_000_000_000) / 1_000_000),
            paths: if write {
                vec![ToolPath::new(
                    format!("{CWD}/notes-{c}.md"),
                    PathAccess::Write,
                )]
            } else {
                Vec::new()
            },
            domains: Vec::new(),
            mcp: None,
        });
        if c.is_multiple_of(50) {
            self.session.prompts.push(Prompt::new(
                c / 50,
                Some(start_ms - 500),
                format!("step {c}"),
            ));
        }
    }

    /// The runtime around call `c`: a transcript append, an API connect,
    /// and for a Write call the write itself.
    fn runtime_events(&mut self, c: usize, t0: i64) -> rusqlite::Result<u64> {
        let m = t0 - 200_000_000;
        let node = |mono, kind| Ev {
            mono,
            kind,
            comm: "node",
            ..Ev::default()
        };
        let transcript = self.transcript.clone();
        self.w.event(
            RUNTIME,
            Ev {
                path: Some(&transcript),
                flags: Some("write,create,append"),
                result: 20,
                ..node(m, "openat")
            },
        )?;
        self.w.event(
            RUNTIME,
            Ev {
                result: -115,
                addr: Some(("10.0.0.1", 443)),
                ..node(m + 1000, "connect")
            },
        )?;
        if c % 5 != 4 {
            return Ok(2);
        }
        let p = format!("{CWD}/notes-{c}.md");
        self.w.event(
            RUNTIME,
            Ev {
                path: Some(&p),
                flags: Some("write,create,truncate"),
                result: 21,
                ..node(t0 + 1_000_000, "openat")
            },
        )?;
        Ok(3)
    }

    /// One process's life from `m`: the fork (seen by its parent), its
    /// exec, library reads (every 25th a write of `out`) in open/io/close
    /// triples up to `each` events, and its exit; returns the events
    /// written.
    fn process_events(
        &mut self,
        p: Proc,
        parent: Proc,
        (comm, argv): (&str, &str),
        (m, each): (i64, u64),
        out: &str,
    ) -> rusqlite::Result<u64> {
        // The fork is stamped on the parent's row with ppid 1 and comm
        // `node`, as the synthetic capture always had it.
        let forker = Proc { ppid: 1, ..parent };
        self.w.event(
            forker,
            Ev {
                mono: m,
                kind: "fork",
                comm: "node",
                ..Ev::default()
            },
        )?;
        let own = |mono, kind| Ev {
            mono,
            kind,
            comm,
            ..Ev::default()
        };
        self.w.event(
            p,
            Ev {
                argv: Some(argv),
                ..own(m + 1000, "exec")
            },
        )?;
        let mut n = 2u64;
        let mut j = 0i64;
        while n + 3 <= each {
            let mm = m + 10_000 + j * 2_000;
            let lib = format!("/usr/lib/x86_64-linux-gnu/lib{}.so", j % 40);
            let (path, flags) = if j % 25 == 7 {
                (out, "write,create,truncate")
            } else {
                (lib.as_str(), "read,cloexec")
            };
            self.w.event(
                p,
                Ev {
                    path: Some(path),
                    flags: Some(flags),
                    result: 3,
                    ..own(mm, "openat")
                },
            )?;
            self.w.event(
                p,
                Ev {
                    path: Some(path),
                    ..own(mm + 500, "io")
                },
            )?;
            self.w.event(
                p,
                Ev {
                    path: Some(path),
                    ..own(mm + 600, "close")
                },
            )?;
            n += 3;
            j += 1;
        }
        self.w.event(p, own(m + 2_400_000_000, "exit"))?;
        Ok(n + 1)
    }
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
        let script = t.command.as_deref().map(shell::claimed_script);
        for r in &all {
            if r.wall_ms < s - ARGV_SEARCH_MS || r.wall_ms > e + ARGV_SEARCH_MS {
                continue;
            }
            if let (Some(v), Some(sc)) = (&r.argv, &script)
                && shell::argv_matches(v, sc).is_some()
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
