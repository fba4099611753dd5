//! Decoding hand-made edge cases: framing, encodings, event streams cut or
//! odd, error answers, Gemini's JSON array stream.

mod common;

use std::io::Write;

use agentsight_wire::decode::{Limits, decode, request_body, sse};
use agentsight_wire::{Api, ApiError, Exchange, RequestedCall, Usage};
use common::{chunked, exchange};

const MESSAGES_REQ: &[u8] = b"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";

fn with_body(head: &str, body: &[u8]) -> Vec<u8> {
    [head.as_bytes(), body].concat()
}

fn run(req: &[u8], resp: &[u8]) -> Exchange {
    decode(&exchange(req, Some(resp)), &Limits::default()).exchange
}

const MESSAGE_JSON: &str = r#"{"id":"msg_1","type":"message","model":"claude-x","content":[{"type":"text","text":"Hi."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":3,"cache_read_input_tokens":2}}"#;

#[test]
fn chunked_with_extensions_and_trailers() {
    let body = MESSAGE_JSON.as_bytes();
    let mut framed = Vec::new();
    framed.extend_from_slice(format!("{:x};name=value\r\n", 40).as_bytes());
    framed.extend_from_slice(&body[..40]);
    framed.extend_from_slice(format!("\r\n{:X} ; x\r\n", body.len() - 40).as_bytes());
    framed.extend_from_slice(&body[40..]);
    framed.extend_from_slice(b"\r\n0;last\r\nx-trailer: 1\r\n\r\n");
    let resp = with_body(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        &framed,
    );
    let ex = run(MESSAGES_REQ, &resp);
    assert_eq!(ex.api, Some(Api::AnthropicMessages));
    assert!(!ex.streamed);
    assert_eq!(ex.response_bytes, body.len() as u64);
    assert_eq!(ex.response_id.as_deref(), Some("msg_1"));
    assert_eq!(ex.response_text, "Hi.");
    assert_eq!(
        ex.tool_calls,
        [RequestedCall {
            id: Some("toolu_1".into()),
            name: "Bash".into(),
            arguments: r#"{"command":"ls"}"#.into()
        }]
    );
    assert_eq!(ex.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        ex.usage,
        Some(Usage {
            input: 10,
            output: 3,
            cache_read: 2,
            ..Usage::default()
        })
    );
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);
}

#[test]
fn interim_100_continue_head_is_skipped() {
    let resp = format!(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{MESSAGE_JSON}",
        MESSAGE_JSON.len()
    );
    let ex = run(MESSAGES_REQ, resp.as_bytes());
    assert_eq!(ex.status, Some(200));
    assert_eq!(ex.response_id.as_deref(), Some("msg_1"));
    assert_eq!(ex.notes, ["response: 1 interim 1xx head(s) skipped"]);
}

fn json_resp(encoding: &str, body: &[u8]) -> Vec<u8> {
    with_body(
        &format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: {encoding}\r\ncontent-length: {}\r\n\r\n",
            body.len()
        ),
        body,
    )
}

#[test]
fn gzip_request_and_response() {
    let gz = |b: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).expect("gzip");
        e.finish().expect("gzip")
    };
    let req_json =
        br#"{"model":"claude-x","system":"Be brief.","messages":[{"role":"user","content":"hi"}]}"#;
    let zipped = gz(req_json);
    let req = with_body(
        &format!(
            "POST /v1/messages HTTP/1.1\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n\r\n",
            zipped.len()
        ),
        &zipped,
    );
    let raw = exchange(&req, Some(&json_resp("gzip", &gz(MESSAGE_JSON.as_bytes()))));
    let d = decode(&raw, &Limits::default());
    assert_eq!(d.request_body, req_json);
    assert_eq!(
        request_body(&raw, &Limits::default()),
        (req_json.to_vec(), vec![])
    );
    let ex = d.exchange;
    assert_eq!(ex.request_encoding.as_deref(), Some("gzip"));
    assert_eq!(ex.response_encoding.as_deref(), Some("gzip"));
    assert_eq!(ex.model.as_deref(), Some("claude-x"));
    assert_eq!(ex.system.as_deref(), Some("Be brief."));
    assert_eq!(ex.system_bytes, 9);
    assert_eq!(ex.messages.len(), 1);
    assert_eq!(ex.messages[0].bytes, 30);
    assert_eq!(ex.response_text, "Hi.");
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);
}

