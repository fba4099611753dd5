//! TLS exchanges: the capture's `tls_records`, one stream pair per
//! (process, library connection object), split into HTTP/1.1 exchanges by
//! `agentsight_wire::tls::split` and stored in `wire_exchanges` with
//! `via = tls`, beside the relay's, so `show`, `correlate` and `audit` read
//! both alike.
//!
//! Stored as: `conn` numbered after the relay's largest (unique in the
//! capture), `route` `tls`, `upstream` `https://` + the request's `Host`
//! (empty when the request has none), `client_port` 0 (the capture records
//! no socket's local port), `process_id` the calls' process. What a stream
//! held that is not HTTP/1.1 (HTTP/2, other bytes) is a `wire_notes` row.

use std::collections::BTreeMap;

use agentsight_wire::tls::{Piece, split};

use crate::store::{
    CaptureRw, StoreError,
    tls::TlsRecordRow,
    wire::{TlsExchange, WireNote},
};

/// What was derived from the TLS rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TlsStored {
    /// (process, conn) streams read.
    pub streams: usize,
    pub exchanges: usize,
    pub notes: usize,
}

/// Splits and stores every TLS stream of the capture (replacing what an
/// earlier run stored); nothing without TLS rows.
pub fn store_tls_exchanges(rw: &CaptureRw) -> Result<TlsStored, StoreError> {
    let cap = rw.reader();
    let records = cap.tls_records()?;
    if records.is_empty() {
        return Ok(TlsStored::default());
    }
    let mut streams: BTreeMap<(i64, u64), Vec<&TlsRecordRow>> = BTreeMap::new();
    for r in &records {
        streams.entry((r.process_id, r.conn)).or_default().push(r);
    }
    let mut streams: Vec<_> = streams.into_iter().collect();
    for (_, rows) in &mut streams {
        // Each direction of a connection is in call order; the return time
        // orders them (the store's order only follows the ring's).
        rows.sort_by_key(|r| (r.mono_ns, r.id));
    }
    // Connections numbered in the order they began.
    streams.sort_by_key(|(key, rows)| (rows.first().map_or(0, |r| r.mono_ns), *key));
    let mut next = cap.wire_relay_max_conn()? + 1;
    let mut exchanges = Vec::new();
    let mut notes = Vec::new();
    for ((process_id, conn), rows) in &streams {
        let pieces = |dir: &str| -> Vec<Piece<'_>> {
            rows.iter()
                .filter(|r| r.direction == dir)
                .map(|r| Piece {
                    ns: r.mono_ns,
                    data: &r.data,
                    cut: r.cut,
                })
                .collect()
        };
        let got = split(
            &pieces("send"),
            &pieces("recv"),
            agentsight_wire::relay::DEFAULT_BODY_LIMIT,
        );
        if !got.exchanges.is_empty() {
            for mut raw in got.exchanges {
                raw.conn = next;
                let limits = agentsight_wire::decode::Limits::default();
                let decoded = agentsight_wire::decode::decode(&raw, &limits).exchange;
                exchanges.push(TlsExchange {
                    process_id: *process_id,
                    raw,
                    decoded,
                });
            }
            next += 1;
        }
        notes.extend(got.notes.into_iter().map(|note| WireNote {
            process_id: Some(*process_id),
            conn: *conn,
            note,
        }));
    }
    rw.replace_tls_exchanges(&exchanges, &notes)?;
    let stored = TlsStored {
        streams: streams.len(),
        exchanges: exchanges.len(),
        notes: notes.len(),
    };
    tracing::debug!(?stored, "TLS exchanges stored");
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use agentsight_common::tls_fn;
    use agentsight_wire::{RawExchange, RawMessage, Via};

    use super::*;

    fn call(rw: &CaptureRw, mono_ns: u64, conn: u64, func: u32, data: &[u8]) {
        rw.tls_call_for_tests(7, mono_ns, conn, func, data);
    }

    /// A relay exchange on connection 3, as the writer stores it.
    fn relay_row(rw: &CaptureRw) {
        let raw = RawExchange {
            via: Via::Relay,
            conn: 3,
            seq: 0,
            route: "ANTHROPIC_BASE_URL".into(),
            upstream: "https://api.anthropic.com".into(),
            client_port: 40000,
            request: RawMessage {
                head: b"GET /v1/models HTTP/1.1\r\n\r\n".to_vec(),
                ..RawMessage::default()
            },
            response: None,
            error: None,
        };
        let decoded = agentsight_wire::decode::decode(&raw, &Default::default()).exchange;
        crate::store::wire::insert(rw.conn(), &raw, &decoded).unwrap();
    }

    const REQ: &[u8] =
        b"POST /v1/messages HTTP/1.1\r\nHost: api.example\r\nContent-Length: 2\r\n\r\n{}";
    const RESP: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

    fn tls_rows(rw: &CaptureRw) {
        call(rw, 1_000, 0xabc, tls_fn::SSL_WRITE, &REQ[..30]);
        call(rw, 1_100, 0xabc, tls_fn::SSL_WRITE, &REQ[30..]);
        call(rw, 1_200, 0xabc, tls_fn::SSL_READ, RESP);
        call(
            rw,
            900,
            0xdef,
            tls_fn::SSL_WRITE,
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        );
    }

    #[test]
    fn tls_rows_become_exchanges_numbered_after_the_relay() {
        let dir = tempfile::tempdir().unwrap();
        let rw = CaptureRw::create(&dir.path().join("cap.db")).unwrap();
        relay_row(&rw);
        tls_rows(&rw);
        let want = TlsStored {
            streams: 2,
            exchanges: 1,
            notes: 1,
        };
        assert_eq!(store_tls_exchanges(&rw).unwrap(), want);
        // Run again: the same rows, not twice.
        assert_eq!(store_tls_exchanges(&rw).unwrap(), want);
        let rows = rw.reader().wire_exchanges().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].raw.via, rows[0].process_id), (Via::Relay, None));
        let t = &rows[1];
        assert_eq!(
            (
                t.raw.via,
                t.raw.conn,
                t.raw.seq,
                t.raw.route.as_str(),
                t.raw.upstream.as_str(),
                t.raw.client_port,
                t.process_id
            ),
            (Via::Tls, 4, 0, "tls", "https://api.example", 0, Some(7))
        );
        assert_eq!(
            (
                t.raw.request.body.as_slice(),
                t.raw.request.first_ns,
                t.raw.request.last_ns,
                t.raw.request.reads.as_slice()
            ),
            (&b"{}"[..], 1_000, 1_100, &[(0, 1_100)][..])
        );
        let resp = t.raw.response.as_ref().unwrap();
        assert_eq!((resp.body.as_slice(), resp.first_ns), (&b"ok"[..], 1_200));
        assert_eq!(
            (
                t.decoded.method.as_deref(),
                t.decoded.path.as_deref(),
                t.decoded.status
            ),
            (Some("POST"), Some("/v1/messages"), Some(200))
        );
        assert_eq!(
            rw.reader().wire_notes().unwrap(),
            vec![WireNote {
                process_id: Some(7),
                conn: 0xdef,
                note: "HTTP/2: no request captured (24 bytes sent, 0 received)".into(),
            }]
        );
    }
}
