//! `capture-loss`: whether the capture is complete (no records lost in
//! the kernel, no sequence gaps, the recorder finished).

use super::{Rules, add_plain, plain};
use crate::{
    audit::{AuditError, fold::Collector, policy::Policy, report::FindingKind},
    store::Capture,
};

/// `capture-loss`: lost records, sequence gaps, an unfinished capture.
pub(in crate::audit) fn completeness(
    cap: &Capture,
    policy: &Policy,
    rules: &Rules,
    out: &mut Collector,
) -> Result<(), AuditError> {
    if !policy.loss.enabled {
        return Ok(());
    }
    let mk = |kind: FindingKind, message: String, detail: String| {
        let mut f = plain(&policy.loss.id, rules.loss_severity, kind, message);
        f.evidence.detail = Some(detail);
        f
    };
    for (kind, lost) in cap.loss().map_err(AuditError::Store)? {
        if lost > 0 {
            let f = mk(
                FindingKind::Loss,
                format!("{lost} {kind} record(s) lost in the kernel (loss table)"),
                format!("loss.kind = {kind}, lost = {lost}"),
            );
            add_plain(out, f);
        }
    }
    let missing = cap.gap_missing().map_err(AuditError::Store)?;
    if missing > 0 {
        let cpus = cap.gap_cpus()?;
        let f = mk(
            FindingKind::Gap,
            format!("{missing} record(s) missing in per-CPU sequence gaps"),
            format!("gaps on {cpus} CPU(s), {missing} sequence numbers"),
        );
        add_plain(out, f);
    }
    let meta = cap.run_meta().map_err(AuditError::Store)?;
    if !meta.recorder_finished {
        let f = mk(
            FindingKind::Incomplete,
            "the capture is not complete (the recorder was killed or crashed)".into(),
            format!(
                "meta.complete = {}, end_reason = {}",
                meta.complete_value.as_deref().unwrap_or("(none)"),
                meta.end_reason.as_deref().unwrap_or("(none)")
            ),
        );
        add_plain(out, f);
    }
    Ok(())
}