/// `{"id":"msg_br1",…,"text":"Compressed with br.",…}` (208 bytes), compressed
/// with Node's `zlib.brotliCompressSync` (no brotli encoder among the crates).
const BR_BODY: &str = "1bcf00408c93a516e56208023a477efcbf35d004a3a35874de38f1c1ec65789c1eaf6d1907f11106b7e1f38884d23abece2f7546fab50c934507db3de564042d58c68e410628ba92b48bf72c97eb380cf9262d6983e0a2fba651ad41749cb1ffdace4a1685df1760d690e924f990858003604bbe2c24e1e91f2b7503e3be996eff3f";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn brotli_response() {
    let ex = run(MESSAGES_REQ, &json_resp("br", &unhex(BR_BODY)));
    assert_eq!(ex.response_bytes, 208);
    assert_eq!(ex.response_id.as_deref(), Some("msg_br1"));
    assert_eq!(ex.response_text, "Compressed with br.");
    assert_eq!(ex.stop_reason.as_deref(), Some("end_turn"));
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);
}

#[test]
fn zstd_and_deflate_responses() {
    let z = zstd::encode_all(MESSAGE_JSON.as_bytes(), 3).expect("zstd");
    let ex = run(MESSAGES_REQ, &json_resp("zstd", &z));
    assert_eq!(ex.response_text, "Hi.");
    assert_eq!(ex.response_bytes, MESSAGE_JSON.len() as u64);
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);

    for zlib in [true, false] {
        let body = if zlib {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(MESSAGE_JSON.as_bytes()).expect("zlib");
            e.finish().expect("zlib")
        } else {
            let mut e =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(MESSAGE_JSON.as_bytes()).expect("deflate");
            e.finish().expect("deflate")
        };
        let ex = run(MESSAGES_REQ, &json_resp("deflate", &body));
        assert_eq!(ex.response_text, "Hi.", "zlib {zlib}");
        assert!(ex.notes.is_empty(), "{:?}", ex.notes);
    }
}

#[test]
fn unknown_encoding_keeps_the_body_raw() {
    let d = decode(
        &exchange(
            MESSAGES_REQ,
            Some(&json_resp("compress", b"\x1f\x9d\x90abc")),
        ),
        &Limits::default(),
    );
    assert_eq!(d.response_body, b"\x1f\x9d\x90abc");
    assert_eq!(
        d.exchange.notes,
        [
            "response content-encoding \"compress\" not known: body kept encoded",
            "response body not JSON: expected value at line 1 column 1"
        ]
    );
}

#[test]
fn gzip_output_over_the_limit_is_cut() {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&[b'a'; 5000]).expect("gzip");
    let gz = e.finish().expect("gzip");
    let raw = exchange(MESSAGES_REQ, Some(&json_resp("gzip", &gz)));
    let d = decode(&raw, &Limits { body: 1000 });
    assert_eq!(d.response_body, vec![b'a'; 1000]);
    assert_eq!(
        d.exchange.notes[0],
        "response gzip output cut at 1000 bytes"
    );
}

const ANTHROPIC_SSE: &str = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_s\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":7,\"cache_creation_input_tokens\":1,\"output_tokens\":1}}}\r\n\r\n: a comment\r\nevent: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\nevent: content_block_start\r\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\r\n\r\nevent: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\r\n\r\nevent: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\r\n\r\nevent: content_block_start\r\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"Read\",\"input\":{}}}\r\n\r\nevent: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pa\"}}\r\n\r\nevent: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"th\\\":\\\"a\\\"}\"}}\r\n\r\nevent: message_delta\r\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\r\n\r\nevent: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n";

fn sse_resp(framed: &[u8]) -> Vec<u8> {
    with_body(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        framed,
    )
}

#[test]
fn events_split_across_reads() {
    // 7-byte chunks: events, lines and CRLFs all split across pieces.
    let pieces: Vec<&[u8]> = ANTHROPIC_SSE.as_bytes().chunks(7).collect();
    let ex = run(MESSAGES_REQ, &sse_resp(&chunked(&pieces)));
    assert!(ex.streamed);
    assert_eq!(ex.events, 10);
    assert_eq!(ex.response_id.as_deref(), Some("msg_s"));
    assert_eq!(ex.response_text, "Hello");
    assert_eq!(
        ex.tool_calls,
        [RequestedCall {
            id: Some("toolu_9".into()),
            name: "Read".into(),
            arguments: r#"{"path":"a"}"#.into()
        }]
    );
    assert_eq!(ex.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        ex.usage,
        Some(Usage {
            input: 5,
            output: 9,
            cache_read: 7,
            cache_creation: 1,
            reasoning: 0
        })
    );
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);
}

