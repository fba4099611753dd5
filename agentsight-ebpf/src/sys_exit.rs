//! The one raw `sys_exit` program: every file and socket syscall of a tracked
//! process, recorded at its exit from the arguments its registers still hold,
//! and failed execs (handed to [`crate::process::exec_failed`]).
//!
//! A call is recorded in named steps: [`account`] (per-fd I/O sums and the
//! fd bookkeeping of close and dup; most reads and writes end here),
//! [`start_record`], [`fill_buffers`] (the paths, socket addresses and DNS
//! payloads the call names) and [`send_record`] (only the used bytes).

use core::ffi::c_void;

use agentsight_common::{
    EventKind, Offsets, PATH_WALKED, PROG_SYS_EXIT, PT_REGS_WORDS, SEQ_STREAM_TASK, SYS_BUF,
    SYS_EVENT_BARE, SYS_EVENT_ONE, SYS_EVENT_TWO, SysEvent, op,
};
use aya_ebpf::{
    helpers::{
        bpf_get_current_task, bpf_probe_read_user,
        generated::bpf_probe_read_kernel as raw_read_kernel,
    },
    macros::raw_tracepoint,
    programs::RawTracePointContext,
};

use crate::{
    emit::{RB_NO_WAKEUP, count_loss, fill_header, next_seq},
    io::{fd_key, forget_dns_fd, io_account, io_flush, is_dns_addr, is_dns_fd},
    maps::{DNS_FDS, EVENTS, SYS_SCRATCH, current_tgid, is_tracked, named, offsets},
    path::{fd_file, file_identity, walk_file_packed},
    process::exec_failed,
    read::{read_u32, user_bytes, user_str},
    tls::{forget_socket, is_socket_io, note_socket, note_tls_fd},
};

/// `sys_exit(struct pt_regs *regs, long ret)` (include/trace/events/syscalls.h):
/// a raw tracepoint gets these `TP_PROTO` arguments, not the record of
/// `/sys/kernel/tracing/events/raw_syscalls/sys_exit/format` (whose `id` is
/// read here from `regs`, and whose `ret` is this `ret`).
const SYS_EXIT_ARG_REGS: usize = 0;
const SYS_EXIT_ARG_RET: usize = 1;

/// `thread_info.status` bit: the current syscall is a 32-bit one.
const TS_COMPAT: u32 = 0x0002;

/// x86-64 numbers of execve and execveat (their failures are recorded here).
const NR_EXECVE: u64 = 59;
const NR_EXECVEAT: u64 = 322;

/// The fcntl commands that make a new fd (include/uapi/linux/fcntl.h).
const F_DUPFD: u64 = 0;
const F_DUPFD_CLOEXEC: u64 = 1030;

/// Bytes kept of a socket address: `sizeof(struct sockaddr_storage)`.
const SOCKADDR_MAX: u32 = 128;

/// `struct user_msghdr` (include/linux/socket.h; `struct mmsghdr` starts
/// with one): `msg_name`, `msg_namelen`, `msg_iov`.
const MSGHDR_NAME: u64 = 0;
const MSGHDR_NAMELEN: u64 = 8;
const MSGHDR_IOV: u64 = 16;
/// `struct iovec` (include/uapi/linux/uio.h): `iov_base`, `iov_len`.
const IOVEC_BASE: u64 = 0;
const IOVEC_LEN: u64 = 8;

