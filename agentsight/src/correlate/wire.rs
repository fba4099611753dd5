//! The wire layer beside the transcript (`record --wire`): each model
//! exchange the relay stored is joined to the session's turns by the ids both
//! carry, never by guessing, and what does not line up is said.
//!
//! Join keys, strongest first: the response id (`msg_…`, `resp_…`) equal to
//! a transcript response's native id; a tool-call id the exchange requested
//! or answered equal to a transcript call's id. An exchange with no shared id
//! inside the session's time span is a model call the transcript does not
//! show (auxiliary: titles, summaries, compaction; retried; or hidden).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::clock::Anchors;
use crate::sessions::{AgentSession, TokenUsage};
use crate::store::wire::WireExchangeRow;

/// What the wire says about one session.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct WireReport {
    /// Exchanges of the capture (all sessions and none).
    pub exchanges_in_capture: usize,
    /// The exchanges joined to this session, in time order.
    pub turns: Vec<WireTurn>,
    /// Exchanges inside the session's time span that share no id with any
    /// turn or call of it: model calls the transcript does not show.
    pub not_in_transcript: Vec<WireTurn>,
    /// TLS exchanges inside the session's time span whose request is no
    /// model API's (a tool's `curl` or `git`): kept apart, never counted as
    /// model calls.
    pub not_model_calls: Vec<WireTurn>,
    /// Transcript responses (native ids) inside the wire's time span that no
    /// exchange answered with.
    pub transcript_turns_without_exchange: Vec<String>,
    /// Tool-call ids the model requested on the wire that the transcript lacks.
    pub calls_requested_not_in_transcript: Vec<String>,
    /// Transcript tool calls (ids) inside the wire's span the wire never requested.
    pub calls_not_requested_on_wire: Vec<String>,
    /// Responses whose usage differs between wire and transcript.
    pub usage_differences: Vec<UsageDifference>,
}

/// One exchange as correlate shows it.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct WireTurn {
    /// `wire_exchanges.id`.
    pub exchange: i64,
    /// RFC 3339 wall time of the request's first byte.
    pub time: String,
    pub api: Option<agentsight_wire::Api>,
    pub model: Option<String>,
    pub status: Option<u16>,
    pub response_id: Option<String>,
    /// How it was joined: `response_id`, `tool_call_id`; empty when not joined.
    pub joined_by: String,
    pub system_bytes: u64,
    pub tools_offered: usize,
    /// Size of the tool definitions as sent.
    pub tools_bytes: u64,
    pub messages: usize,
    /// Size of the messages sent (the history), each as its JSON.
    pub history_bytes: u64,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub tool_calls: Vec<String>,
    pub usage: Option<agentsight_wire::Usage>,
    pub stop_reason: Option<String>,
    pub error: Option<String>,
    /// CLOCK_MONOTONIC ns of the request's first byte and of the
    /// exchange's last (the response's, else the request's): spans' times.
    #[serde(skip)]
    pub mono_ns: (u64, u64),
}

/// Usage of one response as the wire and the transcript give it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct UsageDifference {
    pub response_id: String,
    pub wire: agentsight_wire::Usage,
    pub transcript: agentsight_wire::Usage,
}

/// The transcript's usage in the wire's parts: the session model's
/// `output` includes `reasoning`, the wire's does not.
fn usage_of(t: &TokenUsage) -> agentsight_wire::Usage {
    agentsight_wire::Usage {
        input: t.input,
        output: t.output.saturating_sub(t.reasoning),
        cache_read: t.cache_read,
        cache_creation: t.cache_creation,
        reasoning: t.reasoning,
    }
}

/// Ids an exchange carries: its response id, and every tool-call id it
/// requested or whose results or requests its conversation holds.
fn ids_of(x: &agentsight_wire::Exchange) -> BTreeSet<&str> {
    let mut ids: BTreeSet<&str> = x
        .tool_calls
        .iter()
        .filter_map(|c| c.id.as_deref())
        .collect();
    for m in &x.messages {
        ids.extend(m.tool_results.iter().map(String::as_str));
        ids.extend(m.tool_calls.iter().map(String::as_str));
    }
    ids.extend(x.response_id.as_deref());
    ids
}

