//! What the timeline holds besides the events: its tracks (declared first),
//! and the slices, instants and flows of sessions, tool calls, processes
//! and loss, sorted by time. All of it is O(processes + tool calls); the
//! events themselves are streamed past it (see [`super::export`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{
    proto::{self, ProcessDescriptor, ProcessTreeProcess, TrackDescriptor},
    writer::{Ann, Value},
};
use crate::{
    clock::Anchors,
    correlate::{Op, ToolReport},
    sessions::util::join_argv,
    store::read::{ContainerRef, Gap, ProcessRecord},
    views::{mcp::McpView, run::SessionRun},
};

/// Track uuids: the kind in the low three bits, so they never collide and
/// stay short on the wire (every event names its track).
pub mod uuid {
    const SESSION: u64 = 1;
    const LANE: u64 = 2;
    const PROCESS: u64 = 3;
    pub const PROCESS_TREE: u64 = 4;
    pub const LOSS: u64 = 5;
    pub const NO_PROCESS: u64 = 6;
    const WIRE: u64 = 7;
    pub fn session(s: usize) -> u64 {
        (s as u64) << 3 | SESSION
    }
    pub fn lane(s: usize, lane: usize) -> u64 {
        ((s as u64) << 24 | lane as u64) << 3 | LANE
    }
    /// A lane of a session's model calls as the wire saw them.
    pub fn wire(s: usize, lane: usize) -> u64 {
        ((s as u64) << 24 | lane as u64) << 3 | WIRE
    }
    /// The process track of a process row (one per (pid, start time)).
    pub fn process(id: i64) -> u64 {
        (id as u64) << 3 | PROCESS
    }
    /// Its place in the process-tree hierarchy.
    pub fn tree(id: i64) -> u64 {
        (id as u64).wrapping_add(1) << 3 | PROCESS_TREE
    }
}

/// Bounds on text copied into the trace (argv, commands, prompts).
const ARGV_MAX: usize = 64;
const TEXT_MAX: usize = 1024;

/// Sort ranks among marks at one timestamp: a slice that ends there closes
/// before the next one opens on its track; process lifetimes close after
/// the events at their last instant.
const RANK_END: u8 = 0;
const RANK_TREE: u8 = 1;
const RANK_BEGIN: u8 = 2;
pub const RANK_EVENT: u8 = 3;
const RANK_PROCESS_END: u8 = 5;

pub enum Mark {
    Event {
        track: u64,
        kind: i32,
        name: Option<String>,
        anns: Vec<Ann>,
        flows: Vec<u64>,
        terminating: Vec<u64>,
    },
    Tree(ProcessTreeProcess),
}

pub struct Item {
    pub ts: u64,
    pub rank: u8,
    pub mark: Mark,
}

/// What correlation says about one event: which call it is attributed to,
/// or who did it unclaimed, and the flows that end on it.
#[derive(Default)]
pub struct EventNote {
    pub anns: Vec<Ann>,
    pub terminating: Vec<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub sessions: u64,
    pub tool_slices: u64,
    /// Tool calls the transcript gives no time for: no slice.
    pub untimed_tools: u64,
    /// Model calls as the wire saw them (`record --wire`).
    pub wire_slices: u64,
    pub processes: u64,
    pub flows: u64,
}

#[derive(Default)]
pub struct Plan {
    pub tracks: Vec<TrackDescriptor>,
    pub items: Vec<Item>,
    pub notes: HashMap<i64, EventNote>,
    pub counts: Counts,
    /// Flows ending on each process's lifetime slice, by process row.
    process_flows: HashMap<i64, Vec<u64>>,
    next_flow: u64,
}

pub(super) fn text(s: &str) -> Value {
    if s.len() <= TEXT_MAX {
        return Value::Str(s.to_owned());
    }
    let mut end = TEXT_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Value::Str(format!("{}…", &s[..end]))
}

/// The JSON word of a session-model enum (its serde name).
fn word<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_owned(),
    }
}

