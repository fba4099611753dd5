//! The process lifecycle of tracked trees: fork (children join `TRACKED`
//! before they first run), exec (successful ones here, failed ones from the
//! `sys_exit` dispatcher through [`exec_failed`]) and exit.
//!
//! These are BTF tracepoints: their arguments are the tracepoint's
//! `TP_PROTO` (include/trace/events/sched.h), taken by index, not the fields
//! of the record laid out in `/sys/kernel/tracing/events/sched/*/format`.

use core::ffi::c_void;

use agentsight_common::{
    ARGV_BUF, ARGV_MAX_ARGS, ARGV_READ_FAILED, ARGV_TRUNCATED, ArgvStage, ContainerNs,
    EXIT_IO_UNLISTED, EventKind, ExecEvent, ExitEvent, FILENAME_MAX, ForkEvent,
    LOSS_SLOT_TRACK_FULL, Offsets, PATH_READ_FAILED, PROG_SCHED_PROCESS_EXEC,
    PROG_SCHED_PROCESS_EXIT, PROG_SCHED_PROCESS_FORK,
};
use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_probe_read_user, generated,
        generated::{
            bpf_probe_read_kernel as raw_read_kernel, bpf_probe_read_kernel_str,
            bpf_probe_read_user_str,
        },
    },
    macros::btf_tracepoint,
    programs::BtfTracePointContext,
};

use crate::{
    emit::{count_loss, emit},
    io::io_flush_process,
    maps::{
        SCRATCH, TRACKED, current_cgroup, current_container, current_tgid, in_tracked_cgroup,
        is_tracked, named, offsets,
    },
    path::{SLOT_EXE, file_identity, walk_cwd, walk_path},
    read::{read_ptr, read_u32, read_u64},
};

/// `sched_process_fork(struct task_struct *parent, struct task_struct *child)`:
/// the child (`sched/sched_process_fork/format`: `child_pid` is its pid).
const FORK_ARG_CHILD: usize = 1;

/// `sched_process_exec(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)`:
/// the task (`sched/sched_process_exec/format`: `pid`).
const EXEC_ARG_TASK: usize = 0;
/// … the tid that called exec (`sched/sched_process_exec/format`: `old_pid`).
const EXEC_ARG_OLD_PID: usize = 1;
/// … the binary being run (`sched/sched_process_exec/format`: `filename` is
/// its `bprm->filename`).
const EXEC_ARG_BPRM: usize = 2;

/// `sched_process_exit(struct task_struct *p, bool group_dead)`: the task
/// (`sched/sched_process_exit/format`: `pid`).
const EXIT_ARG_TASK: usize = 0;
/// … whether the whole thread group is gone (`sched/sched_process_exit/format`:
/// `group_dead`); a `bool`, so only its low byte is defined in the u64 slot.
const EXIT_ARG_GROUP_DEAD: usize = 1;

#[btf_tracepoint(function = "sched_process_fork")]
pub fn sched_process_fork(ctx: BtfTracePointContext) -> u32 {
    let tgid = current_tgid();
    if !is_tracked(tgid) {
        // A process of a recorded container not tracked yet (one `docker
        // exec`'s runtime moved into the cgroup): it joins now, with the
        // child, which starts in the same cgroup.
        if !in_tracked_cgroup() || !track(tgid) {
            return 0;
        }
    }
    let off = offsets();
    let child: *const u8 = ctx.arg(FORK_ARG_CHILD);
    let child_tgid = unsafe { read_u32(child.add(off.task_tgid as usize)) };
    let child_tid = unsafe { read_u32(child.add(off.task_pid as usize)) };
    if child_tgid == tgid || child_tgid == 0 {
        // A new thread of a tracked process: already covered by its tgid.
        return 0;
    }
    if TRACKED.insert(&child_tgid, &1, 0).is_err() {
        count_loss(LOSS_SLOT_TRACK_FULL);
    }
    let cgroup_id = current_cgroup();
    emit::<ForkEvent>(EventKind::Fork, |ev, _| unsafe {
        (*ev).child_pid = child_tgid;
        (*ev).child_tid = child_tid;
        (*ev).cgroup_id = cgroup_id;
    });
    0
}

/// Adds `tgid` to `TRACKED`; false (counted as loss) when the map is full.
#[inline(always)]
fn track(tgid: u32) -> bool {
    if TRACKED.insert(&tgid, &1, 0).is_err() {
        count_loss(LOSS_SLOT_TRACK_FULL);
        return false;
    }
    true
}
named!(sched_process_fork, PROG_SCHED_PROCESS_FORK);

