//! TLS plaintext captured by symbol (uprobes on OpenSSL/BoringSSL-compatible
//! and GnuTLS read/write functions, `capture::tls`): one row per library
//! call in `tls_records`, and per recorded process what the capture could
//! and could not decrypt in `tls_processes` ("TLS not decrypted: no
//! supported library in EXE" is a row, never a silence).
//!
//! These are wire evidence kept beside the kernel's `events`, never in it;
//! `agentsight_wire::RawExchange { via: Tls, .. }` is assembled from them by
//! (process, conn) stream. `docs/wire.md` describes both tables.

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;
pub use crate::capture::tls::TlsProcessNote;
use crate::capture::{decode::EventHeader, decode::TlsData, model::ProcessId};

/// Created by the first TLS row of a capture; a capture without the tables
/// has no TLS layer.
pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS tls_records (
    id INTEGER PRIMARY KEY,
    process_id INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    tid INTEGER NOT NULL,
    comm TEXT NOT NULL,
    anchor_id INTEGER NOT NULL,
    entry_mono_ns INTEGER NOT NULL,
    mono_ns INTEGER NOT NULL,
    func TEXT NOT NULL,
    direction TEXT NOT NULL,
    conn INTEGER NOT NULL,
    fd INTEGER,
    len INTEGER NOT NULL,
    data BLOB NOT NULL,
    cut INTEGER NOT NULL,
    read_failed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tls_processes (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    exe TEXT,
    decrypted INTEGER NOT NULL,
    libraries TEXT NOT NULL,
    note TEXT NOT NULL
);
"#;

/// One stored TLS call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsRecordRow {
    pub id: i64,
    pub process_id: i64,
    pub pid: u32,
    pub tid: u32,
    pub mono_ns: u64,
    pub entry_mono_ns: u64,
    /// The library function (`SSL_write`, `gnutls_record_recv`, …).
    pub func: String,
    /// `send` or `recv`.
    pub direction: String,
    pub conn: u64,
    pub fd: Option<i32>,
    pub len: u64,
    pub data: Vec<u8>,
    /// Bytes of the call not kept (`len - data.len()`).
    pub cut: u64,
    pub read_failed: bool,
}

/// The symbol of a `tls_fn` number (the number itself for one this build
/// does not know).
pub fn func_name(func: u32) -> String {
    agentsight_common::tls_fn::SYMBOLS
        .iter()
        .find(|(n, _)| *n == func)
        .map_or_else(|| format!("tls_fn_{func}"), |(_, s)| (*s).to_owned())
}

pub(crate) fn insert_record(
    conn: &Connection,
    process_id: ProcessId,
    anchor_id: i64,
    h: &EventHeader,
    d: &TlsData,
) -> rusqlite::Result<()> {
    let direction = if agentsight_common::tls_fn::is_send(d.func) {
        "send"
    } else {
        "recv"
    };
    let mut st = conn.prepare_cached(
        "INSERT INTO tls_records (process_id, pid, tid, comm, anchor_id, entry_mono_ns, mono_ns,
         func, direction, conn, fd, len, data, cut, read_failed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    )?;
    st.execute(params![
        process_id,
        h.pid,
        h.tid,
        h.comm,
        anchor_id,
        d.entry_ns as i64,
        h.mono_ns as i64,
        func_name(d.func),
        direction,
        d.conn as i64,
        d.fd,
        d.len as i64,
        d.data,
        d.len.saturating_sub(d.data.len() as u64) as i64,
        d.read_failed,
    ])?;
    Ok(())
}

/// Stores the notes (at the end of the recording, when every TLS row is
/// in). A process whose scans saw no TLS library but whose calls were
/// captured (it mapped the library after its last scan, e.g. a short
/// `curl`) is decrypted: its rows, not the scan, have the last word. A
/// process that ended before any scan is named by the executable its
/// exec recorded (the latest process row of that pid).
pub(crate) fn insert_processes(
    conn: &Connection,
    notes: &[TlsProcessNote],
) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    let mut calls = conn.prepare("SELECT count(*) FROM tls_records WHERE pid = ?1")?;
    let mut exec_exe = conn.prepare(
        "SELECT exe FROM processes WHERE pid = ?1 AND exe IS NOT NULL ORDER BY id DESC LIMIT 1",
    )?;
    let mut insert = conn.prepare(
        "INSERT INTO tls_processes (pid, exe, decrypted, libraries, note)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for n in notes {
        let mut n = n.clone();
        if n.exe.is_none() {
            n.exe = exec_exe
                .query_row([n.pid], |r| r.get::<_, String>(0))
                .optional()?;
            if let Some(exe) = &n.exe {
                n.note = n.note.replace(&crate::capture::tls::unread_exe(n.pid), exe);
            }
        }
        let captured: i64 = calls.query_row([n.pid], |r| r.get(0))?;
        let (decrypted, note) = if n.libraries.is_empty() && captured > 0 {
            let exe = n.exe.as_deref().unwrap_or("its executable");
            (
                true,
                format!(
                    "TLS decrypted: {captured} calls captured through a library mapped after the last scan of {exe}"
                ),
            )
        } else {
            (!n.libraries.is_empty(), n.note.clone())
        };
        insert.execute(params![
            n.pid,
            n.exe,
            decrypted,
            serde_json::to_string(&n.libraries).unwrap_or_default(),
            note,
        ])?;
    }
    Ok(())
}

