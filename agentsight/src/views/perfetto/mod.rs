//! `agentsight export --format perfetto`: the capture as a Perfetto trace
//! (protobuf `TracePacket`s with `TrackEvent`s) for ui.perfetto.dev. The
//! mapping is documented in `docs/perfetto.md`.
//!
//! The file is written in one pass: clock snapshots (one per clock anchor:
//! CLOCK_MONOTONIC, the trace's clock, against wall time), then every track
//! descriptor, then the timeline in time order — the plan's marks
//! (sessions, tool calls, process lifetimes, loss; O(processes + calls) in
//! memory) merged with the events, streamed from the capture and never
//! held whole.
//!
//! Redacted by default (a trace is made to be shared): secret-looking
//! values in argv, command lines, URLs and transcript text are written
//! `‹redacted›` (see [`crate::views::redact`]); the capture keeps them.

mod plan;
pub mod proto;
#[cfg(test)]
mod tests;
mod writer;

use std::io::Write;

pub use plan::Counts;
use plan::{Mark, Plan, RANK_EVENT, uuid};
use writer::{Ann, Event, TraceWriter, Value};
pub use writer::{SEQUENCE_ID, Written};

use crate::{
    correlate::CorrelateError,
    store::{Capture, StoreError, read::EventRecord, run::VisitError},
    views::run::RunModel,
};

#[derive(Debug, thiserror::Error)]
pub enum PerfettoError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Correlate(#[from] CorrelateError),
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Exported {
    pub counts: Counts,
    pub events: u64,
    pub written: Written,
}

/// Writes `cap` as a Perfetto trace to `out`; with `redact`, every text
/// has its secret-looking values replaced.
pub fn export(cap: &Capture, out: &mut dyn Write, redact: bool) -> Result<Exported, PerfettoError> {
    let anchors = cap.anchors()?;
    let (mut plan, known) = plan_of(cap, &anchors)?;
    let mut w = TraceWriter::new(out, redact);
    if anchors.0.is_empty() {
        w.clock_snapshot(0, None)?;
    }
    for &(mono, wall) in &anchors.0 {
        w.clock_snapshot(mono, Some(wall.max(0) as u64))?;
    }
    for t in std::mem::take(&mut plan.tracks) {
        w.track(t)?;
    }
    let items = std::mem::take(&mut plan.items);
    let mut items = items.into_iter().peekable();
    let mut events = 0u64;
    let streamed = cap.events_by_time(|e| {
        let ts = e.mono_ns.max(0) as u64;
        while let Some(i) = items.next_if(|i| (i.ts, i.rank) < (ts, RANK_EVENT)) {
            write_mark(&mut w, i.ts, i.mark)?;
        }
        events += 1;
        let track = match e.process_id {
            Some(id) if known.contains(&id) => uuid::process(id),
            _ => uuid::NO_PROCESS,
        };
        let note = plan.notes.remove(&e.id).unwrap_or_default();
        let mut anns = event_anns(&e, track == uuid::NO_PROCESS);
        anns.extend(note.anns);
        w.event(&Event {
            ts,
            track,
            kind: proto::INSTANT,
            name: Some(&e.kind),
            anns: &anns,
            flows: &[],
            terminating: &note.terminating,
        })
    });
    match streamed {
        Ok(()) => {}
        Err(VisitError::Store(e)) => return Err(e.into()),
        Err(VisitError::Visit(e)) => return Err(e.into()),
    }
    for i in items {
        write_mark(&mut w, i.ts, i.mark)?;
    }
    w.flush()?;
    Ok(Exported {
        counts: plan.counts,
        events,
        written: w.written,
    })
}

/// Everything but the events, and the process rows events may name.
fn plan_of(
    cap: &Capture,
    anchors: &crate::clock::Anchors,
) -> Result<(Plan, std::collections::HashSet<i64>), PerfettoError> {
    let procs = cap.processes()?;
    let capture_end = [
        cap.last_event_mono_ns()?,
        procs.iter().filter_map(|p| p.end_mono_ns).max(),
        procs.iter().map(|p| p.start_mono_ns).max(),
        anchors.0.last().map(|a| a.0 as i64),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(0)
    .max(0) as u64;
    let mut plan = Plan::default();
    let run = RunModel::load(cap)?;
    let mut mcp_servers = std::collections::HashMap::new();
    for (i, s) in run.correlated_sessions()?.iter().enumerate() {
        plan::session(&mut plan, i, s, anchors, capture_end);
        for server in cap.reader().mcp_servers(s.row)? {
            if let Some(id) = server.process_id {
                mcp_servers.insert(id, server.name);
            }
        }
    }
    plan::processes(&mut plan, &procs, capture_end, &mcp_servers);
    let known = procs.iter().map(|p| p.id).collect();
    let gaps = cap.gaps()?;
    plan::loss(
        &mut plan,
        &gaps,
        &run.loss.counters,
        run.meta.recorder_finished,
        capture_end,
    );
    Ok((plan.finish(), known))
}

fn write_mark(w: &mut TraceWriter, ts: u64, mark: Mark) -> std::io::Result<()> {
    match mark {
        Mark::Tree(p) => w.process_tree(ts, p),
        Mark::Event {
            track,
            kind,
            name,
            anns,
            flows,
            terminating,
        } => w.event(&Event {
            ts,
            track,
            kind,
            name: name.as_deref(),
            anns: &anns,
            flows: &flows,
            terminating: &terminating,
        }),
    }
}

/// An event's own fields as annotations: its row id, what it touched, and
/// how it ended; its pid only when its track is no process's.
fn event_anns(e: &EventRecord, with_pid: bool) -> Vec<Ann> {
    let mut a: Vec<Ann> = vec![("event_id", Value::Int(e.id))];
    if with_pid {
        a.push(("pid", Value::Int(e.pid)));
    }
    let texts = [
        ("path", &e.path),
        ("old_path", &e.old_path),
        ("real_path", &e.real_path),
        ("flags", &e.flags),
        ("addr", &e.addr),
        ("errno", &e.errno),
        ("query", &e.query),
    ];
    for (k, v) in texts {
        if let Some(v) = v {
            a.push((k, Value::Shared(crate::rawtext::escaped(v))));
        }
    }
    if let Some(argv) = &e.argv {
        let argv: Vec<String> = serde_json::from_str(argv).unwrap_or_default();
        let line = crate::sessions::util::join_argv(&argv);
        a.push(("argv", plan::text(&crate::rawtext::escaped(&line))));
    }
    a.extend(e.port.map(|p| ("port", Value::Int(p))));
    a.extend(e.result.map(|r| ("result", Value::Int(r))));
    a
}
