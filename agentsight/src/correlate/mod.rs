//! `agentsight correlate`: line up what a session's transcript says each tool
//! call did with what the bound process trees really did, per tool call, and
//! flag the differences.
//!
//! Attribution of an activity (exec, file change, connection) to a call, by
//! reason, strongest first:
//! - `argv_match`: a process exec'd the call's command (shell wrappers on both
//!   sides understood, see [`shell`]); that process's own activity;
//! - `descendant`: activity of a process descended from an attributed one;
//! - `path_match`: a file event on a path the call names, inside its window;
//! - `via_rename`: a file event on a temp path that the same process then
//!   renames onto a path the call names, inside its window (atomic writes:
//!   Claude Code's Write writes `NAME.tmp.PID.HEX`, then renames it to NAME);
//! - `time_window`: a process the agent started inside the call's window
//!   whose argv does not match (e.g. a hook or a helper), and its activity.
//!
//! Times are compared on one clock: events carry wall times derived from the
//! capture's monotonic↔UTC anchors; transcripts carry UTC milliseconds. An
//! argv match is searched in `[call − ARGV_SEARCH_MS, result + ARGV_SEARCH_MS]`
//! (the argv is the evidence); every weaker attribution (`time_window`,
//! `path_match`, `via_rename`) needs the activity inside the call's own window
//! widened only by a tolerance measured from the argv matches' clock skew
//! ([`window_tolerance`]), so the runtime's start-up and bookkeeping just
//! before a call stay with the runtime.
//! The JSON shape is documented in `docs/correlate.md`.

mod activity;
mod assemble;
mod attribute;
mod calls;
mod flags;
pub mod mcp;
mod persist;
pub mod render;
pub mod report;
mod runtime;
pub mod shell;
#[cfg(test)]
mod tests;
mod view;
pub mod wire;

use std::collections::HashMap;

pub use persist::store_all;
pub use report::{
    Activity, BindingInfo, Bookkeeping, By, Claim, Claimed, ClockBasis, ClockInfo, Flags, Late,
    McpServerInfo, Mismatch, MismatchKind, Op, PromptReport, Reason, Report, RuntimeGroup,
    SessionInfo, SessionSource, ToleranceBasis, ToolReport, TreeInfo, TreeStatus, describe,
};
pub use view::{BoundTree, CaptureView};

use crate::{sessions::AgentSession, store::StoreError};

/// Slack on both ends of a call's window when looking for the exec of its
/// own command (ms): the argv is strong evidence, the window only a bound.
pub const ARGV_SEARCH_MS: i64 = 1000;
/// Margin added to the measured skew for the call's window (ms): transcript
/// timestamps are whole milliseconds. Kept small on purpose: Codex prepares
/// each command (its shell snapshot, git probes) 80–100 ms before the call's
/// timestamp, and that is the runtime's work, not the call's.
pub const WINDOW_MARGIN_MS: i64 = 1;
/// The window tolerance when no argv match measures the skew (ms).
pub const WINDOW_DEFAULT_MS: i64 = 100;

