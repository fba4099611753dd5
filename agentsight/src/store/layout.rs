//! How events are laid out on disk. Readers always query the `events` view,
//! whose columns are those of the `events` table of earlier captures; the
//! rows themselves live in `event_rows`, whose repeated text (paths, comm,
//! kind, flags, statuses, argv…) is an integer id into `strings`, and whose
//! columns are ordered by how often they are filled so that SQLite drops a
//! row's trailing NULLs (built with `SQLITE_ENABLE_NULL_TRIM`,
//! `.cargo/config.toml`). `wall_ns` is not stored for recorded rows: it is
//! the row's `mono_ns` plus the offset of the clock anchor it was stored
//! under (`anchor`), as the recorder computed it before.
//!
//! A text column of `event_rows` holds either a `strings` id (INTEGER) or the
//! text itself: rows written through the view (INSERT/UPDATE on `events`,
//! which INSTEAD OF triggers carry over) keep their text inline, so tests,
//! benchmarks and tools that write synthetic captures need nothing else.

use rusqlite::Connection;

use crate::capture::{
    decode::WalkStatus,
    model::{EventRow, TcpOutcome},
    syscalls::PathStatus,
};

/// A value to bind, before its text is interned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    Null,
    Int(i64),
    Text(&'a str),
}

fn int<T: Into<i64>>(v: Option<T>) -> Value<'static> {
    v.map_or(Value::Null, |x| Value::Int(x.into()))
}

fn text(v: Option<&str>) -> Value<'_> {
    v.map_or(Value::Null, Value::Text)
}

/// One row as the recorder stores it: the model's row under the newest
/// clock anchor.
pub(crate) struct StoredRow<'a> {
    pub anchor: i64,
    pub event: &'a EventRow<'a>,
}

/// What the recorder binds in a column for one row.
type Get = for<'r> fn(&StoredRow<'r>) -> Value<'r>;

/// A column's type in `event_rows`, which also says how it is bound and
/// exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ColumnType {
    Key,
    Int,
    IntNotNull,
    /// 0/1, exported as a JSON boolean.
    Bool,
    /// A `strings` id, or the text inline (no declared type).
    Text,
    TextNotNull,
}

impl ColumnType {
    fn ddl(self) -> &'static str {
        match self {
            Self::Key => " INTEGER PRIMARY KEY",
            Self::Int | Self::Bool => " INTEGER",
            Self::IntNotNull => " INTEGER NOT NULL",
            Self::Text => "",
            Self::TextNotNull => " NOT NULL",
        }
    }

    pub(crate) fn is_text(self) -> bool {
        matches!(self, Self::Text | Self::TextNotNull)
    }
}

/// One column of `event_rows` and of the `events` view.
pub(crate) struct Column {
    pub name: &'static str,
    pub ty: ColumnType,
    /// Position in `events` (the view, and the table of earlier captures);
    /// None for a column of the layout only.
    view: Option<u8>,
    /// A field of `export`'s JSON lines.
    pub exported: bool,
    /// What the recorder binds; None: SQLite's (`id`) or the view's (`wall_ns`).
    get: Option<Get>,
}

const fn col(name: &'static str, ty: ColumnType, view: u8, get: Get) -> Column {
    Column {
        name,
        ty,
        view: Some(view),
        exported: true,
        get: Some(get),
    }
}

use ColumnType::{Bool, Int, IntNotNull, Key, Text, TextNotNull};

