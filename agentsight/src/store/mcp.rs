//! The MCP servers of each stored session: what the agent's configuration
//! declared and, for a stdio server, the process that ran it (found by
//! `matching::mcp`). A server's row references `sessions` and `processes`,
//! never copies them (`docs/capture-schema.md`).

use rusqlite::{OptionalExtension, params};

use super::{CaptureRw, StoreError};

/// Created with every new capture and by the first write into an older one;
/// a capture without the table simply has no servers.
pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS mcp_servers (
    id INTEGER PRIMARY KEY,
    session_row INTEGER NOT NULL REFERENCES sessions(id),
    name TEXT NOT NULL,
    transport TEXT NOT NULL,
    command TEXT,
    url TEXT,
    source TEXT NOT NULL,
    kind TEXT,
    process_id INTEGER REFERENCES processes(id),
    evidence TEXT
);
"#;

/// One MCP server of a session, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerRow {
    pub session_row: i64,
    /// The configured name (`fs`).
    pub name: String,
    /// `stdio`, `http` or `sse` (`sessions::mcp::McpTransport`).
    pub transport: String,
    /// Stdio: the configured command line (argv).
    pub command: Vec<String>,
    /// Http/Sse: the endpoint.
    pub url: Option<String>,
    /// Where the configuration declared it.
    pub source: String,
    /// A server whose tools have known effects (`filesystem`: the reference
    /// filesystem server), `None` for any other.
    pub kind: Option<String>,
    /// The process (`processes.id`) that ran it; `None` for a remote server
    /// or a stdio server no process of the tree was found for.
    pub process_id: Option<i64>,
    /// How that process was recognised (`argv`, …), when it was.
    pub evidence: Option<String>,
}

impl CaptureRw {
    /// Replaces the stored servers of the given sessions' rows with
    /// `servers` (one transaction; enrichment may run again).
    pub fn put_mcp_servers(&self, servers: &[McpServerRow]) -> Result<(), StoreError> {
        let qe = |e| self.query_err(e);
        self.conn.execute_batch(SCHEMA).map_err(qe)?;
        let t = self.conn.unchecked_transaction().map_err(qe)?;
        {
            let mut clear = t
                .prepare("DELETE FROM mcp_servers WHERE session_row = ?1")
                .map_err(qe)?;
            let mut rows: Vec<i64> = servers.iter().map(|s| s.session_row).collect();
            rows.dedup();
            for r in rows {
                clear.execute([r]).map_err(qe)?;
            }
            let mut st = t
                .prepare(
                    "INSERT INTO mcp_servers (session_row, name, transport, command, url, source,
                     kind, process_id, evidence) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .map_err(qe)?;
            for s in servers {
                let command = (!s.command.is_empty())
                    .then(|| serde_json::to_string(&s.command).unwrap_or_default());
                st.execute(params![
                    s.session_row,
                    s.name,
                    s.transport,
                    command,
                    s.url,
                    s.source,
                    s.kind,
                    s.process_id,
                    s.evidence
                ])
                .map_err(qe)?;
            }
        }
        t.commit().map_err(qe)
    }
}

/// A stored server with its session's provider and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMcpServer {
    pub provider: String,
    pub session_id: String,
    pub server: McpServerRow,
}

