//! Copilot CLI's `events.jsonl` records as serde reads them, shared by the
//! full parser (`super`) and the tail reader (`super::live`).
//!
//! Every line is an envelope `{type, id, timestamp, parentId, agentId?,
//! data}`; `data` differs per `type`. One union ([`Data`]) holds the fields
//! of every type this reader uses (each lenient: a field of an unexpected
//! shape reads as missing instead of losing the line); the rest (the system
//! prompt's siblings, telemetry, shutdown metrics) are skipped unbuffered.

use serde::Deserialize;
use serde_json::Value;

use crate::de::{Count, LBool, LStr, ObjOr, Prefix};

/// One line of `events.jsonl`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Line {
    #[serde(rename = "type")]
    pub kind: LStr,
    /// The record's own uuid.
    pub id: LStr,
    pub timestamp: LStr,
    /// Set on every record a subagent (`task` tool) wrote, from its
    /// `subagent.started` on; absent for the main agent.
    #[serde(rename = "agentId")]
    pub agent_id: LStr,
    pub data: Option<ObjOr<Data>>,
}

impl Line {
    pub fn data(&self) -> Option<&Data> {
        self.data.as_ref().and_then(ObjOr::obj)
    }
}

/// The `data` fields read, over every record type.
#[derive(Deserialize, Default, Clone)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Data {
    // session.start / session.resume
    pub session_id: LStr,
    pub copilot_version: LStr,
    pub selected_model: LStr,
    pub context: Option<ObjOr<Context>>,
    // session.model_change
    pub new_model: LStr,
    // user.message / assistant.message / system.message
    pub content: LStr,
    /// `agent-<session id>` on a subagent's task prompt.
    pub source: LStr,
    pub model: LStr,
    pub message_id: LStr,
    /// The provider's response id, on `assistant.message` and (in
    /// `usage`) on its usage record.
    pub api_call_id: LStr,
    pub tool_requests: Option<Vec<ObjOr<ToolRequest>>>,
    // tool.execution_start / _complete, subagent.*
    pub tool_call_id: LStr,
    pub parent_tool_call_id: LStr,
    pub tool_name: LStr,
    pub arguments: Option<Value>,
    pub mcp_server_name: LStr,
    pub mcp_tool_name: LStr,
    pub success: LBool,
    pub result: Option<ObjOr<ToolResult>>,
    pub error: Option<Prefix>,
    pub shell_execution: Option<ObjOr<ShellExecution>>,
    pub agent_type: LStr,
    pub agent_name: LStr,
    pub agent_description: LStr,
    // session.usage_record
    pub usage: Option<ObjOr<Usage>>,
    // session.error / abort
    pub error_type: LStr,
    pub status_code: Option<Value>,
    pub message: LStr,
    pub reason: LStr,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Context {
    pub cwd: LStr,
    pub branch: LStr,
}

/// One entry of `assistant.message.toolRequests`.
#[derive(Deserialize, Default, Clone)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ToolRequest {
    pub tool_call_id: LStr,
    pub name: LStr,
    pub arguments: Option<Value>,
    pub mcp_server_name: LStr,
    pub mcp_tool_name: LStr,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct ToolResult {
    /// What the model was given (a 4 KiB prefix: outputs can be huge).
    pub content: Prefix,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ShellExecution {
    pub exit_code: Option<Value>,
}

/// `session.usage_record.data.usage`, one model call.
#[derive(Deserialize, Default, Clone)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Usage {
    pub model: LStr,
    pub input_tokens: Count,
    pub output_tokens: Count,
    pub cache_read_tokens: Count,
    pub cache_write_tokens: Count,
    /// The part of `outputTokens` spent reasoning (OpenAI wire).
    pub reasoning_tokens: Count,
    /// The provider's response id (`msg_…` on the Anthropic wire).
    pub api_call_id: LStr,
    pub accounting: Option<ObjOr<Accounting>>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Accounting {
    pub source_session_id: LStr,
    pub sequence: Option<Value>,
}

impl Usage {
    /// The de-duplication key `(sourceSessionId, sequence)`; `None` when a
    /// record lacks either (then it is counted as it comes).
    pub fn key(&self) -> Option<(String, String)> {
        let a = self.accounting.as_ref()?.obj()?;
        let seq = a.sequence.as_ref()?.to_string();
        Some((a.source_session_id.as_deref()?.to_string(), seq))
    }

    /// Normalized counts ([`crate::TokenUsage`]): Copilot's `inputTokens`
    /// is the whole prompt — on the Anthropic wire the server's
    /// `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`
    /// (verified on 1.0.102), on the OpenAI wire `prompt_tokens`, which holds
    /// the cached part — so both cache counts are taken out of it.
    /// `outputTokens` includes `reasoningTokens` (OpenAI wire, verified).
    pub fn normalized(&self) -> crate::TokenUsage {
        let read = self.cache_read_tokens.0.min(self.input_tokens.0);
        let write = self.cache_write_tokens.0.min(self.input_tokens.0 - read);
        crate::TokenUsage::new(
            self.input_tokens.0 - read - write,
            self.output_tokens.0,
            read,
            write,
            self.reasoning_tokens.0.min(self.output_tokens.0),
        )
    }
}

/// The exit code a shell call's result states: `shellExecution.exitCode`,
/// else the `<shellId: N completed with exit code K>` trailer Copilot
/// appends to the output.
pub(crate) fn exit_code(d: &Data) -> Option<i32> {
    if let Some(c) = d
        .shell_execution
        .as_ref()
        .and_then(ObjOr::obj)
        .and_then(|s| s.exit_code.as_ref())
        .and_then(crate::util::exit_code_of)
    {
        return Some(c);
    }
    let out = &d.result.as_ref()?.obj()?.content.0;
    let last = out.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    let rest = last.strip_prefix("<shellId: ")?.strip_suffix('>')?;
    let (_, code) = rest.split_once(" completed with exit code ")?;
    code.trim().parse().ok()
}
