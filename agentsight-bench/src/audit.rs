//! Findings for `cargo xtask bench audit`: turns library reads of the
//! synthetic 1M-event correlate capture (`correlate::synthesize`)
//! into writes outside the allowed roots, so the event count stays the same
//! and exactly `n` findings appear.

use std::path::Path;

use anyhow::Context;
use rusqlite::params;

use agentsight::{
    audit::{self, Policy, Strategy},
    store::{Capture, CaptureRw, StoreError},
};

/// Where the injected findings go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// All by one new `sh` process under the root (a shell loop writing
    /// files: the shape of issue 18 point 8, findings × events per process).
    OneProcess,
    /// Each write stays in its own process, spread over the whole run.
    Spread,
}

/// The process id the one-process layout gives its writer.
const WRITER_PID: i64 = 99_999;

fn qe(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::Query {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// Rewrites `n` read opens (evenly spaced) into writes of distinct files
/// under `/srv/out/dK/` (100 directories); returns how many were rewritten.
pub fn inject_findings(path: &Path, n: u64, layout: Layout) -> Result<u64, StoreError> {
    let e = qe(path);
    let cap = CaptureRw::open(path)?;
    let conn = cap.conn();
    conn.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN")
        .map_err(&e)?;
    let ids: Vec<i64> = {
        let mut st = conn
            .prepare("SELECT id FROM events WHERE kind = 'openat' AND flags = 'read,cloexec' ORDER BY id")
            .map_err(&e)?;
        st.query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(&e)?
    };
    let step = (ids.len() as u64 / n.max(1)).max(1) as usize;
    let chosen: Vec<i64> = ids.into_iter().step_by(step).take(n as usize).collect();
    let writer = if layout == Layout::OneProcess {
        let id: i64 = conn
            .query_row("SELECT MAX(id) + 1 FROM processes", [], |r| r.get(0))
            .map_err(&e)?;
        let start: i64 = conn
            .query_row("SELECT MIN(mono_ns) FROM events", [], |r| r.get(0))
            .map_err(&e)?;
        let argv = serde_json::json!([
            "sh",
            "-c",
            "for i in $(seq N); do echo > /srv/out/d$((i % 100))/f$i.txt; done"
        ])
        .to_string();
        conn.execute(
            "INSERT INTO processes (id, pid, start_mono_ns, parent_id, ppid, origin, comm, argv, cwd)
             VALUES (?1, ?2, ?3, 1, 1000, 'fork', 'sh', ?4, '/home/dev/proj')",
            params![id, WRITER_PID, start, argv],
        )
        .map_err(&e)?;
        Some(id)
    } else {
        None
    };
    let mut st = conn
        .prepare(
            "UPDATE events SET flags = 'write,create,truncate', path = ?2,
                 process_id = COALESCE(?3, process_id), pid = COALESCE(?4, pid),
                 comm = COALESCE(?5, comm)
             WHERE id = ?1",
        )
        .map_err(&e)?;
    for (i, id) in chosen.iter().enumerate() {
        let p = format!("/srv/out/d{}/f{i}.txt", i % 100);
        st.execute(params![
            id,
            p,
            writer,
            writer.map(|_| WRITER_PID),
            writer.map(|_| "sh")
        ])
        .map_err(&e)?;
    }
    drop(st);
    conn.execute_batch("COMMIT").map_err(&e)?;
    Ok(chosen.len() as u64)
}

/// Audits `db` under `policy` the way the audit worked before (two queries
/// per finding occurrence and chain entry, every finding kept): the
/// baseline `bench audit` times; the JSON report goes to `output` or stdout.
pub fn baseline(
    db: &Path,
    policy: &Path,
    output: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    let policy = Policy::load(policy)?;
    let cap = Capture::open(db)?;
    let report = audit::audit_with(&cap, &policy, Strategy::PerFindingQueries)?;
    let mut json = serde_json::to_string_pretty(&audit::render::json(&report))?;
    json.push('\n');
    match output {
        Some(p) => std::fs::write(&p, json).with_context(|| format!("write {}", p.display())),
        None => {
            use std::io::Write as _;
            std::io::stdout()
                .write_all(json.as_bytes())
                .context("write to stdout")
        }
    }
}