/// The one list of event columns, in `event_rows` storage order: the columns
/// most rows fill first, so that the NULLs at the end of a row cost nothing.
/// The `event_rows` DDL, the `events` view and its triggers, the recorder's
/// INSERT and `export`'s fields are all built from it.
pub(crate) const COLUMNS: [Column; 54] = [
    Column {
        name: "id",
        ty: Key,
        view: Some(0),
        exported: false,
        get: None,
    },
    col("mono_ns", IntNotNull, 1, |r| {
        Value::Int(r.event.header.mono_ns as i64)
    }),
    Column {
        name: "anchor",
        ty: Int,
        view: None,
        exported: false,
        get: Some(|r| Value::Int(r.anchor)),
    },
    Column {
        name: "wall_ns",
        ty: Int,
        view: Some(2),
        exported: false,
        get: None,
    },
    col("kind", TextNotNull, 3, |r| Value::Text(r.event.kind)),
    col("cpu", IntNotNull, 4, |r| {
        Value::Int(r.event.header.cpu.into())
    }),
    col("seq", IntNotNull, 5, |r| {
        Value::Int(r.event.header.seq as i64)
    }),
    col("pid", IntNotNull, 6, |r| {
        Value::Int(r.event.header.pid.into())
    }),
    col("tid", Int, 7, |r| {
        let h = r.event.header;
        int((h.tid != h.pid).then_some(h.tid))
    }),
    col("ppid", IntNotNull, 8, |r| {
        Value::Int(r.event.header.ppid.into())
    }),
    col("uid", IntNotNull, 9, |r| {
        Value::Int(r.event.header.uid.into())
    }),
    col("gid", IntNotNull, 10, |r| {
        Value::Int(r.event.header.gid.into())
    }),
    col("comm", TextNotNull, 11, |r| {
        Value::Text(&r.event.header.comm)
    }),
    Column {
        name: "process_id",
        ty: Int,
        view: Some(12),
        exported: false,
        get: Some(|r| Value::Int(r.event.process_id)),
    },
    col("result", Int, 24, |r| int(r.event.fields.result)),
    col("fd", Int, 29, |r| int(r.event.fields.sys.fd)),
    col("path", Text, 30, |r| {
        text(r.event.fields.sys.path.as_deref())
    }),
    col("path_as_given", Text, 31, |r| {
        text(r.event.fields.sys.path_as_given.as_deref())
    }),
    col("path_status", Text, 32, |r| {
        text(r.event.fields.sys.path_status.map(PathStatus::as_str))
    }),
    col("errno", Text, 25, |r| text(r.event.fields.errno.as_deref())),
    col("flags", Text, 33, |r| {
        text(r.event.fields.sys.flags.as_deref())
    }),
    col("mode", Int, 34, |r| int(r.event.fields.sys.mode)),
    col("real_path", Text, 49, |r| {
        text(r.event.fields.sys.real_path.as_deref())
    }),
    col("real_path_status", Text, 50, |r| {
        text(r.event.fields.sys.real_path_status.map(WalkStatus::as_str))
    }),
    col("dev", Int, 51, |r| int(r.event.fields.sys.dev)),
    col("ino", Int, 52, |r| int(r.event.fields.sys.ino)),
    col("repeat", Int, 48, |r| int(r.event.repeat)),
    col("bytes", Int, 39, |r| {
        int(r.event.fields.io.map(|i| i.write_bytes as i64))
    }),
    col("count", Int, 40, |r| {
        int(r.event.fields.io.map(|i| i.write_calls as i64))
    }),
    col("read_bytes", Int, 41, |r| {
        int(r.event.fields.io.map(|i| i.read_bytes as i64))
    }),
    col("read_count", Int, 42, |r| {
        int(r.event.fields.io.map(|i| i.read_calls as i64))
    }),
    col("old_path", Text, 35, |r| {
        text(r.event.fields.sys.old_path.as_deref())
    }),
    col("old_path_as_given", Text, 36, |r| {
        text(r.event.fields.sys.old_path_as_given.as_deref())
    }),
    col("new_path", Text, 37, |r| {
        text(r.event.fields.sys.new_path.as_deref())
    }),
    col("new_path_as_given", Text, 38, |r| {
        text(r.event.fields.sys.new_path_as_given.as_deref())
    }),
    col("family", Text, 43, |r| text(r.event.fields.sys.family)),
    col("addr", Text, 44, |r| {
        text(r.event.fields.sys.addr.as_deref())
    }),
    col("port", Int, 45, |r| int(r.event.fields.sys.port)),
    col("query", Text, 46, |r| {
        text(r.event.fields.sys.query.as_deref())
    }),
    col("tcp_state", Text, 47, |r| {
        text(r.event.fields.tcp_state.map(TcpOutcome::as_str))
    }),
    col("child_pid", Int, 13, |r| int(r.event.fields.child_pid)),
    Column {
        name: "child_process_id",
        ty: Int,
        view: Some(14),
        exported: false,
        get: Some(|r| int(r.event.fields.child_process_id)),
    },
    col("filename", Text, 15, |r| {
        text(r.event.fields.filename.as_deref())
    }),
    col("argv", Text, 16, |r| text(r.event.fields.argv.as_deref())),
    col("argc", Int, 17, |r| int(r.event.fields.argc)),
    col("argv_truncated", Bool, 18, |r| {
        int(r.event.fields.argv_truncated)
    }),
    col("argv_incomplete", Bool, 19, |r| {
        int(r.event.fields.argv_incomplete)
    }),
    col("cwd", Text, 20, |r| text(r.event.fields.cwd.as_deref())),
    col("cwd_status", Text, 21, |r| {
        text(r.event.fields.cwd_status.map(WalkStatus::as_str))
    }),
    col("exe", Text, 22, |r| text(r.event.fields.exe.as_deref())),
    col("exe_status", Text, 23, |r| {
        text(r.event.fields.exe_status.map(WalkStatus::as_str))
    }),
    col("exit_code", Int, 26, |r| int(r.event.fields.exit_code)),
    col("signal", Int, 27, |r| int(r.event.fields.signal)),
    col("core_dumped", Bool, 28, |r| int(r.event.fields.core_dumped)),
];

