//! Decoding a [`RawExchange`] into an [`Exchange`]: HTTP/1.1 heads and
//! framing ([`http1`]), content encodings ([`body`]), event streams
//! ([`sse`]), then the model API the path names.

mod anthropic;
mod body;
mod gemini;
pub mod http1;
mod openai_chat;
mod openai_responses;
pub mod sse;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::{Api, ApiError, Exchange, RawExchange, Usage};
use http1::Head;

/// Output bounds of decoding.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most bytes a decoded (de-chunked, decompressed) body may take; past it
    /// the body is cut and a note says how much was dropped.
    pub body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body: 16 * 1024 * 1024,
        }
    }
}

/// A decoded exchange and its decoded bodies (bounded by [`Limits::body`]).
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    pub exchange: Exchange,
    /// The request body after de-chunking and content decoding.
    pub request_body: Vec<u8>,
    /// The response body after de-chunking and content decoding (the SSE text
    /// for a streamed answer).
    pub response_body: Vec<u8>,
}

/// Decodes one exchange; never fails: what cannot be decoded is noted.
pub fn decode(raw: &RawExchange, limits: &Limits) -> Decoded {
    let mut ex = Exchange::default();
    let req_head = request_head(raw, &mut ex.notes);
    ex.method = req_head.method.clone();
    ex.path = req_head.target.as_deref().map(redact_key);
    ex.request_encoding = req_head.header("content-encoding").map(str::to_string);
    let (request_body, notes) = request_body_of(raw, &req_head, limits);
    ex.notes.extend(notes);
    ex.request_bytes = request_body.len() as u64;
    ex.api = Some(api_of(ex.method.as_deref(), req_head.target.as_deref()));
    if let Some(e) = &raw.error {
        ex.notes.push(format!("exchange ended abnormally: {e}"));
    }
    let api = ex.api.unwrap_or(Api::Other);
    if api != Api::Other {
        decode_request(api, &request_body, req_head.target.as_deref(), &mut ex);
    }
    let head_request = ex.method.as_deref() == Some("HEAD");
    let response_body = match &raw.response {
        Some(resp) => decode_response(resp, head_request, api, limits, &mut ex),
        None => Vec::new(),
    };
    if !ex.notes.is_empty() {
        tracing::debug!(conn = raw.conn, seq = raw.seq, notes = ?ex.notes, "exchange decoded with notes");
    }
    Decoded {
        exchange: ex,
        request_body,
        response_body,
    }
}

/// The request body after de-chunking and content decoding, bounded by
/// `limits.body`, and the notes on it.
pub fn request_body(raw: &RawExchange, limits: &Limits) -> (Vec<u8>, Vec<String>) {
    let mut notes = Vec::new();
    let head = request_head(raw, &mut notes);
    let (body, more) = request_body_of(raw, &head, limits);
    notes.extend(more);
    (body, notes)
}

fn request_head(raw: &RawExchange, notes: &mut Vec<String>) -> Head {
    http1::parse_request(&raw.request.head).unwrap_or_else(|e| {
        notes.push(format!("request {e}"));
        Head::default()
    })
}

fn request_body_of(raw: &RawExchange, head: &Head, limits: &Limits) -> (Vec<u8>, Vec<String>) {
    let framing = http1::request_framing(head);
    body::decode(&raw.request, head, framing, limits.body, "request")
}