/// Every syscall's exit, for every process: one program instead of an
/// enter/exit pair per syscall. An untracked process pays one map lookup;
/// a tracked one needs no per-syscall staging, because on x86-64 the
/// argument registers in `pt_regs` are unchanged when the syscall returns
/// (only `ax` carries the result). A successful exec replaces the
/// registers and is recorded by sched_process_exec instead; a failed one
/// is recorded here.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit(ctx: RawTracePointContext) -> i32 {
    let tgid = current_tgid();
    if !is_tracked(tgid) {
        return 0;
    }
    let off = offsets();
    let regs: *const u8 = ctx.arg(SYS_EXIT_ARG_REGS);
    let ret: i64 = ctx.arg(SYS_EXIT_ARG_RET);
    unsafe {
        // The registers we need all lie in pt_regs' first PT_REGS_WORDS
        // words (user space checks the offsets): one read, straight into
        // this stack slot.
        let mut words = core::mem::MaybeUninit::<[u64; PT_REGS_WORDS]>::uninit();
        if raw_read_kernel(
            words.as_mut_ptr() as *mut c_void,
            core::mem::size_of::<[u64; PT_REGS_WORDS]>() as u32,
            regs as *const c_void,
        ) < 0
        {
            return 0;
        }
        let words = words.assume_init_ref();
        let word = |offset: u32| words[(offset as usize / 8) & (PT_REGS_WORDS - 1)];
        let nr = word(off.regs_nr);
        let op = op_of_syscall(nr);
        let exec = nr == NR_EXECVE || nr == NR_EXECVEAT;
        let socket_io = is_socket_io(nr);
        if op.is_none() && !exec && !socket_io {
            return 0;
        }
        // A 32-bit (compat) syscall numbers its calls differently.
        let task = bpf_get_current_task() as *const u8;
        if read_u32(task.add(off.task_ti_status as usize)) & TS_COMPAT != 0 {
            return 0;
        }
        let mut a = [0u64; 6];
        for (i, slot) in a.iter_mut().enumerate() {
            *slot = word(off.regs_args[i]);
        }
        if socket_io {
            note_tls_fd(tgid, a[0]);
        }
        match op {
            Some(op) => finish(tgid, op, a, ret),
            // A successful exec is recorded by sched_process_exec.
            None if ret < 0 && nr == NR_EXECVE => exec_failed(a[0], a[1], ret),
            None if ret < 0 && nr == NR_EXECVEAT => exec_failed(a[1], a[2], ret),
            None => {}
        }
    }
    0
}
named!(sys_exit, PROG_SYS_EXIT);

/// x86-64 syscall number → the `op` we record it as (None: not recorded).
#[inline(always)]
fn op_of_syscall(nr: u64) -> Option<u32> {
    Some(match nr {
        0 => op::READ,
        1 => op::WRITE,
        2 => op::OPEN,
        3 => op::CLOSE,
        17 => op::PREAD64,
        18 => op::PWRITE64,
        19 => op::READV,
        20 => op::WRITEV,
        40 => op::SENDFILE,
        32 => op::DUP,
        33 => op::DUP2,
        41 => op::SOCKET,
        42 => op::CONNECT,
        43 => op::ACCEPT,
        44 => op::SENDTO,
        46 => op::SENDMSG,
        49 => op::BIND,
        50 => op::LISTEN,
        72 => op::FCNTL,
        76 => op::TRUNCATE,
        77 => op::FTRUNCATE,
        80 => op::CHDIR,
        81 => op::FCHDIR,
        82 => op::RENAME,
        83 => op::MKDIR,
        84 => op::RMDIR,
        85 => op::CREAT,
        86 => op::LINK,
        87 => op::UNLINK,
        88 => op::SYMLINK,
        257 => op::OPENAT,
        258 => op::MKDIRAT,
        263 => op::UNLINKAT,
        264 => op::RENAMEAT,
        265 => op::LINKAT,
        266 => op::SYMLINKAT,
        288 => op::ACCEPT4,
        275 => op::SPLICE,
        292 => op::DUP3,
        295 => op::PREADV,
        296 => op::PWRITEV,
        307 => op::SENDMMSG,
        316 => op::RENAMEAT2,
        326 => op::COPY_FILE_RANGE,
        327 => op::PREADV2,
        328 => op::PWRITEV2,
        437 => op::OPENAT2,
        _ => return None,
    })
}

