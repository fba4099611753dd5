//! The mapping from the run model to spans (the table in docs/otlp.md):
//! one trace per session — `invoke_agent {agent}` at the root, `chat
//! {model}` per model response, `execute_tool {tool}` per tool call, a CLI
//! span per process attributed to a call, file and network activity as span
//! events, the unattributed rest under `agentsight.unattributed` — and one
//! more trace for the trees bound to no session.

use std::collections::{BTreeMap, HashMap, HashSet};

use opentelemetry_proto::tonic::trace::v1::{
    Span, Status,
    span::{Event, SpanKind},
    status::StatusCode,
};

use super::{
    Options,
    attrs::{Attrs, ms_to_ns, span_id, trace_id},
};
use crate::{
    correlate::{Activity, By, CaptureView, Op, Reason, ToolReport, wire::WireTurn},
    sessions::{AgentSession, LlmResponse, Provider, TokenUsage, ToolEvent, ToolStatus},
    views::{
        mcp::McpView,
        run::{RunModel, SessionRun, UnboundRun},
    },
};

/// Span events kept per span; the rest are counted in
/// `dropped_events_count` (never silently left out).
pub const MAX_EVENTS_PER_SPAN: usize = 128;

/// The agent names of `gen_ai.agent.name` and the providers of
/// `gen_ai.provider.name` (the convention's well-known values; Cursor
/// fronts several model providers and its transcripts do not say which).
pub fn agent_of(p: Provider) -> (&'static str, &'static str) {
    match p {
        Provider::Claude => ("claude-code", "anthropic"),
        Provider::Codex => ("codex", "openai"),
        Provider::Gemini => ("gemini-cli", "gcp.gemini"),
        Provider::Cursor => ("cursor", "cursor"),
        // These front several model providers; their records name the
        // model, not whose API served it.
        Provider::Copilot => ("copilot-cli", "github"),
        Provider::Opencode => ("opencode", "opencode"),
        Provider::Qwen => ("qwen-code", "qwen"),
    }
}

/// What every trace of an export draws from: the run, its correlation
/// view and the wall time of its newest stored event.
pub struct Source<'m> {
    pub run: &'m RunModel<'m>,
    pub view: &'m CaptureView<'m>,
    pub last_event_wall_ns: Option<i64>,
}

/// The spans of one trace as they are built.
pub struct Trace<'m> {
    pub id: [u8; 16],
    pub spans: Vec<Span>,
    model: &'m Source<'m>,
    opts: Options,
}

/// One span to add.
struct SpanSpec {
    key: String,
    parent: Option<Vec<u8>>,
    name: String,
    kind: SpanKind,
    start_ns: u64,
    end_ns: u64,
    attrs: Attrs,
    events: Vec<Event>,
    error: bool,
}

impl<'m> Trace<'m> {
    fn new(model: &'m Source<'m>, opts: Options, parts: &[&str]) -> Self {
        Trace {
            id: trace_id(&model.run.meta.capture_key(), parts),
            spans: Vec::new(),
            model,
            opts,
        }
    }

    fn add(&mut self, s: SpanSpec) -> Vec<u8> {
        let id = span_id(&self.id, &s.key);
        let mut events = s.events;
        let dropped = events.len().saturating_sub(MAX_EVENTS_PER_SPAN);
        events.truncate(MAX_EVENTS_PER_SPAN);
        self.spans.push(Span {
            trace_id: self.id.to_vec(),
            span_id: id.clone(),
            parent_span_id: s.parent.unwrap_or_default(),
            name: s.name,
            kind: s.kind as i32,
            start_time_unix_nano: s.start_ns,
            end_time_unix_nano: s.end_ns.max(s.start_ns),
            attributes: s.attrs.0,
            events,
            dropped_events_count: u32::try_from(dropped).unwrap_or(u32::MAX),
            // Always present (Unset unless an error): OTLP/JSON readers
            // then never meet a null status.
            status: Some(Status {
                message: String::new(),
                code: if s.error {
                    StatusCode::Error
                } else {
                    StatusCode::Unset
                } as i32,
            }),
            ..Default::default()
        });
        id
    }

    fn wall_ns(&self, mono_ns: u64) -> u64 {
        self.model.view.anchors.wall_ns(mono_ns).max(0) as u64
    }

    /// The capture's loss and completeness, on a trace's root span.
    fn capture_attrs(&self, a: &mut Attrs) {
        let f = self.model.run.completeness();
        a.bool("agentsight.capture.complete", f.complete())
            .bool("agentsight.capture.recorder_finished", f.recorder_finished)
            .count("agentsight.capture.lost_events", f.lost_in_kernel)
            .count(
                "agentsight.capture.missing_by_sequence",
                f.missing_by_sequence,
            )
            .count("agentsight.capture.not_stored", f.not_stored);
        let loss: Vec<String> = self
            .model
            .run
            .loss
            .counters_nonzero()
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        if !loss.is_empty() {
            a.strs("agentsight.capture.loss", &loss);
        }
    }
}

