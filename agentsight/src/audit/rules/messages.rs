//! `session-continued-externally`: every `agentsight session message`
//! submission the capture stored (`external_messages`) is a finding — a
//! session that went on by a message from outside the agent, which a
//! reviewer of the run must know about.

use super::plain;
use crate::{
    audit::{
        AuditError,
        context::Ctx,
        fold::{Collector, Pending},
        policy::Policy,
        report::FindingKind,
    },
    clock::rfc3339_ns,
    store::read::ms_to_ns,
};

/// One finding per stored submission, citing the provider process when the
/// capture has it.
pub(in crate::audit) fn continued_externally(
    ctx: &Ctx,
    policy: &Policy,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let meta = &policy.external_messages;
    if !meta.enabled {
        return Ok(());
    }
    let msgs = ctx.cap.session_messages()?;
    if msgs.is_empty() {
        return Ok(());
    }
    let procs = ctx.cap.processes().map_err(AuditError::Store)?;
    let anchors = ctx.cap.anchors()?;
    for m in &msgs {
        let time = rfc3339_ns(ms_to_ns(m.time_ms));
        let message = format!(
            "session {} ({}) continued externally by agentsight session message ({}, {} bytes, by {}) at {time}",
            m.session_id, m.provider, m.transport, m.message_bytes, m.invoking_user
        );
        let mut f = plain(
            &meta.id,
            meta.severity,
            FindingKind::SessionMessage,
            message,
        );
        f.time = Some(time);
        let provider = m.provider_process(&procs, &anchors);
        f.process = provider.and_then(|p| ctx.process_info(Some(p.id), Some(p.start_mono_ns)));
        f.container = provider.and_then(|p| ctx.container_of(Some(p.id)).cloned());
        f.evidence.detail = Some(format!(
            "external_messages.id = {}, outcome = {}, run as uid {}{}{}",
            m.id,
            m.outcome.as_deref().unwrap_or("(not logged)"),
            m.run_as_uid,
            m.container
                .as_deref()
                .map(|c| format!(", container {c}"))
                .unwrap_or_default(),
            m.provider_pid
                .map(|p| format!(", provider pid {p}"))
                .unwrap_or_default(),
        ));
        out.add(
            Pending {
                finding: f,
                process: None,
                tcp: None,
            },
            None,
        );
    }
    Ok(())
}
