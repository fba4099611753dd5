//! The TCP outcome of a tracked process's connects, from the
//! `sock:inet_sock_set_state` tracepoint.

use agentsight_common::{
    EventKind, PROG_INET_SOCK_SET_STATE, SEQ_STREAM_TCP, TcpStateEvent,
    inet_sock_set_state_format::{
        DADDR, DADDR_V6, DPORT, FAMILY, NEWSTATE, OLDSTATE, SADDR, SADDR_V6, SKADDR, SPORT,
    },
};
use aya_ebpf::{
    helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns},
    macros::tracepoint,
    programs::TracePointContext,
};

use crate::{
    emit::{RB_NO_WAKEUP, lose_record, next_seq},
    io::AF_INET6,
    maps::{EVENTS, TCP_SOCKS, current_tgid, is_tracked, named},
};

/// TCP states (include/net/tcp_states.h; the format file's `print fmt`
/// lists them too).
const TCP_ESTABLISHED: i32 = 1;
const TCP_SYN_SENT: i32 = 2;
const TCP_CLOSE: i32 = 7;

/// TCP outcome of a connect: the SYN_SENT transition happens in the
/// connecting task (we note the socket); later ones run in softirq with an
/// unrelated `current`, so the record is built from what we noted.
#[tracepoint]
pub fn inet_sock_set_state(ctx: TracePointContext) -> u32 {
    unsafe {
        let sk: u64 = ctx.read_at(SKADDR).unwrap_or(0);
        let oldstate: i32 = ctx.read_at(OLDSTATE).unwrap_or(0);
        let newstate: i32 = ctx.read_at(NEWSTATE).unwrap_or(0);
        if newstate == TCP_SYN_SENT {
            let tgid = current_tgid();
            if is_tracked(tgid) {
                let _ = TCP_SOCKS.insert(&sk, &tgid, 0);
            }
            return 0;
        }
        if oldstate != TCP_SYN_SENT || (newstate != TCP_ESTABLISHED && newstate != TCP_CLOSE) {
            return 0;
        }
        let Some(tgid) = TCP_SOCKS.get(&sk).copied() else {
            return 0;
        };
        let _ = TCP_SOCKS.remove(&sk);
        match EVENTS.reserve::<TcpStateEvent>(0) {
            Some(mut entry) => {
                let ev = entry.as_mut_ptr();
                let h = &mut *core::ptr::addr_of_mut!((*ev).header);
                h.kind = EventKind::TcpState as u32;
                h.cpu = bpf_get_smp_processor_id();
                h.seq = next_seq(SEQ_STREAM_TCP);
                h.mono_ns = bpf_ktime_get_ns();
                h.tid = tgid;
                h.pid = tgid;
                h.ppid = 0;
                h.uid = 0;
                h.gid = 0;
                h.seq_stream = SEQ_STREAM_TCP;
                h.comm = [0; 16];
                (*ev).oldstate = oldstate;
                (*ev).newstate = newstate;
                (*ev).sport = ctx.read_at(SPORT).unwrap_or(0);
                (*ev).dport = ctx.read_at(DPORT).unwrap_or(0);
                (*ev).family = ctx.read_at(FAMILY).unwrap_or(0);
                (*ev)._pad = 0;
                if (*ev).family == AF_INET6 {
                    (*ev).saddr = ctx.read_at(SADDR_V6).unwrap_or([0; 16]);
                    (*ev).daddr = ctx.read_at(DADDR_V6).unwrap_or([0; 16]);
                } else {
                    let s4: [u8; 4] = ctx.read_at(SADDR).unwrap_or([0; 4]);
                    let d4: [u8; 4] = ctx.read_at(DADDR).unwrap_or([0; 4]);
                    let mut s16 = [0u8; 16];
                    let mut d16 = [0u8; 16];
                    s16[..4].copy_from_slice(&s4);
                    d16[..4].copy_from_slice(&d4);
                    (*ev).saddr = s16;
                    (*ev).daddr = d16;
                }
                entry.submit(RB_NO_WAKEUP);
            }
            None => lose_record(SEQ_STREAM_TCP, EventKind::TcpState as u32),
        }
    }
    0
}
named!(inet_sock_set_state, PROG_INET_SOCK_SET_STATE);