/// Usage per the convention: input counts every prompt token (the model's
/// `input` excludes cache reads and writes, which are parts of it here),
/// output includes reasoning.
fn usage_attrs(a: &mut Attrs, u: &TokenUsage) {
    let input = u
        .input
        .saturating_add(u.cache_read)
        .saturating_add(u.cache_creation);
    a.count("gen_ai.usage.input_tokens", input)
        .count("gen_ai.usage.output_tokens", u.output)
        .count("gen_ai.usage.cache_read.input_tokens", u.cache_read)
        .count("gen_ai.usage.cache_creation.input_tokens", u.cache_creation)
        .count("gen_ai.usage.reasoning.output_tokens", u.reasoning);
}

/// A chat message list in the convention's JSON shape (content capture).
fn messages(role: &str, text: &str) -> String {
    serde_json::json!([{"role": role, "parts": [{"type": "text", "content": text}]}]).to_string()
}

/// The trace of one session.
pub fn session_trace<'m>(m: &'m Source<'m>, run: &SessionRun, opts: Options) -> Trace<'m> {
    let s = &run.session;
    let mut t = Trace::new(m, opts, &["session", s.provider.as_str(), &s.session_id]);
    let root = span_id(&t.id, "invoke_agent");
    let times = Timeline::of(s);
    for (i, r) in s.responses.iter().enumerate() {
        chat_span(&mut t, &root, s, s.cut.responses_dropped + i, r, &times);
    }
    if let Some(w) = &run.report.wire {
        for turn in w.turns.iter().chain(&w.not_in_transcript) {
            wire_chat_span(&mut t, &root, s, turn);
        }
    }
    for p in &run.report.prompts {
        for tr in &p.tools {
            if let Some(tool) = s.tools.get(tr.tool_index) {
                let key = format!("tool:{}", s.cut.tools_dropped + tr.tool_index);
                tool_span(&mut t, &root, &key, s, tool, tr, run);
            }
        }
    }
    let unattributed: Vec<&Activity> = run.report.flags.observed_not_claimed.iter().collect();
    let mut a = Attrs::default();
    a.str("agentsight.unattributed.scope", "session")
        .count("agentsight.unattributed.count", unattributed.len() as u64);
    group_span(&mut t, &root, "unattributed", &unattributed, a);
    // The agent runtime's own activity outside every call: beside the
    // unexplained, never in it.
    let runtime: Vec<&Activity> = run
        .report
        .runtime_activity
        .iter()
        .flat_map(|g| &g.activity)
        .collect();
    if !runtime.is_empty() {
        let mut a = Attrs::default();
        a.count("agentsight.runtime.count", runtime.len() as u64)
            .count(
                "agentsight.runtime.programs",
                run.report.runtime_activity.len() as u64,
            );
        group_span(&mut t, &root, "runtime", &runtime, a);
    }
    root_span(&mut t, run);
    t.spans = parents_first(std::mem::take(&mut t.spans));
    t
}

/// The spans reordered so that every parent comes before its children
/// (depth first, siblings in the order they were built).
fn parents_first(spans: Vec<Span>) -> Vec<Span> {
    let index: HashMap<&[u8], usize> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.span_id.as_slice(), i))
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); spans.len()];
    let mut roots = Vec::new();
    for (i, s) in spans.iter().enumerate() {
        match index.get(s.parent_span_id.as_slice()) {
            Some(&p) if p != i => children[p].push(i),
            _ => roots.push(i),
        }
    }
    let mut order = Vec::with_capacity(spans.len());
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(children[i].iter().rev());
    }
    let mut slots: Vec<Option<Span>> = spans.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// Earliest start and latest end of `spans`, over known times only (0 is
/// "the source gave no time", never 1970).
fn span_range(spans: &[Span]) -> (u64, u64) {
    let lo = spans
        .iter()
        .map(|s| s.start_time_unix_nano)
        .filter(|&t| t != 0)
        .min();
    let hi = spans
        .iter()
        .map(|s| s.end_time_unix_nano)
        .filter(|&t| t != 0)
        .max();
    (lo.unwrap_or(0), hi.unwrap_or(0))
}

fn activity_range(t: &Trace, acts: &[&Activity]) -> Option<(u64, u64)> {
    let lo = acts.iter().map(|a| a.mono_ns).min()?;
    let hi = acts.iter().map(|a| a.mono_ns).max()?;
    Some((t.wall_ns(lo), t.wall_ns(hi)))
}

/// `agentsight.{key}` under the root: the helpers' processes (`by`
/// child) as CLI spans under it, the runtime's own activity as its events.
/// It spans its activity and its processes (all of the session's spans
/// when there is neither).
fn group_span(t: &mut Trace, root: &[u8], key: &str, acts: &[&Activity], attrs: Attrs) {
    let id = span_id(&t.id, key);
    let before = t.spans.len();
    let events = process_spans(t, &id, key, acts, |a| a.by == Some(By::Child));
    let (lo, hi) = match (activity_range(t, acts), before < t.spans.len()) {
        (Some((a, b)), true) => {
            let (c, d) = span_range(&t.spans[before..]);
            (a.min(c), b.max(d))
        }
        (Some(r), false) => r,
        (None, true) => span_range(&t.spans[before..]),
        (None, false) => span_range(&t.spans),
    };
    t.add(SpanSpec {
        key: key.into(),
        parent: Some(root.to_vec()),
        name: format!("agentsight.{key}"),
        kind: SpanKind::Internal,
        start_ns: lo,
        end_ns: hi,
        attrs,
        events,
        error: false,
    });
}

