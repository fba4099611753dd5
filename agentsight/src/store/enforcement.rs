//! `record --enforce`'s evidence: one `enforcement_denials` row per access
//! the decider refused (`crate::enforce`), and meta `enforcement` (the mode,
//! the counts, the rules only audited). A capture without the table was
//! recorded without `--enforce`.

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::enforce::{Denial, DenialKind};

/// `path`, `dev` and `ino` name a refused read's or exec's file (`path`
/// empty, `dev` and `ino` 0 for a connect or a send); `addr` and `port` a
/// refused connect's or send's destination (NULL for a file); `repeat` how
/// many identical calls back to back the row stands for (NULL = 1; a
/// write Landlock refused, from its stored call). Captures of older builds
/// lack `addr`, `port` and `repeat`.
///
/// Created by the first denial (or at the start of an enforced recording).
pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS enforcement_denials (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    mono_ns INTEGER NOT NULL,
    rule TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    addr TEXT,
    port INTEGER,
    repeat INTEGER
);
"#;

/// One stored denial, with the process row it belongs to where the
/// capture knows it (the process of that pid alive at `mono_ns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenialRow {
    pub id: i64,
    pub kind: DenialKind,
    pub path: String,
    pub dev: i64,
    pub ino: i64,
    pub pid: u32,
    pub process_id: Option<i64>,
    pub mono_ns: u64,
    pub rule: String,
    pub mechanism: String,
    /// A refused connect's or send's destination address and port.
    pub addr: Option<String>,
    pub port: Option<u16>,
    /// How many calls the row stands for (1 but for a folded failure).
    pub repeat: u64,
}

impl DenialRow {
    /// What was refused: the file, or `addr:port` (`[v6]:port`).
    pub fn target(&self) -> String {
        match (&self.addr, self.port) {
            (Some(a), Some(p)) if a.contains(':') => format!("[{a}]:{p}"),
            (Some(a), Some(p)) => format!("{a}:{p}"),
            _ => self.path.clone(),
        }
    }
}

/// The accesses the rows stand for (a folded failure counts its calls).
pub fn blocked_total(rows: &[DenialRow]) -> u64 {
    rows.iter().map(|r| r.repeat).sum()
}

/// "2 read(s), 1 exec(s)", with "W write(s)" when a write was refused,
/// ", C connect(s), S send(s)" when a
/// connect or send was refused: what `show` and the report head their
/// denials with.
pub fn kind_counts(rows: &[DenialRow]) -> String {
    let n = |k: DenialKind| -> u64 { rows.iter().filter(|r| r.kind == k).map(|r| r.repeat).sum() };
    let mut s = format!("{} read(s), ", n(DenialKind::Read));
    if rows.iter().any(|r| r.kind == DenialKind::Write) {
        s += &format!("{} write(s), ", n(DenialKind::Write));
    }
    s += &format!("{} exec(s)", n(DenialKind::Exec));
    if rows.iter().any(|r| r.kind.is_network()) {
        s += &format!(
            ", {} connect(s), {} send(s)",
            n(DenialKind::Connect),
            n(DenialKind::Send)
        );
    }
    s
}

/// Meta `enforcement`, as `record --enforce` stores it at the end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnforcementMeta {
    /// `enforce` or `best-effort`.
    pub mode: String,
    pub blocked_reads: u64,
    /// Writes outside the allowed roots Landlock refused (absent in
    /// captures of older builds).
    #[serde(default)]
    pub blocked_writes: u64,
    pub blocked_execs: u64,
    /// Refused connects and sends (the network rules; absent in captures
    /// of older builds).
    #[serde(default)]
    pub blocked_connects: u64,
    #[serde(default)]
    pub blocked_sends: u64,
    /// Denials the decider could not hand to the writer (queue full).
    pub lost: u64,
    /// Files and directories marked at start.
    pub marked: u64,
    /// Rules judged only afterwards by `audit`, each with why.
    pub audited_not_enforced: Vec<String>,
    /// Writes the policy allows that Landlock refused all the same (a glob
    /// it cannot grant, such as `~/.claude.json.*`): how many, and the
    /// first [`REFUSED_ALLOWED_NAMED`] paths. Never denials nor findings.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_allowed: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_allowed_paths: Vec<String>,
    /// Set by the sentinel (`enforce::sentinel`) when the recorder ended
    /// without stopping enforcement: the tree it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backstop: Option<BackstopMeta>,
}

/// How many of the refused-but-allowed writes meta `enforcement` names.
pub const REFUSED_ALLOWED_NAMED: usize = 10;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the sentinel did when the recorder died while enforcing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackstopMeta {
    pub recorder_pid: u32,
    /// The tree's processes stopped and killed.
    pub killed: Vec<u32>,
    /// Those still running when the sentinel stopped waiting (10 s).
    pub still_running: Vec<u32>,
}

pub(crate) fn insert(conn: &Connection, denials: &[Denial]) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    let mut st = conn.prepare_cached(
        "INSERT INTO enforcement_denials
         (kind, path, dev, ino, pid, mono_ns, rule, mechanism, addr, port, repeat)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    for d in denials {
        st.execute(params![
            d.kind.as_str(),
            d.path,
            d.dev,
            d.ino,
            d.pid,
            d.mono_ns as i64,
            d.rule,
            d.mechanism,
            d.dest.as_ref().map(|t| t.addr.as_str()),
            d.dest.as_ref().map(|t| t.port),
            (d.repeat > 1).then_some(d.repeat as i64),
        ])?;
    }
    Ok(())
}

