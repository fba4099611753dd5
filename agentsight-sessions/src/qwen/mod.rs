//! SKELETON (issue 29): Qwen's row of the provider table, filled in by
//! the provider's own module; until then it finds and parses nothing.

use std::path::{Path, PathBuf};

use super::error::{Result, SessionError};
use super::{AgentSession, Provider};
use crate::discovery::Scanner;
use crate::live::TailFacts;
use crate::provider::{IndexId, ProviderSpec, TailSpec, WatchLayout};

/// Qwen's row of the provider table.
pub(crate) const SPEC: ProviderSpec = ProviderSpec {
    provider: Provider::Qwen,
    name: "qwen",
    aliases: &[],
    cli_name: "qwen",
    roots: |_: &Path, _: bool| -> Vec<PathBuf> { Vec::new() },
    scan_root: |_: &Path, _: &mut Scanner| {},
    after_scan: None,
    path_rank: 5,
    id_for_path: |_: &Path, _: &[&str]| None,
    candidate_id: |_: &Path| None,
    index_id: |_: &Path| IndexId::None,
    is_transcript: |_: &[&str]| false,
    watch: |_: &Path| WatchLayout {
        depth: 0,
        project_subdir: None,
    },
    header_id: false,
    verify_id: |_: &Path, _: &str| false,
    parse: |path, _, _| {
        Err(SessionError::Format {
            path: path.to_path_buf(),
            provider: "qwen",
            reason: "not yet read".into(),
        })
    },
    enrich: None,
    mcp: crate::mcp::McpSpec {
        names: None,
        home: |_: &Path| None,
        servers: |_, _| {},
    },
    tail: TailSpec {
        read: |_: &[&str], _: bool, _: &mut TailFacts| {},
        first_line: None,
        from_path: |_: &Path, _: &mut TailFacts| {},
        widens: false,
        document: None,
    },
};

#[allow(dead_code)]
fn _unused(_: Result<AgentSession>) {}