fn plain_track(
    uuid: u64,
    name: String,
    parent: Option<u64>,
    order: Option<i32>,
) -> TrackDescriptor {
    TrackDescriptor {
        uuid: Some(uuid),
        name: Some(name),
        parent_uuid: parent,
        child_ordering: order,
        ..Default::default()
    }
}

impl Plan {
    fn push(&mut self, ts: u64, rank: u8, mark: Mark) {
        self.items.push(Item { ts, rank, mark });
    }

    fn slice(
        &mut self,
        track: u64,
        span: (u64, u64),
        name: String,
        anns: Vec<Ann>,
        flows: (Vec<u64>, Vec<u64>),
        end: (u8, Vec<Ann>),
    ) {
        let (begin, finish) = (span.0, span.1.max(span.0));
        self.push(
            begin,
            RANK_BEGIN,
            Mark::Event {
                track,
                kind: proto::SLICE_BEGIN,
                name: Some(name),
                anns,
                flows: flows.0,
                terminating: flows.1,
            },
        );
        // A zero-length slice ends right after it begins (same rank, next).
        let rank = if finish > begin { end.0 } else { RANK_BEGIN };
        self.push(
            finish,
            rank,
            Mark::Event {
                track,
                kind: proto::SLICE_END,
                name: None,
                anns: end.1,
                flows: Vec::new(),
                terminating: Vec::new(),
            },
        );
    }

    fn flow(&mut self) -> u64 {
        self.next_flow += 1;
        self.next_flow
    }

    /// Sorts the marks by time, rank, then the order they were made in.
    pub fn finish(mut self) -> Self {
        self.items.sort_by_key(|i| (i.ts, i.rank));
        self
    }
}

/// A session's track: prompts as slices, each until the next; responses as
/// instants; tool calls as slices on lanes below it (calls may overlap:
/// a lane never holds two at once); a flow from each call to every process
/// whose exec correlation attributed to it, and to each attributed event of
/// a process it did not start.
pub fn session(plan: &mut Plan, s_ix: usize, cs: &SessionRun, anchors: &Anchors, capture_end: u64) {
    let (session, report) = (&cs.session, &cs.report);
    let mono = |ms: i64| anchors.mono_of_ms(ms);
    let track = uuid::session(s_ix);
    plan.counts.sessions += 1;
    plan.tracks.push(plain_track(
        track,
        format!(
            "{} session {}",
            session.provider.as_str(),
            session.session_id
        ),
        None,
        Some(proto::ORDER_CHRONOLOGICAL),
    ));
    let last_tool_end = session
        .tools
        .iter()
        .filter_map(|t| t.end_ms.or(t.start_ms))
        .max();
    let end = session
        .end_ms
        .into_iter()
        .chain(last_tool_end)
        .max()
        .map(mono)
        .unwrap_or(capture_end);
    prompts(plan, track, session, &mono, end);
    for r in &session.responses {
        let Some(ts) = r.ts_ms else { continue };
        let mut anns: Vec<Ann> = Vec::new();
        anns.extend(r.model.as_ref().map(|m| ("model", Value::Str(m.clone()))));
        anns.extend(
            r.native_id
                .as_ref()
                .map(|m| ("response_id", Value::Str(m.clone()))),
        );
        if let Some(t) = &r.tokens {
            anns.push(("input_tokens", Value::Int(t.input as i64)));
            anns.push(("output_tokens", Value::Int(t.output as i64)));
            anns.push(("cache_read_tokens", Value::Int(t.cache_read as i64)));
            anns.push(("cache_creation_tokens", Value::Int(t.cache_creation as i64)));
        }
        plan.push(
            mono(ts),
            RANK_EVENT,
            Mark::Event {
                track,
                kind: proto::INSTANT,
                name: Some("response".into()),
                anns,
                flows: Vec::new(),
                terminating: Vec::new(),
            },
        );
    }
    let reports: HashMap<usize, &ToolReport> = report
        .prompts
        .iter()
        .flat_map(|p| &p.tools)
        .map(|t| (t.tool_index, t))
        .collect();
    // Calls by start; each on the first lane free before it starts.
    let mut timed: Vec<(u64, u64, usize)> = Vec::new();
    for (i, t) in session.tools.iter().enumerate() {
        match t.start_ms {
            Some(start) => {
                let b = mono(start);
                timed.push((b, t.end_ms.map(mono).unwrap_or(end).max(b), i));
            }
            None => plan.counts.untimed_tools += 1,
        }
    }
    timed.sort();
    let mut lanes: Vec<u64> = Vec::new();
    for (b, e, i) in timed {
        let lane = free_lane(plan, &mut lanes, (b, e), |l| {
            let name = if l == 0 {
                "tool calls".to_owned()
            } else {
                format!("tool calls {}", l + 1)
            };
            let mut d = plain_track(uuid::lane(s_ix, l), name, Some(track), None);
            d.sibling_order_rank = Some(l as i32);
            d
        });
        tool_call(
            plan,
            uuid::lane(s_ix, lane),
            (b, e),
            i,
            cs,
            reports.get(&i).copied(),
        );
    }
    if let Some(w) = &report.wire {
        wire_calls(plan, s_ix, track, w);
    }
    for a in &report.flags.observed_not_claimed {
        let note = plan.notes.entry(a.event_id).or_default();
        note.anns.push((
            "unclaimed_by",
            Value::Str(a.by.map(|b| b.as_str()).unwrap_or("?").into()),
        ));
    }
}