/// Reads filename and argv of an exec call from the caller's memory into
/// per-CPU scratch (only failed execs need this: the caller's memory is
/// still there, and a successful exec's argv is read from the new stack).
#[inline(always)]
fn stage_argv(filename: *const u8, argv: *const *const u8) -> Option<*const ArgvStage> {
    let stage = SCRATCH.get_ptr_mut(0)?;
    unsafe {
        let buf = (*stage).argv.as_mut_ptr();
        (*stage).argv_flags = 0;
        if bpf_probe_read_user_str(
            (*stage).filename.as_mut_ptr() as *mut c_void,
            FILENAME_MAX as u32,
            filename as *const c_void,
        ) < 0
        {
            (*stage).filename[0] = 0;
        }
        let mut off = 0usize;
        let mut kept = 0u32;
        let mut flags = 0u32;
        // A NULL argv is allowed (no arguments), not a failed read.
        let count = if argv.is_null() { 0 } else { ARGV_MAX_ARGS };
        for i in 0..count {
            let arg = match bpf_probe_read_user(argv.add(i)) {
                Ok(p) => p,
                Err(_) => {
                    flags |= ARGV_READ_FAILED;
                    break;
                }
            };
            if arg.is_null() {
                break;
            }
            if off >= ARGV_BUF {
                flags |= ARGV_TRUNCATED;
                break;
            }
            // Masked so the verifier sees dst + size inside the 2 × ARGV_BUF buffer.
            let at = off & (ARGV_BUF - 1);
            let room = ARGV_BUF - at;
            let n = bpf_probe_read_user_str(
                buf.add(at) as *mut c_void,
                room as u32,
                arg as *const c_void,
            );
            if n < 0 {
                flags |= ARGV_READ_FAILED;
                break;
            }
            kept += 1;
            let n = n as usize;
            if n >= room {
                // Filled the remaining room: this argument may be cut.
                flags |= ARGV_TRUNCATED;
                off = ARGV_BUF;
                break;
            }
            off = at + n;
        }
        if kept as usize == ARGV_MAX_ARGS
            && !bpf_probe_read_user(argv.add(ARGV_MAX_ARGS))
                .unwrap_or(core::ptr::null())
                .is_null()
        {
            flags |= ARGV_TRUNCATED;
        }
        (*stage).argv_kept = kept;
        (*stage).argv_len = if off > ARGV_BUF {
            ARGV_BUF as u32
        } else {
            off as u32
        };
        (*stage).argv_flags = flags;
    }
    Some(stage)
}

/// Copies a staged argv and filename into an exec record.
#[inline(always)]
unsafe fn copy_stage(ev: *mut ExecEvent, stage: *const ArgvStage) {
    unsafe {
        (*ev).argv_kept = (*stage).argv_kept;
        (*ev).argv_len = (*stage).argv_len;
        (*ev).argv_flags = (*stage).argv_flags;
        raw_read_kernel(
            (*ev).argv.as_mut_ptr() as *mut c_void,
            ARGV_BUF as u32,
            (*stage).argv.as_ptr() as *const c_void,
        );
        raw_read_kernel(
            (*ev).filename.as_mut_ptr() as *mut c_void,
            FILENAME_MAX as u32,
            (*stage).filename.as_ptr() as *const c_void,
        );
    }
}

/// Reads the argv of the program just exec'd from its new stack, where the
/// kernel copied it (`mm->arg_start..arg_end`, argc strings back to back):
/// one read, no staging at syscall entry, and exactly the arguments the
/// program received — for a `#!` script, the interpreter's argv.
#[inline(always)]
unsafe fn argv_from_mm(task: *const u8, ev: *mut ExecEvent, off: &Offsets) {
    unsafe {
        (*ev).argv_kept = (*ev).argc;
        (*ev).argv_len = 0;
        (*ev).argv_flags = ARGV_READ_FAILED;
        let mm = read_ptr(task.add(off.task_mm as usize));
        if mm.is_null() {
            return;
        }
        let start = read_u64(mm.add(off.mm_arg_start as usize));
        let end = read_u64(mm.add(off.mm_arg_end as usize));
        if start == 0 || end < start {
            return;
        }
        let len = end - start;
        let flags = if len > ARGV_BUF as u64 {
            ARGV_TRUNCATED
        } else {
            0
        };
        // Masked and clamped so the verifier sees 0..=ARGV_BUF bytes.
        let n = (len.min(ARGV_BUF as u64) as u32) & (ARGV_BUF as u32 * 2 - 1);
        let n = n.min(ARGV_BUF as u32);
        if generated::bpf_probe_read_user(
            (*ev).argv.as_mut_ptr() as *mut c_void,
            n,
            start as *const c_void,
        ) < 0
        {
            return;
        }
        (*ev).argv_len = n;
        (*ev).argv_flags = flags;
    }
}

