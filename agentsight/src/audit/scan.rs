//! Phase 3, the pass over the capture's events, in time order: each file,
//! exec and network event handed to its rule family (`rules`), exec argv
//! and `tcp_state` changes noted for the findings' process chains and
//! connect outcomes (`complete`).

use super::{
    AuditError,
    context::{Ctx, Ev, ev_columns, ev_from_row, q},
    fold::Collector,
    policy::Policy,
    rules::{
        Rules, exec::exec_event, files::file_event, network::net_event, note, paths::PathSets,
    },
};

const EVENT_KINDS: &str = "'open','openat','openat2','creat','unlink','unlinkat','rmdir','mkdir','mkdirat',\
'truncate','ftruncate','rename','renameat','renameat2','link','linkat','symlink','symlinkat',\
'exec','exec_failed','connect','sendto','sendmsg','sendmmsg','dns_write','tcp_state'";

/// Reads every relevant event once, in time order, and checks it.
pub(in crate::audit) fn events(
    ctx: &mut Ctx,
    policy: &Policy,
    rules: &Rules,
    sets: &PathSets,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let cap = ctx.cap;
    let sql = format!(
        "SELECT {} FROM events WHERE kind IN ({EVENT_KINDS}) ORDER BY mono_ns, id",
        ev_columns(cap)?
    );
    let mut st = cap.conn.prepare(&sql).map_err(|e| q(cap, e))?;
    let rows = st.query_map([], ev_from_row).map_err(|e| q(cap, e))?;
    // Container processes' file events no path rule judged (no `[container]`).
    let mut unjudged: u64 = 0;
    for ev in rows {
        let ev = ev.map_err(|e| q(cap, e))?;
        match ev.kind.as_str() {
            "tcp_state" => note_tcp(ctx, ev),
            "exec" | "exec_failed" => {
                if ev.kind == "exec"
                    && let (Some(id), Some(a)) = (ev.process_id, &ev.argv)
                {
                    let list = ctx.history.execs.entry(id).or_default();
                    list.push((ev.mono_ns, a.clone()));
                }
                exec_event(ctx, policy, sets, &ev, out)?;
            }
            "connect" | "sendto" | "sendmsg" | "sendmmsg" | "dns_write" => {
                net_event(ctx, policy, rules, &ev, out)?;
            }
            _ => {
                if !file_event(ctx, policy, sets, &ev, out)? {
                    unjudged += 1;
                }
            }
        }
    }
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

fn note_tcp(ctx: &mut Ctx, ev: Ev) {
    if let (Some(id), Some(addr), Some(port), Some(state)) =
        (ev.process_id, ev.addr, ev.port, ev.tcp_state)
    {
        let list = ctx.history.tcp.entry((id, addr, port)).or_default();
        list.push((ev.mono_ns, state));
    }
}