/// The first lane free before `span` starts (`lanes` holds when each
/// becomes free), busy until it ends; a new one, declared by `track_of`,
/// when none is.
fn free_lane(
    plan: &mut Plan,
    lanes: &mut Vec<u64>,
    span: (u64, u64),
    track_of: impl Fn(usize) -> TrackDescriptor,
) -> usize {
    let lane = match lanes.iter().position(|&free| free < span.0) {
        Some(l) => l,
        None => {
            lanes.push(0);
            let l = lanes.len() - 1;
            plan.tracks.push(track_of(l));
            l
        }
    };
    lanes[lane] = span.1;
    lane
}

/// The session's model calls as the wire saw them, beside its transcript:
/// one slice per exchange from the request's first byte to the answer's
/// last, on lanes below the session (calls overlap: a title request beside
/// the main one), with sizes, ids and usage — never content.
fn wire_calls(
    plan: &mut Plan,
    s_ix: usize,
    session_track: u64,
    w: &crate::correlate::wire::WireReport,
) {
    let mut turns: Vec<(&crate::correlate::wire::WireTurn, bool)> = w
        .turns
        .iter()
        .map(|t| (t, true))
        .chain(w.not_in_transcript.iter().map(|t| (t, false)))
        .collect();
    turns.sort_by_key(|(t, _)| (t.mono_ns.0, t.exchange));
    let mut lanes: Vec<u64> = Vec::new();
    for (t, in_transcript) in turns {
        let (b, e) = (t.mono_ns.0, t.mono_ns.1.max(t.mono_ns.0));
        let lane = free_lane(plan, &mut lanes, (b, e), |l| {
            let name = if l == 0 {
                "model calls (wire)".to_owned()
            } else {
                format!("model calls (wire) {}", l + 1)
            };
            let mut d = plain_track(uuid::wire(s_ix, l), name, Some(session_track), None);
            // Below the tool-call lanes.
            d.sibling_order_rank = Some(1_000 + l as i32);
            d
        });
        let n = |v: u64| Value::Int(i64::try_from(v).unwrap_or(i64::MAX));
        let mut anns: Vec<Ann> = vec![
            ("exchange", Value::Int(t.exchange)),
            (
                "joined_by",
                Value::Str(if in_transcript {
                    t.joined_by.clone()
                } else {
                    "not in the transcript".to_owned()
                }),
            ),
            ("system_bytes", n(t.system_bytes)),
            ("tools_offered", n(t.tools_offered as u64)),
            ("tools_bytes", n(t.tools_bytes)),
            ("messages", n(t.messages as u64)),
            ("history_bytes", n(t.history_bytes)),
            ("request_bytes", n(t.request_bytes)),
            ("response_bytes", n(t.response_bytes)),
        ];
        anns.extend(t.model.as_ref().map(|m| ("model", Value::Str(m.clone()))));
        anns.extend(
            t.response_id
                .as_ref()
                .map(|r| ("response_id", Value::Str(r.clone()))),
        );
        anns.extend(t.status.map(|st| ("status", Value::Int(i64::from(st)))));
        if !t.tool_calls.is_empty() {
            anns.push(("tool_calls", text(&t.tool_calls.join(" "))));
        }
        if let Some(u) = &t.usage {
            anns.push(("input_tokens", n(u.input)));
            anns.push(("output_tokens", n(u.output)));
            anns.push(("cache_read_tokens", n(u.cache_read)));
            anns.push(("cache_creation_tokens", n(u.cache_creation)));
        }
        anns.extend(
            t.stop_reason
                .as_ref()
                .map(|r| ("stop_reason", Value::Str(r.clone()))),
        );
        anns.extend(t.error.as_ref().map(|e| ("error", text(e))));
        let name = match &t.model {
            Some(m) => format!("chat {m}"),
            None => "chat".to_owned(),
        };
        plan.counts.wire_slices += 1;
        plan.slice(
            uuid::wire(s_ix, lane),
            (b, e),
            name,
            anns,
            (Vec::new(), Vec::new()),
            (RANK_END, Vec::new()),
        );
    }
}

