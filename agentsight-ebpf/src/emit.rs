//! Putting a record on the ring: reserve, fill the header, submit, or take
//! the sequence number anyway and count the loss.

use core::ffi::c_void;

use agentsight_common::{EventKind, Header, Offsets, SEQ_STREAM_TASK};
use aya_ebpf::helpers::{
    bpf_get_current_pid_tgid, bpf_get_current_task, bpf_get_current_uid_gid,
    bpf_get_smp_processor_id, bpf_ktime_get_ns, generated,
};

use crate::{
    maps::{EVENTS, LOSS, SEQ, offsets},
    read::{read_ptr, read_u32},
};

/// `BPF_RB_NO_WAKEUP`: records never wake the reader; it drains the ring
/// on a short timer instead, so a busy traced process does not pay a
/// wakeup (and a context switch) per record.
pub(crate) const RB_NO_WAKEUP: u64 = 1;

/// Bytes of `task_struct.comm` (`TASK_COMM_LEN`), the size of `Header::comm`.
const TASK_COMM_LEN: u32 = 16;

/// The next sequence number of `stream` on this CPU. Call it only where a
/// record is then submitted or counted as lost, so that a gap in the numbers
/// means a record that never arrived and nothing else. Programs that share a
/// stream never interleave on a CPU (task context with preemption off; the
/// TCP tracepoint, which may run in softirq, has its own stream and cannot
/// nest in itself), so a plain increment is exact.
#[inline(always)]
pub(crate) fn next_seq(stream: u32) -> u64 {
    match SEQ.get_ptr_mut(stream) {
        Some(p) => unsafe {
            *p += 1;
            *p
        },
        None => 0,
    }
}

/// A record that could not be reserved or sent: it takes its sequence
/// number (so the reader sees the gap) and is counted as lost of `slot`.
#[inline(always)]
pub(crate) fn lose_record(stream: u32, slot: u32) {
    next_seq(stream);
    count_loss(slot);
}

#[inline(always)]
pub(crate) fn count_loss(slot: u32) {
    if let Some(p) = LOSS.get_ptr_mut(slot) {
        unsafe { *p += 1 };
    }
}

/// Fills the common header for the current task.
#[inline(always)]
pub(crate) unsafe fn fill_header(h: *mut Header, kind: EventKind, seq: u64, off: &Offsets) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let uid_gid = bpf_get_current_uid_gid();
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        let parent = read_ptr(task.add(off.task_real_parent as usize));
        let ppid = if parent.is_null() {
            0
        } else {
            read_u32(parent.add(off.task_tgid as usize))
        };
        (*h).kind = kind as u32;
        (*h).cpu = bpf_get_smp_processor_id();
        (*h).seq = seq;
        (*h).mono_ns = bpf_ktime_get_ns();
        (*h).tid = pid_tgid as u32;
        (*h).pid = (pid_tgid >> 32) as u32;
        (*h).ppid = ppid;
        (*h).uid = uid_gid as u32;
        (*h).gid = (uid_gid >> 32) as u32;
        (*h).seq_stream = SEQ_STREAM_TASK;
        // Straight into the record (the kernel zeroes it on failure).
        generated::bpf_get_current_comm((*h).comm.as_mut_ptr() as *mut c_void, TASK_COMM_LEN);
    }
}

/// Reserves a `T` record (which starts with a [`Header`]) in the ring,
/// fills its header for the current task and the rest with `fill`, and
/// submits it; a full ring is counted as loss of `kind`.
#[inline(always)]
pub(crate) fn emit<T: 'static>(kind: EventKind, fill: impl FnOnce(*mut T, &Offsets)) {
    let off = offsets();
    match EVENTS.reserve::<T>(0) {
        Some(mut entry) => {
            let ev = entry.as_mut_ptr();
            // The number is taken once the record is sure to be submitted.
            unsafe { fill_header(ev as *mut Header, kind, next_seq(SEQ_STREAM_TASK), off) };
            fill(ev, off);
            entry.submit(RB_NO_WAKEUP);
        }
        None => lose_record(SEQ_STREAM_TASK, kind as u32),
    }
}
