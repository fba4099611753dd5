//! Gemini `models/M:generateContent` and `:streamGenerateContent`.

use serde_json::Value;

use super::{api_error, element_sizes, field_size, push_system, str_at, u64_at};
use crate::{Exchange, RequestedCall, SentMessage, Usage};

/// The model named in the path: `…/models/M:method`.
pub(super) fn model_of(target: &str) -> Option<String> {
    let path = target.split('?').next().unwrap_or_default();
    let (_, after) = path.rsplit_once("/models/")?;
    let model = after.split(':').next().unwrap_or_default();
    (!model.is_empty()).then(|| model.to_string())
}

pub fn request(v: &Value, body: &[u8], ex: &mut Exchange) {
    match v.get("systemInstruction") {
        Some(Value::String(s)) => push_system(ex, s),
        Some(si) => {
            let texts: Vec<&str> = si
                .get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            if !texts.is_empty() {
                push_system(ex, &texts.join("\n"));
            }
        }
        None => {}
    }
    for t in v
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let decls = t.get("functionDeclarations").and_then(Value::as_array);
        ex.tools.extend(
            decls
                .into_iter()
                .flatten()
                .filter_map(|d| str_at(d, "name")),
        );
    }
    ex.tools_bytes = field_size(body, "tools");
    let sizes = element_sizes(body, "contents");
    let contents = v.get("contents").and_then(Value::as_array);
    for (i, c) in contents.into_iter().flatten().enumerate() {
        // Gemini's calls and responses carry no ids: the lists stay empty.
        ex.messages.push(SentMessage {
            role: str_at(c, "role").unwrap_or_default(),
            bytes: sizes.get(i).copied().unwrap_or_default(),
            ..SentMessage::default()
        });
    }
}

/// Each element is one `GenerateContentResponse` (an SSE event's data, an
/// element of the JSON array stream, or the whole non-streamed answer).
pub fn stream(items: &[(Option<String>, Value)], ex: &mut Exchange) {
    for (_, d) in items {
        if d.get("error").is_some() {
            let code = u64_at(d, &["error", "code"]);
            ex.error = Some(api_error(d, u16::try_from(code).unwrap_or_default()));
            continue;
        }
        if let Some(id) = str_at(d, "responseId") {
            ex.response_id = Some(id);
        }
        if let Some(m) = str_at(d, "modelVersion") {
            ex.response_model = Some(m);
        }
        let candidate = d
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        if let Some(c) = candidate {
            let parts = c
                .get("content")
                .and_then(|x| x.get("parts"))
                .and_then(Value::as_array);
            for p in parts.into_iter().flatten() {
                if p.get("thought").and_then(Value::as_bool) == Some(true) {
                    continue;
                }
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    ex.response_text.push_str(t);
                }
                if let Some(f) = p.get("functionCall") {
                    ex.tool_calls.push(RequestedCall {
                        id: str_at(f, "id"),
                        name: str_at(f, "name").unwrap_or_default(),
                        arguments: f.get("args").map(Value::to_string).unwrap_or_default(),
                    });
                }
            }
            if let Some(r) = str_at(c, "finishReason") {
                ex.stop_reason = Some(r);
            }
        }
        // Last wins; the prompt count includes the cached part, thoughts are
        // counted apart from the candidates.
        if let Some(u) = d.get("usageMetadata").filter(|u| u.is_object()) {
            let prompt = u64_at(u, &["promptTokenCount"]);
            let cached = u64_at(u, &["cachedContentTokenCount"]);
            ex.usage = Some(Usage {
                input: prompt.saturating_sub(cached),
                output: u64_at(u, &["candidatesTokenCount"]),
                cache_read: cached,
                cache_creation: 0,
                reasoning: u64_at(u, &["thoughtsTokenCount"]),
            });
        }
    }
}