/// The root `invoke_agent` span, added last: it spans its children.
fn root_span(t: &mut Trace, run: &SessionRun) {
    let s = &run.session;
    let (agent, provider) = agent_of(s.provider);
    let mut a = Attrs::default();
    a.str("gen_ai.operation.name", "invoke_agent")
        .str("gen_ai.provider.name", provider)
        .str("gen_ai.agent.name", agent)
        .opt_str("gen_ai.agent.version", s.agent_version.as_deref())
        .opt_str("gen_ai.conversation.id", s.conversation_id.as_deref());
    if let [model] = s.models.as_slice() {
        a.str("gen_ai.request.model", model.clone());
    }
    if !s.usage.is_zero() {
        usage_attrs(&mut a, &s.usage);
    }
    a.str("agentsight.session.id", s.session_id.clone())
        .str("agentsight.session.provider", s.provider.as_str())
        .count("agentsight.session.prompts", s.prompt_count as u64)
        .count("agentsight.session.responses", s.response_count as u64)
        .count("agentsight.session.tool_calls", s.tool_count as u64);
    let cut = [
        ("prompts_dropped", s.cut.prompts_dropped),
        ("responses_dropped", s.cut.responses_dropped),
        ("tools_dropped", s.cut.tools_dropped),
    ];
    for (k, n) in cut.into_iter().filter(|(_, n)| *n > 0) {
        a.count(&format!("agentsight.session.{k}"), n as u64);
    }
    let f = &run.report.flags;
    a.count(
        "agentsight.correlate.bindings",
        run.report.bindings.len() as u64,
    )
    .count(
        "agentsight.correlate.claimed_not_observed",
        f.claimed_not_observed.len() as u64,
    )
    .count(
        "agentsight.correlate.observed_not_claimed",
        f.observed_not_claimed.len() as u64,
    )
    .count(
        "agentsight.correlate.runtime_activity",
        run.report
            .runtime_activity
            .iter()
            .map(|g| g.count as u64)
            .sum(),
    )
    .count("agentsight.correlate.mismatches", f.mismatches.len() as u64)
    .count("agentsight.correlate.late", f.late.len() as u64)
    .int(
        "agentsight.correlate.clock_skew_ms",
        run.report.clock.skew_ms,
    );
    t.capture_attrs(&mut a);
    let events = s
        .prompts
        .iter()
        .map(|p| {
            let mut ea = Attrs::default();
            ea.count("agentsight.prompt.index", p.index as u64)
                .count("agentsight.prompt.length", p.text_len as u64);
            if t.opts.capture_content {
                ea.str("gen_ai.input.messages", messages("user", &p.text));
            }
            Event {
                time_unix_nano: p.ts_ms.map(ms_to_ns).unwrap_or(0),
                name: "agentsight.prompt".into(),
                attributes: ea.0,
                dropped_attributes_count: 0,
            }
        })
        .collect::<Vec<_>>();
    let (lo, hi) = span_range(&t.spans);
    let known = |ns: u64| (ns != 0).then_some(ns);
    let start = [known(lo), s.start_ms.map(ms_to_ns)]
        .into_iter()
        .flatten()
        .min();
    let end = [known(hi), s.end_ms.map(ms_to_ns)]
        .into_iter()
        .flatten()
        .max();
    let mut events = events;
    let start_ns = start.unwrap_or(0);
    for e in &mut events {
        if e.time_unix_nano == 0 {
            // A prompt with no time: placed at the start, and said so.
            e.time_unix_nano = start_ns;
            let mut ea = Attrs(std::mem::take(&mut e.attributes));
            ea.bool("agentsight.time.unknown", true);
            e.attributes = ea.0;
        }
    }
    // Children whose source gave no time sit at the session's start (they
    // say so with `agentsight.time.unknown`), never at the epoch.
    for sp in &mut t.spans {
        if sp.start_time_unix_nano == 0 {
            sp.start_time_unix_nano = start_ns;
        }
        if sp.end_time_unix_nano == 0 {
            sp.end_time_unix_nano = sp.start_time_unix_nano;
        }
    }
    if start.is_none() {
        a.bool("agentsight.time.unknown", true);
    }
    t.add(SpanSpec {
        key: "invoke_agent".into(),
        parent: None,
        name: format!("invoke_agent {agent}"),
        kind: SpanKind::Internal,
        start_ns,
        end_ns: end.unwrap_or(start_ns),
        attrs: a,
        events,
        error: false,
    });
}

/// Every time a session's records carry, sorted: a response's record is
/// written when it ends, so its start is the record before it.
struct Timeline(Vec<i64>);

impl Timeline {
    fn of(s: &AgentSession) -> Self {
        let mut v: Vec<i64> = s.prompts.iter().filter_map(|p| p.ts_ms).collect();
        v.extend(s.responses.iter().filter_map(|r| r.ts_ms));
        v.extend(
            s.tools
                .iter()
                .flat_map(|t| [t.start_ms, t.end_ms])
                .flatten(),
        );
        v.sort_unstable();
        Timeline(v)
    }