impl super::CaptureRw {
    /// Adds the writes Landlock refused, found in the finished capture
    /// (`enforce::landlock`), and their count to meta `enforcement`, with
    /// the refused writes the policy allows (`allowed`: counted and the
    /// first named); one transaction.
    pub fn add_write_denials(
        &self,
        denials: &[Denial],
        allowed: &[String],
    ) -> Result<(), StoreError> {
        let qe = |e: rusqlite::Error| StoreError::Query {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        let t = self.conn().unchecked_transaction().map_err(qe)?;
        insert(&t, denials).map_err(qe)?;
        if let Some(mut meta) = stored_meta(&t).map_err(qe)? {
            meta.blocked_writes += denials.iter().map(|d| d.repeat).sum::<u64>();
            meta.refused_allowed += allowed.len() as u64;
            meta.refused_allowed_paths = allowed
                .iter()
                .take(REFUSED_ALLOWED_NAMED)
                .cloned()
                .collect();
            let json = serde_json::to_string(&meta).map_err(|e| StoreError::Query {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
            super::put_meta(&t, super::meta::key::ENFORCEMENT, &json).map_err(qe)?;
        }
        t.commit().map_err(qe)
    }
}

fn has_table(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'enforcement_denials'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

impl super::CaptureReader<'_> {
    /// Every access `record --enforce` refused, in order; empty for a
    /// capture recorded without it.
    pub fn enforcement_denials(&self) -> Result<Vec<DenialRow>, StoreError> {
        let qe = |e| self.query_err(e);
        if !has_table(self.conn).map_err(qe)? {
            return Ok(Vec::new());
        }
        // Captures of older builds have no destination columns.
        let dest =
            if super::read::has_column(self.conn, "enforcement_denials", "addr").map_err(qe)? {
                "d.addr, d.port"
            } else {
                "NULL, NULL"
            };
        let repeat =
            if super::read::has_column(self.conn, "enforcement_denials", "repeat").map_err(qe)? {
                "d.repeat"
            } else {
                "NULL"
            };
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT d.id, d.kind, d.path, d.dev, d.ino, d.pid, d.mono_ns, d.rule, d.mechanism,
                 {dest}, {repeat}, (SELECT p.id FROM processes p WHERE p.pid = d.pid
                    AND p.start_mono_ns <= d.mono_ns
                    AND (p.end_mono_ns IS NULL OR p.end_mono_ns >= d.mono_ns)
                  ORDER BY p.start_mono_ns DESC, p.id DESC LIMIT 1)
                 FROM enforcement_denials d ORDER BY d.id"
            ))
            .map_err(qe)?;
        let rows = st
            .query_map([], |r| {
                let kind: String = r.get(1)?;
                Ok(DenialRow {
                    id: r.get(0)?,
                    kind: DenialKind::parse(&kind).unwrap_or(DenialKind::Read),
                    path: r.get(2)?,
                    dev: r.get(3)?,
                    ino: r.get(4)?,
                    pid: r.get(5)?,
                    mono_ns: r.get::<_, i64>(6)?.max(0) as u64,
                    rule: r.get(7)?,
                    mechanism: r.get(8)?,
                    addr: r.get(9)?,
                    port: r
                        .get::<_, Option<i64>>(10)?
                        .and_then(|p| u16::try_from(p).ok()),
                    repeat: r.get::<_, Option<i64>>(11)?.map_or(1, |n| n.max(1) as u64),
                    process_id: r.get(12)?,
                })
            })
            .map_err(qe)?;
        rows.map(|r| r.map_err(qe)).collect()
    }

    /// The file calls that failed with `EACCES` or `EXDEV` (what Landlock
    /// answers), of these `kinds`, in time order, each with how many calls
    /// its row stands for (`repeat`).
    pub fn refused_file_calls(
        &self,
        kinds: &[&str],
    ) -> Result<Vec<(super::read::EventRecord, u64)>, StoreError> {
        let qe = |e| self.query_err(e);
        let mut st = self
            .conn
            .prepare(
                "SELECT id, mono_ns, kind, pid, process_id, path, old_path, flags, result, errno,
                 repeat FROM events WHERE errno IN ('EACCES', 'EXDEV') ORDER BY mono_ns, id",
            )
            .map_err(qe)?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    super::read::EventRecord {
                        id: r.get(0)?,
                        mono_ns: r.get(1)?,
                        kind: r.get(2)?,
                        pid: r.get(3)?,
                        process_id: r.get(4)?,
                        path: r.get(5)?,
                        old_path: r.get(6)?,
                        flags: r.get(7)?,
                        result: r.get(8)?,
                        errno: r.get(9)?,
                        ..Default::default()
                    },
                    r.get::<_, Option<i64>>(10)?.map_or(1, |n| n.max(1) as u64),
                ))
            })
            .map_err(qe)?;
        let mut out = Vec::new();
        for row in rows {
            let row = row.map_err(qe)?;
            if kinds.contains(&row.0.kind.as_str()) {
                out.push(row);
            }
        }
        Ok(out)
    }

    /// Meta `enforcement`, when the capture was recorded with `--enforce`
    /// (a value that does not parse is reported as absent).
    pub fn enforcement_meta(&self) -> Result<Option<EnforcementMeta>, StoreError> {
        stored_meta(self.conn).map_err(|e| self.query_err(e))
    }
}

/// Meta `enforcement` as stored (a value that does not parse: None).
fn stored_meta(conn: &Connection) -> rusqlite::Result<Option<EnforcementMeta>> {
    let raw: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = ?1",
            [super::meta::key::ENFORCEMENT],
            |r| r.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    Ok(raw.and_then(|r| serde_json::from_str(&r).ok()))
}
