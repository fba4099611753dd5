//! Wire evidence: each model exchange the relay (or a TLS probe) saw, raw
//! and decoded, beside the kernel's rows and the transcripts, never merged
//! into them (`docs/wire.md`).
//!
//! The raw bytes are the evidence (bounded by the relay's body limit, the
//! rest counted in `*_dropped`); `decoded` is `agentsight_wire::Exchange` as
//! JSON, computed when stored so readers and SQL share one reading.

use agentsight_wire::{Exchange, RawExchange, RawMessage, Via};
use rusqlite::{Connection, params};

use super::StoreError;

/// Created with every new capture and by the first exchange stored into an
/// older one; a capture without the table has no wire layer.
pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS wire_exchanges (
    id INTEGER PRIMARY KEY,
    via TEXT NOT NULL,
    conn INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    route TEXT NOT NULL,
    upstream TEXT NOT NULL,
    client_port INTEGER NOT NULL,
    request_head BLOB NOT NULL,
    request_body BLOB NOT NULL,
    request_body_dropped INTEGER NOT NULL,
    request_first_ns INTEGER NOT NULL,
    request_last_ns INTEGER NOT NULL,
    request_reads TEXT NOT NULL,
    response_head BLOB,
    response_body BLOB,
    response_body_dropped INTEGER,
    response_first_ns INTEGER,
    response_last_ns INTEGER,
    response_reads TEXT,
    error TEXT,
    decoded TEXT NOT NULL,
    process_id INTEGER
);
CREATE TABLE IF NOT EXISTS wire_notes (
    id INTEGER PRIMARY KEY,
    process_id INTEGER,
    conn INTEGER NOT NULL,
    note TEXT NOT NULL
);
"#;

/// One stored exchange: the raw capture and its decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireExchangeRow {
    /// `wire_exchanges.id`: how findings and views cite it.
    pub id: i64,
    pub raw: RawExchange,
    pub decoded: Exchange,
    /// The `processes` row that sent it: known for TLS exchanges (their
    /// calls' process); `None` for the relay's (its kernel rows name the
    /// agent by `client_port`) and in captures older than the column.
    pub process_id: Option<i64>,
}

impl WireExchangeRow {
    /// Whether this exchange is a call to a model: every relayed one (the
    /// relay forwards only to model upstreams), and a TLS one whose request
    /// is a model API's (Messages, Responses, Chat Completions,
    /// generateContent). Any other HTTPS of a tracked process (a tool's
    /// `curl`, `git`) is kept and shown, but is not model traffic.
    pub fn is_model_call(&self) -> bool {
        self.raw.via != Via::Tls
            || self
                .decoded
                .api
                .is_some_and(|a| a != agentsight_wire::Api::Other)
    }
}

/// A TLS stream (one connection of one process) that held no HTTP/1.1, or
/// bytes after its last exchange: what `agentsight_wire::tls::split` noted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireNote {
    pub process_id: Option<i64>,
    /// The TLS library's connection object of those calls (`tls_records.conn`).
    pub conn: u64,
    pub note: String,
}

/// A TLS exchange to store: the raw exchange, its decoding, its process.
pub struct TlsExchange {
    pub process_id: i64,
    pub raw: RawExchange,
    pub decoded: Exchange,
}

/// Stores one exchange (the writer's thread calls this).
pub(crate) fn insert(
    conn: &Connection,
    raw: &RawExchange,
    decoded: &Exchange,
) -> rusqlite::Result<()> {
    ensure_schema(conn)?;
    insert_row(conn, raw, decoded, None)
}

/// The tables, and `process_id` in a `wire_exchanges` made before it.
fn ensure_schema(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    if !has_process_id(conn)? {
        conn.execute_batch("ALTER TABLE wire_exchanges ADD COLUMN process_id INTEGER")?;
    }
    Ok(())
}

