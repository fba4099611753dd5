//! `record --enforce`'s denials in the audit: the finding of a refused
//! access is marked `blocked`; a denial no event finding stands for (a read
//! through a hard link or a symlink fails before the kernel names the file,
//! and a failed read is judged only with `include_failed`) becomes a
//! finding of its own, by the file's identity.

use super::{
    AuditError,
    context::Ctx,
    fold::Pending,
    policy::Policy,
    report::{Access, Finding, FindingKind},
    rules::plain,
};
use crate::enforce::DenialKind;
use crate::store::enforcement::DenialRow;

/// Marks or adds a finding for each stored denial.
pub(super) fn denials(
    ctx: &Ctx,
    policy: &Policy,
    findings: &mut Vec<Finding>,
) -> Result<(), AuditError> {
    let reader = ctx.cap.reader();
    let rows = reader.enforcement_denials()?;
    if rows.is_empty() {
        return Ok(());
    }
    let anchors = reader.anchors()?;
    for d in rows {
        let access = match d.kind {
            DenialKind::Read => Access::Read,
            DenialKind::Exec => Access::Exec,
        };
        if let Some(f) = findings.iter_mut().find(|f| same(f, &d, &access)) {
            f.blocked = true;
            if f.kind == FindingKind::Event("enforcement".into()) {
                f.evidence.count += 1;
            }
            continue;
        }
        let severity = if d.rule == policy.executables.meta.id {
            policy.executables.meta.severity
        } else {
            policy.denied_paths.meta.severity
        };
        let what = match d.kind {
            DenialKind::Read => "read of denied path",
            DenialKind::Exec => "exec of denied executable",
        };
        let message = format!(
            "attempted {what} {} (device {}, inode {}; refused by {})",
            d.path, d.dev, d.ino, d.mechanism
        );
        let mut p = Pending {
            finding: plain(
                &d.rule,
                severity,
                FindingKind::Event("enforcement".into()),
                message,
            ),
            process: d.process_id.map(|id| (id, Some(d.mono_ns as i64))),
            tcp: None,
        };
        let f = &mut p.finding;
        f.access = Some(access);
        f.path = Some(d.path.clone());
        f.time = Some(crate::clock::rfc3339_ns(
            anchors.wall_ns(d.mono_ns).max(0) as u64
        ));
        f.evidence.count = 1;
        f.evidence.errno = Some("EPERM".into());
        f.evidence.matched = Some(format!("{} (by inode)", d.path));
        f.evidence.detail = Some(format!("enforcement_denials id {}", d.id));
        f.blocked = true;
        ctx.complete(&mut p)?;
        findings.push(p.finding);
    }
    Ok(())
}

/// Whether `f` is the finding of denial `d`: same rule, access, process
/// and file, refused with EPERM (or a finding made from a denial).
fn same(f: &Finding, d: &DenialRow, access: &Access) -> bool {
    f.rule == d.rule
        && f.access.as_ref() == Some(access)
        && f.path.as_deref() == Some(d.path.as_str())
        && f.process
            .as_ref()
            .is_some_and(|p| p.pid == i64::from(d.pid))
        && (f.blocked || f.evidence.errno.as_deref() == Some("EPERM"))
}