    /// The latest record strictly before `t`, or `t` itself.
    fn before(&self, t: i64) -> i64 {
        match self.0.partition_point(|&x| x < t) {
            0 => t,
            i => self.0[i - 1],
        }
    }
}

fn chat_span(
    t: &mut Trace,
    root: &[u8],
    s: &AgentSession,
    index: usize,
    r: &LlmResponse,
    times: &Timeline,
) {
    let (_, provider) = agent_of(s.provider);
    let mut a = Attrs::default();
    a.str("gen_ai.operation.name", "chat")
        .str("gen_ai.provider.name", provider)
        .opt_str("gen_ai.request.model", r.model.as_deref())
        .opt_str("gen_ai.response.model", r.model.as_deref())
        .opt_str("gen_ai.response.id", r.native_id.as_deref())
        .opt_str("gen_ai.conversation.id", s.conversation_id.as_deref());
    match (s.provider, r.phase.as_deref()) {
        // Claude's phase is the response's `stop_reason`.
        (Provider::Claude, Some(reason)) => {
            a.strs("gen_ai.response.finish_reasons", &[reason.to_owned()]);
        }
        (_, phase) => {
            a.opt_str("agentsight.response.phase", phase);
        }
    }
    a.opt_str("agentsight.response.request_id", r.request_id.as_deref());
    if let Some(u) = &r.tokens {
        usage_attrs(&mut a, u);
    }
    if let Some(p) = r.prompt_index {
        a.count("agentsight.prompt.index", p as u64);
    }
    if let Some(sub) = r.subagent {
        a.count("agentsight.subagent.index", sub as u64);
    }
    a.bool("agentsight.time.start_inferred", true);
    if t.opts.capture_content && !r.text.is_empty() {
        a.str("gen_ai.output.messages", messages("assistant", &r.text));
    }
    if r.ts_ms.is_none() {
        a.bool("agentsight.time.unknown", true);
    }
    let end = r.ts_ms.unwrap_or(0);
    t.add(SpanSpec {
        key: format!("chat:{index}"),
        parent: Some(root.to_vec()),
        name: match &r.model {
            Some(m) => format!("chat {m}"),
            None => "chat".into(),
        },
        kind: SpanKind::Client,
        // No time: 0 until the root places it at the session's start.
        start_ns: r.ts_ms.map_or(0, |e| ms_to_ns(times.before(e))),
        end_ns: ms_to_ns(end),
        attrs: a,
        events: Vec::new(),
        error: false,
    });
}

/// `gen_ai.provider.name` of a model API as the wire saw it.
fn provider_of_api(api: Option<agentsight_wire::Api>) -> Option<&'static str> {
    use agentsight_wire::Api;
    match api? {
        Api::AnthropicMessages => Some("anthropic"),
        Api::OpenaiResponses | Api::OpenaiChat => Some("openai"),
        Api::GeminiGenerate => Some("gcp.gemini"),
        Api::Other => None,
    }
}

/// A model call as the wire layer (`record --wire`) saw it: beside the
/// transcript's `chat` spans, never merged with them
/// (`agentsight.evidence` = `wire`); `agentsight.wire.joined_by` says how
/// it lines up with the transcript (empty: a call the transcript does not
/// show). No content is exported from the wire.
fn wire_chat_span(t: &mut Trace, root: &[u8], s: &AgentSession, w: &WireTurn) {
    let mut a = Attrs::default();
    a.str("gen_ai.operation.name", "chat")
        .opt_str("gen_ai.provider.name", provider_of_api(w.api))
        .opt_str("gen_ai.request.model", w.model.as_deref())
        .opt_str("gen_ai.response.id", w.response_id.as_deref())
        .opt_str("gen_ai.conversation.id", s.conversation_id.as_deref())
        .str("agentsight.evidence", "wire")
        .int("agentsight.wire.exchange", w.exchange)
        .str("agentsight.wire.joined_by", w.joined_by.clone())
        .count("agentsight.wire.system_bytes", w.system_bytes)
        .count("agentsight.wire.tools_offered", w.tools_offered as u64)
        .count("agentsight.wire.messages", w.messages as u64)
        .count("agentsight.wire.request_bytes", w.request_bytes)
        .count("agentsight.wire.response_bytes", w.response_bytes);
    if let Some(status) = w.status {
        a.int("http.response.status_code", i64::from(status));
    }
    if let Some(reason) = &w.stop_reason {
        a.strs(
            "gen_ai.response.finish_reasons",
            std::slice::from_ref(reason),
        );
    }
    if !w.tool_calls.is_empty() {
        a.strs("agentsight.wire.tool_calls", &w.tool_calls);
    }
    if let Some(u) = &w.usage {
        // The wire's output excludes reasoning; the convention's includes it.
        let usage = TokenUsage::new(
            u.input,
            u.output.saturating_add(u.reasoning),
            u.cache_read,
            u.cache_creation,
            u.reasoning,
        );
        usage_attrs(&mut a, &usage);
    }
    if let Some(e) = &w.error {
        a.str("error.type", e.clone());
    }
    let (start, end) = w.mono_ns;
    let span = SpanSpec {
        key: format!("wire:{}", w.exchange),
        parent: Some(root.to_vec()),
        name: match &w.model {
            Some(m) => format!("chat {m}"),
            None => "chat".into(),
        },
        kind: SpanKind::Client,
        start_ns: t.wall_ns(start),
        end_ns: t.wall_ns(end),
        attrs: a,
        events: Vec::new(),
        error: w.error.is_some() || w.status.is_some_and(|c| c >= 400),
    };
    t.add(span);
}