/// Records one finished syscall of a tracked process from its arguments
/// (as the registers still hold them at exit) and its result.
#[inline(always)]
fn finish(tgid: u32, op: u32, a: [u64; 6], ret: i64) {
    let dns_key = fd_key(tgid, a[0]);
    if !account(tgid, op, &a, ret, dns_key) {
        return;
    }
    let Some(ev) = SYS_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    let off = offsets();
    unsafe {
        // The sequence number is set just before the record is sent: the
        // buffers may still show there is nothing worth a record.
        start_record(ev, op, a, ret, off);
        let Some((l1, l2, size)) = fill_buffers(ev, op, &a, ret, dns_key, off) else {
            return;
        };
        send_record(ev, l1, l2, size);
    }
}

/// The fd bookkeeping of a call: reads and writes go into their fd's sums,
/// a close or a dup over an fd flushes what that fd did. Returns whether the
/// call is recorded too (a read or write only when it is a DNS query).
#[inline(always)]
fn account(tgid: u32, op: u32, a: &[u64; 6], ret: i64, dns_key: u64) -> bool {
    match op {
        op::WRITE | op::PWRITE64 | op::WRITEV | op::PWRITEV | op::PWRITEV2 => {
            io_account(tgid, a[0], true, ret);
            op == op::WRITE && ret > 0 && is_dns_fd(dns_key)
        }
        op::READ | op::PREAD64 | op::READV | op::PREADV | op::PREADV2 => {
            io_account(tgid, a[0], false, ret);
            false
        }
        // Bytes the kernel moves between two fds, never through the
        // caller's memory: read from the source, written to the destination.
        // sendfile(out, in, …); splice/copy_file_range(in, off, out, …).
        op::SENDFILE | op::SPLICE | op::COPY_FILE_RANGE => {
            let (src, dst) = if op == op::SENDFILE {
                (a[1], a[0])
            } else {
                (a[0], a[2])
            };
            io_account(tgid, src, false, ret);
            io_account(tgid, dst, true, ret);
            false
        }
        op::CLOSE => {
            if ret == 0 {
                io_flush(tgid, a[0]);
                forget_dns_fd(dns_key);
                forget_socket(tgid, a[0]);
            }
            true
        }
        // dup2/dup3 close their target fd implicitly: flush what it did first.
        op::DUP2 | op::DUP3 => {
            if ret >= 0 && a[0] != a[1] {
                io_flush(tgid, a[1]);
                forget_dns_fd(fd_key(tgid, a[1]));
                forget_socket(tgid, a[1]);
            }
            true
        }
        op::SOCKET | op::ACCEPT | op::ACCEPT4 => {
            note_socket(tgid, ret);
            true
        }
        // Only the fcntl commands that make a new fd matter to the fd table.
        op::FCNTL => a[1] == F_DUPFD || a[1] == F_DUPFD_CLOEXEC,
        _ => true,
    }
}

/// Fills the header (its sequence number comes at the send) and the fixed
/// fields of the record in `SYS_SCRATCH`.
#[inline(always)]
unsafe fn start_record(ev: *mut SysEvent, op: u32, a: [u64; 6], ret: i64, off: &Offsets) {
    unsafe {
        fill_header(&mut (*ev).header, EventKind::Sys, 0, off);
        (*ev).op = op;
        (*ev).ret = ret;
        (*ev).args = a;
        (*ev).how_flags = 0;
        (*ev).path_flags = 0;
        (*ev).ino = 0;
        (*ev).dev = 0;
        (*ev)._pad = 0;
    }
}