fn decode_response(
    resp: &crate::RawMessage,
    head_request: bool,
    api: Api,
    limits: &Limits,
    ex: &mut Exchange,
) -> Vec<u8> {
    let head = match http1::parse_response(&resp.head) {
        Ok((head, interim)) => {
            if interim > 0 {
                ex.notes
                    .push(format!("response: {interim} interim 1xx head(s) skipped"));
            }
            head
        }
        Err(e) => {
            ex.notes.push(format!("response {e}"));
            Head::default()
        }
    };
    ex.status = head.status;
    ex.response_encoding = head.header("content-encoding").map(str::to_string);
    let framing = http1::response_framing(&head, head_request);
    let (body, notes) = body::decode(resp, &head, framing, limits.body, "response");
    ex.notes.extend(notes);
    ex.response_bytes = body.len() as u64;
    let content_type = head
        .header("content-type")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let is_sse = content_type.starts_with("text/event-stream")
        || (!content_type.contains("json") && sse::looks_like(&body));
    let status = head.status.unwrap_or_default();
    if is_sse {
        ex.streamed = true;
        let (events, notes) = sse::parse(&body);
        ex.notes.extend(notes);
        ex.events = events.len() as u32;
        if api != Api::Other {
            let items = event_values(&events, ex);
            api_stream(api, &items, ex);
        }
    } else if api == Api::GeminiGenerate && body.trim_ascii_start().starts_with(b"[") {
        // Gemini's streamGenerateContent without `alt=sse`: a JSON array.
        ex.streamed = true;
        let (items, notes) = sse::json_array(&body);
        ex.notes.extend(notes);
        ex.events = items.len() as u32;
        let items: Vec<_> = items.into_iter().map(|v| (None, v)).collect();
        if status < 400 {
            api_stream(api, &items, ex);
        } else if let Some((_, v)) = items.first() {
            ex.error = Some(api_error(v, status));
        }
    } else if status >= 400 {
        ex.error = Some(match serde_json::from_slice::<Value>(&body) {
            Ok(v) => api_error(&v, status),
            Err(_) => {
                ex.notes.push("error body not JSON".to_string());
                ApiError {
                    status: Some(status),
                    ..ApiError::default()
                }
            }
        });
    } else if api != Api::Other && !body.is_empty() {
        match serde_json::from_slice::<Value>(&body) {
            Ok(v) => api_json(api, &v, ex),
            Err(e) => ex.notes.push(format!("response body not JSON: {e}")),
        }
    }
    if is_sse && status >= 400 && ex.error.is_none() {
        ex.error = Some(ApiError {
            status: Some(status),
            ..ApiError::default()
        });
    }
    body
}

/// Each event's data as JSON with the event's name; what is not JSON is
/// noted and skipped (Chat Completions' `[DONE]` silently: it ends the stream).
fn event_values(events: &[sse::Event], ex: &mut Exchange) -> Vec<(Option<String>, Value)> {
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if e.data.trim() == "[DONE]" {
            continue;
        }
        match serde_json::from_str::<Value>(&e.data) {
            Ok(v) => out.push((e.name.clone(), v)),
            Err(_) => ex.notes.push(format!("SSE event {i}: not JSON")),
        }
    }
    out
}

fn decode_request(api: Api, body: &[u8], target: Option<&str>, ex: &mut Exchange) {
    if api == Api::GeminiGenerate {
        // Gemini names the model in the path, whatever the body holds.
        ex.model = target.and_then(gemini::model_of);
    }
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            if !body.is_empty() {
                ex.notes.push(format!("request body not JSON: {e}"));
            }
            return;
        }
    };
    match api {
        Api::AnthropicMessages => anthropic::request(&v, body, ex),
        Api::OpenaiResponses => openai_responses::request(&v, body, ex),
        Api::OpenaiChat => openai_chat::request(&v, body, ex),
        Api::GeminiGenerate => gemini::request(&v, body, ex),
        Api::Other => {}
    }
}

fn api_stream(api: Api, items: &[(Option<String>, Value)], ex: &mut Exchange) {
    match api {
        Api::AnthropicMessages => anthropic::stream(items, ex),
        Api::OpenaiResponses => openai_responses::stream(items, ex),
        Api::OpenaiChat => openai_chat::stream(items, ex),
        Api::GeminiGenerate => gemini::stream(items, ex),
        Api::Other => {}
    }
}