#[test]
fn sse_rules() {
    // BOM, CR and LF line ends, comments, two data lines joined with LF, a
    // field without colon, an event with no data (not dispatched), a last
    // event without a blank line.
    let text = "\u{feff}: hi\revent: a\rdata: one\rdata:two\r\rid\nevent: empty\n\ndata: last";
    let (events, notes) = sse::parse(text.as_bytes());
    assert_eq!(
        events,
        [
            sse::Event {
                name: Some("a".into()),
                data: "one\ntwo".into()
            },
            sse::Event {
                name: None,
                data: "last".into()
            },
        ]
    );
    assert_eq!(notes, ["SSE event 1: no blank line after it (stream cut?)"]);
}

#[test]
fn non_json_data_is_noted() {
    let body = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\ndata: not json\n\ndata: [DONE]\n\n";
    let req = b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 0\r\n\r\n";
    let resp = with_body(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
        body.as_bytes(),
    );
    let ex = run(req, &resp);
    assert_eq!(ex.api, Some(Api::OpenaiChat));
    assert_eq!(ex.events, 3);
    assert_eq!(ex.response_text, "ok");
    assert_eq!(ex.usage, None);
    assert_eq!(ex.notes, ["SSE event 1: not JSON"]);
}

fn error_resp(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn rate_limit_errors() {
    let ex = run(
        MESSAGES_REQ,
        &error_resp(
            "429 Too Many Requests",
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down."}}"#,
        ),
    );
    assert_eq!(ex.status, Some(429));
    assert_eq!(
        ex.error,
        Some(ApiError {
            status: Some(429),
            kind: Some("rate_limit_error".into()),
            message: Some("Slow down.".into())
        })
    );
    let chat = b"POST /chat/completions HTTP/1.1\r\ncontent-length: 0\r\n\r\n";
    let ex = run(
        chat,
        &error_resp(
            "429 Too Many Requests",
            r#"{"error":{"message":"Rate limit reached.","type":null,"code":"rate_limit_exceeded"}}"#,
        ),
    );
    assert_eq!(
        ex.error,
        Some(ApiError {
            status: Some(429),
            kind: Some("rate_limit_exceeded".into()),
            message: Some("Rate limit reached.".into())
        })
    );
    let gemini = b"POST /v1beta/models/gemini-2.5-pro:generateContent?key=secret123 HTTP/1.1\r\ncontent-length: 0\r\n\r\n";
    let ex = run(
        gemini,
        &error_resp(
            "429 Too Many Requests",
            r#"[{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED"}}]"#,
        ),
    );
    assert_eq!(ex.api, Some(Api::GeminiGenerate));
    assert_eq!(
        ex.path.as_deref(),
        Some("/v1beta/models/gemini-2.5-pro:generateContent?key=REDACTED")
    );
    assert_eq!(
        ex.error,
        Some(ApiError {
            status: Some(429),
            kind: Some("RESOURCE_EXHAUSTED".into()),
            message: Some("Quota exceeded.".into())
        })
    );
}

#[test]
fn anthropic_error_event_in_a_stream() {
    let body = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let resp = with_body(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
        body.as_bytes(),
    );
    let ex = run(MESSAGES_REQ, &resp);
    assert_eq!(
        ex.error,
        Some(ApiError {
            status: None,
            kind: Some("overloaded_error".into()),
            message: Some("Overloaded".into())
        })
    );
}

const GEMINI_REQ: &[u8] = b"POST /v1beta/models/gemini-2.5-flash:streamGenerateContent HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";

const GEMINI_ARRAY: &str = "[{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"thinking\",\"thought\":true},{\"text\":\"Hi\"}]}}],\"responseId\":\"r1\",\"modelVersion\":\"gemini-2.5-flash\"}\r\n,\r\n{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"ls\",\"args\":{\"p\":\".\"}}}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":100,\"candidatesTokenCount\":20,\"cachedContentTokenCount\":30,\"thoughtsTokenCount\":5}}\r\n]";

#[test]
fn gemini_json_array_stream() {
    let resp = with_body(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n",
        GEMINI_ARRAY.as_bytes(),
    );
    let ex = run(GEMINI_REQ, &resp);
    assert!(ex.streamed);
    assert_eq!(ex.events, 2);
    assert_eq!(ex.model.as_deref(), Some("gemini-2.5-flash"));
    assert_eq!(ex.response_id.as_deref(), Some("r1"));
    assert_eq!(ex.response_text, "Hi");
    assert_eq!(
        ex.tool_calls,
        [RequestedCall {
            id: None,
            name: "ls".into(),
            arguments: r#"{"p":"."}"#.into()
        }]
    );
    assert_eq!(ex.stop_reason.as_deref(), Some("STOP"));
    assert_eq!(
        ex.usage,
        Some(Usage {
            input: 70,
            output: 20,
            cache_read: 30,
            cache_creation: 0,
            reasoning: 5
        })
    );
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);

    // Cut inside the second element: the first still counts.
    let cut = &GEMINI_ARRAY.as_bytes()[..GEMINI_ARRAY.len() - 40];
    let resp = with_body(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n",
        cut,
    );
    let ex = run(GEMINI_REQ, &resp);
    assert_eq!(ex.events, 1);
    assert_eq!(ex.response_text, "Hi");
    assert!(ex.tool_calls.is_empty());
    assert_eq!(ex.notes, ["JSON stream element 1 cut"]);
}

