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
    decoded TEXT NOT NULL
);
"#;

/// One stored exchange: the raw capture and its decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireExchangeRow {
    /// `wire_exchanges.id`: how findings and views cite it.
    pub id: i64,
    pub raw: RawExchange,
    pub decoded: Exchange,
}

/// Stores one exchange (the writer's thread calls this).
pub(crate) fn insert(
    conn: &Connection,
    raw: &RawExchange,
    decoded: &Exchange,
) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    let reads = |m: &RawMessage| serde_json::to_string(&m.reads).unwrap_or_default();
    let resp = raw.response.as_ref();
    conn.execute(
        "INSERT INTO wire_exchanges (via, conn, seq, route, upstream, client_port,
         request_head, request_body, request_body_dropped, request_first_ns, request_last_ns,
         request_reads, response_head, response_body, response_body_dropped, response_first_ns,
         response_last_ns, response_reads, error, decoded)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
         ?18, ?19, ?20)",
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
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'wire_exchanges'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
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
        let mut st = self
            .conn
            .prepare(
                "SELECT id, via, conn, seq, route, upstream, client_port, request_head,
                 request_body, request_body_dropped, request_first_ns, request_last_ns,
                 request_reads, response_head, response_body, response_body_dropped,
                 response_first_ns, response_last_ns, response_reads, error, decoded
                 FROM wire_exchanges ORDER BY id",
            )
            .map_err(qe)?;
        let rows = st.query_map([], row_of).map_err(qe)?;
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
    })
}
