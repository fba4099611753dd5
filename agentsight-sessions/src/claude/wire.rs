//! Claude Code's transcript lines as serde reads them, declared once for
//! the full parser (`super`, [`Full`]) and the tail reader (`super::live`,
//! [`Tail`]).
//!
//! The two readers want different things of some fields, chosen by the
//! [`Reading`] parameter:
//! - `error`: the parser keeps it as text (an assistant error line's code,
//!   or an `api_error`'s text); the tail reader as an object with `status`
//!   and nested error types (`system/api_error`) or the code string;
//! - blocks: the parser copies a block's text whole, the tail reader keeps
//!   a 4 KiB prefix (a tail must never copy multi-MB tool outputs);
//! - fields only one reader reads are [`Skip`] for the other: skipped as an
//!   unknown key would be, never buffered.
//!
//! A field one reader skips is still a field serde knows, so a line with
//! that key twice is refused by both readers (serde refuses duplicates of
//! known fields only); no agent writes duplicate keys (JSON.stringify
//! cannot), so transcripts read the same.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::de::{Content, Count, LBool, LStr, ObjOr, Prefix, Skip};

/// Which reader a line is read for: the types of the fields that differ.
pub(crate) trait Reading: Default + 'static {
    /// The line's `error` field.
    type Error: DeserializeOwned + Default;
    /// A message's content block.
    type Block: DeserializeOwned + Default;
    /// A field only the full parser reads.
    type FullOnly<T: DeserializeOwned + Default>: DeserializeOwned + Default;
    /// A field only the tail reader reads.
    type TailOnly<T: DeserializeOwned + Default>: DeserializeOwned + Default;
}

/// The full parser's reading (`claude::parse`).
#[derive(Default)]
pub(crate) struct Full;

/// The live tail reader's reading (`claude::live::read`).
#[derive(Default)]
pub(crate) struct Tail;

impl Reading for Full {
    /// `system/api_error` carries `error{…}`; assistant error lines a string.
    type Error = Prefix;
    type Block = Block;
    type FullOnly<T: DeserializeOwned + Default> = T;
    type TailOnly<T: DeserializeOwned + Default> = Skip;
}

impl Reading for Tail {
    /// `rate_limit`… on synthetic error lines; an object on `api_error`.
    type Error = ObjOr<ApiError>;
    type Block = TailBlock;
    type FullOnly<T: DeserializeOwned + Default> = Skip;
    type TailOnly<T: DeserializeOwned + Default> = T;
}

/// One JSONL record.
#[derive(Deserialize, Default)]
#[serde(default, bound = "")]
pub(crate) struct Line<R: Reading> {
    #[serde(rename = "type")]
    pub kind: LStr,
    pub subtype: LStr,
    #[serde(rename = "sessionId")]
    pub session_id: LStr,
    pub timestamp: LStr,
    pub cwd: LStr,
    #[serde(rename = "isSidechain")]
    pub is_sidechain: LBool,
    #[serde(rename = "isMeta")]
    pub is_meta: LBool,
    #[serde(rename = "isCompactSummary")]
    pub is_compact_summary: LBool,
    #[serde(rename = "agentId")]
    pub agent_id: LStr,
    #[serde(rename = "isApiErrorMessage")]
    pub is_api_error: LBool,
    pub message: Option<ObjOr<Message<R>>>,
    pub error: Option<R::Error>,
    pub data: Option<ObjOr<ProgressData<R>>>,
    // Read by the full parser only.
    #[serde(rename = "gitBranch")]
    pub git_branch: R::FullOnly<LStr>,
    pub version: R::FullOnly<LStr>,
    #[serde(rename = "requestId")]
    pub request_id: R::FullOnly<LStr>,
    #[serde(rename = "toolUseResult")]
    pub tool_use_result: R::FullOnly<Option<ObjOr<ToolUseResult>>>,
    pub content: R::FullOnly<Option<Prefix>>,
    pub summary: R::FullOnly<LStr>,
    #[serde(rename = "customTitle")]
    pub custom_title: R::FullOnly<LStr>,
    #[serde(rename = "aiTitle")]
    pub ai_title: R::FullOnly<LStr>,
    #[serde(rename = "parentToolUseID")]
    pub parent_tool_use_id: R::FullOnly<LStr>,
    // Read by the tail reader only.
    pub uuid: R::TailOnly<LStr>,
    #[serde(rename = "retryAttempt")]
    pub retry_attempt: R::TailOnly<Option<Count>>,
    #[serde(rename = "maxRetries")]
    pub max_retries: R::TailOnly<Option<Count>>,
    /// `api-request` records (2.1.3xx): who asked, and for which subagent.
    #[serde(rename = "querySource")]
    pub query_source: R::TailOnly<LStr>,
}

#[derive(Deserialize, Default)]
#[serde(default, bound = "")]
pub(crate) struct Message<R: Reading> {
    pub id: LStr,
    pub model: LStr,
    pub content: Content<R::Block>,
    pub stop_reason: LStr,
    pub usage: Option<ObjOr<Usage<R>>>,
}

/// A content block as the full parser reads it: text whole, tool calls and
/// results.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Block {
    #[serde(rename = "type")]
    pub kind: LStr,
    pub text: LStr,
    pub id: LStr,
    pub name: LStr,
    pub input: Option<Value>,
    pub tool_use_id: LStr,
    pub is_error: LBool,
    pub content: Option<Prefix>,
}

/// A content block as the tail reader reads it: a text prefix and the tool
/// name.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct TailBlock {
    #[serde(rename = "type")]
    pub kind: LStr,
    pub text: Option<Prefix>,
    pub name: LStr,
}

#[derive(Deserialize, Default)]
#[serde(default, bound = "")]
pub(crate) struct Usage<R: Reading> {
    pub input_tokens: Count,
    pub output_tokens: Count,
    pub cache_creation_input_tokens: Count,
    pub cache_read_input_tokens: Count,
    pub cache_creation: R::FullOnly<Option<ObjOr<CacheCreation>>>,
}

// The tail keeps each response's usage by value.
impl Clone for Usage<Tail> {
    fn clone(&self) -> Self {
        *self
    }
}
impl Copy for Usage<Tail> {}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct CacheCreation {
    pub ephemeral_5m_input_tokens: Option<Count>,
    pub ephemeral_1h_input_tokens: Option<Count>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ToolUseResult {
    #[serde(rename = "type")]
    pub kind: LStr,
    #[serde(rename = "agentId")]
    pub agent_id: LStr,
    #[serde(rename = "exitCode")]
    pub exit_code: Option<Value>,
}

/// A `progress` line's `data`.
#[derive(Deserialize, Default)]
#[serde(default, bound = "")]
pub(crate) struct ProgressData<R: Reading> {
    #[serde(rename = "type")]
    pub kind: LStr,
    #[serde(rename = "agentId")]
    pub agent_id: R::FullOnly<LStr>,
}

/// `system/api_error`'s `error`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ApiError {
    pub status: Option<Count>,
    pub error: Option<ObjOr<ApiErrorBody>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ApiErrorBody {
    #[serde(rename = "type")]
    pub kind: LStr,
    pub error: Option<Box<ObjOr<ApiErrorBody>>>,
}

/// A ≥ 2.1.2 subagent's `agent-<id>.meta.json`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct MetaJson {
    #[serde(rename = "agentType")]
    pub agent_type: LStr,
    pub description: LStr,
    #[serde(rename = "toolUseId")]
    pub tool_use_id: LStr,
}