fn insert_row(
    conn: &Connection,
    raw: &RawExchange,
    decoded: &Exchange,
    process_id: Option<i64>,
) -> rusqlite::Result<()> {
    let reads = |m: &RawMessage| serde_json::to_string(&m.reads).unwrap_or_default();
    let resp = raw.response.as_ref();
    conn.execute(
        "INSERT INTO wire_exchanges (via, conn, seq, route, upstream, client_port,
         request_head, request_body, request_body_dropped, request_first_ns, request_last_ns,
         request_reads, response_head, response_body, response_body_dropped, response_first_ns,
         response_last_ns, response_reads, error, decoded, process_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
         ?18, ?19, ?20, ?21)",
        params![
            via_word(raw.via),
            raw.conn as i64,
            raw.seq,
            raw.route,
            raw.upstream,
            raw.client_port,
            raw.request.head,
            raw.request.body,
            raw.request.body_dropped as i64,
            raw.request.first_ns as i64,
            raw.request.last_ns as i64,
            reads(&raw.request),
            resp.map(|m| &m.head),
            resp.map(|m| &m.body),
            resp.map(|m| m.body_dropped as i64),
            resp.map(|m| m.first_ns as i64),
            resp.map(|m| m.last_ns as i64),
            resp.map(reads),
            raw.error,
            serde_json::to_string(decoded).unwrap_or_default(),
            process_id,
        ],
    )?;
    Ok(())
}

fn via_word(v: Via) -> &'static str {
    match v {
        Via::Relay => "relay",
        Via::Tls => "tls",
    }
}

fn table_exists(conn: &Connection) -> rusqlite::Result<bool> {
    named_table_exists(conn, "wire_exchanges")
}

