//! The reader of opencode's SQLite store (`opencode.db`, generation S1:
//! opencode 1.2 – 1.18): the `session`, `message` and `part` tables.
//!
//! The database is opened read-only, without `immutable=1` (which ignores
//! the `-wal` file, where the newest rows of a running agent live), with a
//! small busy timeout: a reader in WAL mode never blocks opencode's writer,
//! and a database locked by someone else is an error after 250 ms, not a
//! hang. Nothing a row stores is used as a path to open.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row, params};
use serde_json::Value;

use crate::error::{Result, SessionError};

/// One `session` row, as the recorder and the listing need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// `ses_…`.
    pub id: String,
    /// The working directory opencode ran in (`session.directory`).
    pub directory: Option<String>,
    /// The parent session of a subagent (`task` tool) session.
    pub parent_id: Option<String>,
    pub title: Option<String>,
    pub created_ms: Option<i64>,
    pub updated_ms: Option<i64>,
}

/// The sessions of `db` whose lifetime (`time_created` ..= `time_updated`)
/// overlaps `from_ms ..= to_ms`, oldest first: the sessions an opencode
/// process that ran in that window may have written (the recorder binds
/// processes with it).
pub fn sessions_between(db: &Path, from_ms: i64, to_ms: i64) -> Result<Vec<StoredSession>> {
    let c = open(db)?;
    require_session_table(&c, db)?;
    query_sessions(
        &c,
        db,
        "WHERE time_updated >= ?1 AND time_created <= ?2 ORDER BY time_created, id",
        params![from_ms, to_ms],
    )
}

/// The `limit` most recently updated sessions of `db`, newest first (the
/// listing's bounded read: one indexed query, no message is read).
pub fn recent_sessions(db: &Path, limit: usize) -> Result<Vec<StoredSession>> {
    let c = open(db)?;
    require_session_table(&c, db)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    query_sessions(
        &c,
        db,
        "ORDER BY time_updated DESC, id LIMIT ?1",
        params![limit],
    )
}

/// Every session id of `db` (the id index: ids only, no other column).
pub fn session_ids(db: &Path) -> Result<Vec<String>> {
    let c = open(db)?;
    require_session_table(&c, db)?;
    let err = sql_err(db);
    let mut st = c.prepare("SELECT id FROM session").map_err(err)?;
    let mut rows = st.query([]).map_err(err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(err)? {
        if let Some(id) = text(r, 0) {
            out.push(id);
        }
    }
    Ok(out)
}

/// The `data` JSON of every part of session `id`, in id order (what the
/// tests compare their scenario's texts with).
pub fn part_data(db: &Path, id: &str) -> Result<Vec<String>> {
    let c = open(db)?;
    require_session_table(&c, db)?;
    let err = sql_err(db);
    let mut st = c
        .prepare("SELECT data FROM part WHERE session_id = ?1 ORDER BY id")
        .map_err(err)?;
    let mut rows = st.query([id]).map_err(err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(err)? {
        if let Some(d) = text(r, 0) {
            out.push(d);
        }
    }
    Ok(out)
}

/// The newest rows of one session, read in one transaction (what the live
/// view judges: a consistent snapshot while opencode writes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewestRows {
    /// `session.directory`.
    pub directory: Option<String>,
    /// The newest messages, newest first: `(id, data)`; `None` for a row
    /// whose columns are not text.
    pub messages: Vec<Option<(String, String)>>,
    /// Tool parts of the newest message that are `pending` or `running`.
    pub open_tools_of_newest: u64,
}

/// The `limit` newest messages of session `id` and what [`NewestRows`] says.
pub fn newest_rows(db: &Path, id: &str, limit: usize) -> Result<NewestRows> {
    let c = open(db)?;
    let err = sql_err(db);
    c.execute_batch("BEGIN").map_err(err)?;
    let mut out = NewestRows {
        directory: c
            .query_row("SELECT directory FROM session WHERE id = ?1", [id], |r| {
                r.get::<_, String>(0)
            })
            .ok(),
        ..NewestRows::default()
    };
    let mut st = c
        .prepare(
            "SELECT id, data FROM message WHERE session_id = ?1 \
             ORDER BY time_created DESC, id DESC LIMIT ?2",
        )
        .map_err(err)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut rows = st.query(params![id, limit]).map_err(err)?;
    while let Some(r) = rows.next().map_err(err)? {
        out.messages.push(text(r, 0).zip(text(r, 1)));
    }
    if let Some(Some((newest, _))) = out.messages.first() {
        let n: i64 = c
            .query_row(
                "SELECT count(*) FROM part WHERE message_id = ?1 \
                 AND json_extract(data, '$.type') = 'tool' \
                 AND json_extract(data, '$.state.status') IN ('pending', 'running')",
                [newest],
                |r| r.get(0),
            )
            .map_err(err)?;
        out.open_tools_of_newest = u64::try_from(n).unwrap_or(0);
    }
    Ok(out)
}

/// `db` holds a session `id`.
pub fn has_session(db: &Path, id: &str) -> bool {
    let Ok(c) = open(db) else { return false };
    c.query_row("SELECT 1 FROM session WHERE id = ?1", [id], |_| Ok(()))
        .is_ok()
}

/// Opens `db` read-only (a regular file, never through a link; WAL read).
pub(crate) fn open(db: &Path) -> Result<Connection> {
    crate::cursor::open_ro(db)
}

fn sql_err(db: &Path) -> impl Fn(rusqlite::Error) -> SessionError + Copy + '_ {
    move |e| SessionError::Sqlite {
        path: db.to_path_buf(),
        source: e,
    }
}