fn prompts(
    plan: &mut Plan,
    track: u64,
    session: &crate::sessions::AgentSession,
    mono: &dyn Fn(i64) -> u64,
    end: u64,
) {
    let mut timed: Vec<(u64, &crate::sessions::Prompt)> = session
        .prompts
        .iter()
        .filter_map(|p| Some((mono(p.ts_ms?), p)))
        .collect();
    timed.sort_by_key(|(t, p)| (*t, p.index));
    for (k, (b, p)) in timed.iter().enumerate() {
        let e = timed.get(k + 1).map(|n| n.0).unwrap_or(end.max(*b));
        let anns = vec![
            ("prompt_index", Value::Int(p.index as i64)),
            ("text", text(&p.text)),
            ("text_truncated", Value::Bool(p.text_truncated)),
        ];
        plan.slice(
            track,
            (*b, e),
            format!("prompt {}", p.index),
            anns,
            (Vec::new(), Vec::new()),
            (RANK_END, Vec::new()),
        );
    }
}

fn tool_call(
    plan: &mut Plan,
    lane: u64,
    span: (u64, u64),
    i: usize,
    cs: &SessionRun,
    report: Option<&ToolReport>,
) {
    let t = &cs.session.tools[i];
    let flags = &cs.report.flags;
    let mut anns: Vec<Ann> = vec![
        ("tool_index", Value::Int(i as i64)),
        ("category", Value::Str(word(&t.category))),
        ("status", Value::Str(word(&t.status))),
    ];
    anns.extend(
        t.call_id
            .as_ref()
            .map(|c| ("call_id", Value::Str(c.clone()))),
    );
    anns.extend(t.command.as_deref().map(|c| ("command", text(c))));
    if let Some(m) = McpView::of(t, report.and_then(|r| r.mcp.as_ref())) {
        mcp_anns(&mut anns, &m, t.command.is_none());
    }
    anns.extend(
        t.exit_code
            .map(|c| ("stated_exit_code", Value::Int(c.into()))),
    );
    if t.end_ms.is_none() {
        anns.push((
            "result",
            Value::Str("none recorded: ends with the session".into()),
        ));
    }
    for c in flags
        .claimed_not_observed
        .iter()
        .filter(|c| c.tool_index == i)
    {
        anns.push(("claimed_not_observed", text(&c.detail)));
    }
    for m in flags.mismatches.iter().filter(|m| m.tool_index == i) {
        anns.push((
            "mismatch",
            text(&format!("{}: {}", m.kind.as_str(), m.detail)),
        ));
    }
    let mut flows = Vec::new();
    if let Some(r) = report {
        let codes: Vec<String> = r
            .exit_codes
            .iter()
            .map(|c| c.map(|c| c.to_string()).unwrap_or_else(|| "running".into()))
            .collect();
        if !codes.is_empty() {
            anns.push(("observed_exit_codes", Value::Str(codes.join(", "))));
        }
        let started: HashSet<i64> = r
            .activity
            .iter()
            .filter(|a| a.op == Op::Exec)
            .map(|a| a.process_id)
            .collect();
        let mut seen = HashSet::new();
        for a in &r.activity {
            let label = format!(
                "#{i} {} ({})",
                t.name,
                a.reason.map(|r| r.as_str()).unwrap_or("?")
            );
            plan.notes
                .entry(a.event_id)
                .or_default()
                .anns
                .push(("attributed_to", Value::Str(label)));
            if a.late {
                plan.notes
                    .entry(a.event_id)
                    .or_default()
                    .anns
                    .push(("late", Value::Bool(true)));
            }
            if let Some(b) = &a.blocked {
                let what = format!("{} ({}), denial {}", b.rule, b.mechanism, b.denial_id);
                plan.notes
                    .entry(a.event_id)
                    .or_default()
                    .anns
                    .push(("blocked", Value::Str(what)));
            }
            let f = if started.contains(&a.process_id) {
                if !seen.insert(a.process_id) {
                    continue;
                }
                let f = plan.flow();
                plan.process_flows.entry(a.process_id).or_default().push(f);
                f
            } else {
                let f = plan.flow();
                plan.notes
                    .entry(a.event_id)
                    .or_default()
                    .terminating
                    .push(f);
                f
            };
            flows.push(f);
        }
    }
    plan.counts.flows += flows.len() as u64;
    plan.counts.tool_slices += 1;
    plan.slice(
        lane,
        span,
        t.name.clone(),
        anns,
        (flows, Vec::new()),
        (RANK_END, Vec::new()),
    );
}