fn tool_span(
    t: &mut Trace,
    root: &[u8],
    key: &str,
    s: &AgentSession,
    tool: &ToolEvent,
    report: &ToolReport,
    run: &SessionRun,
) {
    let activity = &report.activity;
    let mcp = McpView::of(tool, report.mcp.as_ref());
    let mut a = Attrs::default();
    a.str("gen_ai.operation.name", "execute_tool")
        .str("gen_ai.tool.name", tool.name.clone())
        .opt_str("gen_ai.tool.call.id", tool.call_id.as_deref())
        .str(
            "gen_ai.tool.type",
            if mcp.is_some() {
                "extension"
            } else {
                "function"
            },
        );
    if let Some(m) = &mcp {
        mcp_attrs(&mut a, m, t.opts.capture_content);
    }
    a.str("agentsight.tool.status", tool_status(tool.status))
        .str("agentsight.tool.category", category(tool))
        .opt_str("gen_ai.conversation.id", s.conversation_id.as_deref());
    if let Some(code) = tool.exit_code {
        a.int("agentsight.tool.exit_code", code.into());
    }
    let failed = tool.status == ToolStatus::Failed;
    if failed {
        a.str("error.type", "tool_error");
    }
    if let Some(p) = tool.prompt_index {
        a.count("agentsight.prompt.index", p as u64);
    }
    let same_call = |c: &Option<String>| tool.call_id.is_some() && *c == tool.call_id;
    let f = &run.report.flags;
    let claimed: Vec<String> = f
        .claimed_not_observed
        .iter()
        .filter(|c| same_call(&c.call_id))
        .map(|c| c.what.as_str().to_owned())
        .collect();
    let mismatches: Vec<String> = f
        .mismatches
        .iter()
        .filter(|c| same_call(&c.call_id))
        .map(|c| c.kind.as_str().to_owned())
        .collect();
    if !claimed.is_empty() {
        a.strs("agentsight.correlate.claimed_not_observed", &claimed);
    }
    if !mismatches.is_empty() {
        a.strs("agentsight.correlate.mismatches", &mismatches);
    }
    a.count("agentsight.correlate.activity", activity.len() as u64);
    if t.opts.capture_content {
        // An MCP call without command text: its arguments object.
        let arguments = tool
            .command
            .clone()
            .or_else(|| mcp.and_then(|m| m.arguments).map(|v| v.to_string()));
        if let Some(arguments) = arguments {
            a.str("gen_ai.tool.call.arguments", arguments);
        }
    }
    if tool.end_ms.is_none() {
        a.bool("agentsight.time.end_unknown", true);
    }
    let start = tool.start_ms.or(tool.end_ms).unwrap_or(0);
    if tool.start_ms.is_none() && tool.end_ms.is_none() {
        a.bool("agentsight.time.unknown", true);
    }
    let id = span_id(&t.id, key);
    let acts: Vec<&Activity> = activity.iter().collect();
    // An MCP server runs before and after its calls: its own activity is
    // the call's events; a process it started during the call (a git
    // server's `git`) gets its CLI span under the call.
    let started_in_call: HashSet<i64> = match tool.start_ms {
        Some(start) => {
            acts.iter()
                .filter(|a| a.reason == Some(Reason::McpServer))
                .filter(|a| {
                    let procs = &t.model.view.procs;
                    procs.by_id.get(&a.process_id).is_some_and(|&i| {
                        t.wall_ns(procs.procs[i].start_mono_ns) >= ms_to_ns(start)
                    })
                })
                .map(|a| a.process_id)
                .collect()
        }
        None => HashSet::new(),
    };
    let events = process_spans(t, &id, key, &acts, |a| match a.reason {
        Some(Reason::ArgvMatch | Reason::Descendant | Reason::TimeWindow) => true,
        Some(Reason::McpServer) => started_in_call.contains(&a.process_id),
        _ => false,
    });
    t.add(SpanSpec {
        key: key.to_owned(),
        parent: Some(root.to_vec()),
        name: format!("execute_tool {}", tool.name),
        kind: SpanKind::Internal,
        start_ns: ms_to_ns(start),
        end_ns: ms_to_ns(tool.end_ms.unwrap_or(start)),
        attrs: a,
        events,
        error: failed,
    });
}