fn named_table_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// Whether `wire_exchanges` has `process_id` (captures before it do not).
fn has_process_id(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info('wire_exchanges') WHERE name = 'process_id'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

impl super::CaptureRw {
    /// Stores one TLS call as the recorder would (tests of what derives
    /// from `tls_records`, outside the store, need no capture types).
    #[cfg(test)]
    pub(crate) fn tls_call_for_tests(
        &self,
        process_id: i64,
        mono_ns: u64,
        conn: u64,
        func: u32,
        data: &[u8],
    ) {
        use crate::capture::decode::{EventHeader, TlsData};
        self.conn().execute_batch(super::tls::SCHEMA).unwrap();
        let h = EventHeader {
            kind: agentsight_common::EventKind::Tls,
            cpu: 0,
            seq: 0,
            mono_ns,
            tid: 70,
            pid: 70,
            ppid: 1,
            uid: 0,
            gid: 0,
            comm: "curl".into(),
        };
        let d = TlsData {
            conn,
            entry_ns: mono_ns - 1,
            func,
            fd: Some(5),
            len: data.len() as u64,
            data: data.to_vec(),
            read_failed: false,
        };
        super::tls::insert_record(self.conn(), process_id, 1, &h, &d).unwrap();
    }

    /// Replaces the capture's TLS exchanges and notes (enrichment derives
    /// them from `tls_records`; run again, it leaves one set), in one
    /// transaction. An older capture gets the `process_id` column first.
    pub fn replace_tls_exchanges(
        &self,
        exchanges: &[TlsExchange],
        notes: &[WireNote],
    ) -> Result<(), StoreError> {
        let qe = |e| self.query_err(e);
        let conn = self.conn();
        ensure_schema(conn).map_err(qe)?;
        let t = conn.unchecked_transaction().map_err(qe)?;
        t.execute("DELETE FROM wire_exchanges WHERE via = 'tls'", [])
            .map_err(qe)?;
        t.execute("DELETE FROM wire_notes", []).map_err(qe)?;
        for x in exchanges {
            insert_row(&t, &x.raw, &x.decoded, Some(x.process_id)).map_err(qe)?;
        }
        for n in notes {
            t.execute(
                "INSERT INTO wire_notes (process_id, conn, note) VALUES (?1, ?2, ?3)",
                params![n.process_id, n.conn as i64, n.note],
            )
            .map_err(qe)?;
        }
        t.commit().map_err(qe)
    }
}

impl super::CaptureReader<'_> {
    /// Every stored exchange in the order stored (when each finished); empty
    /// for a capture recorded without `--wire`. A row whose stored decoding
    /// is not readable is decoded again from its raw bytes.
    pub fn wire_exchanges(&self) -> Result<Vec<WireExchangeRow>, StoreError> {
        let qe = |e| self.query_err(e);
        if !table_exists(self.conn).map_err(qe)? {
            return Ok(Vec::new());
        }
        let process_id = if has_process_id(self.conn).map_err(qe)? {
            "process_id"
        } else {
            "NULL"
        };
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT id, via, conn, seq, route, upstream, client_port, request_head,
                 request_body, request_body_dropped, request_first_ns, request_last_ns,
                 request_reads, response_head, response_body, response_body_dropped,
                 response_first_ns, response_last_ns, response_reads, error, decoded,
                 {process_id} FROM wire_exchanges ORDER BY id"
            ))
            .map_err(qe)?;
        let rows = st.query_map([], row_of).map_err(qe)?;
        rows.map(|r| r.map_err(qe)).collect()
    }

    /// The largest connection number of the relay's exchanges (0 when none):
    /// TLS connections are numbered after it, so `conn` stays unique.
    pub fn wire_relay_max_conn(&self) -> Result<u64, StoreError> {
        let qe = |e| self.query_err(e);
        if !table_exists(self.conn).map_err(qe)? {
            return Ok(0);
        }
        self.conn
            .query_row(
                "SELECT coalesce(max(conn), 0) FROM wire_exchanges WHERE via = 'relay'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
            .map_err(qe)
    }

    /// The notes of TLS streams not read as HTTP/1.1, in the order stored.
    pub fn wire_notes(&self) -> Result<Vec<WireNote>, StoreError> {
        let qe = |e| self.query_err(e);
        if !named_table_exists(self.conn, "wire_notes").map_err(qe)? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare("SELECT process_id, conn, note FROM wire_notes ORDER BY id")
            .map_err(qe)?;
        let rows = st
            .query_map([], |r| {
                Ok(WireNote {
                    process_id: r.get(0)?,
                    conn: r.get::<_, i64>(1)? as u64,
                    note: r.get(2)?,
                })
            })
            .map_err(qe)?;
        rows.map(|r| r.map_err(qe)).collect()
    }

    /// How many exchanges the capture holds (0 without a wire layer).
    pub fn wire_exchange_count(&self) -> Result<u64, StoreError> {
        let qe = |e| self.query_err(e);
        if !table_exists(self.conn).map_err(qe)? {
            return Ok(0);
        }
        self.conn
            .query_row("SELECT count(*) FROM wire_exchanges", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n as u64)
            .map_err(qe)
    }
}

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<WireExchangeRow> {
    let reads = |s: Option<String>| -> Vec<(u64, u64)> {
        s.and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default()
    };
    let response = match r.get::<_, Option<Vec<u8>>>(13)? {
        None => None,
        Some(head) => Some(RawMessage {
            head,
            body: r.get::<_, Option<Vec<u8>>>(14)?.unwrap_or_default(),
            body_dropped: r.get::<_, Option<i64>>(15)?.unwrap_or(0) as u64,
            first_ns: r.get::<_, Option<i64>>(16)?.unwrap_or(0) as u64,
            last_ns: r.get::<_, Option<i64>>(17)?.unwrap_or(0) as u64,
            reads: reads(r.get(18)?),
        }),
    };
    let raw = RawExchange {
        via: if r.get::<_, String>(1)? == "tls" {
            Via::Tls
        } else {
            Via::Relay
        },
        conn: r.get::<_, i64>(2)? as u64,
        seq: r.get(3)?,
        route: r.get(4)?,
        upstream: r.get(5)?,
        client_port: r.get(6)?,
        request: RawMessage {
            head: r.get(7)?,
            body: r.get(8)?,
            body_dropped: r.get::<_, i64>(9)? as u64,
            first_ns: r.get::<_, i64>(10)? as u64,
            last_ns: r.get::<_, i64>(11)? as u64,
            reads: reads(r.get(12)?),
        },
        response,
        error: r.get(19)?,
    };
    let decoded = serde_json::from_str(&r.get::<_, String>(20)?).unwrap_or_else(|_| {
        agentsight_wire::decode::decode(&raw, &agentsight_wire::decode::Limits::default()).exchange
    });
    Ok(WireExchangeRow {
        id: r.get(0)?,
        raw,
        decoded,
        process_id: r.get(21)?,
    })
}