fn turn_of(row: &WireExchangeRow, anchors: &Anchors, joined_by: &str) -> WireTurn {
    let x = &row.decoded;
    WireTurn {
        exchange: row.id,
        time: crate::clock::rfc3339_ns(anchors.wall_ns(row.raw.request.first_ns).max(0) as u64),
        api: x.api,
        model: x.model.clone(),
        status: x.status,
        response_id: x.response_id.clone(),
        joined_by: joined_by.to_string(),
        system_bytes: x.system_bytes,
        tools_offered: x.tools.len(),
        tools_bytes: x.tools_bytes,
        messages: x.messages.len(),
        history_bytes: x.messages.iter().map(|m| m.bytes).sum(),
        request_bytes: x.request_bytes,
        response_bytes: x.response_bytes,
        tool_calls: x.tool_calls.iter().filter_map(|c| c.id.clone()).collect(),
        usage: x.usage,
        stop_reason: x.stop_reason.clone(),
        error: x
            .error
            .as_ref()
            .map(|e| e.message.clone().or(e.kind.clone()).unwrap_or_default())
            .or(row.raw.error.clone()),
        mono_ns: (
            row.raw.request.first_ns,
            row.raw
                .response
                .as_ref()
                .map_or(row.raw.request.last_ns, |r| r.last_ns),
        ),
    }
}

/// The shape of an id: what comes before its first `_` or `-` (`msg`,
/// `resp`, `chatcmpl`), or the whole id.
fn id_kind(id: &str) -> &str {
    id.split(['_', '-']).next().unwrap_or(id)
}

/// Records a usage difference of one response, when both sides give one.
fn usage_difference(
    out: &mut WireReport,
    id: &str,
    wire: Option<agentsight_wire::Usage>,
    transcript: Option<agentsight_wire::Usage>,
) {
    if let (Some(w), Some(t)) = (wire, transcript)
        && w != t
    {
        out.usage_differences.push(UsageDifference {
            response_id: id.to_string(),
            wire: w,
            transcript: t,
        });
    }
}

/// Adds a joined exchange: its turn, its time to the joined span, its
/// requested calls (by id, or by name when the API gives none).
fn joined(
    out: &mut WireReport,
    row: &WireExchangeRow,
    anchors: &Anchors,
    by: &str,
    span: &mut (i64, i64),
    requested: &mut BTreeSet<String>,
    unnamed: &mut BTreeMap<String, usize>,
) {
    let t = anchors.wall_ms(row.raw.request.first_ns);
    let end = row
        .raw
        .response
        .as_ref()
        .map_or(t, |r| anchors.wall_ms(r.last_ns));
    *span = (span.0.min(t), span.1.max(end));
    for c in &row.decoded.tool_calls {
        match &c.id {
            Some(id) => {
                requested.insert(id.clone());
            }
            None => *unnamed.entry(c.name.clone()).or_default() += 1,
        }
    }
    out.turns.push(turn_of(row, anchors, by));
}