/// An MCP call's attributes beside `gen_ai.tool.type` `extension`: the MCP
/// semantic conventions' `mcp.method.name` (`tools/call`), the transport as
/// `network.transport` (`pipe` for stdio, `tcp` for HTTP) and a remote
/// server's `server.address`/`server.port`; the server itself under
/// `agentsight.mcp.*` (the conventions name none). Its command line and URL
/// are content.
fn mcp_attrs(a: &mut Attrs, m: &McpView, capture_content: bool) {
    a.str("mcp.method.name", "tools/call")
        .opt_str("agentsight.mcp.server", m.server)
        .opt_str("agentsight.mcp.tool", m.tool)
        .opt_str("agentsight.mcp.transport", m.transport)
        .opt_str("network.transport", m.network_transport())
        .opt_str("agentsight.mcp.server.kind", m.kind);
    if let Some(pid) = m.pid {
        a.int("agentsight.mcp.server.pid", pid.into());
    }
    if let Some((host, port)) = m.host_port() {
        a.str("server.address", host);
        if let Some(port) = port {
            a.int("server.port", port.into());
        }
    }
    if capture_content {
        if !m.command.is_empty() {
            a.strs("agentsight.mcp.server.command", m.command);
        }
        a.opt_str("url.full", m.url);
    }
}

fn tool_status(s: ToolStatus) -> &'static str {
    match s {
        ToolStatus::Ok => "ok",
        ToolStatus::Failed => "failed",
        ToolStatus::Unknown => "unknown",
    }
}

fn category(t: &ToolEvent) -> String {
    serde_json::to_value(t.category)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// CLI spans for the processes of `acts` that `spawned` says were started
/// for the group (nested by parentage under `parent`), each with its
/// activity as events; the rest of the activity (a process that was not
/// started for it, e.g. the agent writing a file itself) comes back as
/// events for `parent`.
fn process_spans(
    t: &mut Trace,
    parent: &[u8],
    group: &str,
    acts: &[&Activity],
    spawned: impl Fn(&Activity) -> bool,
) -> Vec<Event> {
    let procs = &t.model.view.procs;
    // By process, in order of first activity; BTreeMap for a stable order.
    let mut by_proc: BTreeMap<(u64, i64), Vec<&Activity>> = BTreeMap::new();
    let mut first: HashMap<i64, u64> = HashMap::new();
    for a in acts {
        let f = *first.entry(a.process_id).or_insert(a.mono_ns);
        by_proc.entry((f, a.process_id)).or_default().push(a);
    }
    let mut own = Vec::new();
    let mut spanned: Vec<(usize, Vec<&Activity>)> = Vec::new();
    for ((_, pid_row), list) in by_proc {
        match procs.by_id.get(&pid_row) {
            Some(&i) if list.iter().any(|a| spawned(a)) => spanned.push((i, list)),
            _ => own.extend(list.into_iter().map(|a| activity_event(t, a, true))),
        }
    }
    let members: HashSet<usize> = spanned.iter().map(|(i, _)| *i).collect();
    for (i, list) in spanned {
        let events = list.iter().map(|a| activity_event(t, a, false)).collect();
        process_span(t, parent, group, &members, i, events);
    }
    own.sort_by_key(|e| e.time_unix_nano);
    own
}

/// One CLI span: the process `i` of the view's table, under the span of
/// its nearest ancestor among `members` (same group), else `parent`.
pub(super) fn process_span(
    t: &mut Trace,
    parent: &[u8],
    group: &str,
    members: &HashSet<usize>,
    i: usize,
    events: Vec<Event>,
) {
    let procs = &t.model.view.procs;
    let p = &procs.procs[i];
    let mut up = p.parent;
    let mut parent_id = parent.to_vec();
    while let Some(q) = up {
        if members.contains(&q) {
            parent_id = span_id(&t.id, &format!("{group}/process:{}", procs.procs[q].id));
            break;
        }
        up = procs.procs[q].parent;
    }
    // The kernel's comm (the executable's file name) by default: argv[0] is
    // whatever the caller chose (`exec -a`, a process title) and is content.
    let argv0 = || {
        p.argv
            .first()
            .map(|a| a.rsplit('/').next().unwrap_or(a).to_owned())
            .filter(|a| !a.is_empty())
    };
    let exe = if t.opts.capture_content {
        argv0().or_else(|| p.comm.clone())
    } else {
        p.comm.clone().filter(|c| !c.is_empty())
    }
    .unwrap_or_else(|| "process".into());
    let mut a = Attrs::default();
    a.str("process.executable.name", exe.clone())
        .int("process.pid", p.pid.into());
    if let Some(q) = p.parent {
        a.int("process.parent_pid", procs.procs[q].pid.into());
    }
    let mut error = false;
    match (p.exit_code, p.signal) {
        (Some(code), _) => {
            a.int("process.exit.code", code);
            if code != 0 {
                a.str("error.type", code.to_string());
                error = true;
            }
        }
        (None, Some(sig)) => {
            let name = nix::sys::signal::Signal::try_from(sig as i32)
                .map(|s| s.as_str().to_owned())
                .unwrap_or_else(|_| format!("signal {sig}"));
            a.int("agentsight.process.signal", sig)
                .str("error.type", name);
            error = true;
        }
        (None, None) => {
            a.bool("agentsight.process.exit_seen", false);
        }
    }
    a.opt_str("process.working_directory", p.cwd.as_deref())
        .int("agentsight.process.row", p.id);
    if let Some(c) = t.model.view.containers.get(&p.id) {
        a.str("container.id", c.id.clone())
            .opt_str("container.name", c.name.as_deref());
    }
    if t.opts.capture_content && !p.argv.is_empty() {
        a.strs("process.command_args", &p.argv);
    }
    let start = t.wall_ns(p.start_mono_ns);
    let end = match p.end_mono_ns {
        Some(e) => t.wall_ns(e),
        None => t
            .model
            .last_event_wall_ns
            .map_or(start, |w| w.max(0) as u64),
    };
    let mut events = events;
    events.sort_by_key(|e| e.time_unix_nano);
    t.add(SpanSpec {
        key: format!("{group}/process:{}", p.id),
        parent: Some(parent_id),
        name: exe,
        kind: SpanKind::Client,
        start_ns: start,
        end_ns: end,
        attrs: a,
        events,
        error,
    });
}

/// The event name of an activity.
fn event_name(op: Op) -> &'static str {
    match op {
        Op::Exec => "process.exec",
        Op::Write => "file.write",
        Op::Read => "file.read",
        Op::Delete => "file.delete",
        Op::Rename => "file.rename",
        Op::Mkdir => "file.mkdir",
        Op::Link => "file.link",
        Op::Connect => "network.connect",
        Op::Bind => "network.bind",
        Op::Listen => "network.listen",
    }
}

