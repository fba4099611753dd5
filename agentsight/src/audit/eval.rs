//! The audit as phases: the capture's context (`context`), the rules'
//! metas (`rules`), completeness (`rules::completeness`), one pass over the
//! relevant events in time order (`scan`, judged per rule family in
//! `rules`), the correlate-derived rules (`rules::correlated`), then the
//! findings kept are completed (process chains and TCP outcomes, from what
//! the pass collected: no query per finding, `complete`) and folded
//! (`fold`).

pub use super::report::{
    ChainEntry, Evidence, Finding, ProcessInfo, Report, RuleInfo, Strategy, ToolRef,
};
use super::{
    AuditError,
    context::{Context, Ctx, History},
    fold::Collector,
    policy::Policy,
    rules::{
        Rules, completeness::completeness, correlated::correlated, mcp,
        messages::continued_externally, paths::PathSets,
    },
    scan,
};
use crate::store::Capture;

/// Runs every enabled rule of `policy` over `cap`.
pub fn audit(cap: &Capture, policy: &Policy) -> Result<Report, AuditError> {
    audit_with(cap, policy, Strategy::default())
}

/// A `record --wire` capture: the agents' connections to the relay (the
/// recorder itself, on loopback) are declared, as the model server is.
fn relay_declared(cap: &Capture, policy: &Policy) -> Option<Policy> {
    let addr = cap.meta(crate::store::meta::key::WIRE_RELAY).ok()??;
    let mut p = policy.clone();
    p.network
        .allow
        .push(super::policy::parse_destination(&addr).ok()?);
    Some(p)
}

/// [`audit`] with a chosen [`Strategy`] (the benchmark times both).
pub fn audit_with(
    cap: &Capture,
    policy: &Policy,
    strategy: Strategy,
) -> Result<Report, AuditError> {
    let with_relay = relay_declared(cap, policy);
    let policy = with_relay.as_ref().unwrap_or(policy);
    let Context {
        procs,
        workspace,
        home,
        tmpdirs,
        correlations,
        corr_rows,
        flagged_events,
        tool_of,
        tool_of_process,
    } = Context::load(cap, policy)?;
    let rules = Rules::new(policy);
    let mut out = Collector::new(strategy == Strategy::Streaming);
    completeness(cap, policy, &rules, &mut out)?;
    let mut sets = PathSets::new(
        policy,
        workspace.as_deref(),
        home.as_deref(),
        &tmpdirs,
        &rules,
        &mut out,
    )?;
    sets.denied_inodes = super::inodes::from_capture(cap)?;
    sets.denied_exe_inodes = super::inodes::executables_from_capture(cap)?;
    let mut ctx = Ctx {
        cap,
        strategy,
        procs,
        tool_of,
        tool_of_process,
        history: History::default(),
    };
    scan::events(&mut ctx, policy, &rules, &sets, &mut out)?;
    correlated(
        &ctx,
        &rules,
        correlations,
        &corr_rows,
        &flagged_events,
        &mut out,
    )?;
    continued_externally(&ctx, policy, &mut out)?;
    mcp::servers(&ctx, policy, &mut out)?;
    super::rules::wire::exchanges(&ctx, policy, &mut out)?;
    let mut findings = out.finish(|p| ctx.complete(p))?;
    super::blocked::denials(&ctx, policy, &mut findings)?;
    // Most severe first, then by time; notes last.
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.time.cmp(&b.time)));
    Ok(Report {
        capture: cap.path.clone(),
        policy: policy.source.clone(),
        workspace,
        home,
        tmpdirs,
        correlations,
        rules: rules.infos,
        findings,
    })
}
