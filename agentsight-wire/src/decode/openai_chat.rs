//! OpenAI Chat Completions (`POST …/chat/completions`).

use std::collections::HashMap;

use serde_json::Value;

use super::{
    api_error, content_text, element_sizes, field_size, push_system, str_at, u64_at,
    usage_inclusive,
};
use crate::{Exchange, RequestedCall, SentMessage};

pub fn request(v: &Value, body: &[u8], ex: &mut Exchange) {
    ex.model = str_at(v, "model");
    ex.tools = v
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("function").and_then(|f| str_at(f, "name")))
        .collect();
    ex.tools_bytes = field_size(body, "tools");
    let sizes = element_sizes(body, "messages");
    let messages = v.get("messages").and_then(Value::as_array);
    for (i, m) in messages.into_iter().flatten().enumerate() {
        let role = str_at(m, "role").unwrap_or_default();
        if (role == "system" || role == "developer")
            && let Some(text) = m.get("content").and_then(content_text)
        {
            push_system(ex, &text);
        }
        let calls = m.get("tool_calls").and_then(Value::as_array);
        ex.messages.push(SentMessage {
            role,
            bytes: sizes.get(i).copied().unwrap_or_default(),
            tool_results: str_at(m, "tool_call_id").into_iter().collect(),
            tool_calls: calls
                .into_iter()
                .flatten()
                .filter_map(|c| str_at(c, "id"))
                .collect(),
        });
    }
}

fn usage(u: &Value, ex: &mut Exchange) {
    if u.is_object() {
        ex.usage = Some(usage_inclusive(
            u64_at(u, &["prompt_tokens"]),
            u64_at(u, &["prompt_tokens_details", "cached_tokens"]),
            u64_at(u, &["completion_tokens"]),
            u64_at(u, &["completion_tokens_details", "reasoning_tokens"]),
        ));
    }
}

/// Whether a choice is the first one (the answer shown; `n > 1` is not used by agents).
fn first_choice(c: &&Value) -> bool {
    c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0
}

pub fn stream(items: &[(Option<String>, Value)], ex: &mut Exchange) {
    // Tool call index in the deltas -> position in `ex.tool_calls`.
    let mut calls: HashMap<u64, usize> = HashMap::new();
    for (_, d) in items {
        if d.get("error").is_some() {
            ex.error = Some(api_error(d, 0));
            continue;
        }
        if ex.response_id.is_none() {
            ex.response_id = str_at(d, "id");
        }
        if let Some(m) = str_at(d, "model") {
            ex.response_model = Some(m);
        }
        let choices = d.get("choices").and_then(Value::as_array);
        for c in choices.into_iter().flatten().filter(first_choice) {
            let delta = c.get("delta").unwrap_or(&Value::Null);
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                ex.response_text.push_str(t);
            }
            for tc in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let f = tc.get("function").unwrap_or(&Value::Null);
                let index = u64_at(tc, &["index"]);
                let at = *calls.entry(index).or_insert_with(|| {
                    ex.tool_calls.push(RequestedCall::default());
                    ex.tool_calls.len() - 1
                });
                let Some(call) = ex.tool_calls.get_mut(at) else {
                    continue;
                };
                if let Some(id) = str_at(tc, "id") {
                    call.id = Some(id);
                }
                if let Some(name) = str_at(f, "name") {
                    call.name.push_str(&name);
                }
                if let Some(args) = f.get("arguments").and_then(Value::as_str) {
                    call.arguments.push_str(args);
                }
            }
            if let Some(r) = str_at(c, "finish_reason") {
                ex.stop_reason = Some(r);
            }
        }
        if let Some(u) = d.get("usage") {
            usage(u, ex);
        }
    }
}

/// A non-streamed answer: one `chat.completion`.
pub fn completion(v: &Value, ex: &mut Exchange) {
    ex.response_id = str_at(v, "id");
    ex.response_model = str_at(v, "model");
    let choices = v.get("choices").and_then(Value::as_array);
    for c in choices.into_iter().flatten().filter(first_choice) {
        let m = c.get("message").unwrap_or(&Value::Null);
        if let Some(t) = m.get("content").and_then(content_text) {
            ex.response_text.push_str(&t);
        }
        for tc in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let f = tc.get("function").unwrap_or(&Value::Null);
            ex.tool_calls.push(RequestedCall {
                id: str_at(tc, "id"),
                name: str_at(f, "name").unwrap_or_default(),
                arguments: str_at(f, "arguments").unwrap_or_default(),
            });
        }
        ex.stop_reason = str_at(c, "finish_reason");
    }
    if let Some(u) = v.get("usage") {
        usage(u, ex);
    }
}