/// The tolerance of a call's window: the transcript clock's measured lead
/// over the capture's (the largest amount by which a matched exec preceded
/// its call) plus [`WINDOW_MARGIN_MS`], at most [`ARGV_SEARCH_MS`]; with no
/// sample, [`WINDOW_DEFAULT_MS`]. `delays` are exec − call start (ms).
pub fn window_tolerance(delays: &[i64]) -> (i64, ToleranceBasis) {
    match delays.iter().min() {
        Some(&min) => (
            ((-min).max(0) + WINDOW_MARGIN_MS).min(ARGV_SEARCH_MS),
            ToleranceBasis::MeasuredSkew,
        ),
        None => (WINDOW_DEFAULT_MS, ToleranceBasis::Default),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CorrelateError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// [`correlate_with`] for a session without stored MCP servers.
pub fn correlate(
    view: &CaptureView,
    session: &AgentSession,
    session_source: SessionSource,
    bound: &[BoundTree],
    unmatched: Vec<TreeInfo>,
) -> Result<Report, CorrelateError> {
    correlate_with(view, session, session_source, bound, unmatched, &[])
}

/// Correlates `session` with the trees bound to it in `view`, in phases:
/// its MCP calls' servers and claims (`mcp`), the calls and their argv
/// windows (`calls`), the bound trees' activity (`activity`), argv matches
/// measuring the skew that sets the calls' own windows, ownership and
/// attribution (`attribute`), per-call flags (`flags`), and the report
/// (`assemble`). `servers`: the session's stored MCP servers.
pub fn correlate_with(
    view: &CaptureView,
    session: &AgentSession,
    session_source: SessionSource,
    bound: &[BoundTree],
    unmatched: Vec<TreeInfo>,
    servers: &[mcp::McpServer],
) -> Result<Report, CorrelateError> {
    let (procs, anchors) = (&view.procs, &view.anchors);
    let mcp_side = mcp::McpSide::of(session, servers, procs);
    // Each MCP call of a server with known tools claims what its arguments name.
    let session = &*mcp_side.with_claims(session);
    let spans = activity::Spans::of(bound, procs);
    let mut calls = calls::calls_of(session, anchors);
    let acts = activity::load(view, &spans, &calls::claimed_paths(&calls))?;

    let argv = attribute::ArgvMatches::find(&acts, &calls);
    let delays = argv.delays(&calls, anchors);
    let tolerance = window_tolerance(&delays);
    calls::set_windows(&mut calls, session, anchors, tolerance.0);

    let agent = attribute::agent_processes(bound, &acts, procs, session);
    let owner = attribute::owners(
        spans.0.keys().copied(),
        procs,
        &argv,
        &agent,
        &calls,
        &mcp_side,
    );
    let side = runtime::RuntimeSide::of(&agent, procs, session.provider, &acts);
    let attributed = attribute::Attribution {
        calls: &calls,
        owner: &owner,
        agent: &agent,
        procs,
        session,
        side: &side,
        servers: &mcp_side,
    }
    .run(acts);

    let mut flags = Flags {
        observed_not_claimed: attributed.unclaimed,
        ..Default::default()
    };
    let mut call_reports: HashMap<usize, ToolReport> = HashMap::new();
    // The first clock anchor is taken as recording starts.
    let recorded_from = anchors.0.first().map_or(0, |a| a.0);
    for (c, acts) in calls.iter().zip(attributed.per_call) {
        let tool = &session.tools[c.idx];
        let exit_codes = flags::exit_codes(&acts);
        if c.win_hi < recorded_from {
            flags.before_recording.push(c.idx);
            let report = assemble::tool_report(c.idx, tool, Some((acts, exit_codes)));
            call_reports.insert(c.idx, report);
            continue;
        }
        flags::CallJudge {
            call: c,
            tool,
            acts: &acts,
            exit_codes: &exit_codes,
        }
        .flag(&mut flags);
        let report = assemble::tool_report(c.idx, tool, Some((acts, exit_codes)));
        call_reports.insert(c.idx, report);
    }

    let mut prompts = assemble::prompts(session, call_reports);
    for t in prompts.iter_mut().flat_map(|p| p.tools.iter_mut()) {
        t.mcp = mcp_side.info(t.tool_index);
    }
    Ok(Report {
        session: assemble::session_info(session),
        capture: view.path.clone(),
        session_source,
        clock: assemble::clock(delays, tolerance, anchors.0.len()),
        bindings: assemble::bindings(view, bound),
        prompts,
        flags,
        agent_bookkeeping: attributed
            .books
            .into_iter()
            .map(|((path, _), (op, count))| Bookkeeping { path, op, count })
            .collect(),
        runtime_activity: runtime::groups(attributed.runtime),
        unmatched_trees: unmatched,
        external_messages: continued_externally(view, &session.session_id)?,
        wire: wire::report(&view.cap.wire_exchanges()?, session, anchors),
    })
}

/// The stored `session message` submissions to session `id`.
fn continued_externally(
    view: &CaptureView,
    id: &str,
) -> Result<Vec<crate::store::read::SessionMessage>, CorrelateError> {
    let all = view.cap.session_messages()?;
    Ok(all.into_iter().filter(|m| m.session_id == id).collect())
}

/// The activity of whole process trees (by root index in `view.procs`)
/// over their lifetimes, loaded as [`correlate`] loads a bound tree's:
/// execs (with how each process ended), file changes and connections; no
/// reads, since no call names a path. For the trees bound to no session,
/// whose activity no call can explain (exports list it as unattributed).
pub fn tree_activity(view: &CaptureView, roots: &[usize]) -> Result<Vec<Activity>, CorrelateError> {
    let mut spans = HashMap::new();
    for &root in roots {
        for m in view.procs.subtree(root) {
            spans.insert(m, (0, u64::MAX));
        }
    }
    let mut acts = activity::load(view, &activity::Spans(spans), &Default::default())?;
    for a in &mut acts {
        if a.op == Op::Exec {
            let p = &view.procs.procs[a.proc_ix];
            a.exit_code = p.exit_code.or(p.signal.map(|s| 128 + s));
        }
    }
    Ok(acts)
}
