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

/// How an `events` column is stored in `event_rows`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Col {
    /// Same column, same value.
    Plain,
    /// A `strings` id, or the text inline.
    Text,
}

/// `event_rows`, in storage order: the columns most rows fill first, so
/// that the NULLs at the end of a row cost nothing.
const ROW_COLUMNS: [(&str, Col); 53] = [
    ("mono_ns", Col::Plain),
    ("anchor", Col::Plain),
    ("wall_ns", Col::Plain),
    ("kind", Col::Text),
    ("cpu", Col::Plain),
    ("seq", Col::Plain),
    ("pid", Col::Plain),
    ("tid", Col::Plain),
    ("ppid", Col::Plain),
    ("uid", Col::Plain),
    ("gid", Col::Plain),
    ("comm", Col::Text),
    ("process_id", Col::Plain),
    ("result", Col::Plain),
    ("fd", Col::Plain),
    ("path", Col::Text),
    ("path_as_given", Col::Text),
    ("path_status", Col::Text),
    ("errno", Col::Text),
    ("flags", Col::Text),
    ("mode", Col::Plain),
    ("real_path", Col::Text),
    ("real_path_status", Col::Text),
    ("dev", Col::Plain),
    ("ino", Col::Plain),
    ("repeat", Col::Plain),
    ("bytes", Col::Plain),
    ("count", Col::Plain),
    ("read_bytes", Col::Plain),
    ("read_count", Col::Plain),
    ("old_path", Col::Text),
    ("old_path_as_given", Col::Text),
    ("new_path", Col::Text),
    ("new_path_as_given", Col::Text),
    ("family", Col::Text),
    ("addr", Col::Text),
    ("port", Col::Plain),
    ("query", Col::Text),
    ("tcp_state", Col::Text),
    ("child_pid", Col::Plain),
    ("child_process_id", Col::Plain),
    ("filename", Col::Text),
    ("argv", Col::Text),
    ("argc", Col::Plain),
    ("argv_truncated", Col::Plain),
    ("argv_incomplete", Col::Plain),
    ("cwd", Col::Text),
    ("cwd_status", Col::Text),
    ("exe", Col::Text),
    ("exe_status", Col::Text),
    ("exit_code", Col::Plain),
    ("signal", Col::Plain),
    ("core_dumped", Col::Plain),
];

/// The columns of `events` (the view, and the table of earlier captures),
/// in their order.
const EVENT_COLUMNS: [&str; 53] = [
    "id",
    "mono_ns",
    "wall_ns",
    "kind",
    "cpu",
    "seq",
    "pid",
    "tid",
    "ppid",
    "uid",
    "gid",
    "comm",
    "process_id",
    "child_pid",
    "child_process_id",
    "filename",
    "argv",
    "argc",
    "argv_truncated",
    "argv_incomplete",
    "cwd",
    "cwd_status",
    "exe",
    "exe_status",
    "result",
    "errno",
    "exit_code",
    "signal",
    "core_dumped",
    "fd",
    "path",
    "path_as_given",
    "path_status",
    "flags",
    "mode",
    "old_path",
    "old_path_as_given",
    "new_path",
    "new_path_as_given",
    "bytes",
    "count",
    "read_bytes",
    "read_count",
    "family",
    "addr",
    "port",
    "query",
    "tcp_state",
    "repeat",
    "real_path",
    "real_path_status",
    "dev",
    "ino",
];

fn stored(name: &str) -> Col {
    ROW_COLUMNS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(Col::Plain, |(_, c)| *c)
}

/// Physical columns the recorder writes (all but `id` and `wall_ns`), in
/// `ROW_COLUMNS` order.
pub(crate) fn recorder_columns() -> impl Iterator<Item = &'static str> {
    ROW_COLUMNS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| *n != "wall_ns")
}

/// What a reader of `events` sees for one column.
fn view_expr(name: &str) -> String {
    match (name, stored(name)) {
        ("id", _) => "r.id".into(),
        ("wall_ns", _) => "COALESCE(r.wall_ns, r.mono_ns + \
             (SELECT a.wall_ns - a.mono_ns FROM clock_anchors a WHERE a.id = r.anchor))"
            .into(),
        ("tid", _) => "COALESCE(r.tid, r.pid)".into(),
        (n, Col::Text) => format!(
            "CASE typeof(r.{n}) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s \
             ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END \
             FROM strings p WHERE p.id = r.{n}) ELSE r.{n} END"
        ),
        (n, Col::Plain) => format!("r.{n}"),
    }
}

/// `event_rows`, the `events` view over it, and the triggers that let rows
/// be written and changed through the view.
pub(crate) fn schema() -> String {
    let mut sql = String::from("CREATE TABLE event_rows (\n    id INTEGER PRIMARY KEY");
    for (name, col) in ROW_COLUMNS {
        // Text columns have no type: they hold an id or the text itself.
        let ty = match (name, col) {
            ("mono_ns" | "cpu" | "seq" | "pid" | "ppid" | "uid" | "gid", _) => " INTEGER NOT NULL",
            ("kind" | "comm", _) => " NOT NULL",
            (_, Col::Text) => "",
            (_, Col::Plain) => " INTEGER",
        };
        sql.push_str(&format!(",\n    {name}{ty}"));
    }
    sql.push_str("\n);\nCREATE VIEW events AS SELECT\n    ");
    let exprs: Vec<String> = EVENT_COLUMNS
        .iter()
        .map(|c| format!("{} AS {c}", view_expr(c)))
        .collect();
    sql.push_str(&exprs.join(",\n    "));
    sql.push_str("\nFROM event_rows r;\n");
    let cols = EVENT_COLUMNS.join(", ");
    let news: Vec<String> = EVENT_COLUMNS.iter().map(|c| format!("NEW.{c}")).collect();
    sql.push_str(&format!(
        "CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN\n    \
         INSERT INTO event_rows ({cols}) VALUES ({});\nEND;\n",
        news.join(", ")
    ));
    let sets: Vec<String> = EVENT_COLUMNS
        .iter()
        .map(|c| format!("{c} = NEW.{c}"))
        .collect();
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

    #[test]
    fn the_view_has_the_columns_of_the_old_table() {
        let c = capture();
        let st = c.prepare("SELECT * FROM events").unwrap();
        let names: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
        assert_eq!(names, EVENT_COLUMNS);
        drop(st);
        // Every stored column is an `events` column or one of the layout's own.
        for (n, _) in ROW_COLUMNS {
            assert!(EVENT_COLUMNS.contains(&n) || n == "anchor", "{n}");
        }
        assert_eq!(ROW_COLUMNS.len(), EVENT_COLUMNS.len());
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
