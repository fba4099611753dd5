//! Decoding real exchanges: the pinned CLIs (Claude Code 2.1.328, Codex 0.169,
//! Gemini CLI 0.61, Qwen Code 0.24.4) against the scripted model server
//! (`tests/e2e/server/server.js`, scenario `inspect`, second turn), recorded
//! byte for byte between them. Expected values are what the request held and
//! what the server logged it sent.

mod common;

use agentsight_wire::decode::{Limits, decode, request_body};
use agentsight_wire::{Api, Exchange, RequestedCall, Usage};
use common::fixture;

fn decoded(name: &str) -> Exchange {
    decode(&fixture(name), &Limits::default()).exchange
}

fn roles(ex: &Exchange) -> Vec<&str> {
    ex.messages.iter().map(|m| m.role.as_str()).collect()
}

fn sizes(ex: &Exchange) -> Vec<u64> {
    ex.messages.iter().map(|m| m.bytes).collect()
}

#[test]
fn claude_code_messages_with_a_tool_result() {
    let ex = decoded("claude-messages");
    assert_eq!(ex.api, Some(Api::AnthropicMessages));
    assert_eq!(ex.method.as_deref(), Some("POST"));
    assert_eq!(ex.path.as_deref(), Some("/v1/messages?beta=true"));
    assert_eq!(ex.status, Some(200));
    assert_eq!(ex.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(ex.response_model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(ex.system_bytes, 28493);
    assert_eq!(ex.system.as_ref().map(String::len), Some(28493));
    assert_eq!(ex.tools.len(), 12);
    assert_eq!(ex.tools.first().map(String::as_str), Some("Agent"));
    assert_eq!(ex.tools.last().map(String::as_str), Some("Write"));
    assert_eq!(ex.tools_bytes, 47265);
    assert_eq!(roles(&ex), ["user", "assistant", "user"]);
    assert_eq!(sizes(&ex), [10875, 193, 250]);
    assert_eq!(ex.messages[1].tool_calls, ["toolu_e2e000001"]);
    assert_eq!(ex.messages[2].tool_results, ["toolu_e2e000001"]);
    assert!(ex.streamed);
    assert_eq!(ex.events, 9);
    assert_eq!(ex.response_id.as_deref(), Some("msg_e2e000004"));
    assert_eq!(ex.response_text, "Now reading the notes.");
    assert_eq!(
        ex.tool_calls,
        [RequestedCall {
            id: Some("toolu_e2e000003".into()),
            name: "Read".into(),
            arguments: r#"{"file_path":"/work/tmp/wire-a/claude/work/notes.txt"}"#.into(),
        }]
    );
    assert_eq!(ex.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        ex.usage,
        Some(Usage {
            input: 700,
            output: 43,
            cache_read: 400,
            cache_creation: 50,
            reasoning: 0
        })
    );
    assert_eq!(ex.request_bytes, 87928);
    assert_eq!(ex.response_bytes, 1490);
    assert_eq!(ex.error, None);
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);
}

#[test]
fn codex_responses_with_function_call_and_output() {
    let ex = decoded("codex-responses");
    assert_eq!(ex.api, Some(Api::OpenaiResponses));
    assert_eq!(ex.path.as_deref(), Some("/v1/responses"));
    assert_eq!(ex.model.as_deref(), Some("gpt-5.5"));
    // Codex sends no `instructions`: its two developer messages are the system prompt.
    assert_eq!(ex.system_bytes, 26473);
    assert_eq!(ex.tools.len(), 10);
    assert_eq!(ex.tools.first().map(String::as_str), Some("exec_command"));
    assert_eq!(ex.tools[3], "apply_patch");
    assert_eq!(ex.tools.last().map(String::as_str), Some("web_search"));
    assert_eq!(ex.tools_bytes, 8931);
    assert_eq!(
        roles(&ex),
        [
            "developer",
            "developer",
            "user",
            "user",
            "assistant",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(sizes(&ex), [21609, 5384, 509, 207, 167, 217, 236]);
    assert_eq!(ex.messages[5].tool_calls, ["call_e2e000004"]);
    assert_eq!(ex.messages[6].tool_results, ["call_e2e000004"]);
    assert!(ex.streamed);
    assert_eq!(ex.events, 13);
    assert_eq!(ex.response_id.as_deref(), Some("resp_e2e000005"));
    assert_eq!(ex.response_model.as_deref(), Some("gpt-5.5"));
    assert_eq!(ex.response_text, "Now reading the notes.");
    assert_eq!(
        ex.tool_calls,
        [RequestedCall {
            id: Some("call_e2e000008".into()),
            name: "exec_command".into(),
            arguments: r#"{"cmd":"cat 'notes.txt'","workdir":"/work/tmp/wire-a/codex/work","yield_time_ms":10000}"#.into(),
        }]
    );
    assert_eq!(ex.stop_reason.as_deref(), Some("completed"));
    // Sent: input 1100 incl. 400 cached, output 54 incl. 11 reasoning.
    assert_eq!(
        ex.usage,
        Some(Usage {
            input: 700,
            output: 43,
            cache_read: 400,
            cache_creation: 0,
            reasoning: 11
        })
    );
    assert_eq!(ex.request_bytes, 38766);
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);
}

#[test]
fn gemini_cli_stream_generate_content() {
    let ex = decoded("gemini-sse");
    assert_eq!(ex.api, Some(Api::GeminiGenerate));
    assert_eq!(
        ex.path.as_deref(),
        Some("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    );
    assert_eq!(ex.model.as_deref(), Some("gemini-2.5-flash"));
    assert_eq!(ex.system_bytes, 23477);
    assert_eq!(ex.tools.len(), 16);
    assert_eq!(ex.tools.first().map(String::as_str), Some("update_topic"));
    assert_eq!(ex.tools.last().map(String::as_str), Some("activate_skill"));
    assert_eq!(ex.tools_bytes, 22565);
    assert_eq!(roles(&ex), ["user", "model", "user"]);
    assert_eq!(sizes(&ex), [641, 250, 208]);
    assert!(
        ex.messages
            .iter()
            .all(|m| m.tool_calls.is_empty() && m.tool_results.is_empty())
    );
    assert!(ex.streamed);
    assert_eq!(ex.events, 2);
    assert_eq!(ex.response_id.as_deref(), Some("gem_e2e000002"));
    assert_eq!(ex.response_model.as_deref(), Some("gemini-2.5-flash"));
    assert_eq!(ex.response_text, "Now reading the notes.");
    assert_eq!(
        ex.tool_calls,
        [RequestedCall {
            id: None,
            name: "read_file".into(),
            arguments: r#"{"file_path":"/work/tmp/wire-a/gemini/work/notes.txt"}"#.into(),
        }]
    );
    assert_eq!(ex.stop_reason.as_deref(), Some("STOP"));
    // Sent: prompt 1100 incl. 400 cached, candidates 43, thoughts 11 apart.
    assert_eq!(
        ex.usage,
        Some(Usage {
            input: 700,
            output: 43,
            cache_read: 400,
            cache_creation: 0,
            reasoning: 11
        })
    );
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);
}

#[test]
fn qwen_code_chat_completions_with_tool_calls_and_usage_chunk() {
    let ex = decoded("qwen-chat");
    assert_eq!(ex.api, Some(Api::OpenaiChat));
    assert_eq!(ex.path.as_deref(), Some("/v1/chat/completions"));
    assert_eq!(ex.model.as_deref(), Some("qwen3-coder-plus"));
    assert_eq!(ex.system_bytes, 27778);
    assert_eq!(ex.tools.len(), 14);
    assert_eq!(ex.tools.first().map(String::as_str), Some("agent"));
    assert_eq!(ex.tools.last().map(String::as_str), Some("write_file"));
    assert_eq!(ex.tools_bytes, 38761);
    assert_eq!(roles(&ex), ["system", "user", "assistant", "tool"]);
    assert_eq!(sizes(&ex), [28186, 9840, 222, 211]);
    assert_eq!(ex.messages[2].tool_calls, ["call_e2e000002"]);
    assert_eq!(ex.messages[3].tool_results, ["call_e2e000002"]);
    assert!(ex.streamed);
    // Nine chunks and `[DONE]`.
    assert_eq!(ex.events, 10);
    assert_eq!(ex.response_id.as_deref(), Some("chatcmpl-e2e000003"));
    assert_eq!(ex.response_model.as_deref(), Some("qwen3-coder-plus"));
    assert_eq!(ex.response_text, "Now reading the notes.");
    assert_eq!(
        ex.tool_calls,
        [RequestedCall {
            id: Some("call_e2e000004".into()),
            name: "read_file".into(),
            arguments: r#"{"file_path":"/work/tmp/wire-a/qwen/work/notes.txt"}"#.into(),
        }]
    );
    assert_eq!(ex.stop_reason.as_deref(), Some("tool_calls"));
    // Sent: prompt 1100 incl. 400 cached, completion 54 incl. 11 reasoning.
    assert_eq!(
        ex.usage,
        Some(Usage {
            input: 700,
            output: 43,
            cache_read: 400,
            cache_creation: 0,
            reasoning: 11
        })
    );
    assert!(ex.notes.is_empty(), "{:?}", ex.notes);
}

#[test]
fn request_body_is_the_json_sent() {
    let (body, notes) = request_body(&fixture("qwen-chat"), &Limits::default());
    assert_eq!(body.len(), 77347);
    assert!(body.starts_with(b"{\"model\":\"qwen3-coder-plus\""));
    assert!(notes.is_empty(), "{notes:?}");
}

/// Every 97th prefix of each fixture's request and response, as if the
/// capture had stopped there: decoding must not panic.
#[test]
fn truncated_fixtures_do_not_panic() {
    let mut cuts = 0;
    for name in [
        "claude-messages",
        "codex-responses",
        "gemini-sse",
        "qwen-chat",
    ] {
        let whole = fixture(name);
        let req = [whole.request.head.clone(), whole.request.body.clone()].concat();
        let resp = whole.response.clone().expect("response");
        let resp = [resp.head, resp.body].concat();
        for cut in (0..resp.len()).step_by(97) {
            let raw = common::exchange(&req, Some(&resp[..cut]));
            let _ = decode(&raw, &Limits::default());
            cuts += 1;
        }
        for cut in (0..req.len()).step_by(97) {
            let raw = common::exchange(&req[..cut], None);
            let _ = decode(&raw, &Limits::default());
            cuts += 1;
        }
    }
    assert!(cuts > 2500, "{cuts}");
}
