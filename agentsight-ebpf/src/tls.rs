//! TLS plaintext by symbol: an entry uprobe and a return uprobe on the TLS
//! libraries' exported read/write functions (user space attaches them per
//! library file, the attach cookie naming the function, `tls_fn`, and the
//! file's index, which `TLS_SEEN` keeps per process).
//!
//! The entry notes the call per thread (`TLS_CALLS`); the `sys_exit`
//! dispatcher notes the fd of the first socket read/write the thread makes
//! inside it ([`note_tls_fd`]), so the connection's fd comes from the
//! syscall, never from library struct offsets; the return copies up to
//! `TLS_DATA_MAX` bytes of what the call moved into the ring.

use agentsight_common::{
    EventKind, PROG_TLS_ENTER, PROG_TLS_RETURN, SEQ_STREAM_TLS, TLS_DATA_MAX, TLS_DATA_SMALL,
    TLS_READ_FAILED, TlsCall, TlsRecord, tls_fn,
};
use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user, generated,
        generated::bpf_get_attach_cookie,
    },
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};

use crate::{
    emit::{RB_NO_WAKEUP, fill_header, lose_record, next_seq},
    io::fd_key,
    maps::{EVENTS, TLS_CALLS, TLS_SEEN, TLS_SOCK_FDS, is_tracked, named, offsets},
};

/// Entry of a TLS function of a tracked process: note the call. A call
/// nested in one already noted on the thread (a library function calling
/// another of the set) only counts its depth: the outer call is recorded.
#[uprobe]
pub fn tls_enter(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_tracked((pid_tgid >> 32) as u32) {
        return 0;
    }
    if let Some(c) = TLS_CALLS.get_ptr_mut(&pid_tgid) {
        unsafe { (*c).depth += 1 };
        return 0;
    }
    // The cookie: the probed file's index (high half), the function (low).
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let func = cookie as u32;
    let seen = (pid_tgid & 0xffff_ffff_0000_0000) | (cookie >> 32);
    // Looked up first: a lookup is lockless, an update is not.
    if unsafe { TLS_SEEN.get(&seen) }.is_none() {
        let _ = TLS_SEEN.insert(&seen, &1, 0);
    }
    let count_ptr = if func == tls_fn::SSL_WRITE_EX || func == tls_fn::SSL_READ_EX {
        ctx.arg::<u64>(3).unwrap_or(0)
    } else {
        0
    };
    let call = TlsCall {
        conn: ctx.arg::<u64>(0).unwrap_or(0),
        buf: ctx.arg::<u64>(1).unwrap_or(0),
        count_ptr,
        entry_ns: unsafe { bpf_ktime_get_ns() },
        func,
        fd: -1,
        depth: 0,
        _pad: 0,
    };
    let _ = TLS_CALLS.insert(&pid_tgid, &call, 0);
    0
}
named!(tls_enter, PROG_TLS_ENTER);

/// Return of a TLS function: the bytes it moved, copied (bounded) into a
/// record; a failed call (nothing moved) leaves none.
#[uretprobe]
pub fn tls_return(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(c) = TLS_CALLS.get_ptr_mut(&pid_tgid) else {
        return 0;
    };
    let call = unsafe {
        if (*c).depth > 0 {
            (*c).depth -= 1;
            return 0;
        }
        *c
    };
    let _ = TLS_CALLS.remove(&pid_tgid);
    let ret: i64 = ctx.ret();
    let len: i64 = match call.func {
        tls_fn::SSL_WRITE | tls_fn::SSL_READ => ret as i32 as i64,
        tls_fn::SSL_WRITE_EX | tls_fn::SSL_READ_EX => {
            if ret as i32 != 1 || call.count_ptr == 0 {
                return 0;
            }
            unsafe { bpf_probe_read_user(call.count_ptr as *const u64) }.map_or(0, |n| n as i64)
        }
        _ => ret,
    };
    if len <= 0 {
        return 0;
    }
    if len as usize <= TLS_DATA_SMALL {
        send::<TLS_DATA_SMALL>(&call, len as u64);
    } else {
        send::<TLS_DATA_MAX>(&call, len as u64);
    }
    0
}
named!(tls_return, PROG_TLS_RETURN);

/// Reserves a record with room for `N` bytes (the reserve size must be a
/// constant, hence two classes) and fills it; a full ring is counted lost.
#[inline(always)]
fn send<const N: usize>(call: &TlsCall, len: u64) {
    let off = offsets();
    let Some(mut entry) = EVENTS.reserve::<TlsRecord<N>>(0) else {
        lose_record(SEQ_STREAM_TLS, EventKind::Tls as u32);
        return;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        let head = &mut (*ev).head;
        fill_header(
            &mut head.header,
            EventKind::Tls,
            next_seq(SEQ_STREAM_TLS),
            off,
        );
        head.header.seq_stream = SEQ_STREAM_TLS;
        head.conn = call.conn;
        head.entry_ns = call.entry_ns;
        head.len = len;
        head.func = call.func;
        head.fd = call.fd;
        // Bounded twice so the verifier sees n ≤ N whatever LLVM folds.
        let n = if len > N as u64 { N as u32 } else { len as u32 };
        let n = n & (N as u32 * 2 - 1);
        let n = if n > N as u32 { N as u32 } else { n };
        let read = generated::bpf_probe_read_user(
            (*ev).data.as_mut_ptr() as *mut core::ffi::c_void,
            n,
            call.buf as *const core::ffi::c_void,
        );
        if read < 0 {
            head.data_len = 0;
            head.flags = TLS_READ_FAILED;
        } else {
            head.data_len = n;
            head.flags = 0;
        }
    }
    entry.submit(RB_NO_WAKEUP);
}

/// Syscalls that move a socket's bytes (x86-64: read, write, readv, writev,
/// sendto, recvfrom, sendmsg, recvmsg): inside a TLS call, their fd is the
/// connection's.
#[inline(always)]
pub(crate) fn is_socket_io(nr: u64) -> bool {
    matches!(nr, 0 | 1 | 19 | 20 | 44 | 45 | 46 | 47)
}

/// Notes `fd` as the socket of the TLS call the current thread is in, if
/// it is in one, no fd was noted yet, and `fd` is a socket.
#[inline(always)]
pub(crate) fn note_tls_fd(tgid: u32, fd: u64) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if let Some(c) = TLS_CALLS.get_ptr_mut(&pid_tgid) {
        unsafe {
            if (*c).fd < 0 && TLS_SOCK_FDS.get(&fd_key(tgid, fd)).is_some() {
                (*c).fd = fd as i32;
            }
        }
    }
}

/// A socket/accept result: `fd` is a socket until closed.
#[inline(always)]
pub(crate) fn note_socket(tgid: u32, fd: i64) {
    if fd >= 0 {
        let _ = TLS_SOCK_FDS.insert(&fd_key(tgid, fd as u64), &1, 0);
    }
}

/// A closed (or dup'ed-over) fd is no longer a socket of ours. Looked up
/// first: a lookup is lockless, a delete of an absent key is not.
#[inline(always)]
pub(crate) fn forget_socket(tgid: u32, fd: u64) {
    let key = fd_key(tgid, fd);
    if unsafe { TLS_SOCK_FDS.get(&key) }.is_some() {
        let _ = TLS_SOCK_FDS.remove(&key);
    }
}