#[btf_tracepoint(function = "sched_process_exec")]
pub fn sched_process_exec(ctx: BtfTracePointContext) -> u32 {
    // A `docker exec` process of a recorded container is tracked from its
    // first exec: the runtime moved it into the cgroup before.
    if !is_tracked(current_tgid()) && !(in_tracked_cgroup() && track(current_tgid())) {
        return 0;
    }
    let cgroup_id = current_cgroup();
    // In a recorded container: its pid as the container sees it (the
    // helper answers only if the task is in that pid namespace), for a
    // process gone before user space could read /proc.
    let (pidns_ino, ns_pid) = match current_container() {
        Some(ns) => ns_pid_in(&ns),
        None => (0, 0),
    };
    let task: *const u8 = ctx.arg(EXEC_ARG_TASK);
    let old_tid: u32 = ctx.arg::<u64>(EXEC_ARG_OLD_PID) as u32;
    let bprm: *const u8 = ctx.arg(EXEC_ARG_BPRM);
    // Close-on-exec fds are closed by the kernel, not by close(2): flush
    // the process's I/O so far (any fd; later I/O starts a new aggregate).
    let _ = io_flush_process(current_tgid(), false);
    emit::<ExecEvent>(EventKind::Exec, |ev, off| unsafe {
        (*ev).old_tid = old_tid;
        (*ev).errno = 0;
        (*ev).argc = read_u32(bprm.add(off.bprm_argc as usize));
        argv_from_mm(task, ev, off);
        (*ev).filename[0] = 0;
        // The kernel's copy of the filename: what was executed.
        let kname = read_ptr(bprm.add(off.bprm_filename as usize));
        if !kname.is_null() {
            bpf_probe_read_kernel_str(
                (*ev).filename.as_mut_ptr() as *mut c_void,
                FILENAME_MAX as u32,
                kname as *const c_void,
            );
        }
        walk_cwd(task, &mut (*ev).cwd, off);
        let file = read_ptr(bprm.add(off.bprm_file as usize));
        (*ev).exe_ino = 0;
        (*ev).exe_dev = 0;
        (*ev)._pad = 0;
        (*ev).cgroup_id = cgroup_id;
        (*ev).pidns_ino = pidns_ino;
        (*ev).ns_pid = ns_pid;
        (*ev)._pad2 = 0;
        if file.is_null() {
            (*ev).exe.depth = 0;
            (*ev).exe.flags = PATH_READ_FAILED;
        } else {
            walk_path(
                file.add(off.file_path as usize),
                &mut (*ev).exe,
                SLOT_EXE,
                off,
            );
            file_identity(file, &mut (*ev).exe_ino, &mut (*ev).exe_dev, off);
        }
    });
    0
}
named!(sched_process_exec, PROG_SCHED_PROCESS_EXEC);

/// A failed execve/execveat of a tracked process, seen at its syscall exit:
/// the caller's memory is intact, so filename and argv are read from it.
#[inline(always)]
pub(crate) fn exec_failed(filename: u64, argv: u64, ret: i64) {
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(stage) = stage_argv(filename as *const u8, argv as *const *const u8) else {
        return;
    };
    emit::<ExecEvent>(EventKind::ExecFailed, |ev, off| unsafe {
        (*ev).old_tid = tid;
        (*ev).errno = (-ret) as i32;
        (*ev).argc = 0;
        copy_stage(ev, stage);
        let task = bpf_get_current_task() as *const u8;
        walk_cwd(task, &mut (*ev).cwd, off);
        (*ev).exe.depth = 0;
        (*ev).exe.flags = 0;
        (*ev).exe_ino = 0;
        (*ev).exe_dev = 0;
        (*ev)._pad = 0;
        (*ev).cgroup_id = 0;
        (*ev).pidns_ino = 0;
        (*ev).ns_pid = 0;
        (*ev)._pad2 = 0;
    });
}

/// (namespace inode, tgid in it) of the current task in `ns`; (0, 0) when
/// the task is not in that pid namespace.
#[inline(always)]
fn ns_pid_in(ns: &ContainerNs) -> (u64, u32) {
    let mut info = aya_ebpf::bindings::bpf_pidns_info { pid: 0, tgid: 0 };
    let r = unsafe {
        generated::bpf_get_ns_current_pid_tgid(
            ns.pidns_dev,
            ns.pidns_ino,
            &mut info,
            core::mem::size_of::<aya_ebpf::bindings::bpf_pidns_info>() as u32,
        )
    };
    if r == 0 {
        (ns.pidns_ino, info.tgid)
    } else {
        (0, 0)
    }
}

#[btf_tracepoint(function = "sched_process_exit")]
pub fn sched_process_exit(ctx: BtfTracePointContext) -> u32 {
    let tgid = current_tgid();
    if !is_tracked(tgid) {
        return 0;
    }
    let group_dead = ctx.arg::<u64>(EXIT_ARG_GROUP_DEAD) & 0xff != 0;
    if !group_dead {
        return 0;
    }
    // The kernel closes what is still open: flush that I/O first, so it
    // precedes the exit.
    let unlisted = io_flush_process(tgid, true);
    let task: *const u8 = ctx.arg(EXIT_ARG_TASK);
    emit::<ExitEvent>(EventKind::Exit, |ev, off| unsafe {
        (*ev).exit_code = read_u32(task.add(off.task_exit_code as usize));
        (*ev).flags = if unlisted { EXIT_IO_UNLISTED } else { 0 };
    });
    let _ = TRACKED.remove(&tgid);
    0
}
named!(sched_process_exit, PROG_SCHED_PROCESS_EXIT);
