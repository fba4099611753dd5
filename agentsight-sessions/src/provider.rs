//! The provider table: what discovery, parsing and the live tail reader need
//! to know of each agent, one row per provider. Each row is declared in the
//! provider's own folder (`claude::SPEC`, …) next to the code it points at,
//! so adding a provider touches one folder, one [`Provider`] variant and one
//! entry of [`PROVIDERS`].

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::discovery::{Candidate, Scanner};
use crate::error::Result;
use crate::live::TailFacts;
use crate::{AgentSession, ParseBatch, Provider};
use crate::{claude, codex, copilot, cursor, gemini, opencode, qwen};

/// Every provider, in [`Provider::ALL`]'s order (`spec` indexes by it).
pub(crate) static PROVIDERS: [&ProviderSpec; 7] = [
    &claude::SPEC,
    &codex::SPEC,
    &gemini::SPEC,
    &cursor::SPEC,
    &copilot::SPEC,
    &opencode::SPEC,
    &qwen::SPEC,
];

/// The row of `p`.
pub(crate) fn spec(p: Provider) -> &'static ProviderSpec {
    PROVIDERS[p as usize]
}

/// How one provider's session is listed, named, parsed and read live.
pub(crate) struct ProviderSpec {
    pub provider: Provider,
    /// The word in JSON, text and `--provider` ([`Provider::as_str`]).
    pub name: &'static str,
    /// Other spellings `--provider` accepts.
    pub aliases: &'static [&'static str],
    /// The name its CLI is recognised by in a command line
    /// ([`Provider::cli_name`]).
    pub cli_name: &'static str,
    /// Transcript roots under a home (they may not exist); `use_env`: honour
    /// the provider's environment variables (not with an explicit `--home`).
    pub roots: fn(home: &Path, use_env: bool) -> Vec<PathBuf>,
    /// The stat-only scan of one root: a fixed-depth walk of the layout.
    pub scan_root: fn(root: &Path, scan: &mut Scanner),
    /// Fix-ups over all candidates after every root was scanned (`stat`:
    /// update times and sizes are wanted).
    pub after_scan: Option<fn(cands: &mut Vec<Candidate>, stat: bool)>,
    /// Order among the path recognisers, lowest first: a layout nested in
    /// another's (Cursor's `projects/…/agent-transcripts`) goes first.
    pub path_rank: u8,
    /// The session id of a path of this provider's layout: `None` when the
    /// path is not of its layout, `Some(None)` when it is but names no id.
    pub id_for_path: fn(path: &Path, comps: &[&str]) -> Option<Option<String>>,
    /// The session id of a scanned transcript (file stem or bounded header).
    pub candidate_id: fn(path: &Path) -> Option<String>,
    /// The id index key of a transcript, from its name when possible.
    pub index_id: fn(path: &Path) -> IndexId,
    /// A transcript found for `id` really is that session (header check).
    pub verify_id: fn(path: &Path, id: &str) -> bool,
    /// A session transcript the scan lists, by its path relative to one of
    /// the provider's roots (`rel`, the file name last): the live view's
    /// recogniser of changed paths.
    pub is_transcript: fn(rel: &[&str]) -> bool,
    /// How deep under `root` directories may hold transcripts or lead to
    /// them, for the live view's watches.
    pub watch: fn(root: &Path) -> WatchLayout,
    /// The session id is read from the file's header, not its name.
    pub header_id: bool,
    /// The full parser (sharing the batch's directory listings); `id`
    /// names the session when the caller knows it (a store holding many
    /// sessions, opencode's database, needs it).
    pub parse: fn(path: &Path, id: Option<&str>, batch: &mut ParseBatch) -> Result<AgentSession>,
    /// Facts from outside the transcript added to a discovered session
    /// (Cursor's `state.vscdb`), given the discovery home.
    pub enrich: Option<fn(s: &mut AgentSession, home: Option<&Path>)>,
    /// MCP: tool names, configuration root and configuration readers.
    pub mcp: crate::mcp::McpSpec,
    pub tail: TailSpec,
}

/// The directories under a root that may hold transcripts or lead to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLayout {
    /// Levels of subdirectories below the root.
    pub depth: u32,
    /// Below each project (level 1) only the directory of this name leads
    /// to transcripts (Gemini's `chats`, Cursor's `agent-transcripts`).
    pub project_subdir: Option<&'static str>,
}

/// How the id index files a transcript.
pub(crate) enum IndexId {
    /// Under this id (verified by [`ProviderSpec::verify_id`] on lookup).
    Id(String),
    /// The name holds only a prefix of the id: filed under it, the header
    /// is read only for a lookup that matches.
    Prefix(String),
    /// Not indexed.
    None,
}

/// The provider's live tail reader (see `live::read_tail`).
pub(crate) struct TailSpec {
    /// Facts from the complete lines of the tail (`begin`: the tail starts
    /// at the file's beginning).
    pub read: fn(lines: &[&str], begin: bool, facts: &mut TailFacts),
    /// Line 1 read apart when the tail does not reach it (Codex's
    /// `session_meta`, Gemini's metadata line).
    pub first_line: Option<fn(text: &str, facts: &mut TailFacts)>,
    /// Facts only the path gives (ids from names, subagent layouts).
    pub from_path: fn(path: &Path, facts: &mut TailFacts),
    /// A tail without any turn record is widened backwards (not Cursor's:
    /// its legacy transcripts never have one).
    pub widens: bool,
    /// A whole-document format read instead of lines.
    pub document: Option<DocumentSpec>,
}

/// A transcript format that is one JSON document, not lines (Gemini CLI's
/// legacy `.json` chat).
pub(crate) struct DocumentSpec {
    /// The file extension of the format.
    pub extension: &'static str,
    /// Streams the whole file, up to `cap` bytes.
    pub read_file: fn(file: &mut File, cap: u64) -> std::io::Result<TailFacts>,
    /// Bytes that are the whole document; `None` when they are not one.
    pub read_bytes: fn(bytes: &[u8]) -> Option<TailFacts>,
}

/// The file stem: the session id of Claude Code and Cursor transcripts.
pub(crate) fn stem_id(path: &Path) -> Option<String> {
    path.file_stem()
        .and_then(|s| s.to_str())
        .map(str::to_string)
}

/// The stem as the index key.
pub(crate) fn stem_index(path: &Path) -> IndexId {
    stem_id(path).map_or(IndexId::None, IndexId::Id)
}

/// For providers whose file name is the id: nothing more to check.
pub(crate) fn name_is_id(_: &Path, _: &str) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_follows_provider_all() {
        for (i, p) in Provider::ALL.iter().enumerate() {
            assert_eq!(PROVIDERS[i].provider, *p);
            assert_eq!(spec(*p).provider, *p);
        }
    }
}
