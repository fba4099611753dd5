//! `record --enforce`'s network rules: cgroup socket-address programs that
//! refuse a tracked process's connect or datagram send to a destination the
//! policy denies or does not declare (`agentsight_common::net_policy`).
//!
//! User space attaches them to the root cgroup only while enforcing, so they
//! see every process; an untracked one is allowed after the same one lookup
//! every other program starts with. A refusal is returned as 0 (the caller
//! gets `EPERM`) and told to user space through `NET_DENIALS`.

use agentsight_common::{
    MAP_NET_DENIAL_LOSS, MAP_NET_DENIALS, MAP_NET_POLICY, PROG_NET_CONNECT4, PROG_NET_CONNECT6,
    PROG_NET_SENDMSG4, PROG_NET_SENDMSG6,
    net_policy::{NET_UNDECLARED, NetDenial, NetPolicy, NetVerdict, normalized},
};
use aya_ebpf::{
    bindings::bpf_sock_addr,
    helpers::bpf_ktime_get_ns,
    macros::{cgroup_sock_addr, map},
    maps::{Array, PerCpuArray, RingBuf},
    programs::SockAddrContext,
};

use crate::maps::{current_tgid, in_tracked_cgroup, is_tracked, named};

/// The compiled `[network]` rules (one entry).
#[map]
static NET_POLICY: Array<NetPolicy> = Array::with_max_entries(1, 0);
named!(NET_POLICY, MAP_NET_POLICY);

/// Refusals for user space (about 18,000 fit between two drains; beyond,
/// counted).
#[map]
static NET_DENIALS: RingBuf = RingBuf::with_byte_size(1024 * 1024, 0);
named!(NET_DENIALS, MAP_NET_DENIALS);

/// Refusals `NET_DENIALS` had no room for.
#[map]
static NET_DENIAL_LOSS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
named!(NET_DENIAL_LOSS, MAP_NET_DENIAL_LOSS);

const ALLOW: i32 = 1;
const REFUSE: i32 = 0;

#[cgroup_sock_addr(connect4)]
pub fn net_connect4(ctx: SockAddrContext) -> i32 {
    judge(&ctx, true, false)
}
named!(net_connect4, PROG_NET_CONNECT4);

#[cgroup_sock_addr(connect6)]
pub fn net_connect6(ctx: SockAddrContext) -> i32 {
    judge(&ctx, false, false)
}
named!(net_connect6, PROG_NET_CONNECT6);

#[cgroup_sock_addr(sendmsg4)]
pub fn net_sendmsg4(ctx: SockAddrContext) -> i32 {
    judge(&ctx, true, true)
}
named!(net_sendmsg4, PROG_NET_SENDMSG4);

#[cgroup_sock_addr(sendmsg6)]
pub fn net_sendmsg6(ctx: SockAddrContext) -> i32 {
    judge(&ctx, false, true)
}
named!(net_sendmsg6, PROG_NET_SENDMSG6);

#[inline(always)]
fn judge(ctx: &SockAddrContext, v4_hook: bool, send: bool) -> i32 {
    let tgid = current_tgid();
    if !is_tracked(tgid) && !in_tracked_cgroup() {
        return ALLOW;
    }
    let Some(policy) = NET_POLICY.get(0) else {
        return ALLOW;
    };
    let sa = ctx.sock_addr;
    // Each context field is read by itself, at its own width: the verifier
    // accepts 4-byte loads of these fields (a merged 8-byte load of two
    // `user_ip6` words is not accepted on every kernel).
    let (raw, port) = unsafe {
        let port = core::ptr::read_volatile(core::ptr::addr_of!((*sa).user_port));
        let raw = if v4_hook {
            [
                core::ptr::read_volatile(core::ptr::addr_of!((*sa).user_ip4)),
                0,
                0,
                0,
            ]
        } else {
            ip6(sa)
        };
        (raw, u16::from_be(port as u16))
    };
    let (words, ipv4) = normalized(raw, v4_hook);
    let rule = match policy.verdict(words, ipv4, port) {
        NetVerdict::Allow => return ALLOW,
        NetVerdict::Denied(i) => i as i32,
        NetVerdict::Undeclared => NET_UNDECLARED,
    };
    let denial = NetDenial {
        mono_ns: unsafe { bpf_ktime_get_ns() },
        tgid,
        rule,
        addr: words,
        port,
        ipv4: ipv4 as u8,
        send: send as u8,
        _pad: 0,
    };
    if NET_DENIALS.output::<NetDenial>(&denial, 0).is_err()
        && let Some(n) = NET_DENIAL_LOSS.get_ptr_mut(0)
    {
        unsafe { *n += 1 };
    }
    REFUSE
}

#[inline(always)]
unsafe fn ip6(sa: *mut bpf_sock_addr) -> [u32; 4] {
    unsafe {
        let p = core::ptr::addr_of!((*sa).user_ip6) as *const u32;
        [
            core::ptr::read_volatile(p),
            core::ptr::read_volatile(p.add(1)),
            core::ptr::read_volatile(p.add(2)),
            core::ptr::read_volatile(p.add(3)),
        ]
    }
}
