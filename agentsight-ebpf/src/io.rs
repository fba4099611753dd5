//! Reads and writes summed per fd (`IO`, flushed as one record at close,
//! exec and exit; `IO_FDS` lists each process's fds so the kernel can flush
//! them itself) and the sockets whose traffic is DNS (`DNS_FDS`).

use core::ffi::c_void;

use agentsight_common::{EventKind, IO_FD_LIST, IoAgg, IoEvent, IoFdList, LOSS_SLOT_IO_FULL};
use aya_ebpf::helpers::{bpf_ktime_get_ns, generated::bpf_loop};

use crate::{
    emit::{count_loss, emit},
    maps::{DNS_FDS, IO, IO_FDS},
};

/// `sa_family` of IPv4 and IPv6 socket addresses (include/linux/socket.h).
pub(crate) const AF_INET: u16 = 2;
pub(crate) const AF_INET6: u16 = 10;
/// The DNS port, whose queries are recorded with their payload.
const DNS_PORT: u16 = 53;

/// Notes that `tgid` has an aggregate for `fd`. Threads of one process may
/// race here; the worst case is an fd left off the list, which the sweep at
/// stop still flushes.
#[inline(always)]
fn note_io_fd(tgid: u32, fd: u32) {
    if let Some(list) = IO_FDS.get_ptr_mut(&tgid) {
        unsafe {
            let n = (*list).count as usize;
            let mut i = 0;
            while i < IO_FD_LIST {
                if i >= n {
                    break;
                }
                if (*list).fds[i] == fd {
                    return;
                }
                i += 1;
            }
            (*list).count = (n + 1) as u32;
            if n < IO_FD_LIST {
                (*list).fds[n] = fd;
            } else {
                (*list).overflowed = 1;
            }
        }
        return;
    }
    let mut list = IoFdList {
        count: 1,
        overflowed: 0,
        fds: [0; IO_FD_LIST],
    };
    list.fds[0] = fd;
    let _ = IO_FDS.insert(&tgid, &list, 0);
}

/// The fds to flush, copied to the caller's stack for `flush_step`.
#[repr(C)]
struct FlushCtx {
    tgid: u32,
    _pad: u32,
    fds: [u32; IO_FD_LIST],
}

/// Flushes one listed fd. Under bpf_loop, so the verifier checks one flush
/// once instead of every unrolled iteration (that cost ~0.3 s per load).
extern "C" fn flush_step(index: u64, ctx: *mut c_void) -> i64 {
    let c = ctx as *const FlushCtx;
    unsafe {
        let fd = (*c).fds[(index as usize) & (IO_FD_LIST - 1)];
        io_flush((*c).tgid, fd as u64);
    }
    0
}

/// Flushes every listed aggregate of `tgid` (at exec and exit). Returns
/// true when some were never listed (user space must sweep for them).
#[inline(always)]
pub(crate) fn io_flush_process(tgid: u32, exiting: bool) -> bool {
    let Some(list) = IO_FDS.get_ptr_mut(&tgid) else {
        return false;
    };
    let mut ctx = FlushCtx {
        tgid,
        _pad: 0,
        fds: [0; IO_FD_LIST],
    };
    let (count, overflowed) = unsafe {
        ctx.fds = (*list).fds;
        ((*list).count as usize, (*list).overflowed != 0)
    };
    if exiting {
        let _ = IO_FDS.remove(&tgid);
    } else {
        unsafe { (*list).count = 0 };
    }
    let n = if count > IO_FD_LIST {
        IO_FD_LIST
    } else {
        count
    };
    unsafe {
        bpf_loop(
            n as u32,
            flush_step as *mut c_void,
            &mut ctx as *mut FlushCtx as *mut c_void,
            0,
        );
    }
    overflowed
}

#[inline(always)]
pub(crate) fn is_dns_fd(key: u64) -> bool {
    unsafe { DNS_FDS.get(&key).is_some() }
}

/// Drops a closed fd from `DNS_FDS`. Looked up first: the lookup is
/// lockless, a delete takes the bucket lock even when the key is absent
/// (the usual case, on every close).
#[inline(always)]
pub(crate) fn forget_dns_fd(key: u64) {
    if is_dns_fd(key) {
        let _ = DNS_FDS.remove(&key);
    }
}

#[inline(always)]
pub(crate) fn fd_key(tgid: u32, fd: u64) -> u64 {
    ((tgid as u64) << 32) | (fd & 0xffff_ffff)
}

/// True when a sockaddr (family + big-endian port) names port 53 over IP.
#[inline(always)]
pub(crate) unsafe fn is_dns_addr(sa: *const u8) -> bool {
    unsafe {
        // struct sockaddr_in/_in6: the family (host order), then the port
        // (network order).
        let family = u16::from_le_bytes([*sa, *sa.add(1)]);
        let port = u16::from_be_bytes([*sa.add(2), *sa.add(3)]);
        (family == AF_INET || family == AF_INET6) && port == DNS_PORT
    }
}

/// Adds a successful read or write to the fd's aggregate.
#[inline(always)]
pub(crate) fn io_account(tgid: u32, fd: u64, is_write: bool, bytes: i64) {
    if bytes <= 0 {
        return;
    }
    let key = fd_key(tgid, fd);
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(agg) = IO.get_ptr_mut(&key) {
        unsafe {
            if is_write {
                (*agg).write_bytes += bytes as u64;
                (*agg).write_calls += 1;
            } else {
                (*agg).read_bytes += bytes as u64;
                (*agg).read_calls += 1;
            }
            (*agg).last_ns = now;
        }
        return;
    }
    // Field by field, volatile: a struct literal with zeros in it compiles
    // to a call to a byte-by-byte memset subprogram first.
    let mut agg = core::mem::MaybeUninit::<IoAgg>::uninit();
    let p = agg.as_mut_ptr();
    let (write_bytes, read_bytes) = if is_write {
        (bytes as u64, 0)
    } else {
        (0, bytes as u64)
    };
    let agg = unsafe {
        core::ptr::addr_of_mut!((*p).write_bytes).write_volatile(write_bytes);
        core::ptr::addr_of_mut!((*p).write_calls).write_volatile(is_write as u64);
        core::ptr::addr_of_mut!((*p).read_bytes).write_volatile(read_bytes);
        core::ptr::addr_of_mut!((*p).read_calls).write_volatile((!is_write) as u64);
        core::ptr::addr_of_mut!((*p).first_ns).write_volatile(now);
        core::ptr::addr_of_mut!((*p).last_ns).write_volatile(now);
        agg.assume_init_ref()
    };
    if IO.insert(&key, agg, 0).is_err() {
        count_loss(LOSS_SLOT_IO_FULL);
        return;
    }
    note_io_fd(tgid, fd as u32);
}

/// Emits and forgets the aggregate of one fd (at close).
#[inline(always)]
pub(crate) fn io_flush(tgid: u32, fd: u64) {
    let key = fd_key(tgid, fd);
    let Some(agg) = IO.get_ptr(&key) else {
        return;
    };
    emit::<IoEvent>(EventKind::Io, |ev, _| unsafe {
        (*ev).fd = fd as i32;
        (*ev)._pad = 0;
        // Field by field: a struct copy compiles to a call to a
        // byte-copying memmove subprogram.
        let (dst, src) = (&mut (*ev).agg, &*agg);
        dst.write_bytes = src.write_bytes;
        dst.write_calls = src.write_calls;
        dst.read_bytes = src.read_bytes;
        dst.read_calls = src.read_calls;
        dst.first_ns = src.first_ns;
        dst.last_ns = src.last_ns;
    });
    let _ = IO.remove(&key);
}