#[test]
fn response_cut_by_the_relay() {
    let framed = chunked(&[ANTHROPIC_SSE.as_bytes()]);
    // Stop in the tool_use block's start; the relay dropped the rest.
    let chunk_len = ANTHROPIC_SSE.len();
    let header = format!("{chunk_len:x}\r\n").len();
    let cut = header + ANTHROPIC_SSE.find("toolu_9").expect("in the stream");
    let mut raw = exchange(MESSAGES_REQ, Some(&sse_resp(&framed[..cut])));
    if let Some(r) = raw.response.as_mut() {
        r.body_dropped = (framed.len() - cut) as u64;
    }
    let ex = decode(&raw, &Limits::default()).exchange;
    assert_eq!(ex.response_id.as_deref(), Some("msg_s"));
    assert_eq!(ex.response_text, "Hello");
    assert!(ex.tool_calls.is_empty());
    assert_eq!(ex.stop_reason, None);
    assert_eq!(
        ex.notes,
        [
            format!(
                "response body cut by the relay at {cut} bytes, {} dropped",
                framed.len() - cut
            ),
            format!(
                "response chunked body cut in chunk 0 ({} of {chunk_len} bytes)",
                cut - header
            ),
            "SSE event 5: no blank line after it (stream cut?)".to_string(),
            "SSE event 5: not JSON".to_string(),
        ]
    );
}

#[test]
fn count_tokens_is_other() {
    let req = b"POST /v1/messages/count_tokens HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}";
    let ex = run(req, &error_resp("200 OK", r#"{"input_tokens":12}"#));
    assert_eq!(ex.api, Some(Api::Other));
    assert_eq!(ex.status, Some(200));
    assert_eq!(ex.usage, None);
    assert_eq!(ex.response_bytes, 19);
}

#[test]
fn responses_namespace_tools_and_failed_response() {
    let body = r#"{"model":"gpt-5.5","instructions":"Be terse.","tools":[{"type":"function","name":"exec_command"},{"type":"namespace","name":"mcp__fs__","tools":[{"type":"function","name":"read_file"},{"type":"function","name":"list"}]},{"type":"web_search"}],"input":"hello"}"#;
    let req = format!(
        "POST /v1/responses HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let events = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5.5\"}}\n\nevent: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"namespace\":\"mcp__fs__\",\"name\":\"read_file\",\"arguments\":\"\"}}\n\ndata: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\",\"delta\":\"{\\\"p\\\":\"}\n\ndata: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\",\"delta\":\"1}\"}\n\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"resp_1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"Boom.\"}}}\n\n";
    let resp = with_body(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
        events.as_bytes(),
    );
    let ex = run(req.as_bytes(), &resp);
    assert_eq!(ex.system.as_deref(), Some("Be terse."));
    assert_eq!(
        ex.tools,
        [
            "exec_command",
            "mcp__fs__read_file",
            "mcp__fs__list",
            "web_search"
        ]
    );
    assert_eq!(ex.messages.len(), 1);
    assert_eq!(ex.messages[0].role, "user");
    assert_eq!(ex.messages[0].bytes, 7);
    assert_eq!(
        ex.tool_calls,
        [RequestedCall {
            id: Some("call_1".into()),
            name: "mcp__fs__read_file".into(),
            arguments: r#"{"p":1}"#.into()
        }]
    );
    assert_eq!(ex.stop_reason.as_deref(), Some("failed"));
    assert_eq!(
        ex.error,
        Some(ApiError {
            status: None,
            kind: Some("server_error".into()),
            message: Some("Boom.".into())
        })
    );
    assert_eq!(ex.usage, None);
}

#[test]
fn malformed_heads_are_noted() {
    let raw = exchange(b"\x00\x01garbage\r\n\r\n", Some(b"HTTP/1.1 200"));
    let ex = decode(&raw, &Limits::default()).exchange;
    assert_eq!(ex.api, Some(Api::Other));
    assert_eq!(ex.method, None);
    assert_eq!(ex.status, None);
    assert_eq!(
        ex.notes,
        [
            "request head malformed: invalid token",
            "response head incomplete"
        ]
    );
}
