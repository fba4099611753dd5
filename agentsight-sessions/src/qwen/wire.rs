//! Qwen Code's chat records as serde reads them (`~/.qwen/projects/…/chats/
//! <sessionId>.jsonl`, one record a line), shared by the full parser
//! (`super`) and the tail reader (`super::live`).
//!
//! Every record carries `uuid`, `parentUuid`, `sessionId`, `timestamp`,
//! `type` (`user`, `assistant`, `tool_result`, `system`), `cwd` and
//! `version`; the message is Gemini's `Content` (`role`, `parts`), so the
//! parts are Gemini CLI's wire shapes.

use serde::Deserialize;
use serde_json::Value;

use crate::de::{Count, LStr, ObjOr};
use crate::gemini::wire::Part;

/// One line of a chat file.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Line {
    pub uuid: LStr,
    pub session_id: LStr,
    pub timestamp: LStr,
    #[serde(rename = "type")]
    pub kind: LStr,
    pub subtype: LStr,
    pub cwd: LStr,
    pub version: LStr,
    pub git_branch: LStr,
    pub model: LStr,
    pub message: Option<ObjOr<Message>>,
    pub usage_metadata: Option<ObjOr<Usage>>,
    pub tool_call_result: Option<ObjOr<CallResult>>,
    pub system_payload: Option<ObjOr<SystemPayload>>,
    /// A subagent's records (`isSidechain`, `agentId`) in the parent file.
    pub is_sidechain: Option<bool>,
    pub agent_id: LStr,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Message {
    pub parts: Vec<ObjOr<QPart>>,
}

/// A Gemini part plus the `thought` flag Qwen Code sets on reasoning text.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct QPart {
    #[serde(flatten)]
    pub part: Part,
    pub thought: Option<bool>,
}

/// `usageMetadata`, as Qwen Code fills it from an OpenAI-compatible answer:
/// `promptTokenCount` includes `cachedContentTokenCount`;
/// `candidatesTokenCount` is `completion_tokens`, reasoning included
/// (verified on 0.24.4: `totalTokenCount` = prompt + candidates).
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Usage {
    pub prompt_token_count: Count,
    pub candidates_token_count: Count,
    pub thoughts_token_count: Count,
    pub cached_content_token_count: Count,
    pub total_token_count: Count,
}

/// `toolCallResult` of a `tool_result` record.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct CallResult {
    pub call_id: LStr,
    /// `success`, `error`, `cancelled`.
    pub status: LStr,
    /// A shell call's `{type:"shell_result", exitCode, directory, …}`;
    /// other tools write a string or a file diff object.
    pub result_display: Option<Value>,
}

/// `systemPayload` of a `system` record.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SystemPayload {
    pub ui_event: Option<ObjOr<UiEvent>>,
}

/// A `ui_telemetry` event: only the API errors are read (the responses and
/// tool calls repeat what the assistant and tool_result records hold).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct UiEvent {
    #[serde(rename = "event.name")]
    pub name: LStr,
    pub error_message: LStr,
    pub error_type: LStr,
    pub status_code: Option<Value>,
}

impl UiEvent {
    /// `qwen-code.api_error`'s HTTP status.
    pub fn status(&self) -> Option<u64> {
        match self.status_code.as_ref()? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
    }
}

impl Usage {
    /// (input without cache, output with reasoning, cache read, reasoning).
    /// When the total says the candidates leave the thoughts out (Gemini's
    /// own rule, a Gemini-auth session), they are added to the output.
    pub fn split(&self) -> (u64, u64, u64, u64) {
        let prompt = self.prompt_token_count.0;
        let cached = self.cached_content_token_count.0.min(prompt);
        let cand = self.candidates_token_count.0;
        let thoughts = self.thoughts_token_count.0;
        let apart = thoughts > 0 && self.total_token_count.0 == prompt + cand + thoughts;
        let output = if apart { cand + thoughts } else { cand };
        (prompt - cached, output, cached, thoughts.min(output))
    }
}
