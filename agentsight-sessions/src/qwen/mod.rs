//! Qwen Code chats (`~/.qwen/projects/<project id>/chats/<sessionId>.jsonl`,
//! Qwen Code ≥ 0.5; verified on 0.24.4).
//!
//! One record a line, appended only: `user` (a prompt), `assistant` (a
//! model answer: Gemini parts — text, `thought` text, `functionCall{id,
//! name, args}` — with `usageMetadata`), `tool_result` (the
//! `functionResponse` and `toolCallResult{callId, status, resultDisplay}`)
//! and `system` (`subtype`: `ui_telemetry`, `attribution_snapshot`,
//! `chat_compression`, … ~45 values). A `--resume` appends to the same file
//! with no marker record. Calls pair by id (`functionCall.id` =
//! `toolCallResult.callId`, the id the model sent). Tool names are Gemini
//! CLI's, so each call is categorised by `gemini::tool_event`; the shell's
//! exit code is `resultDisplay.exitCode`. A deferred tool (MCP among them)
//! is called through the wrapper `tool_call{name, arguments}`: the event is
//! named after the real tool. Only the assistant records' usage is counted
//! (`ui_telemetry` api_response events and `~/.qwen/usage*` repeat it).

/// The tail reader of the live layer (`crate::live::read_tail`).
pub(crate) mod live;

/// Where transcripts live and how they are named.
pub(crate) mod layout;

/// Where its MCP servers are configured.
pub(crate) mod mcp;

/// The serde shapes of a chat record (shared with `live`).
pub(crate) mod wire;

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::de::{Content, LStr, ObjOr};
use super::error::{Result, SessionError};
use super::util::{self, parse_ts};
use super::{
    AgentSession, ErrorEvent, ErrorKind, LlmResponse, ParseStats, PathAccess, Provider,
    SubagentInfo, TokenUsage, ToolCategory, ToolStatus,
};
use crate::gemini::wire::{FnCall, FnResponse, FnResult, ToolCall};
use crate::mcp::McpCall;
use crate::provider::{IndexId, ProviderSpec, TailSpec};
use wire::{CallResult, Line, QPart};

/// Qwen Code's row of the provider table. Its paths are recognised before
/// Claude Code's (`…/projects/<x>/…` is Claude's layout too) and Gemini
/// CLI's (a home under `/tmp` puts `tmp` and `chats` in the path).
pub(crate) const SPEC: ProviderSpec = ProviderSpec {
    provider: Provider::Qwen,
    name: "qwen",
    aliases: &["qwen-code", "qwen_code"],
    cli_name: "qwen",
    roots: layout::roots,
    scan_root: layout::scan_root,
    after_scan: None,
    path_rank: 1,
    id_for_path: layout::id_for_path,
    candidate_id: crate::provider::stem_id,
    index_id: |p| crate::provider::stem_id(p).map_or(IndexId::None, IndexId::Id),
    is_transcript: layout::is_transcript,
    watch: layout::watch,
    header_id: false,
    verify_id: crate::provider::name_is_id,
    parse: |path, _, _| parse(path),
    enrich: None,
    mcp: mcp::SPEC,
    tail: TailSpec {
        read: live::read,
        first_line: None,
        from_path: live::from_path,
        widens: true,
        document: None,
    },
};

/// The real tool of a deferred call: `tool_call{name, arguments}`.
pub(crate) const DEFERRED_WRAPPER: &str = "tool_call";

fn read_lines(path: &Path, stats: &mut ParseStats) -> Result<Vec<Line>> {
    let f = util::open_regular(path)?;
    stats.files += 1;
    stats.bytes += f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut out = Vec::new();
    util::for_each_line(f, stats, |line, last, st| {
        if let Some(l) = util::parse_line::<Line>(line, last, st) {
            out.push(l);
        }
    })
    .map_err(|e| SessionError::io(path, e))?;
    Ok(out)
}

pub(crate) fn parse(path: &Path) -> Result<AgentSession> {
    let mut stats = ParseStats::default();
    let lines = read_lines(path, &mut stats)?;
    let Some(id) = crate::provider::stem_id(path) else {
        return Err(SessionError::Format {
            path: path.to_path_buf(),
            provider: "qwen",
            reason: "no file stem".into(),
        });
    };
    let mut s = AgentSession::new(Provider::Qwen, id.clone(), path.to_path_buf());
    s.conversation_id = Some(id);
    s.stats = stats;
    let results = results_by_call(&lines);
    let mut subs: HashMap<String, usize> = HashMap::new();
    for l in &lines {
        let ts = l.timestamp.as_deref().and_then(parse_ts);
        s.see_ts(ts);
        if s.cwd.is_none() {
            s.cwd = l.cwd.0.clone();
        }
        if s.agent_version.is_none() {
            s.agent_version = l.version.0.clone();
        }
        if s.git_branch.is_none() {
            s.git_branch = l.git_branch.0.clone();
        }
        let sub = subagent_of(&mut s, &mut subs, l);
        match l.kind.as_deref().unwrap_or("") {
            "user" => {
                let text = text_of(l, false);
                if sub.is_none() && !text.trim().is_empty() {
                    s.push_prompt(ts, text);
                }
            }
            "assistant" => answer(&mut s, l, ts, sub, &results),
            "tool_result" => {}
            "system" => system(&mut s, l, ts, sub),
            _ => s.stats.unknown_records += 1,
        }
    }
    Ok(s)
}