/// The columns of `events` (the view, and the table of earlier captures),
/// in their order.
pub(crate) fn event_columns() -> Vec<&'static Column> {
    let mut cols: Vec<&Column> = COLUMNS.iter().filter(|c| c.view.is_some()).collect();
    cols.sort_by_key(|c| c.view);
    cols
}

/// The columns of `export`'s JSON lines, in `events` order.
pub(crate) fn exported_columns() -> impl Iterator<Item = &'static Column> {
    event_columns().into_iter().filter(|c| c.exported)
}

/// The columns the recorder binds, in storage order.
fn recorder_columns() -> impl Iterator<Item = &'static Column> {
    COLUMNS.iter().filter(|c| c.get.is_some())
}

/// The summary field each parameter of the recorder's INSERT fills, by
/// parameter number (from 1; index 0 is unused).
pub(crate) fn summary_slots() -> Vec<Option<super::summary::Slot>> {
    std::iter::once(None)
        .chain(recorder_columns().map(|c| super::summary::Slot::of(c.name)))
        .collect()
}

/// `INSERT INTO event_rows` with the columns the recorder writes, in
/// storage order.
pub(crate) fn insert_row_sql() -> String {
    let cols: Vec<&str> = recorder_columns().map(|c| c.name).collect();
    let params: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO event_rows ({}) VALUES ({})",
        cols.join(", "),
        params.join(", ")
    )
}

/// Each value of the recorder's INSERT (`insert_row_sql`), by parameter
/// number (from 1), with whether it is text to intern.
pub(crate) fn row_values<'r>(
    row: &'r StoredRow<'r>,
) -> impl Iterator<Item = (usize, Value<'r>)> + 'r {
    recorder_columns().enumerate().filter_map(move |(i, c)| {
        let get = c.get?;
        Some((i + 1, get(row)))
    })
}

/// A column of `event_rows` as stored, for readers that resolve text ids
/// and clock anchors themselves (`export`): the view's expression, but a
/// text column's raw value (a `strings` id or the text inline).
pub(crate) fn raw_expr(c: &Column) -> String {
    match c.name {
        "tid" => "COALESCE(r.tid, r.pid)".into(),
        n => format!("r.{n}"),
    }
}

/// What a reader of `events` sees for one column.
fn view_expr(c: &Column) -> String {
    match c.name {
        "wall_ns" => "COALESCE(r.wall_ns, r.mono_ns + \
             (SELECT a.wall_ns - a.mono_ns FROM clock_anchors a WHERE a.id = r.anchor))"
            .into(),
        "tid" => "COALESCE(r.tid, r.pid)".into(),
        n if c.ty.is_text() => format!(
            "CASE typeof(r.{n}) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s \
             ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END \
             FROM strings p WHERE p.id = r.{n}) ELSE r.{n} END"
        ),
        n => format!("r.{n}"),
    }
}

/// `event_rows`, the `events` view over it, and the triggers that let rows
/// be written and changed through the view.
pub(crate) fn schema() -> String {
    let mut sql = String::from("CREATE TABLE event_rows (");
    for (i, c) in COLUMNS.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        sql.push_str(&format!("{sep}\n    {}{}", c.name, c.ty.ddl()));
    }
    sql.push_str("\n);\nCREATE VIEW events AS SELECT\n    ");
    let view = event_columns();
    let exprs: Vec<String> = view
        .iter()
        .map(|c| format!("{} AS {}", view_expr(c), c.name))
        .collect();
    sql.push_str(&exprs.join(",\n    "));
    sql.push_str("\nFROM event_rows r;\n");
    let names: Vec<&str> = view.iter().map(|c| c.name).collect();
    let cols = names.join(", ");
    let news: Vec<String> = names.iter().map(|c| format!("NEW.{c}")).collect();
    sql.push_str(&format!(
        "CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN\n    \
         INSERT INTO event_rows ({cols}) VALUES ({});\nEND;\n",
        news.join(", ")
    ));
    let sets: Vec<String> = names.iter().map(|c| format!("{c} = NEW.{c}")).collect();
    sql.push_str(&format!(
        "CREATE TRIGGER events_update INSTEAD OF UPDATE ON events BEGIN\n    \
         UPDATE event_rows SET anchor = NULL, {} WHERE id = OLD.id;\nEND;\n",
        sets.join(", ")
    ));
    sql.push_str(
        "CREATE TRIGGER events_delete INSTEAD OF DELETE ON events BEGIN\n    \
         DELETE FROM event_rows WHERE id = OLD.id;\nEND;\n",
    );
    sql
}

/// How a capture stores its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventsLayout {
    /// `events` is a table with the text inline (captures before interning).
    Table,
    /// `events` is a view over `event_rows` and `strings`.
    Interned,
}