/// An MCP call's server on its slice: name, tool, transport, kind, the
/// process or URL; its arguments (content, redacted as commands are) when
/// it has no command text.
fn mcp_anns(anns: &mut Vec<Ann>, m: &McpView, with_arguments: bool) {
    anns.push(("mcp_server", Value::Str(m.server.unwrap_or("?").to_owned())));
    anns.extend(m.tool.map(|t| ("mcp_tool", text(t))));
    anns.extend(
        m.transport
            .map(|t| ("mcp_transport", Value::Str(t.to_owned()))),
    );
    anns.extend(
        m.kind
            .map(|k| ("mcp_server_kind", Value::Str(k.to_owned()))),
    );
    anns.extend(m.pid.map(|p| ("mcp_server_pid", Value::Int(p.into()))));
    if !m.command.is_empty() {
        anns.push(("mcp_server_command", text(&join_argv(m.command))));
    }
    anns.extend(m.url.map(|u| ("mcp_server_url", text(u))));
    if with_arguments && let Some(a) = m.arguments {
        anns.push(("arguments", text(&a.to_string())));
    }
}

/// [`mcp_anns`]'s list, for the tests.
#[cfg(test)]
pub(super) fn mcp_anns_for_test(m: &McpView, with_arguments: bool) -> Vec<Ann> {
    let mut anns = Vec::new();
    mcp_anns(&mut anns, m, with_arguments);
    anns
}

/// Process name: the executable's basename (argv[0]), else the comm.
fn process_name(p: &ProcessRecord) -> String {
    p.argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_owned())
        .filter(|a| !a.is_empty())
        .or_else(|| p.comm.clone())
        .unwrap_or_else(|| format!("pid {}", p.pid))
}