/// One activity as a span event; `with_pid` when it sits on a span that
/// is not its process's own.
pub(super) fn activity_event(t: &Trace, act: &Activity, with_pid: bool) -> Event {
    let mut a = Attrs::default();
    a.int("agentsight.event.id", act.event_id);
    if with_pid {
        a.int("process.pid", act.pid.into());
    }
    match act.op {
        Op::Connect => {
            a.opt_str("server.address", act.addr.as_deref());
            if let Some(port) = act.port {
                a.int("server.port", port.into());
            }
        }
        Op::Bind | Op::Listen => {
            a.opt_str("network.local.address", act.addr.as_deref());
            if let Some(port) = act.port {
                a.int("network.local.port", port.into());
            }
        }
        Op::Exec => {
            // correlate's exit code follows the shell (128 + signal for a
            // killed process); a killed process has no exit code of its own.
            let procs = &t.model.view.procs;
            let p = procs.by_id.get(&act.process_id).map(|&i| &procs.procs[i]);
            match p.map_or((act.exit_code, None), |p| (p.exit_code, p.signal)) {
                (Some(code), _) => {
                    a.int("process.exit.code", code);
                }
                (None, Some(sig)) => {
                    a.int("agentsight.process.signal", sig);
                }
                (None, None) => {}
            }
            if t.opts.capture_content
                && let Some(argv) = &act.argv
            {
                a.strs("process.command_args", argv);
            }
        }
        _ => {
            a.opt_str("file.path", act.path.as_deref())
                .opt_str("agentsight.file.real_path", act.real_path.as_deref())
                .opt_str("agentsight.file.old_path", act.old_path.as_deref());
        }
    }
    a.opt_str("error.type", act.errno.as_deref());
    if let Some(r) = act.reason {
        a.str("agentsight.attribution.reason", r.as_str());
    }
    if let Some(b) = &act.blocked {
        // Refused by `record --enforce` before it happened.
        a.bool("agentsight.enforcement.blocked", true)
            .int("agentsight.enforcement.denial_id", b.denial_id)
            .str("agentsight.enforcement.rule", &b.rule)
            .str("agentsight.enforcement.mechanism", &b.mechanism);
    }
    if act.late {
        a.bool("agentsight.late", true);
    }
    if let Some(by) = act.by {
        a.str("agentsight.unattributed.by", by.as_str());
    }
    Event {
        time_unix_nano: t.wall_ns(act.mono_ns),
        name: event_name(act.op).into(),
        attributes: a.0,
        dropped_attributes_count: 0,
    }
}