fn api_json(api: Api, v: &Value, ex: &mut Exchange) {
    match api {
        Api::AnthropicMessages => anthropic::message(v, ex),
        Api::OpenaiResponses => openai_responses::response(v, ex),
        Api::OpenaiChat => openai_chat::completion(v, ex),
        Api::GeminiGenerate => gemini::stream(&[(None, v.clone())], ex),
        Api::Other => {}
    }
}

/// The API a request spoke, from its method and path (query ignored).
pub fn api_of(method: Option<&str>, target: Option<&str>) -> Api {
    let (Some("POST"), Some(target)) = (method, target) else {
        return Api::Other;
    };
    let path = target.split(['?', '#']).next().unwrap_or_default();
    let path = path.trim_end_matches('/');
    if path.ends_with("/v1/messages") {
        Api::AnthropicMessages
    } else if path.ends_with("/responses") {
        Api::OpenaiResponses
    } else if path.ends_with("/chat/completions") {
        Api::OpenaiChat
    } else if path.contains("/models/")
        && (path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent"))
    {
        Api::GeminiGenerate
    } else {
        Api::Other
    }
}

/// The target with the value of a `key` query parameter replaced.
pub fn redact_key(target: &str) -> String {
    let Some((path, query)) = target.split_once('?') else {
        return target.to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("key") => format!("{k}=REDACTED"),
            _ => p.to_string(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// An `ApiError` from an error body: `{"error": {type|code|status, message}}`
/// (Anthropic, OpenAI, Gemini) or a bare `{type, code, message}`.
pub(crate) fn api_error(v: &Value, status: u16) -> ApiError {
    let v = v.as_array().and_then(|a| a.first()).unwrap_or(v);
    let e = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
    let kind = str_at(e, "type")
        .filter(|t| t != "error")
        .or_else(|| str_at(e, "code"))
        .or_else(|| str_at(e, "status"));
    ApiError {
        status: (status != 0).then_some(status),
        kind,
        message: str_at(e, "message"),
    }
}

/// A string field.
pub(crate) fn str_at(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// An unsigned field (0 when absent).
pub(crate) fn u64_at(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_u64)
        .unwrap_or_default()
}

/// The byte sizes, as sent, of the elements of the top-level array `key`
/// of a JSON object body (empty when it is not an array).
pub(crate) fn element_sizes(body: &[u8], key: &str) -> Vec<u64> {
    top_raw(body, key)
        .and_then(|raw| serde_json::from_str::<Vec<&RawValue>>(raw.get()).ok())
        .map(|items| items.iter().map(|r| r.get().len() as u64).collect())
        .unwrap_or_default()
}

/// The byte size, as sent, of the top-level field `key` of a JSON object body.
pub(crate) fn field_size(body: &[u8], key: &str) -> u64 {
    top_raw(body, key).map_or(0, |r| r.get().len() as u64)
}

fn top_raw<'a>(body: &'a [u8], key: &str) -> Option<&'a RawValue> {
    let map: std::collections::HashMap<String, &RawValue> = serde_json::from_slice(body).ok()?;
    map.get(key).copied()
}

/// Appends a system text part.
pub(crate) fn push_system(ex: &mut Exchange, text: &str) {
    match &mut ex.system {
        Some(s) => {
            s.push('\n');
            s.push_str(text);
        }
        None => ex.system = Some(text.to_string()),
    }
    ex.system_bytes = ex.system.as_ref().map_or(0, |s| s.len() as u64);
}

/// Usage from totals that include their cached and reasoning parts
/// (OpenAI, Gemini's prompt): the parts are subtracted.
pub(crate) fn usage_inclusive(input: u64, cached: u64, output: u64, reasoning: u64) -> Usage {
    Usage {
        input: input.saturating_sub(cached),
        output: output.saturating_sub(reasoning),
        cache_read: cached,
        cache_creation: 0,
        reasoning,
    }
}

/// The text of a content value: a string, or text parts (`{type: "text"|
/// "input_text"|"output_text", text}`) joined with "\n".
pub(crate) fn content_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}
