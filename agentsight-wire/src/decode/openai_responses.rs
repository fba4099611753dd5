//! OpenAI Responses (`POST …/responses`), as Codex speaks it.

use std::collections::HashMap;

use serde_json::Value;

use super::{
    api_error, content_text, element_sizes, field_size, push_system, str_at, u64_at,
    usage_inclusive,
};
use crate::{ApiError, Exchange, RequestedCall, SentMessage};

/// A tool's name: `name`; a namespace's tools (Codex's MCP tools:
/// `{type: "namespace", name: "mcp__S__", tools: [{name: T}]}`) each as the
/// namespace and name joined (`mcp__S__T`), the name Codex calls them by;
/// a built-in tool without a name (`web_search`, `tool_search`) by its type.
fn tool_names(t: &Value, out: &mut Vec<String>) {
    let kind = str_at(t, "type");
    if kind.as_deref() == Some("namespace") {
        let ns = str_at(t, "name").unwrap_or_default();
        for inner in t
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push(format!("{ns}{}", str_at(inner, "name").unwrap_or_default()));
        }
    } else if let Some(name) = str_at(t, "name").or(kind) {
        out.push(name);
    }
}

/// A call's name, with its namespace when it has one.
fn call_name(item: &Value) -> String {
    let name = str_at(item, "name").unwrap_or_default();
    match str_at(item, "namespace") {
        Some(ns) => format!("{ns}{name}"),
        None => name,
    }
}

pub fn request(v: &Value, body: &[u8], ex: &mut Exchange) {
    ex.model = str_at(v, "model");
    if let Some(text) = str_at(v, "instructions") {
        push_system(ex, &text);
    }
    for t in v
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        tool_names(t, &mut ex.tools);
    }
    ex.tools_bytes = field_size(body, "tools");
    match v.get("input") {
        // A bare string input is the user's message; its size is the string's JSON.
        Some(Value::String(_)) => ex.messages.push(SentMessage {
            role: "user".to_string(),
            bytes: field_size(body, "input"),
            ..SentMessage::default()
        }),
        Some(Value::Array(items)) => {
            let sizes = element_sizes(body, "input");
            for (i, item) in items.iter().enumerate() {
                ex.messages
                    .push(input_item(item, sizes.get(i).copied().unwrap_or_default()));
                // Codex sends its system prompt as developer messages, not `instructions`.
                let role = item.get("role").and_then(Value::as_str);
                if matches!(role, Some("system") | Some("developer"))
                    && let Some(text) = item.get("content").and_then(content_text)
                {
                    push_system(ex, &text);
                }
            }
        }
        _ => {}
    }
}

fn input_item(item: &Value, bytes: u64) -> SentMessage {
    let kind = str_at(item, "type");
    let mut sent = SentMessage {
        role: str_at(item, "role").or(kind.clone()).unwrap_or_default(),
        bytes,
        ..SentMessage::default()
    };
    match kind.as_deref() {
        Some("function_call") | Some("custom_tool_call") | Some("local_shell_call") => {
            sent.tool_calls.extend(str_at(item, "call_id"))
        }
        Some("function_call_output")
        | Some("custom_tool_call_output")
        | Some("local_shell_call_output") => sent.tool_results.extend(str_at(item, "call_id")),
        _ => {}
    }
    sent
}

fn call_of(item: &Value) -> Option<RequestedCall> {
    let args = match item.get("type").and_then(Value::as_str) {
        Some("function_call") => str_at(item, "arguments"),
        Some("custom_tool_call") => str_at(item, "input"),
        _ => return None,
    };
    Some(RequestedCall {
        id: str_at(item, "call_id"),
        name: call_name(item),
        arguments: args.unwrap_or_default(),
    })
}

pub fn stream(items: &[(Option<String>, Value)], ex: &mut Exchange) {
    // Output item id -> position in `ex.tool_calls`.
    let mut calls: HashMap<String, usize> = HashMap::new();
    let mut saw_text = false;
    for (name, d) in items {
        let kind = d.get("type").and_then(Value::as_str).or(name.as_deref());
        match kind {
            Some("response.created") | Some("response.in_progress") => {
                let r = d.get("response").unwrap_or(&Value::Null);
                ex.response_id = str_at(r, "id").or(ex.response_id.take());
                ex.response_model = str_at(r, "model").or(ex.response_model.take());
            }
            Some("response.output_text.delta") => {
                saw_text = true;
                ex.response_text
                    .push_str(d.get("delta").and_then(Value::as_str).unwrap_or_default());
            }
            Some("response.output_item.added") | Some("response.output_item.done") => {
                let item = d.get("item").unwrap_or(&Value::Null);
                let Some(call) = call_of(item) else { continue };
                let key =
                    str_at(item, "id").unwrap_or_else(|| u64_at(d, &["output_index"]).to_string());
                match calls.get(&key).and_then(|&i| ex.tool_calls.get_mut(i)) {
                    // `done` carries the whole arguments: they replace the pieces.
                    Some(known) if !call.arguments.is_empty() => known.arguments = call.arguments,
                    Some(_) => {}
                    None => {
                        calls.insert(key, ex.tool_calls.len());
                        ex.tool_calls.push(call);
                    }
                }
            }
            Some("response.function_call_arguments.delta")
            | Some("response.custom_tool_call_input.delta") => {
                let key = str_at(d, "item_id")
                    .unwrap_or_else(|| u64_at(d, &["output_index"]).to_string());
                if let Some(call) = calls.get(&key).and_then(|&i| ex.tool_calls.get_mut(i)) {
                    call.arguments
                        .push_str(d.get("delta").and_then(Value::as_str).unwrap_or_default());
                }
            }
            Some("response.completed") | Some("response.incomplete") | Some("response.failed") => {
                let r = d.get("response").unwrap_or(&Value::Null);
                finish(r, ex, !saw_text, calls.is_empty());
            }
            Some("error") => ex.error = Some(api_error(d, 0)),
            _ => {}
        }
    }
}

/// The final response object: id, model, status, usage, error; its text and
/// calls only when the stream did not carry them piece by piece.
fn finish(r: &Value, ex: &mut Exchange, want_text: bool, want_calls: bool) {
    ex.response_id = str_at(r, "id").or(ex.response_id.take());
    ex.response_model = str_at(r, "model").or(ex.response_model.take());
    ex.stop_reason = str_at(r, "status");
    let output = r.get("output").and_then(Value::as_array);
    for item in output.into_iter().flatten() {
        if want_calls {
            ex.tool_calls.extend(call_of(item));
        }
        if want_text && item.get("type").and_then(Value::as_str) == Some("message") {
            for part in item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if part.get("type").and_then(Value::as_str) == Some("output_text") {
                    ex.response_text
                        .push_str(part.get("text").and_then(Value::as_str).unwrap_or_default());
                }
            }
        }
    }
    if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
        ex.usage = Some(usage_inclusive(
            u64_at(u, &["input_tokens"]),
            u64_at(u, &["input_tokens_details", "cached_tokens"]),
            u64_at(u, &["output_tokens"]),
            u64_at(u, &["output_tokens_details", "reasoning_tokens"]),
        ));
    }
    if let Some(e) = r.get("error").filter(|e| e.is_object()) {
        ex.error = Some(ApiError {
            status: None,
            kind: str_at(e, "code").or_else(|| str_at(e, "type")),
            message: str_at(e, "message"),
        });
    }
}

/// A non-streamed answer: one response object.
pub fn response(v: &Value, ex: &mut Exchange) {
    finish(v, ex, true, true);
}
