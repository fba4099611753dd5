//! Gemini CLI's chat records as serde reads them, declared once for the
//! full parser (`super`, [`Full`]) and the tail reader (`super::live`,
//! [`Tail`]).
//!
//! A message ([`Msg`]) and its token counts are shared; the readers differ
//! in a message's content (the parser keeps parts whole with their function
//! calls and responses, the tail reader a 4 KiB text prefix of each) and in
//! its tool calls (the parser keeps each call, the tail reader its status
//! and time). The lines around messages stay two shapes on purpose: the
//! parser reads every line as one union ([`GLine`]), the tail reader tries
//! a message, a `$set` patch, a `$rewindTo` and the metadata line in turn
//! ([`SetLine`], [`RewindLine`], [`Meta`]); one shape for both would change
//! which lines each of them counts as skipped.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::de::{Content, Count, LBool, LStr, ObjOr, Prefix};

/// Which reader a message is read for: the types of the fields that differ.
pub(crate) trait Reading: Default + Clone + 'static {
    /// A message's `content`.
    type Content: DeserializeOwned + Default + Clone;
    /// A message's `toolCalls`.
    type ToolCalls: DeserializeOwned + Default + Clone;
}

/// The full parser's reading (`gemini::parse`).
#[derive(Default, Clone)]
pub(crate) struct Full;

/// The live tail reader's reading (`gemini::live::read`).
#[derive(Default, Clone)]
pub(crate) struct Tail;

impl Reading for Full {
    type Content = Content<Part>;
    type ToolCalls = Vec<ObjOr<ToolCall>>;
}

impl Reading for Tail {
    type Content = Option<Content<TextPart>>;
    type ToolCalls = Option<Vec<ObjOr<TailToolCall>>>;
}

/// One message of the conversation.
#[derive(Deserialize, Default, Clone)]
#[serde(default, bound = "")]
pub(crate) struct Msg<R: Reading> {
    pub id: LStr,
    pub timestamp: LStr,
    #[serde(rename = "type")]
    pub kind: LStr,
    pub content: R::Content,
    pub model: LStr,
    #[serde(rename = "toolCalls")]
    pub tool_calls: R::ToolCalls,
    pub tokens: Option<ObjOr<Tokens>>,
}

/// Gemini's usage: `input` includes `cached`; `output` (candidates)
/// excludes `thoughts`; `tool` is tool-use prompt tokens.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default)]
pub(crate) struct Tokens {
    pub input: Count,
    pub output: Count,
    pub cached: Count,
    pub thoughts: Count,
    pub tool: Count,
}

// ---- The full parser's shapes.

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct Part {
    pub text: LStr,
    /// A call as the API history holds it; a resume writes these into the
    /// model message's content.
    #[serde(rename = "functionCall")]
    pub function_call: Option<ObjOr<FnCall>>,
    /// A call's result in a user-role message of the API history.
    #[serde(rename = "functionResponse")]
    pub function_response: Option<ObjOr<FnResponse>>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct FnCall {
    pub id: LStr,
    pub name: LStr,
    pub args: Option<Value>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct ToolCall {
    pub id: LStr,
    pub name: LStr,
    pub args: Option<Value>,
    pub status: LStr,
    pub timestamp: LStr,
    #[serde(rename = "agentId")]
    pub agent_id: LStr,
    /// `[{functionResponse:{response:{output}}}]`: a shell call's exit code
    /// is only in this text (`Exit Code: N`); `status` stays `success`.
    pub result: Content<FnResult>,
    #[serde(rename = "resultDisplay")]
    pub result_display: Option<ObjOr<ResultDisplay>>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct FnResult {
    #[serde(rename = "functionResponse")]
    pub function_response: Option<ObjOr<FnResponse>>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct FnResponse {
    pub id: LStr,
    pub response: Option<ObjOr<FnOutput>>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct FnOutput {
    pub output: LStr,
    /// Set instead of `output` when the tool failed.
    pub error: Option<Value>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct ResultDisplay {
    #[serde(rename = "isNewFile")]
    pub is_new_file: LBool,
}

/// One JSONL line (or the legacy whole record): metadata, message, or patch.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct GLine {
    #[serde(rename = "sessionId")]
    pub session_id: LStr,
    #[serde(rename = "startTime")]
    pub start_time: LStr,
    #[serde(rename = "lastUpdated")]
    pub last_updated: LStr,
    pub summary: LStr,
    pub kind: LStr,
    pub messages: Option<Vec<ObjOr<Msg<Full>>>>,
    #[serde(rename = "$set")]
    pub set: Option<ObjOr<SetPatch>>,
    #[serde(rename = "$rewindTo")]
    pub rewind_to: LStr,
    // Message fields (a line with a string `id` is a message).
    pub id: LStr,
    pub timestamp: LStr,
    #[serde(rename = "type")]
    pub msg_type: LStr,
    pub content: Option<Content<Part>>,
    pub model: LStr,
    #[serde(rename = "toolCalls")]
    pub tool_calls: Vec<ObjOr<ToolCall>>,
    pub tokens: Option<ObjOr<Tokens>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct SetPatch {
    #[serde(rename = "lastUpdated")]
    pub last_updated: LStr,
    pub summary: LStr,
    pub messages: Option<Vec<ObjOr<Msg<Full>>>>,
}

// ---- The tail reader's shapes.

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct TextPart {
    pub text: Option<Prefix>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct TailToolCall {
    pub status: LStr,
    pub timestamp: LStr,
}

/// The metadata line, a `$set` patch, or a legacy whole record.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Meta {
    pub session_id: LStr,
    pub last_updated: LStr,
    pub kind: LStr,
    pub messages: Option<Vec<ObjOr<Msg<Tail>>>>,
}

#[derive(Deserialize)]
pub(crate) struct SetLine {
    #[serde(rename = "$set")]
    pub set: ObjOr<Meta>,
}

#[derive(Deserialize)]
pub(crate) struct RewindLine {
    #[serde(rename = "$rewindTo")]
    pub rewind_to: String,
}