/// Reads what the call names into the record's buffers. Returns the bytes
/// read into `buf1` and `buf2` and the record's size class, or None when
/// the call is not worth a record after all.
#[inline(always)]
unsafe fn fill_buffers(
    ev: *mut SysEvent,
    op: u32,
    a: &[u64; 6],
    ret: i64,
    dns_key: u64,
    off: &Offsets,
) -> Option<(i32, i32, usize)> {
    unsafe {
        let b1 = (*ev).buf1.as_mut_ptr();
        let b2 = (*ev).buf2.as_mut_ptr();
        Some(match op {
            op::OPEN | op::CREAT | op::OPENAT | op::OPENAT2 => open_record(ev, op, a, ret, off),
            op::UNLINK | op::RMDIR | op::MKDIR | op::TRUNCATE | op::CHDIR => {
                (user_str(a[0], b1), 0, SYS_EVENT_ONE)
            }
            op::UNLINKAT | op::MKDIRAT => (user_str(a[1], b1), 0, SYS_EVENT_ONE),
            op::RENAME | op::LINK | op::SYMLINK => {
                (user_str(a[0], b1), user_str(a[1], b2), SYS_EVENT_TWO)
            }
            op::RENAMEAT | op::RENAMEAT2 | op::LINKAT => {
                (user_str(a[1], b1), user_str(a[3], b2), SYS_EVENT_TWO)
            }
            op::SYMLINKAT => (user_str(a[0], b1), user_str(a[2], b2), SYS_EVENT_TWO),
            op::CONNECT | op::BIND => {
                let l1 = user_bytes(a[1], a[2], SOCKADDR_MAX, b1);
                if op == op::CONNECT && l1 >= 4 && is_dns_addr(b1) {
                    let _ = DNS_FDS.insert(&dns_key, &1, 0);
                }
                (l1, 0, SYS_EVENT_ONE)
            }
            op::ACCEPT | op::ACCEPT4 => {
                let mut l1 = 0;
                if ret >= 0 && a[1] != 0 {
                    let len: i32 = bpf_probe_read_user(a[2] as *const i32).unwrap_or(0);
                    l1 = user_bytes(a[1], len.max(0) as u64, SOCKADDR_MAX, b1);
                }
                (l1, 0, SYS_EVENT_ONE)
            }
            // sendto's `dest_addr` and, for DNS, its buffer.
            op::SENDTO => send_buffers(a[4], a[5], dns_key, b1, b2, |b2| {
                user_bytes(a[1], a[2], SYS_BUF as u32, b2)
            })?,
            op::SENDMSG | op::SENDMMSG => sendmsg_buffers(a, dns_key, b1, b2)?,
            op::WRITE => {
                (*ev).op = op::DNS_WRITE;
                let l2 = user_bytes(a[1], ret as u64, SYS_BUF as u32, b2);
                (0, l2, SYS_EVENT_TWO)
            }
            _ => (0, 0, SYS_EVENT_BARE),
        })
    }
}

/// sendmsg/sendmmsg: the address the (first) message names (`msg_name`, if
/// any) and, for DNS, its first iovec.
#[inline(always)]
unsafe fn sendmsg_buffers(
    a: &[u64; 6],
    dns_key: u64,
    b1: *mut u8,
    b2: *mut u8,
) -> Option<(i32, i32, usize)> {
    unsafe {
        // struct mmsghdr starts with a struct user_msghdr.
        let msg = a[1];
        let name: u64 = bpf_probe_read_user((msg + MSGHDR_NAME) as *const u64).unwrap_or(0);
        let namelen: u32 = bpf_probe_read_user((msg + MSGHDR_NAMELEN) as *const u32).unwrap_or(0);
        send_buffers(name, namelen as u64, dns_key, b1, b2, |b2| {
            msghdr_payload(msg, b2)
        })
    }
}