impl super::CaptureReader<'_> {
    /// Every stored MCP server with its session, in row order; empty for a
    /// capture made before servers were stored (what `audit`'s `[mcp]` judges).
    pub fn all_mcp_servers(&self) -> Result<Vec<SessionMcpServer>, StoreError> {
        let rows = self.mcp_server_rows(None)?;
        let mut st = self
            .conn
            .prepare("SELECT provider, session_id FROM sessions WHERE id = ?1")
            .map_err(|e| self.query_err(e))?;
        rows.into_iter()
            .map(|server| {
                let (provider, session_id) = st
                    .query_row([server.session_row], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(|e| self.query_err(e))?;
                Ok(SessionMcpServer {
                    provider,
                    session_id,
                    server,
                })
            })
            .collect()
    }

    /// The MCP servers stored for session row `session_row`, in row order;
    /// empty for a capture made before servers were stored.
    pub fn mcp_servers(&self, session_row: i64) -> Result<Vec<McpServerRow>, StoreError> {
        self.mcp_server_rows(Some(session_row))
    }

    /// Whether the capture has the `mcp_servers` table: made (or enriched)
    /// by a version that stores servers, so no row means no server; an
    /// older capture's sessions may have had servers nobody stored.
    pub fn stores_mcp_servers(&self) -> Result<bool, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='mcp_servers'",
                [],
                |_| Ok(()),
            )
            .optional()
            .map_err(|e| self.query_err(e))?
            .is_some())
    }

    /// The stored servers of one session row, or of all (`None`).
    fn mcp_server_rows(&self, session_row: Option<i64>) -> Result<Vec<McpServerRow>, StoreError> {
        if !self.stores_mcp_servers()? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT session_row, name, transport, command, url, source, kind, process_id, evidence
                 FROM mcp_servers WHERE ?1 IS NULL OR session_row = ?1 ORDER BY id",
            )
            .map_err(|e| self.query_err(e))?;
        st.query_map([session_row], |r| {
            let command: Option<String> = r.get(3)?;
            Ok(McpServerRow {
                session_row: r.get(0)?,
                name: r.get(1)?,
                transport: r.get(2)?,
                // A command that does not parse back is shown as stored.
                command: command
                    .map(|c| serde_json::from_str(&c).unwrap_or_else(|_| vec![c]))
                    .unwrap_or_default(),
                url: r.get(4)?,
                source: r.get(5)?,
                kind: r.get(6)?,
                process_id: r.get(7)?,
                evidence: r.get(8)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.query_err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Capture;

    fn row(session_row: i64, name: &str, process_id: Option<i64>) -> McpServerRow {
        McpServerRow {
            session_row,
            name: name.into(),
            transport: "stdio".into(),
            command: vec!["node".into(), "/opt/fs/dist/index.js".into(), "/w".into()],
            url: None,
            source: "/h/.claude.json mcpServers".into(),
            kind: Some("filesystem".into()),
            process_id,
            evidence: process_id.map(|_| "argv".into()),
        }
    }

    #[test]
    fn servers_are_read_back_as_stored_and_replaced_per_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cap.db");
        let rw = CaptureRw::create(&path).unwrap();
        let remote = McpServerRow {
            transport: "http".into(),
            command: Vec::new(),
            url: Some("http://127.0.0.1:9/mcp".into()),
            kind: None,
            ..row(1, "web", None)
        };
        rw.put_mcp_servers(&[row(1, "fs", Some(7)), remote.clone(), row(2, "fs", None)])
            .unwrap();
        // A second enrichment of session 1 replaces its rows only.
        rw.put_mcp_servers(&[row(1, "fs", Some(8)), remote.clone()])
            .unwrap();
        drop(rw);
        let cap = Capture::open(&path).unwrap();
        let r = cap.reader();
        assert_eq!(
            r.mcp_servers(1).unwrap(),
            vec![row(1, "fs", Some(8)), remote]
        );
        assert_eq!(r.mcp_servers(2).unwrap(), vec![row(2, "fs", None)]);
        assert_eq!(r.mcp_servers(3).unwrap(), vec![]);
        assert!(r.stores_mcp_servers().unwrap());
    }

    #[test]
    fn a_capture_made_before_the_table_has_no_servers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let conn = crate::store::create(&path).unwrap();
        conn.execute_batch("DROP TABLE mcp_servers").unwrap();
        drop(conn);
        let cap = Capture::open(&path).unwrap();
        assert_eq!(cap.reader().mcp_servers(1).unwrap(), vec![]);
        assert!(!cap.reader().stores_mcp_servers().unwrap());
    }
}