/// Joins the capture's exchanges to `session`; `None` for a capture without
/// a wire layer.
pub fn report(
    rows: &[WireExchangeRow],
    session: &AgentSession,
    anchors: &Anchors,
) -> Option<WireReport> {
    if rows.is_empty() {
        return None;
    }
    let responses: BTreeMap<&str, &crate::sessions::LlmResponse> = session
        .responses
        .iter()
        .filter_map(|r| Some((r.native_id.as_deref()?, r)))
        .collect();
    let calls: BTreeSet<&str> = session
        .tools
        .iter()
        .filter_map(|t| t.call_id.as_deref())
        .collect();
    let wall_ms = |ns: u64| anchors.wall_ms(ns);
    let (lo, hi) = (
        session.start_ms.unwrap_or(i64::MIN),
        session.end_ms.unwrap_or(i64::MAX),
    );
    let mut out = WireReport {
        exchanges_in_capture: rows.len(),
        ..Default::default()
    };
    let mut requested: BTreeSet<String> = BTreeSet::new();
    // Calls requested without an id (Gemini), by name: matched to the
    // transcript's calls of that name.
    let mut unnamed: BTreeMap<String, usize> = BTreeMap::new();
    let mut answered: BTreeSet<&str> = BTreeSet::new();
    let mut span = (i64::MAX, i64::MIN);
    let mut unjoined: Vec<&WireExchangeRow> = Vec::new();
    for row in rows {
        if !row.is_model_call() {
            if (lo..=hi).contains(&wall_ms(row.raw.request.first_ns)) {
                out.not_model_calls.push(turn_of(row, anchors, ""));
            }
            continue;
        }
        let x = &row.decoded;
        let ids = ids_of(x);
        let by_response = x
            .response_id
            .as_deref()
            .filter(|id| responses.contains_key(id));
        let joined_by = if by_response.is_some() {
            "response_id"
        } else if ids.iter().any(|id| calls.contains(id)) {
            "tool_call_id"
        } else {
            ""
        };
        if joined_by.is_empty() {
            if (lo..=hi).contains(&wall_ms(row.raw.request.first_ns)) {
                unjoined.push(row);
            }
            continue;
        }
        if let Some(id) = by_response {
            answered.insert(id);
            let tr = responses[id].tokens.as_ref().map(usage_of);
            usage_difference(&mut out, id, x.usage, tr);
        }
        joined(
            &mut out,
            row,
            anchors,
            joined_by,
            &mut span,
            &mut requested,
            &mut unnamed,
        );
    }
    // An API without ids (Gemini): the transcript's responses no id joined,
    // in time order, against the exchanges no id joined — only when both
    // counts agree (one model call per transcript response); otherwise they
    // stay apart and are reported.
    let open: Vec<&crate::sessions::LlmResponse> = session
        .responses
        .iter()
        .filter(|r| {
            r.native_id
                .as_deref()
                .is_none_or(|id| !answered.contains(id))
        })
        .collect();
    let idless = !unjoined.is_empty()
        && unjoined
            .iter()
            .all(|r| r.decoded.tool_calls.iter().all(|c| c.id.is_none()))
        && unjoined.iter().all(|r| ids_of(&r.decoded).len() <= 1);
    if idless && open.len() == unjoined.len() {
        for (row, resp) in unjoined.iter().zip(&open) {
            let label = resp
                .native_id
                .clone()
                .unwrap_or_else(|| format!("response at {:?}", resp.ts_ms));
            usage_difference(
                &mut out,
                &label,
                row.decoded.usage,
                resp.tokens.as_ref().map(usage_of),
            );
            if let Some(id) = resp.native_id.as_deref() {
                answered.insert(id);
            }
            joined(
                &mut out,
                row,
                anchors,
                "order",
                &mut span,
                &mut requested,
                &mut unnamed,
            );
        }
    } else {
        out.not_in_transcript = unjoined.iter().map(|r| turn_of(r, anchors, "")).collect();
    }
    let inside = |ms: Option<i64>| ms.is_some_and(|m| (span.0..=span.1).contains(&m));
    // Only transcripts that keep the API's own response ids (Claude Code's
    // `msg_…`) can say a turn had no exchange; others (Copilot CLI, Qwen
    // Code, opencode) name their turns with ids of their own.
    let kinds: BTreeSet<&str> = rows
        .iter()
        .filter_map(|r| r.decoded.response_id.as_deref().map(id_kind))
        .collect();
    out.transcript_turns_without_exchange = responses
        .iter()
        .filter(|(id, r)| !answered.contains(*id) && inside(r.ts_ms) && kinds.contains(id_kind(id)))
        .map(|(id, _)| id.to_string())
        .collect();
    call_differences(&mut out, session, &calls, &requested, unnamed, &inside);
    Some(out)
}

/// Tool calls requested on the wire that the transcript lacks, and the
/// transcript's calls inside the wire's span it never requested (calls
/// requested without an id count by name).
fn call_differences(
    out: &mut WireReport,
    session: &AgentSession,
    calls: &BTreeSet<&str>,
    requested: &BTreeSet<String>,
    mut unnamed: BTreeMap<String, usize>,
    inside: &dyn Fn(Option<i64>) -> bool,
) {
    out.calls_requested_not_in_transcript = requested
        .iter()
        .filter(|id| !calls.contains(id.as_str()))
        .cloned()
        .collect();
    for t in session.tools.iter().filter(|t| inside(t.start_ms)) {
        let Some(id) = &t.call_id else { continue };
        if requested.contains(id) {
            continue;
        }
        match unnamed.get_mut(&t.name) {
            Some(n) if *n > 0 => *n -= 1,
            _ => out.calls_not_requested_on_wire.push(id.clone()),
        }
    }
}
