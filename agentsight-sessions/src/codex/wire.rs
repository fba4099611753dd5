//! Codex's rollout lines as serde reads them, declared once for the full
//! parser (`super`, [`Full`]) and the tail reader (`super::live`, [`Tail`]).
//!
//! The readers differ in a message's content (the parser keeps block texts
//! whole, the tail reader a 4 KiB prefix of each), in `token_count.info`
//! (typed usage for the parser, a value the tail reader only tests and
//! searches) and in the fields only one of them reads ([`Skip`] for the
//! other, skipped as an unknown key would be). A field one reader skips is
//! still known to serde, so a line with that key twice is refused by both
//! (no agent writes duplicate keys).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::OutputStatus;
use crate::de::{Content, Count, LBool, LStr, ObjOr, Prefix, Skip};

/// Which reader a line is read for: the types of the fields that differ.
pub(crate) trait Reading: Default + 'static {
    /// A message's `content`.
    type Content: DeserializeOwned + Default;
    /// `token_count`'s `info`.
    type Info: DeserializeOwned + Default;
    /// A field only the full parser reads.
    type FullOnly<T: DeserializeOwned + Default>: DeserializeOwned + Default;
    /// A field only the tail reader reads.
    type TailOnly<T: DeserializeOwned + Default>: DeserializeOwned + Default;
}

/// The full parser's reading (`codex::parse`).
#[derive(Default)]
pub(crate) struct Full;

/// The live tail reader's reading (`codex::live::read`).
#[derive(Default)]
pub(crate) struct Tail;

impl Reading for Full {
    type Content = Content<CBlock>;
    type Info = Option<ObjOr<TokenInfo>>;
    type FullOnly<T: DeserializeOwned + Default> = T;
    type TailOnly<T: DeserializeOwned + Default> = Skip;
}

impl Reading for Tail {
    /// A `response_item` message's parts (only their text prefixes).
    type Content = Option<Content<TextPart>>;
    type Info = Option<Value>;
    type FullOnly<T: DeserializeOwned + Default> = Skip;
    type TailOnly<T: DeserializeOwned + Default> = T;
}

/// One line: the envelope `{timestamp, type, payload}`, or a legacy line.
#[derive(Deserialize, Default)]
#[serde(default, bound = "")]
pub(crate) struct Line<R: Reading> {
    pub timestamp: LStr,
    #[serde(rename = "type")]
    pub kind: LStr,
    pub payload: Option<ObjOr<Payload<R>>>,
    pub record_type: R::FullOnly<LStr>,
    /// Legacy first line: a bare SessionMeta.
    pub id: R::FullOnly<LStr>,
}

#[derive(Deserialize, Default)]
#[serde(default, bound = "")]
pub(crate) struct Payload<R: Reading> {
    #[serde(rename = "type")]
    pub kind: LStr,
    // session_meta
    pub id: LStr,
    pub cwd: LStr,
    pub source: Option<Value>,
    pub timestamp: R::FullOnly<LStr>,
    pub cli_version: R::FullOnly<LStr>,
    pub forked_from_id: R::FullOnly<LStr>,
    pub git: R::FullOnly<Option<ObjOr<Git>>>,
    pub originator: R::TailOnly<LStr>,
    pub thread_source: R::TailOnly<LStr>,
    // turn_context
    pub model: LStr,
    // messages / events
    pub message: LStr,
    pub role: LStr,
    pub content: R::Content,
    pub phase: R::FullOnly<LStr>,
    pub turn_id: R::TailOnly<LStr>,
    pub item_id: R::TailOnly<LStr>,
    // tools
    pub name: LStr,
    pub call_id: LStr,
    /// A JSON string (`function_call`) or a value (`tool_search_call`).
    pub arguments: R::FullOnly<Option<Value>>,
    /// `function_call` of a namespaced tool (`mcp__fs__`: an MCP server's).
    pub namespace: R::FullOnly<LStr>,
    /// `tool_search_call`/`tool_search_output`: `completed`, `failed`….
    pub status: R::FullOnly<LStr>,
    /// `mcp_tool_call_end`: `{server, tool, arguments}`.
    pub invocation: R::FullOnly<Option<ObjOr<Invocation>>>,
    /// `mcp_tool_call_end`: `{"Ok": CallToolResult}` or `{"Err": text}`.
    pub result: R::FullOnly<Option<ObjOr<McpResult>>>,
    pub input: R::FullOnly<LStr>,
    pub output: R::FullOnly<Option<OutputStatus>>,
    pub action: R::FullOnly<Option<Value>>,
    pub success: R::FullOnly<LBool>,
    pub exit_code: R::FullOnly<Option<Value>>,
    // token_count
    pub info: R::Info,
    pub rate_limits: R::TailOnly<Option<Value>>,
    // errors
    pub codex_error_info: Option<Value>,
    pub reason: R::FullOnly<LStr>,
    pub thread_name: R::FullOnly<LStr>,
    /// `task_complete` of a failed turn (Codex ≥ 0.16x):
    /// `{message, codex_error_info}`.
    pub error: R::TailOnly<Option<Value>>,
    // item_completed (0.16x): the typed prompt is a `UserMessage` item
    pub item: R::FullOnly<Option<ObjOr<Item>>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Item {
    #[serde(rename = "type")]
    pub kind: LStr,
    pub content: Content<CBlock>,
    // CommandExecution, McpToolCall: `id` is the call id.
    pub id: LStr,
    pub exit_code: Option<Value>,
    // McpToolCall (Codex 0.169, written for every MCP call):
    // `{server, tool, arguments, status: completed|failed, result:
    // CallToolResult, error?}`.
    pub server: LStr,
    pub tool: LStr,
    pub arguments: Option<Value>,
    pub status: LStr,
    pub result: Option<ObjOr<McpToolResult>>,
    pub error: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Git {
    pub branch: LStr,
}

/// A content block as the full parser reads it.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct CBlock {
    #[serde(rename = "type")]
    pub kind: LStr,
    pub text: LStr,
}

/// A content part as the tail reader reads it: a text prefix.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct TextPart {
    pub text: Option<Prefix>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct TokenInfo {
    pub total_token_usage: Option<ObjOr<RawUsage>>,
    pub last_token_usage: Option<ObjOr<RawUsage>>,
}

/// Codex's own usage fields: `input_tokens` includes `cached_input_tokens`,
/// `output_tokens` includes `reasoning_output_tokens`.
#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(default)]
pub(crate) struct RawUsage {
    pub input_tokens: Count,
    pub cached_input_tokens: Count,
    pub output_tokens: Count,
    pub reasoning_output_tokens: Count,
    pub total_tokens: Count,
}

/// What `mcp_tool_call_end` says was called.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Invocation {
    pub server: LStr,
    pub tool: LStr,
    pub arguments: Option<Value>,
}

/// The outcome of an MCP call (`Result<CallToolResult, String>` as Rust's
/// serde writes it); the content is not kept.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct McpResult {
    #[serde(rename = "Ok")]
    pub ok: Option<ObjOr<McpToolResult>>,
    #[serde(rename = "Err")]
    pub err: Option<Prefix>,
}

/// A `CallToolResult`: only whether the server said the tool failed.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct McpToolResult {
    #[serde(rename = "isError", alias = "is_error")]
    pub is_error: LBool,
}
