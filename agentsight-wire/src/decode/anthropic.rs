//! Anthropic Messages (`POST /v1/messages`).

use std::collections::HashMap;

use serde_json::Value;

use super::{api_error, content_text, element_sizes, field_size, push_system, str_at, u64_at};
use crate::{Exchange, RequestedCall, SentMessage, Usage};

pub fn request(v: &Value, body: &[u8], ex: &mut Exchange) {
    ex.model = str_at(v, "model");
    if let Some(text) = v.get("system").and_then(content_text) {
        push_system(ex, &text);
    }
    let tools = v.get("tools").and_then(Value::as_array);
    ex.tools = tools
        .into_iter()
        .flatten()
        .filter_map(|t| str_at(t, "name"))
        .collect();
    ex.tools_bytes = field_size(body, "tools");
    let sizes = element_sizes(body, "messages");
    let messages = v.get("messages").and_then(Value::as_array);
    for (i, m) in messages.into_iter().flatten().enumerate() {
        let mut sent = SentMessage {
            role: str_at(m, "role").unwrap_or_default(),
            bytes: sizes.get(i).copied().unwrap_or_default(),
            ..SentMessage::default()
        };
        for block in m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_result") => sent.tool_results.extend(str_at(block, "tool_use_id")),
                Some("tool_use") => sent.tool_calls.extend(str_at(block, "id")),
                _ => {}
            }
        }
        ex.messages.push(sent);
    }
}

/// Usage fields of a `usage` object, over what is already known (the stream
/// reports input in `message_start`, output in `message_delta`).
fn merge_usage(u: &Value, ex: &mut Exchange) {
    let usage = ex.usage.get_or_insert_with(Usage::default);
    let set = |key: &str, field: &mut u64| {
        if let Some(n) = u.get(key).and_then(Value::as_u64) {
            *field = n;
        }
    };
    set("input_tokens", &mut usage.input);
    set("output_tokens", &mut usage.output);
    set("cache_read_input_tokens", &mut usage.cache_read);
    set("cache_creation_input_tokens", &mut usage.cache_creation);
}

pub fn stream(items: &[(Option<String>, Value)], ex: &mut Exchange) {
    // Content block index -> position in `ex.tool_calls`.
    let mut calls: HashMap<u64, usize> = HashMap::new();
    // Start inputs of tool_use blocks, used when no delta came.
    let mut start_inputs: HashMap<usize, String> = HashMap::new();
    for (name, d) in items {
        let kind = d.get("type").and_then(Value::as_str).or(name.as_deref());
        match kind {
            Some("message_start") => {
                let m = d.get("message").unwrap_or(&Value::Null);
                ex.response_id = str_at(m, "id");
                ex.response_model = str_at(m, "model");
                if let Some(u) = m.get("usage") {
                    merge_usage(u, ex);
                }
            }
            Some("content_block_start") => {
                let index = u64_at(d, &["index"]);
                let block = d.get("content_block").unwrap_or(&Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") | Some("server_tool_use") => {
                        calls.insert(index, ex.tool_calls.len());
                        if let Some(input) = block.get("input") {
                            start_inputs.insert(ex.tool_calls.len(), input.to_string());
                        }
                        ex.tool_calls.push(RequestedCall {
                            id: str_at(block, "id"),
                            name: str_at(block, "name").unwrap_or_default(),
                            arguments: String::new(),
                        });
                    }
                    Some("text") => {
                        ex.response_text.push_str(
                            block
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or_default(),
                        );
                    }
                    _ => {}
                }
            }
            Some("content_block_delta") => {
                let delta = d.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => ex.response_text.push_str(
                        delta
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    ),
                    Some("input_json_delta") => {
                        let piece = delta.get("partial_json").and_then(Value::as_str);
                        let at = calls.get(&u64_at(d, &["index"])).copied();
                        if let (Some(piece), Some(call)) =
                            (piece, at.and_then(|i| ex.tool_calls.get_mut(i)))
                        {
                            call.arguments.push_str(piece);
                        }
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(r) = d.get("delta").and_then(|x| str_at(x, "stop_reason")) {
                    ex.stop_reason = Some(r);
                }
                if let Some(u) = d.get("usage") {
                    merge_usage(u, ex);
                }
            }
            Some("error") => ex.error = Some(api_error(d, 0)),
            _ => {}
        }
    }
    for (i, input) in start_inputs {
        if let Some(call) = ex.tool_calls.get_mut(i).filter(|c| c.arguments.is_empty()) {
            call.arguments = input;
        }
    }
}

/// A non-streamed answer: one message object.
pub fn message(v: &Value, ex: &mut Exchange) {
    ex.response_id = str_at(v, "id");
    ex.response_model = str_at(v, "model");
    ex.stop_reason = str_at(v, "stop_reason");
    for block in v
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => ex.response_text.push_str(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
            Some("tool_use") | Some("server_tool_use") => ex.tool_calls.push(RequestedCall {
                id: str_at(block, "id"),
                name: str_at(block, "name").unwrap_or_default(),
                arguments: block.get("input").map(Value::to_string).unwrap_or_default(),
            }),
            _ => {}
        }
    }
    if let Some(u) = v.get("usage") {
        merge_usage(u, ex);
    }
}
