//! Phase 6, the report: per-call reports grouped under their prompts (calls
//! without a timestamp listed with no activity), the clock summary, the
//! bindings and the session.

use std::collections::{BTreeMap, HashMap};

use super::{
    ARGV_SEARCH_MS,
    report::{
        Activity, BindingInfo, ClockBasis, ClockInfo, PromptReport, SessionInfo, ToleranceBasis,
        ToolReport,
    },
    view::{BoundTree, CaptureView},
};
use crate::{
    clock::rfc3339_ns,
    sessions::{AgentSession, ToolEvent},
};

pub(super) fn ts_ms(ms: i64) -> String {
    rfc3339_ns((ms.max(0) as u64).saturating_mul(1_000_000))
}

/// The report of tool `i`; `timed` carries a timed call's activity and
/// exit codes (an untimed call has neither, nor a start or duration).
pub(super) fn tool_report(
    i: usize,
    t: &ToolEvent,
    timed: Option<(Vec<Activity>, Vec<Option<i64>>)>,
) -> ToolReport {
    let is_timed = timed.is_some();
    let (activity, exit_codes) = timed.unwrap_or_default();
    ToolReport {
        tool_index: i,
        call_id: t.call_id.clone(),
        name: t.name.clone(),
        category: t.category,
        command: t.command.clone(),
        paths: t.paths.clone(),
        status: t.status,
        exit_code: t.exit_code,
        start: t.start_ms.filter(|_| is_timed).map(ts_ms),
        end: t.end_ms.map(ts_ms),
        duration_ms: t
            .start_ms
            .zip(t.end_ms)
            .filter(|_| is_timed)
            .map(|(s, e)| e - s),
        exit_codes,
        mcp: None,
        activity,
    }
}

/// Prompts in order, each with its calls; calls before any prompt first,
/// calls of a prompt the session does not list last.
pub(super) fn prompts(
    session: &AgentSession,
    mut call_reports: HashMap<usize, ToolReport>,
) -> Vec<PromptReport> {
    // Calls without a timestamp are listed with no activity.
    for (i, t) in session.tools.iter().enumerate() {
        call_reports
            .entry(i)
            .or_insert_with(|| tool_report(i, t, None));
    }
    let mut prompts: Vec<PromptReport> = Vec::new();
    let mut by_prompt: BTreeMap<Option<usize>, Vec<ToolReport>> = BTreeMap::new();
    let mut reports: Vec<(usize, ToolReport)> = call_reports.into_iter().collect();
    reports.sort_by_key(|(i, _)| *i);
    for (i, r) in reports {
        by_prompt
            .entry(session.tools[i].prompt_index)
            .or_default()
            .push(r);
    }
    if let Some(before) = by_prompt.remove(&None) {
        prompts.push(PromptReport {
            index: None,
            ts: None,
            text: String::new(),
            tools: before,
        });
    }
    for p in &session.prompts {
        prompts.push(PromptReport {
            index: Some(p.index),
            ts: p.ts_ms.map(ts_ms),
            text: p.text.clone(),
            tools: by_prompt.remove(&Some(p.index)).unwrap_or_default(),
        });
    }
    for (idx, tools) in by_prompt {
        prompts.push(PromptReport {
            index: idx,
            ts: None,
            text: String::new(),
            tools,
        });
    }
    prompts
}

/// The clock summary from the argv matches' delays (exec − call start, ms).
pub(super) fn clock(
    mut delays: Vec<i64>,
    tolerance: (i64, ToleranceBasis),
    anchors: usize,
) -> ClockInfo {
    delays.sort_unstable();
    ClockInfo {
        basis: ClockBasis::AnchorsVsTranscript,
        tolerance_ms: tolerance.0,
        tolerance_basis: tolerance.1,
        argv_search_ms: ARGV_SEARCH_MS,
        anchors,
        skew_ms: delays.first().map(|d| (-d).max(0)).unwrap_or(0),
        skew_samples: delays.len(),
        median_exec_delay_ms: delays.get(delays.len() / 2).copied(),
    }
}

pub(super) fn bindings(view: &CaptureView, bound: &[BoundTree]) -> Vec<BindingInfo> {
    let wall = |mono: u64| rfc3339_ns(view.anchors.wall_ns(mono).max(0) as u64);
    bound
        .iter()
        .map(|b| {
            let p = &view.procs.procs[b.root];
            BindingInfo {
                root_pid: p.pid,
                root_process_id: p.id,
                root_argv: p.argv.clone(),
                evidence: b.evidence,
                evidence_count: b.evidence_count,
                evidence_path: b.evidence_path.clone(),
                from: wall(b.from_mono_ns),
                to: b.to_mono_ns.map(wall),
                container: view.containers.get(&p.id).cloned(),
            }
        })
        .collect()
}

pub(super) fn session_info(session: &AgentSession) -> SessionInfo {
    SessionInfo {
        provider: session.provider.as_str().to_string(),
        session_id: session.session_id.clone(),
        cwd: session.cwd.clone(),
        source_path: session.source_path.display().to_string(),
        start: session.start_ms.map(ts_ms),
        end: session.end_ms.map(ts_ms),
        models: session.models.clone(),
        tool_count: session.tool_count,
    }
}