/// Parents before children (depth first, children by start time), so a
/// tree track's parent is always declared first; rows whose parent chain
/// is broken come after, in start order.
fn tree_order(procs: &[ProcessRecord]) -> Vec<usize> {
    let ids: HashMap<i64, usize> = procs.iter().enumerate().map(|(i, p)| (p.id, i)).collect();
    let mut children: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut roots = Vec::new();
    for (i, p) in procs.iter().enumerate() {
        match p.parent_id.and_then(|id| ids.get(&id)) {
            Some(&parent) if parent != i => children.entry(parent).or_default().push(i),
            _ => roots.push(i),
        }
    }
    let mut order = Vec::with_capacity(procs.len());
    let mut seen = vec![false; procs.len()];
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        order.push(i);
        if let Some(c) = children.get(&i) {
            stack.extend(c.iter().rev());
        }
    }
    order.extend((0..procs.len()).filter(|&i| !seen[i]));
    order
}

/// What the lifetime slice of `p` says at its start.
fn lifetime_anns(p: &ProcessRecord, ppid: Option<i64>) -> Vec<Ann> {
    let mut anns: Vec<Ann> = vec![
        ("pid", Value::Int(p.pid)),
        ("process_row", Value::Int(p.id)),
        ("origin", Value::Str(p.origin.clone())),
    ];
    anns.extend(ppid.map(|q| ("ppid", Value::Int(q))));
    if !p.argv.is_empty() {
        anns.push(("argv", text(&join_argv(&p.argv))));
    }
    anns.extend(p.cwd.as_ref().map(|c| ("cwd", text(c))));
    anns.extend(p.uid.map(|u| ("uid", Value::Int(u))));
    anns.extend(ContainerRef::of(&p.identity).map(|c| ("container", Value::Str(c.label()))));
    anns
}

/// When the lifetime of `p` ends (its exit, or the capture's end when it
/// was still running) and what it says there.
fn lifetime_end(p: &ProcessRecord, capture_end: u64) -> (u64, Vec<Ann>) {
    let mut anns: Vec<Ann> = Vec::new();
    anns.extend(p.exit_code.map(|c| ("exit_code", Value::Int(c))));
    anns.extend(p.signal.map(|s| ("signal", Value::Int(s))));
    let end = match p.end_mono_ns {
        Some(e) => e.max(0) as u64,
        None => {
            anns.push(("running_at_capture_end", Value::Bool(true)));
            capture_end
        }
    };
    (end, anns)
}