#[cfg(test)]
mod tests {
    use agentsight_wire::{Api, RawMessage, Via};

    use super::*;
    use crate::store::CaptureRw;

    fn raw(via: Via, conn: u64) -> RawExchange {
        RawExchange {
            via,
            conn,
            seq: 0,
            route: "r".into(),
            upstream: String::new(),
            client_port: 0,
            request: RawMessage {
                head: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
                ..RawMessage::default()
            },
            response: None,
            error: None,
        }
    }

    #[test]
    fn a_capture_without_the_process_column_is_read_and_extended() {
        let dir = tempfile::tempdir().unwrap();
        let rw = CaptureRw::create(&dir.path().join("cap.db")).unwrap();
        // The table as captures before `process_id` have it, without `wire_notes`.
        let old = SCHEMA[..SCHEMA
            .find("CREATE TABLE IF NOT EXISTS wire_notes")
            .unwrap()]
            .replace(",\n    process_id INTEGER\n);", "\n);");
        rw.conn()
            .execute_batch(&format!(
                "DROP TABLE wire_exchanges; DROP TABLE wire_notes; {old}"
            ))
            .unwrap();
        assert!(!has_process_id(rw.conn()).unwrap());
        let x = Exchange::default();
        rw.conn()
            .execute(
                "INSERT INTO wire_exchanges (via, conn, seq, route, upstream, client_port,
                 request_head, request_body, request_body_dropped, request_first_ns,
                 request_last_ns, request_reads, decoded)
                 VALUES ('relay', 3, 0, 'r', '', 0, x'', x'', 0, 0, 0, '[]', '{}')",
                [],
            )
            .unwrap();
        let reader = rw.reader();
        let rows = reader.wire_exchanges().unwrap();
        assert_eq!((rows.len(), rows[0].process_id), (1, None));
        assert_eq!(reader.wire_notes().unwrap(), vec![]);
        assert_eq!(reader.wire_relay_max_conn().unwrap(), 3);
        let tls = TlsExchange {
            process_id: 7,
            raw: raw(Via::Tls, 4),
            decoded: x.clone(),
        };
        let note = WireNote {
            process_id: Some(7),
            conn: 9,
            note: "n".into(),
        };
        rw.replace_tls_exchanges(&[tls], std::slice::from_ref(&note))
            .unwrap();
        // Again: replaced, not added.
        let tls = TlsExchange {
            process_id: 7,
            raw: raw(Via::Tls, 4),
            decoded: x.clone(),
        };
        rw.replace_tls_exchanges(&[tls], std::slice::from_ref(&note))
            .unwrap();
        insert(rw.conn(), &raw(Via::Relay, 5), &x).unwrap();
        let reader = rw.reader();
        let rows = reader.wire_exchanges().unwrap();
        assert_eq!(
            rows.iter()
                .map(|r| (r.raw.via, r.raw.conn, r.process_id))
                .collect::<Vec<_>>(),
            vec![
                (Via::Relay, 3, None),
                (Via::Tls, 4, Some(7)),
                (Via::Relay, 5, None)
            ]
        );
        assert_eq!(reader.wire_notes().unwrap(), vec![note]);
    }

    #[test]
    fn a_relayed_exchange_is_a_model_call_a_tls_one_only_by_its_api() {
        let row = |via, api| WireExchangeRow {
            id: 1,
            raw: raw(via, 1),
            decoded: Exchange {
                api,
                ..Exchange::default()
            },
            process_id: None,
        };
        let judged: Vec<bool> = [
            (Via::Relay, None),
            (Via::Relay, Some(Api::Other)),
            (Via::Tls, Some(Api::AnthropicMessages)),
            (Via::Tls, Some(Api::OpenaiChat)),
            (Via::Tls, Some(Api::Other)),
            (Via::Tls, None),
        ]
        .into_iter()
        .map(|(via, api)| row(via, api).is_model_call())
        .collect();
        assert_eq!(judged, vec![true, true, true, true, false, false]);
    }
}