impl EventsLayout {
    pub(crate) fn detect(conn: &Connection) -> rusqlite::Result<Self> {
        let n: i64 = conn.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('event_rows', 'strings')",
            [],
            |r| r.get(0),
        )?;
        Ok(if n == 2 { Self::Interned } else { Self::Table })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(crate::store::SCHEMA).unwrap();
        c.execute_batch(&schema()).unwrap();
        c
    }

    /// The capture format: what `store::create` executes must stay this,
    /// byte for byte (captures of every earlier build read the same).
    #[test]
    fn the_schema_is_the_capture_format_byte_for_byte() {
        let ddl = format!(
            "{}{}{}{}",
            crate::store::SCHEMA,
            schema(),
            crate::store::sessions::SCHEMA,
            crate::store::messages::SCHEMA
        );
        assert_eq!(ddl, include_str!("capture-format.sql"));
    }

    #[test]
    fn the_recorder_inserts_every_stored_column_but_the_view_s_own() {
        let cols = "mono_ns,anchor,kind,cpu,seq,pid,tid,ppid,uid,gid,comm,process_id,result,fd,path,path_as_given,path_status,errno,flags,mode,real_path,real_path_status,dev,ino,repeat,bytes,count,read_bytes,read_count,old_path,old_path_as_given,new_path,new_path_as_given,family,addr,port,query,tcp_state,child_pid,child_process_id,filename,argv,argc,argv_truncated,argv_incomplete,cwd,cwd_status,exe,exe_status,exit_code,signal,core_dumped";
        let params: Vec<String> = (1..=52).map(|i| format!("?{i}")).collect();
        assert_eq!(
            insert_row_sql(),
            format!(
                "INSERT INTO event_rows ({}) VALUES ({})",
                cols.replace(',', ", "),
                params.join(", ")
            )
        );
    }

    #[test]
    fn the_view_has_the_columns_of_the_old_table() {
        let c = capture();
        let st = c.prepare("SELECT * FROM events").unwrap();
        let names: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
        let view: Vec<&str> = event_columns().iter().map(|c| c.name).collect();
        assert_eq!(names, view);
        drop(st);
        // Every stored column is an `events` column or one of the layout's own.
        for c in &COLUMNS {
            assert!(c.view.is_some() || c.name == "anchor", "{}", c.name);
        }
        // View positions are 0..n, each once.
        let mut pos: Vec<u8> = COLUMNS.iter().filter_map(|c| c.view).collect();
        pos.sort();
        assert_eq!(pos, (0..53).collect::<Vec<u8>>());
        assert_eq!(EventsLayout::detect(&c).unwrap(), EventsLayout::Interned);
    }

    #[test]
    fn interned_rows_and_rows_written_through_the_view_read_the_same() {
        let c = capture();
        c.execute_batch(
            "INSERT INTO clock_anchors (id, label, mono_ns, wall_ns) VALUES (7, 'start', 100, 5000);
             INSERT INTO strings (id, s, prefix) VALUES (1, 'openat', NULL), (2, 'sh', NULL),
                 (9, '/w/', NULL), (3, 'a.txt', 9), (4, '5', NULL);
             INSERT INTO event_rows (mono_ns, anchor, kind, cpu, seq, pid, ppid, uid, gid, comm,
                 result, path, path_as_given)
             VALUES (150, 7, 1, 0, 1, 42, 1, 1000, 1000, 2, 3, 3, 4);
             INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, tid, ppid, uid, gid, comm,
                 result, path, path_as_given)
             VALUES (160, 5060, 'openat', 0, 2, 42, 43, 1, 1000, 1000, 'sh', 3, '/w/a.txt', '5');",
        )
        .unwrap();
        let rows = |c: &Connection| -> Vec<(i64, i64, String, i64, String, String, String)> {
            let mut st = c
                .prepare(
                    "SELECT mono_ns, wall_ns, kind, tid, comm, path, path_as_given FROM events ORDER BY id",
                )
                .unwrap();
            st.query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
        };
        let s = |x: &str| x.to_string();
        assert_eq!(
            rows(&c),
            vec![
                (150, 5050, s("openat"), 42, s("sh"), s("/w/a.txt"), s("5")),
                (160, 5060, s("openat"), 43, s("sh"), s("/w/a.txt"), s("5")),
            ]
        );
        // UPDATE and DELETE through the view (tests and benches do both).
        c.execute_batch(
            "UPDATE events SET path = '/w/b.txt', comm = 'bash' WHERE id = 1;
             DELETE FROM events WHERE id = 2;",
        )
        .unwrap();
        assert_eq!(
            rows(&c),
            vec![(150, 5050, s("openat"), 42, s("bash"), s("/w/b.txt"), s("5"))]
        );
    }
}