/// One process track per process row and its place in a parallel tree of
/// plain tracks; a lifetime slice (fork to exit, or to the capture's end
/// when it was still running) on both; its parentage as a ProcessTree
/// entry at its start.
/// A process that ran a stored MCP server (`mcp_servers`, by process row)
/// is named `mcp SERVER`.
pub fn processes(
    plan: &mut Plan,
    procs: &[ProcessRecord],
    capture_end: u64,
    mcp_servers: &HashMap<i64, String>,
) {
    plan.tracks.push(plain_track(
        uuid::PROCESS_TREE,
        "process tree".into(),
        None,
        Some(proto::ORDER_CHRONOLOGICAL),
    ));
    let by_id: HashMap<i64, &ProcessRecord> = procs.iter().map(|p| (p.id, p)).collect();
    for i in tree_order(procs) {
        let p = &procs[i];
        let parent = p.parent_id.and_then(|id| by_id.get(&id));
        let server = mcp_servers.get(&p.id);
        let name = match server {
            Some(s) => format!("mcp {s}"),
            None => process_name(p),
        };
        let argv: Vec<String> = p.argv.iter().take(ARGV_MAX).cloned().collect();
        plan.counts.processes += 1;
        plan.tracks.push(plain_track(
            uuid::tree(p.id),
            format!("{name} {}", p.pid),
            Some(
                parent
                    .map(|q| uuid::tree(q.id))
                    .unwrap_or(uuid::PROCESS_TREE),
            ),
            Some(proto::ORDER_CHRONOLOGICAL),
        ));
        plan.tracks.push(TrackDescriptor {
            uuid: Some(uuid::process(p.id)),
            process: Some(ProcessDescriptor {
                pid: Some(p.pid as i32),
                cmdline: argv.clone(),
                process_name: Some(name.clone()),
                start_timestamp_ns: Some(p.start_mono_ns),
            }),
            ..Default::default()
        });
        let start = p.start_mono_ns.max(0) as u64;
        plan.push(
            start,
            RANK_TREE,
            Mark::Tree(ProcessTreeProcess {
                pid: Some(p.pid as i32),
                ppid: parent.map(|q| q.pid as i32),
                cmdline: argv,
                uid: p.uid.map(|u| u as i32),
            }),
        );
        let mut anns = lifetime_anns(p, parent.map(|q| q.pid));
        anns.extend(server.map(|s| ("mcp_server", text(s))));
        let (end, end_anns) = lifetime_end(p, capture_end);
        let flows = plan.process_flows.remove(&p.id).unwrap_or_default();
        plan.slice(
            uuid::process(p.id),
            (start, end),
            name.clone(),
            anns.clone(),
            (Vec::new(), flows),
            (RANK_PROCESS_END, end_anns.clone()),
        );
        plan.slice(
            uuid::tree(p.id),
            (start, end),
            name,
            vec![("pid", Value::Int(p.pid))],
            (Vec::new(), Vec::new()),
            (RANK_PROCESS_END, end_anns),
        );
    }
    plan.tracks.push(plain_track(
        uuid::NO_PROCESS,
        "events of no known process".into(),
        None,
        None,
    ));
}

/// Loss on its own track: an instant per sequence gap, one per lost kind
/// and one for an unfinished capture, at the capture's end; the track's
/// name says the total, "none" included.
pub fn loss(
    plan: &mut Plan,
    gaps: &[Gap],
    lost: &[(String, u64)],
    complete: bool,
    capture_end: u64,
) {
    let total: u64 = gaps.iter().map(|g| g.missing.max(0) as u64).sum::<u64>()
        + lost.iter().map(|l| l.1).sum::<u64>();
    let name = match (total, complete) {
        (0, true) => "loss: none".to_owned(),
        (n, true) => format!("loss: {n} records"),
        (n, false) => {
            format!("loss: {n} records, and UNKNOWN after the last stored record (incomplete)")
        }
    };
    plan.tracks.push(plain_track(uuid::LOSS, name, None, None));
    let instant = |name: String, anns: Vec<Ann>| Mark::Event {
        track: uuid::LOSS,
        kind: proto::INSTANT,
        name: Some(name),
        anns,
        flows: Vec::new(),
        terminating: Vec::new(),
    };
    for g in gaps {
        let missing = g.missing;
        let anns = vec![
            ("cpu", Value::Int(g.cpu)),
            ("stream", Value::Int(g.stream)),
            ("missing", Value::Int(missing)),
            ("to_mono_ns", Value::Int(g.to_mono_ns)),
        ];
        plan.push(
            g.from_mono_ns.max(0) as u64,
            RANK_EVENT,
            instant(format!("sequence gap: {missing} records lost"), anns),
        );
    }
    for (kind, n) in lost.iter().filter(|l| l.1 > 0) {
        let anns = vec![
            ("kind", Value::Str(kind.clone())),
            ("lost", Value::Int(*n as i64)),
        ];
        plan.push(
            capture_end,
            RANK_EVENT,
            instant(format!("lost {n} {kind}"), anns),
        );
    }
    if !complete {
        plan.push(
            capture_end,
            RANK_EVENT,
            instant("capture incomplete: UNKNOWN after here".into(), Vec::new()),
        );
    }
}