/// The trace of the trees bound to no session: every process of each
/// tree as a CLI span (nested by parentage) with its activity, under one
/// `agentsight.unattributed` root.
pub fn unbound_trace<'m>(m: &'m Source<'m>, run: &UnboundRun, opts: Options) -> Trace<'m> {
    let mut t = Trace::new(m, opts, &["unbound_trees"]);
    let root = span_id(&t.id, "unattributed");
    let procs = &m.view.procs;
    let mut order: Vec<usize> = Vec::new();
    for (_, r) in &run.trees {
        order.extend(procs.subtree(*r));
    }
    let members: HashSet<usize> = order.iter().copied().collect();
    let mut by_proc: HashMap<i64, Vec<&Activity>> = HashMap::new();
    for a in &run.activity {
        by_proc.entry(a.process_id).or_default().push(a);
    }
    for &i in &order {
        let events = by_proc
            .get(&procs.procs[i].id)
            .map(|v| v.iter().map(|a| activity_event(&t, a, false)).collect())
            .unwrap_or_default();
        process_span(&mut t, &root, "unbound", &members, i, events);
    }
    for (info, r) in &run.trees {
        let key = span_id(&t.id, &format!("unbound/process:{}", procs.procs[*r].id));
        if let Some(s) = t.spans.iter_mut().find(|s| s.span_id == key) {
            let mut a = Attrs::default();
            a.str("agentsight.tree.status", info.status.as_str())
                .opt_str("agentsight.tree.note", info.note.as_deref());
            s.attributes.extend(a.0);
        }
    }
    let (lo, hi) = span_range(&t.spans);
    let mut a = Attrs::default();
    a.str("agentsight.unattributed.scope", "unbound_trees")
        .count("agentsight.unattributed.trees", run.trees.len() as u64)
        .count("agentsight.unattributed.count", run.activity.len() as u64);
    t.capture_attrs(&mut a);
    t.add(SpanSpec {
        key: "unattributed".into(),
        parent: None,
        name: "agentsight.unattributed".into(),
        kind: SpanKind::Internal,
        start_ns: lo,
        end_ns: hi,
        attrs: a,
        events: Vec::new(),
        error: false,
    });
    t.spans = parents_first(std::mem::take(&mut t.spans));
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::any_value::Value;

    fn get(a: &Attrs, key: &str) -> Option<Value> {
        a.0.iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.clone()?.value)
    }

    /// The names the convention fixes, one row per provider.
    #[test]
    fn agents_and_providers_are_the_conventions_words() {
        let table = [
            (Provider::Claude, "claude-code", "anthropic"),
            (Provider::Codex, "codex", "openai"),
            (Provider::Gemini, "gemini-cli", "gcp.gemini"),
            (Provider::Cursor, "cursor", "cursor"),
            (Provider::Copilot, "copilot-cli", "github"),
            (Provider::Opencode, "opencode", "opencode"),
            (Provider::Qwen, "qwen-code", "qwen"),
        ];
        for (p, agent, provider) in table {
            assert_eq!(agent_of(p), (agent, provider), "{p}");
        }
    }

    /// §3 token rules on the normalized model (input without cache):
    /// input counts cache reads and writes, output includes reasoning.
    #[test]
    fn usage_follows_the_token_rules() {
        // (model usage, input, output, cache read, cache creation, reasoning)
        let table = [
            // Anthropic: input_tokens 10, cache read 200, cache write 30.
            (TokenUsage::new(10, 5, 200, 30, 0), 240, 5, 200, 30, 0),
            // OpenAI: input_tokens 120 of which 100 cached; 7 of 20 output reasoning.
            (TokenUsage::new(20, 20, 100, 0, 7), 120, 20, 100, 0, 7),
            (TokenUsage::default(), 0, 0, 0, 0, 0),
        ];
        for (u, input, output, read, creation, reasoning) in table {
            let mut a = Attrs::default();
            usage_attrs(&mut a, &u);
            let int = |k| get(&a, k);
            assert_eq!(
                int("gen_ai.usage.input_tokens"),
                Some(Value::IntValue(input))
            );
            assert_eq!(
                int("gen_ai.usage.output_tokens"),
                Some(Value::IntValue(output))
            );
            assert_eq!(
                int("gen_ai.usage.cache_read.input_tokens"),
                Some(Value::IntValue(read))
            );
            assert_eq!(
                int("gen_ai.usage.cache_creation.input_tokens"),
                Some(Value::IntValue(creation))
            );
            assert_eq!(
                int("gen_ai.usage.reasoning.output_tokens"),
                Some(Value::IntValue(reasoning))
            );
        }
    }

    #[test]
    fn a_response_starts_at_the_record_before_it() {
        let t = Timeline(vec![100, 250, 250, 400]);
        assert_eq!(t.before(250), 100);
        assert_eq!(t.before(400), 250);
        assert_eq!(t.before(100), 100, "nothing before: starts at its end");
        assert_eq!(t.before(50), 50);
    }

    #[test]
    fn parents_come_before_children() {
        let span = |id: u8, parent: Option<u8>| Span {
            span_id: vec![id; 8],
            parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
            ..Default::default()
        };
        // Built children first, as the mapping does.
        let spans = vec![
            span(3, Some(2)),
            span(2, Some(1)),
            span(4, Some(1)),
            span(1, None),
        ];
        let order: Vec<u8> = parents_first(spans).iter().map(|s| s.span_id[0]).collect();
        assert_eq!(order, vec![1, 2, 3, 4]);
    }

    #[test]
    fn untimed_spans_never_widen_the_range_to_the_epoch() {
        let sp = |start, end| Span {
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            ..Default::default()
        };
        assert_eq!(
            span_range(&[sp(0, 0), sp(5_000, 9_000), sp(7_000, 8_000)]),
            (5_000, 9_000)
        );
        // Nothing timed: 0, "unknown", which the root never takes as a time.
        assert_eq!(span_range(&[sp(0, 0)]), (0, 0));
    }

    #[test]
    fn every_op_has_an_event_name() {
        let names: HashSet<&str> = Op::ALL.iter().map(|&op| event_name(op)).collect();
        assert_eq!(names.len(), Op::ALL.len());
        assert_eq!(event_name(Op::Connect), "network.connect");
        assert_eq!(event_name(Op::Write), "file.write");
    }
}