fn has_tables(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tls_records'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

impl super::CaptureReader<'_> {
    /// Every TLS call captured, in the order stored; empty for a capture
    /// without a TLS layer.
    pub fn tls_records(&self) -> Result<Vec<TlsRecordRow>, StoreError> {
        let qe = |e| self.query_err(e);
        if !has_tables(self.conn).map_err(qe)? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT id, process_id, pid, tid, mono_ns, entry_mono_ns, func, direction, conn,
                 fd, len, data, cut, read_failed FROM tls_records ORDER BY id",
            )
            .map_err(qe)?;
        let rows = st
            .query_map([], |r| {
                Ok(TlsRecordRow {
                    id: r.get(0)?,
                    process_id: r.get(1)?,
                    pid: r.get(2)?,
                    tid: r.get(3)?,
                    mono_ns: r.get::<_, i64>(4)? as u64,
                    entry_mono_ns: r.get::<_, i64>(5)? as u64,
                    func: r.get(6)?,
                    direction: r.get(7)?,
                    conn: r.get::<_, i64>(8)? as u64,
                    fd: r.get(9)?,
                    len: r.get::<_, i64>(10)? as u64,
                    data: r.get(11)?,
                    cut: r.get::<_, i64>(12)? as u64,
                    read_failed: r.get(13)?,
                })
            })
            .map_err(qe)?;
        rows.map(|r| r.map_err(qe)).collect()
    }

    /// What was and was not decrypted, per recorded process.
    pub fn tls_processes(&self) -> Result<Vec<TlsProcessNote>, StoreError> {
        let qe = |e| self.query_err(e);
        if !has_tables(self.conn).map_err(qe)? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare("SELECT pid, exe, libraries, note FROM tls_processes ORDER BY id")
            .map_err(qe)?;
        let rows = st
            .query_map([], |r| {
                Ok(TlsProcessNote {
                    pid: r.get(0)?,
                    exe: r.get(1)?,
                    libraries: serde_json::from_str(&r.get::<_, String>(2)?).unwrap_or_default(),
                    note: r.get(3)?,
                })
            })
            .map_err(qe)?;
        rows.map(|r| r.map_err(qe)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that ended before any scan (its note has no executable)
    /// is named by the executable its exec recorded; a scanned one keeps
    /// its own.
    #[test]
    fn an_unscanned_process_is_named_by_its_exec() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::store::CaptureRw::create(&dir.path().join("c.db"))
            .unwrap()
            .into_conn();
        conn.execute_batch(
            "INSERT INTO processes (id, pid, start_mono_ns, origin, exe)
               VALUES (1, 7, 5, 'root', '/usr/bin/old'), (2, 7, 9, 'child', '/usr/bin/curl'),
                      (3, 8, 9, 'child', '/usr/bin/python3.11');",
        )
        .unwrap();
        let unscanned = |pid: u32, libraries: Vec<String>, note: String| TlsProcessNote {
            pid,
            exe: None,
            libraries,
            note,
        };
        let lib = "/usr/lib/x86_64-linux-gnu/libssl.so.3".to_owned();
        let notes = [
            unscanned(7, vec![lib.clone()], format!("TLS decrypted through {lib}")),
            unscanned(
                9,
                Vec::new(),
                format!(
                    "TLS not decrypted: {} ended before its libraries were listed",
                    crate::capture::tls::unread_exe(9)
                ),
            ),
            unscanned(
                8,
                Vec::new(),
                format!(
                    "TLS not decrypted: {} ended before its libraries were listed",
                    crate::capture::tls::unread_exe(8)
                ),
            ),
        ];
        insert_processes(&conn, &notes).unwrap();
        let got = super::super::CaptureReader::new(&conn, "c.db")
            .tls_processes()
            .unwrap();
        let got: Vec<(u32, Option<&str>, &str)> = got
            .iter()
            .map(|n| (n.pid, n.exe.as_deref(), n.note.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    7,
                    Some("/usr/bin/curl"),
                    "TLS decrypted through /usr/lib/x86_64-linux-gnu/libssl.so.3"
                ),
                (
                    9,
                    None,
                    "TLS not decrypted: pid 9 (executable not read) ended before its libraries were listed"
                ),
                (
                    8,
                    Some("/usr/bin/python3.11"),
                    "TLS not decrypted: /usr/bin/python3.11 ended before its libraries were listed"
                ),
            ]
        );
    }
}
