//! The decoded exchange: one model call, as the wire says it.

use serde::{Deserialize, Serialize};

/// The model API an exchange spoke, decided from the request path and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST …/v1/messages`
    AnthropicMessages,
    /// `POST …/responses`
    OpenaiResponses,
    /// `POST …/chat/completions`
    OpenaiChat,
    /// `POST …/models/M:generateContent` or `:streamGenerateContent`
    GeminiGenerate,
    /// Anything else (model lists, token counts, telemetry, a path not known):
    /// kept with its HTTP facts, no model fields.
    Other,
}

/// One exchange decoded. Every field is what the bytes say; `None` or empty
/// means they did not say it (or could not be decoded: see `notes`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    pub api: Option<Api>,
    pub method: Option<String>,
    /// The request target as the agent sent it (query string kept; an API
    /// key in the query — Gemini's `key=` — is replaced by `key=REDACTED`).
    pub path: Option<String>,
    pub status: Option<u16>,
    /// The request's `content-encoding` / the response's, if any.
    pub request_encoding: Option<String>,
    pub response_encoding: Option<String>,
    /// Whether the response was streamed: server-sent events, or Gemini's
    /// JSON array stream (`streamGenerateContent` without `alt=sse`).
    pub streamed: bool,
    /// Number of server-sent events (or JSON stream elements) in the response.
    pub events: u32,
    /// The model asked for (request) and the one that answered (response), if they differ both are kept.
    pub model: Option<String>,
    pub response_model: Option<String>,
    /// The system prompt's text (all parts joined with "\n") and its size in bytes.
    pub system: Option<String>,
    pub system_bytes: u64,
    /// Names of the tools offered, in request order (MCP and built-in alike).
    pub tools: Vec<String>,
    /// Size in bytes of the tool definitions as sent (their JSON).
    pub tools_bytes: u64,
    /// The conversation sent, one entry per message/content item.
    pub messages: Vec<SentMessage>,
    /// The response's id (`msg_…`, `resp_…`, `chatcmpl-…`, Gemini `responseId`).
    pub response_id: Option<String>,
    /// The answer's text, every text part joined (thinking not included).
    pub response_text: String,
    /// Tool calls the model asked for, in order.
    pub tool_calls: Vec<RequestedCall>,
    /// Usage as the response reported it, normalized to disjoint parts.
    pub usage: Option<Usage>,
    /// `end_turn`, `tool_use`, `stop`, `tool_calls`, `STOP`, `completed`, …
    pub stop_reason: Option<String>,
    /// An error the API answered with (HTTP status ≥ 400 or an `error` event).
    pub error: Option<ApiError>,
    /// Decoded body sizes (after de-chunking and content decoding).
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// What could not be decoded or was cut, one short sentence each
    /// ("response body cut at 8388608 bytes, 1200 dropped", "gzip output over
    /// the limit: cut", "SSE event 7: not JSON"). Never silent.
    pub notes: Vec<String>,
}

/// One message (or input item) of the request's conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentMessage {
    /// `user`, `assistant`, `tool`, `system`, `developer`, `model`, `function`;
    /// for Responses items without a role, the item type
    /// (`function_call`, `function_call_output`, `reasoning`).
    pub role: String,
    /// Size of the message's JSON as sent.
    pub bytes: u64,
    /// Tool-call ids this message answers (tool results).
    pub tool_results: Vec<String>,
    /// Tool-call ids this message records as requested earlier (assistant turns).
    pub tool_calls: Vec<String>,
}

/// A tool call the model requested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestedCall {
    /// The call id (`toolu_…`, `call_…`; Gemini gives none: `None`).
    pub id: Option<String>,
    pub name: String,
    /// The arguments as the model sent them (streamed pieces joined), JSON text.
    pub arguments: String,
}

/// Token usage in disjoint parts (the same rule as the session model's
/// `TokenUsage`): `input` excludes cached input, `output` excludes reasoning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
    pub reasoning: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_creation + self.reasoning
    }
}

/// An error answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    pub status: Option<u16>,
    /// The API's own error type (`rate_limit_error`, `insufficient_quota`, `RESOURCE_EXHAUSTED`).
    pub kind: Option<String>,
    pub message: Option<String>,
}