/// A database without opencode's S1 `session` table (another program's,
/// or a future layout) is a Format error, not an empty store.
fn require_session_table(c: &Connection, db: &Path) -> Result<()> {
    let n: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('session', 'message', 'part')",
            [],
            |r| r.get(0),
        )
        .map_err(sql_err(db))?;
    if n == 3 {
        Ok(())
    } else {
        Err(SessionError::Format {
            path: db.to_path_buf(),
            provider: "opencode",
            reason: "no session/message/part tables".into(),
        })
    }
}

fn query_sessions(
    c: &Connection,
    db: &Path,
    tail: &str,
    p: &[&dyn rusqlite::ToSql],
) -> Result<Vec<StoredSession>> {
    let err = sql_err(db);
    let sql = format!(
        "SELECT id, directory, parent_id, title, time_created, time_updated FROM session {tail}"
    );
    let mut st = c.prepare(&sql).map_err(err)?;
    let mut rows = st.query(p).map_err(err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(err)? {
        let Some(id) = text(r, 0) else { continue };
        out.push(StoredSession {
            id,
            directory: text(r, 1),
            parent_id: text(r, 2),
            title: text(r, 3),
            created_ms: int(r, 4),
            updated_ms: int(r, 5),
        });
    }
    Ok(out)
}

/// The whole `session` row of one session.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionRow {
    pub(crate) directory: Option<String>,
    pub(crate) parent_id: Option<String>,
    pub(crate) title: Option<String>,
    pub(crate) version: Option<String>,
    /// `model` JSON `{id, providerID, variant}`.
    pub(crate) model: Option<Value>,
    pub(crate) created_ms: Option<i64>,
    pub(crate) updated_ms: Option<i64>,
}

/// A `message` row with its `part` rows, in order.
#[derive(Debug, Clone)]
pub(crate) struct MessageRow {
    pub(crate) id: String,
    pub(crate) created_ms: Option<i64>,
    pub(crate) data: Value,
    /// `(part id, data)`.
    pub(crate) parts: Vec<(String, Value)>,
}

/// What one session holds: its row, messages and parts, and the rows whose
/// `data` was not JSON (counted, skipped).
pub(crate) struct Loaded {
    pub(crate) session: SessionRow,
    pub(crate) messages: Vec<MessageRow>,
    pub(crate) bad_rows: u64,
    pub(crate) bytes: u64,
}

