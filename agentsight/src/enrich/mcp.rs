//! The MCP servers of each stored host session, stored at the end of
//! `record` once the bindings are committed: the servers its agent's
//! configuration declares (`sessions::mcp::configured_servers`) and, for a
//! stdio server, the process of its bound trees that ran it
//! (`matching::mcp`). Enrichment decides nothing here either: the
//! configuration readers and matching do.

use std::path::PathBuf;

use crate::{
    matching::{
        PathEvidence, ProcTable, SessionKey, Tree,
        mcp::{agent_processes, config_argv, identify_servers, server_rows},
    },
    sessions::mcp::{self, McpConfigs, McpPlaces},
    store::{CaptureRw, StoreError, meta},
};

/// A session stored from a host file: what its configuration is found by.
/// (A session read inside a container has its configuration there: it is
/// not read on the host.)
#[derive(Debug, Clone)]
pub(super) struct HostSession {
    pub key: SessionKey,
    pub row: i64,
    pub transcript: PathBuf,
    pub cwd: Option<String>,
}

/// What storing the servers did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpStored {
    /// Server rows stored (all sessions).
    pub servers: usize,
    /// Configuration problems (unreadable files, skipped entries), each
    /// logged and counted in meta `mcp_config_problems`.
    pub problems: usize,
}

/// Reads each host session's MCP configuration (its provider's
/// configuration root for the transcript, the session's cwd as the
/// project, the argv of the process that wrote it, the configuration the
/// recorded command's environment held: meta `opencode_config_content`),
/// identifies its stdio
/// servers' processes among its bound trees, and stores the rows (one
/// transaction) and the problem count (meta, only when there were any).
/// Runs as the invoking user, as all of enrichment does under `sudo`.
pub(super) fn store_mcp_servers(
    rw: &CaptureRw,
    procs: &ProcTable,
    trees: &[Tree],
    evidence: &[PathEvidence],
    sessions: &[HostSession],
) -> Result<McpStored, StoreError> {
    let mut rows = Vec::new();
    let mut problems = 0;
    // The recorded command's `OPENCODE_CONFIG_CONTENT` (its servers).
    let env: Vec<(String, String)> = rw
        .reader()
        .meta(meta::key::OPENCODE_CONFIG_CONTENT)?
        .map(|v| (mcp::CONFIG_CONTENT_VAR.to_string(), v))
        .into_iter()
        .collect();
    for s in sessions {
        let Some(home) = mcp::config_home(s.key.0, &s.transcript) else {
            continue;
        };
        let roots: Vec<usize> = trees
            .iter()
            .filter(|t| t.bindings.iter().any(|b| b.key == s.key))
            .map(|t| t.root)
            .collect();
        let writers: Vec<(usize, u64)> = evidence
            .iter()
            .filter(|e| e.key == s.key)
            .map(|e| (e.proc, e.mono_ns))
            .collect();
        let places = McpPlaces {
            home,
            project: s.cwd.as_deref().map(PathBuf::from),
            argv: config_argv(procs, &roots, &writers),
            env: env.clone(),
        };
        let McpConfigs {
            servers,
            problems: found_problems,
        } = mcp::configured_servers(s.key.0, &places);
        for p in &found_problems {
            tracing::warn!("MCP configuration of session {}: {p}", s.key.1);
        }
        problems += found_problems.len();
        if servers.is_empty() {
            continue;
        }
        let agent = agent_processes(roots, writers.iter().map(|w| w.0), procs);
        let found = identify_servers(procs, &agent, &servers);
        rows.extend(server_rows(s.row, &servers, procs, &found));
    }
    if !rows.is_empty() {
        rw.put_mcp_servers(&rows)?;
    }
    if problems > 0 {
        rw.put_meta(meta::key::MCP_CONFIG_PROBLEMS, &problems.to_string())?;
    }
    Ok(McpStored {
        servers: rows.len(),
        problems,
    })
}
