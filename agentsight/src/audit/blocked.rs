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
            DenialKind::Write => Access::Write,
            DenialKind::Exec => Access::Exec,
            DenialKind::Connect => Access::Connect,
            DenialKind::Send => Access::Send,
        };
        // A finding not marked yet first: two findings can stand for one
        // destination (`::ffff:127.0.0.1` and `127.0.0.1`).
        let at = findings
            .iter()
            .position(|f| !f.blocked && same(f, &d, &access))
            .or_else(|| findings.iter().position(|f| same(f, &d, &access)));
        if let Some(f) = at.map(|i| &mut findings[i]) {
            f.blocked = true;
            if f.kind == FindingKind::Event("enforcement".into()) {
                f.evidence.count += d.repeat;
            }
            continue;
        }
        let severity = if d.kind.is_network() {
            policy.network.meta.severity
        } else if d.kind == DenialKind::Write && d.rule == policy.writes.meta.id {
            policy.writes.meta.severity
        } else if d.rule == policy.executables.meta.id {
            policy.executables.meta.severity
        } else {
            policy.denied_paths.meta.severity
        };
        let message = match d.kind {
            DenialKind::Read | DenialKind::Exec => format!(
                "attempted {} {} (device {}, inode {}; refused by {})",
                if d.kind == DenialKind::Read {
                    "read of denied path"
                } else {
                    "exec of denied executable"
                },
                d.path,
                d.dev,
                d.ino,
                d.mechanism
            ),
            DenialKind::Write if d.rule == policy.writes.meta.id => format!(
                "attempted write outside the allowed roots: {} (refused by {})",
                d.path, d.mechanism
            ),
            DenialKind::Write => format!(
                "attempted write of denied path {} (refused by {})",
                d.path, d.mechanism
            ),
            DenialKind::Connect | DenialKind::Send => format!(
                "attempted {} to {} destination {} (refused by {})",
                d.kind.as_str(),
                if d.rule == policy.network.meta.id {
                    "undeclared"
                } else {
                    "denied"
                },
                d.target(),
                d.mechanism
            ),
        };
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
        if d.kind.is_network() {
            f.addr = d.addr.clone();
            f.port = d.port;
        } else if d.kind == DenialKind::Write {
            f.path = Some(d.path.clone());
        } else {
            f.path = Some(d.path.clone());
            f.evidence.matched = Some(format!("{} (by inode)", d.path));
        }
        f.time = Some(crate::clock::rfc3339_ns(
            anchors.wall_ns(d.mono_ns).max(0) as u64
        ));
        f.evidence.count = d.repeat;
        // Landlock answers EACCES; fanotify and the socket programs EPERM.
        f.evidence.errno = Some(refused_errno(d.kind).into());
        f.evidence.detail = Some(format!("enforcement_denials id {}", d.id));
        f.blocked = true;
        ctx.complete(&mut p)?;
        findings.push(p.finding);
    }
    Ok(())
}

/// Whether `f` is the finding of denial `d`: same rule, access, process
/// and file (or destination), refused with EPERM (or a finding made from a
/// denial).
fn same(f: &Finding, d: &DenialRow, access: &Access) -> bool {
    let target = if d.kind.is_network() {
        let ip = |a: Option<&str>| a.and_then(crate::audit::policy::parse_addr);
        ip(f.addr.as_deref()).is_some()
            && ip(f.addr.as_deref()) == ip(d.addr.as_deref())
            && f.port == d.port
    } else {
        f.path.as_deref() == Some(d.path.as_str())
    };
    f.rule == d.rule
        && f.access.as_ref() == Some(access)
        && target
        && f.process
            .as_ref()
            .is_some_and(|p| p.pid == i64::from(d.pid))
        && (f.blocked || f.evidence.errno.as_deref() == Some(refused_errno(d.kind)))
}

/// The errno the refused call got.
fn refused_errno(kind: DenialKind) -> &'static str {
    if kind == DenialKind::Write {
        "EACCES"
    } else {
        "EPERM"
    }
}
