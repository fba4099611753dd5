//! `unexplained-activity` and `claims-mismatch`: the flags correlate
//! stored for the capture's sessions, as findings.

use std::collections::HashMap;

use super::{Rules, note, plain};
use crate::audit::{
    AuditError,
    context::{CorrRow, Ctx, Ev, argv_of},
    fold::{Collector, Pending},
    report::{Access, FindingKind, Role},
};

/// Correlate-derived rules: `observed_not_claimed` rows are unexplained
/// activity; `claimed_not_observed` and `mismatch` rows are claims mismatches.
/// The events they name were read with the rows (`events`): no query per
/// finding.
pub(in crate::audit) fn correlated(
    ctx: &Ctx,
    rules: &Rules,
    correlations: bool,
    rows: &[CorrRow],
    events: &HashMap<i64, Ev>,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let (unexplained, claims) = (&rules.unexplained, &rules.claims);
    if (unexplained.enabled || claims.enabled) && !correlations {
        note(
            out,
            rules,
            "the capture holds no session bindings or correlations: unexplained-activity and claims-mismatch were not checked".into(),
        );
    }
    for row in rows {
        let meta = match row.tool.role {
            Role::ObservedNotClaimed if unexplained.enabled => unexplained,
            Role::ClaimedNotObserved | Role::Mismatch if claims.enabled => claims,
            _ => continue,
        };
        let ev = row.event_id.and_then(|id| events.get(&id));
        let what = row.tool.reason.clone().unwrap_or_default();
        let message = match row.tool.role {
            Role::ObservedNotClaimed => format!(
                "activity no tool call explains: {}",
                ev.map(describe).unwrap_or_else(|| what.clone())
            ),
            Role::ClaimedNotObserved => format!(
                "tool call #{} claimed but not observed: {what}",
                row.tool.tool_index.unwrap_or(-1)
            ),
            _ => format!(
                "tool call #{} outcome does not match: {what}",
                row.tool.tool_index.unwrap_or(-1)
            ),
        };
        let mut p = match ev {
            Some(ev) => {
                let kind = ev.kind.as_str().to_owned();
                let mut p = ctx.base(ev, meta, message, Access::Event(kind));
                let f = &mut p.finding;
                f.path = ev.path.clone();
                f.addr = ev.addr.clone();
                f.port = ev.port.and_then(|p| u16::try_from(p).ok());
                f.argv = ev.argv.as_deref().map(|a| argv_of(Some(a)));
                p
            }
            None => {
                let mut f = plain(
                    &meta.id,
                    meta.severity,
                    FindingKind::Correlation(row.tool.role),
                    message,
                );
                f.process = ctx.process_info(row.process_id, None);
                f.container = ctx.container_of(row.process_id).cloned();
                Pending {
                    finding: f,
                    process: None,
                    tcp: None,
                }
            }
        };
        p.finding.session = Some(row.tool.clone());
        p.finding.evidence.detail = row.tool.reason.clone();
        ctx.complete_if_per_finding(&mut p)?;
        out.add(p, ev);
    }
    Ok(())
}

fn describe(ev: &Ev) -> String {
    if let Some(p) = &ev.path {
        format!("{} {p}", ev.kind)
    } else if let Some(a) = &ev.addr {
        format!("{} {a}:{}", ev.kind, ev.port.unwrap_or(0))
    } else {
        format!("{} {}", ev.kind, argv_of(ev.argv.as_deref()).join(" "))
    }
}
