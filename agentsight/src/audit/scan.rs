//! Phase 3, the pass over the capture's events, in time order: each file,
//! exec and network event handed to its rule family (`rules`), exec argv
//! and `tcp_state` changes noted for the findings' process chains and
//! connect outcomes (`complete`).

use super::{
    AuditError,
    context::{Ctx, Ev},
    fold::Collector,
    policy::Policy,
    rules::{
        Rules, exec::exec_event, files::file_event, network::net_event, note, paths::PathSets,
    },
};
use crate::store::events::EventKind as K;

/// The kinds the pass reads: file changes and opens, execs, connections,
/// sends, DNS writes and TCP outcomes.
const EVENT_KINDS: [K; 26] = [
    K::Open,
    K::Openat,
    K::Openat2,
    K::Creat,
    K::Unlink,
    K::Unlinkat,
    K::Rmdir,
    K::Mkdir,
    K::Mkdirat,
    K::Truncate,
    K::Ftruncate,
    K::Rename,
    K::Renameat,
    K::Renameat2,
    K::Link,
    K::Linkat,
    K::Symlink,
    K::Symlinkat,
    K::Exec,
    K::ExecFailed,
    K::Connect,
    K::Sendto,
    K::Sendmsg,
    K::Sendmmsg,
    K::DnsWrite,
    K::TcpState,
];

/// Reads every relevant event once, in time order, and checks it.
pub(in crate::audit) fn events(
    ctx: &mut Ctx,
    policy: &Policy,
    rules: &Rules,
    sets: &PathSets,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let cap = ctx.cap;
    // Container processes' file events no path rule judged (no `[container]`).
    let mut unjudged: u64 = 0;
    cap.full_events_of_kinds(&EVENT_KINDS, |ev| -> Result<(), AuditError> {
        match ev.kind {
            K::TcpState => note_tcp(ctx, ev),
            K::Exec | K::ExecFailed => {
                if ev.kind == K::Exec
                    && let (Some(id), Some(a)) = (ev.process_id, &ev.argv)
                {
                    let list = ctx.history.execs.entry(id).or_default();
                    list.push((ev.mono_ns, a.clone()));
                }
                exec_event(ctx, policy, sets, ev, out)?;
            }
            K::Connect | K::Sendto | K::Sendmsg | K::Sendmmsg | K::DnsWrite => {
                net_event(ctx, policy, rules, ev, out)?;
            }
            _ => {
                if !file_event(ctx, policy, sets, ev, out)? {
                    unjudged += 1;
                }
            }
        }
        Ok(())
    })?;
    if unjudged > 0 {
        note(
            out,
            rules,
            format!(
                "{unjudged} file event(s) of processes in containers not judged by the path rules: the policy has no [container] table (the top-level path rules are the host's)"
            ),
        );
    }
    Ok(())
}

fn note_tcp(ctx: &mut Ctx, ev: &Ev) {
    if let (Some(id), Some(addr), Some(port), Some(state)) =
        (ev.process_id, &ev.addr, ev.port, &ev.tcp_state)
    {
        let list = ctx.history.tcp.entry((id, addr.clone(), port)).or_default();
        list.push((ev.mono_ns, state.clone()));
    }
}