/// The subagent index of a sidechain record (`isSidechain`, `agentId`),
/// created on first sight.
fn subagent_of(s: &mut AgentSession, subs: &mut HashMap<String, usize>, l: &Line) -> Option<usize> {
    if l.is_sidechain != Some(true) {
        return None;
    }
    let agent = l.agent_id.0.clone().unwrap_or_default();
    let n = s.subagents.len();
    let i = *subs.entry(agent.clone()).or_insert(n);
    if i == n {
        s.subagents.push(SubagentInfo {
            agent_id: (!agent.is_empty()).then_some(agent),
            kind: None,
            description: None,
            parent_call_id: None,
            source_path: s.source_path.clone(),
            models: Vec::new(),
            usage: TokenUsage::default(),
            responses: 0,
            tools: 0,
        });
    }
    Some(i)
}

/// A call's result: the `tool_result` record's time, its `toolCallResult`
/// and its `functionResponse`.
struct Outcome<'a> {
    ts: Option<&'a str>,
    result: Option<&'a CallResult>,
    response: Option<&'a FnResponse>,
}

fn results_by_call(lines: &[Line]) -> HashMap<&str, Outcome<'_>> {
    let mut out: HashMap<&str, Outcome<'_>> = HashMap::new();
    for l in lines
        .iter()
        .filter(|l| l.kind.as_deref() == Some("tool_result"))
    {
        let result = l.tool_call_result.as_ref().and_then(ObjOr::obj);
        for r in parts(l).filter_map(|p| p.part.function_response.as_ref()?.obj()) {
            let Some(id) = r.id.as_deref() else { continue };
            out.entry(id).or_insert(Outcome {
                ts: l.timestamp.as_deref(),
                result: result.filter(|c| c.call_id.as_deref() == Some(id)),
                response: Some(r),
            });
        }
        // A result without a functionResponse part still closes its call.
        if let Some(c) = result
            && let Some(id) = c.call_id.as_deref()
        {
            out.entry(id).or_insert(Outcome {
                ts: l.timestamp.as_deref(),
                result: Some(c),
                response: None,
            });
        }
    }
    out
}

fn parts(l: &Line) -> impl Iterator<Item = &QPart> {
    l.message
        .as_ref()
        .and_then(ObjOr::obj)
        .into_iter()
        .flat_map(|m| m.parts.iter().filter_map(ObjOr::obj))
}

/// The text parts of a record; `thoughts`: the reasoning ones instead.
fn text_of(l: &Line, thoughts: bool) -> String {
    let texts: Vec<&str> = parts(l)
        .filter(|p| p.thought.unwrap_or(false) == thoughts)
        .filter_map(|p| p.part.text.as_deref())
        .collect();
    texts.join("\n")
}

fn answer(
    s: &mut AgentSession,
    l: &Line,
    ts: Option<i64>,
    sub: Option<usize>,
    results: &HashMap<&str, Outcome<'_>>,
) {
    if let Some(m) = l.model.as_deref() {
        s.see_model(m);
    }
    let tokens = l.usage_metadata.as_ref().and_then(ObjOr::obj).map(|u| {
        let (input, output, cached, reasoning) = u.split();
        TokenUsage::new(input, output, cached, 0, reasoning)
    });
    s.responses.push(LlmResponse {
        prompt_index: s.current_prompt(),
        subagent: sub,
        ts_ms: ts,
        model: l.model.0.clone(),
        native_id: l.uuid.0.clone(),
        request_id: None,
        phase: None,
        text: text_of(l, false),
        text_truncated: false,
        tokens,
    });
    for c in parts(l).filter_map(|p| p.part.function_call.as_ref()?.obj()) {
        let out = c.id.as_deref().and_then(|id| results.get(id));
        let ev = tool_event(s, c, out, ts, sub);
        s.tools.push(ev);
    }
}