/// Reads session `id` of `db`; `Ok(None)` when the database has no such
/// session. Messages in creation order (ids break ties: opencode's ids are
/// monotonic), parts in id order within their message.
pub(crate) fn load(db: &Path, id: &str) -> Result<Option<Loaded>> {
    let c = open(db)?;
    require_session_table(&c, db)?;
    let err = sql_err(db);
    // One read transaction: the three queries see one snapshot of a
    // database opencode may be writing.
    c.execute_batch("BEGIN").map_err(err)?;
    let session = c.query_row(
        "SELECT directory, parent_id, title, version, model, time_created, time_updated \
         FROM session WHERE id = ?1",
        [id],
        |r| {
            Ok(SessionRow {
                directory: text(r, 0),
                parent_id: text(r, 1),
                title: text(r, 2),
                version: text(r, 3),
                model: text(r, 4).and_then(|m| serde_json::from_str(&m).ok()),
                created_ms: int(r, 5),
                updated_ms: int(r, 6),
            })
        },
    );
    let session = match session {
        Ok(s) => s,
        Err(rusqlite::Error::QueryReturnedNoRows) => return Ok(None),
        Err(e) => return Err(err(e)),
    };
    let mut out = Loaded {
        session,
        messages: Vec::new(),
        bad_rows: 0,
        bytes: 0,
    };
    read_messages(&c, db, id, &mut out)?;
    read_parts(&c, db, id, &mut out)?;
    Ok(Some(out))
}

fn read_messages(c: &Connection, db: &Path, id: &str, out: &mut Loaded) -> Result<()> {
    let err = sql_err(db);
    let mut st = c
        .prepare(
            "SELECT id, time_created, data FROM message WHERE session_id = ?1 \
             ORDER BY time_created, id",
        )
        .map_err(err)?;
    let mut rows = st.query([id]).map_err(err)?;
    while let Some(r) = rows.next().map_err(err)? {
        let (Some(mid), Some(data)) = (text(r, 0), text(r, 2)) else {
            out.bad_rows += 1;
            continue;
        };
        out.bytes += data.len() as u64;
        match serde_json::from_str::<Value>(&data) {
            Ok(v) => out.messages.push(MessageRow {
                id: mid,
                created_ms: int(r, 1),
                data: v,
                parts: Vec::new(),
            }),
            Err(_) => out.bad_rows += 1,
        }
    }
    Ok(())
}

fn read_parts(c: &Connection, db: &Path, id: &str, out: &mut Loaded) -> Result<()> {
    let err = sql_err(db);
    let index: std::collections::HashMap<String, usize> = out
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.clone(), i))
        .collect();
    let mut st = c
        .prepare(
            "SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY message_id, id",
        )
        .map_err(err)?;
    let mut rows = st.query([id]).map_err(err)?;
    while let Some(r) = rows.next().map_err(err)? {
        let (Some(pid), Some(mid), Some(data)) = (text(r, 0), text(r, 1), text(r, 2)) else {
            out.bad_rows += 1;
            continue;
        };
        out.bytes += data.len() as u64;
        let Some(&i) = index.get(&mid) else {
            // A part whose message row is not (yet) there: nothing to
            // attach it to.
            out.bad_rows += 1;
            continue;
        };
        match serde_json::from_str::<Value>(&data) {
            Ok(v) => out.messages[i].parts.push((pid, v)),
            Err(_) => out.bad_rows += 1,
        }
    }
    Ok(())
}

fn text(r: &Row<'_>, i: usize) -> Option<String> {
    match r.get_ref(i).ok()? {
        ValueRef::Text(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

fn int(r: &Row<'_>, i: usize) -> Option<i64> {
    match r.get_ref(i).ok()? {
        ValueRef::Integer(v) => Some(v),
        // Whole milliseconds stored as a float.
        ValueRef::Real(v) => Some(v as i64),
        _ => None,
    }
}