/// A send that may name its peer: the address (`addr`, 0 for none) into
/// `b1` and, when the send is DNS (a socket connected to port 53, or an
/// address with port 53), the payload `payload` reads into `b2`. None: a
/// send on a connected socket that is not DNS, whose peer is known from
/// its connect.
#[inline(always)]
unsafe fn send_buffers(
    addr: u64,
    addr_len: u64,
    dns_key: u64,
    b1: *mut u8,
    b2: *mut u8,
    payload: impl FnOnce(*mut u8) -> i32,
) -> Option<(i32, i32, usize)> {
    unsafe {
        let mut l1 = 0;
        if addr != 0 {
            l1 = user_bytes(addr, addr_len, SOCKADDR_MAX, b1);
        }
        let dns = is_dns_fd(dns_key) || (l1 >= 4 && is_dns_addr(b1));
        if addr == 0 && !dns {
            return None;
        }
        Some(if dns {
            (l1, payload(b2), SYS_EVENT_TWO)
        } else {
            (l1, 0, SYS_EVENT_ONE)
        })
    }
}

/// Reads the first iovec of a `struct user_msghdr` into `buf2` (DNS payload).
#[inline(always)]
unsafe fn msghdr_payload(msg: u64, dst: *mut u8) -> i32 {
    unsafe {
        let iov: u64 = bpf_probe_read_user((msg + MSGHDR_IOV) as *const u64).unwrap_or(0);
        if iov == 0 {
            return 0;
        }
        let base: u64 = bpf_probe_read_user((iov + IOVEC_BASE) as *const u64).unwrap_or(0);
        let len: u64 = bpf_probe_read_user((iov + IOVEC_LEN) as *const u64).unwrap_or(0);
        user_bytes(base, len, SYS_BUF as u32, dst)
    }
}

/// The buffers of an open's record: the path as given (`buf1`) and, when it
/// succeeded, what the kernel opened — the dentry walk of the file behind
/// the new fd (`buf2`), its inode and device. Returns both lengths and the
/// record size class.
#[inline(always)]
unsafe fn open_record(
    ev: *mut SysEvent,
    op: u32,
    a: &[u64; 6],
    ret: i64,
    off: &Offsets,
) -> (i32, i32, usize) {
    unsafe {
        let given = if op == op::OPEN || op == op::CREAT {
            a[0]
        } else {
            a[1]
        };
        let l1 = user_str(given, (*ev).buf1.as_mut_ptr());
        if op == op::OPENAT2 {
            (*ev).how_flags = bpf_probe_read_user(a[2] as *const u64).unwrap_or(0);
        }
        let file = if ret >= 0 {
            fd_file(ret as u64, off)
        } else {
            core::ptr::null()
        };
        if file.is_null() {
            return (l1, 0, SYS_EVENT_ONE);
        }
        file_identity(file, &mut (*ev).ino, &mut (*ev).dev, off);
        let (used, flags) = walk_file_packed(file, (*ev).buf2.as_mut_ptr(), off);
        (*ev).path_flags = flags | PATH_WALKED;
        (l1, used, SYS_EVENT_TWO)
    }
}

/// Sends the record in `SYS_SCRATCH` with only the bytes read: the last
/// buffer in the record is cut to its length (most paths are far shorter
/// than SYS_BUF), which keeps the ring, the copies and the reader's memory
/// small. The record takes its sequence number here, sent or lost.
#[inline(always)]
unsafe fn send_record(ev: *mut SysEvent, l1: i32, l2: i32, size: usize) {
    unsafe {
        (*ev).len1 = l1;
        (*ev).len2 = l2;
        let used = |len: i32| -> usize {
            if len <= 0 {
                0
            } else {
                (len as usize).min(SYS_BUF)
            }
        };
        let size = if size == SYS_EVENT_ONE {
            SYS_EVENT_BARE + used(l1)
        } else if size == SYS_EVENT_TWO {
            SYS_EVENT_ONE + used(l2)
        } else {
            size
        };
        (*ev).header.seq = next_seq(SEQ_STREAM_TASK);
        let bytes = core::slice::from_raw_parts(ev as *const u8, size);
        if EVENTS.output::<[u8]>(bytes, RB_NO_WAKEUP).is_err() {
            count_loss(EventKind::Sys as u32);
        }
    }
}