/// A call as Gemini CLI's record shape, so its categories and paths are
/// read by the same code; then Qwen's own exit code, status and MCP split.
fn tool_event(
    s: &mut AgentSession,
    c: &FnCall,
    out: Option<&Outcome<'_>>,
    ts: Option<i64>,
    sub: Option<usize>,
) -> crate::ToolEvent {
    let (name, args) = real_tool(c);
    let result = out.and_then(|o| o.result);
    let tc = ToolCall {
        id: c.id.clone(),
        name: LStr(Some(name.clone())),
        args: Some(args.clone()),
        status: LStr(result.and_then(|r| r.status.0.clone())),
        timestamp: LStr(out.and_then(|o| o.ts).map(str::to_string)),
        result: Content::Blocks(
            out.and_then(|o| o.response)
                .map(|r| FnResult {
                    function_response: Some(ObjOr::Obj(r.clone())),
                })
                .into_iter()
                .collect(),
        ),
        ..ToolCall::default()
    };
    let mut ev = crate::gemini::tool_event(s, &tc, ts, sub);
    if created_file(&name, out.and_then(|o| o.response)) {
        for p in &mut ev.paths {
            p.access = PathAccess::Create;
        }
    }
    let display = result.and_then(|r| r.result_display.as_ref());
    if let Some(d) = display.filter(|d| util::jstr(d, "type") == Some("shell_result")) {
        ev.exit_code = util::exit_code_of(d.get("exitCode").unwrap_or(&Value::Null));
        if ev.exit_code.is_some_and(|c| c != 0) {
            ev.status = ToolStatus::Failed;
        }
    }
    if ev.category == ToolCategory::Mcp || name.starts_with("mcp__") {
        ev.category = ToolCategory::Mcp;
        ev.mcp = Some(McpCall::from_split_name(&name, args));
    }
    ev
}

/// A `write_file` or `edit` call that made a new file. Qwen Code writes no
/// `isNewFile` (Gemini CLI's flag); its result text says it, as 0.24.4
/// words it: `write_file` "Successfully created and wrote to new file: P."
/// (else "Successfully overwrote file: P."), `edit` "Created new file: P
/// with provided content." (else "The file: P has been updated."). The
/// display's `originalContent` cannot tell: it is "" for a new file and for
/// an emptied one alike.
fn created_file(name: &str, response: Option<&FnResponse>) -> bool {
    let prefix = match name {
        "write_file" => "Successfully created and wrote to new file: ",
        "edit" => "Created new file: ",
        _ => return false,
    };
    response
        .and_then(|r| r.response.as_ref()?.obj()?.output.as_deref())
        .is_some_and(|o| o.starts_with(prefix))
}

/// The tool a call really runs: the wrapper's `args.name` and
/// `args.arguments` for a deferred call, else the call itself.
fn real_tool(c: &FnCall) -> (String, Value) {
    let name = c.name.0.clone().unwrap_or_default();
    let args = c.args.clone().unwrap_or(Value::Null);
    if name == DEFERRED_WRAPPER
        && let Some(real) = util::jstr(&args, "name")
    {
        let inner = args.get("arguments").cloned().unwrap_or(Value::Null);
        // Arguments may arrive as a JSON string.
        let inner = match inner {
            Value::String(t) => serde_json::from_str(&t).unwrap_or(Value::String(t)),
            v => v,
        };
        return (real.to_string(), inner);
    }
    (name, args)
}

/// `system` records: an API error (`ui_telemetry` `qwen-code.api_error`)
/// is an error event; the other subtypes are bookkeeping.
fn system(s: &mut AgentSession, l: &Line, ts: Option<i64>, sub: Option<usize>) {
    if l.subtype.as_deref() != Some("ui_telemetry") {
        return;
    }
    let Some(ev) = l
        .system_payload
        .as_ref()
        .and_then(ObjOr::obj)
        .and_then(|p| p.ui_event.as_ref()?.obj())
    else {
        return;
    };
    if ev.name.as_deref() != Some("qwen-code.api_error") {
        return;
    }
    let kind = if ev.status() == Some(429) || ev.error_type.as_deref() == Some("RateLimitError") {
        ErrorKind::RateLimit
    } else {
        ErrorKind::ApiError
    };
    s.errors.push(ErrorEvent {
        prompt_index: s.current_prompt(),
        subagent: sub,
        ts_ms: ts,
        kind,
        message: ev.error_message.0.clone().unwrap_or_default(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(output: &str) -> FnResponse {
        serde_json::from_value(serde_json::json!({"id": "c", "response": {"output": output}}))
            .expect("response")
    }

    /// The texts of the 0.24.4 `write_file` and `edit` tools.
    #[test]
    fn a_new_file_is_told_by_the_result_text() {
        let created = |name: &str, out: &str| created_file(name, Some(&response(out)));
        assert!(created(
            "write_file",
            "Successfully created and wrote to new file: /w/a."
        ));
        assert!(!created("write_file", "Successfully overwrote file: /w/a."));
        assert!(created(
            "edit",
            "Created new file: /w/a with provided content."
        ));
        assert!(!created("edit", "The file: /w/a has been updated."));
        // Another tool's text, or no result yet, says nothing.
        assert!(!created("read_file", "Created new file: /w/a"));
        assert!(!created_file("write_file", None));
    }
}
