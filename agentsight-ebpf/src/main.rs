//! agentsight's kernel programs: process lifecycle of tracked trees.
//!
//! Every program first checks whether the current tgid is in `TRACKED` and
//! returns at once when it is not, so untracked processes pay one lookup.
//! Children join `TRACKED` here, at fork, before they first run.
#![no_std]
#![no_main]

use core::ffi::c_void;

use agentsight_common::{
    ARGV_BUF, ARGV_MAX_ARGS, ARGV_READ_FAILED, ARGV_TRUNCATED, ArgvStage, EXIT_IO_UNLISTED,
    EventKind, ExecEvent, ExitEvent, FILENAME_MAX, ForkEvent, Header, IO_FD_LIST, IoAgg, IoEvent,
    IoFdList, KIND_SLOTS, LOSS_SLOT_IO_FULL, LOSS_SLOT_TRACK_FULL, Offsets, PATH_COMPLETE,
    PATH_DEPTH, PATH_DETACHED, PATH_NAME_CUT, PATH_NAME_MAX, PATH_PACKED_MAX, PATH_PACKED_NAME,
    PATH_READ_FAILED, PATH_TOO_DEEP, PATH_WALKED, PathRecord, SEQ_STREAM_TASK, SEQ_STREAM_TCP,
    SEQ_STREAMS, SYS_BUF, SYS_EVENT_BARE, SYS_EVENT_ONE, SYS_EVENT_TWO, SysEvent, TcpStateEvent,
    op,
};
use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_get_current_uid_gid,
        bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_user,
        generated,
        generated::{
            bpf_loop, bpf_probe_read_kernel as raw_read_kernel, bpf_probe_read_kernel_str,
            bpf_probe_read_user_str,
        },
    },
    macros::{btf_tracepoint, map, raw_tracepoint, tracepoint},
    maps::{HashMap, LruHashMap, PerCpuArray, RingBuf},
    programs::{BtfTracePointContext, RawTracePointContext, TracePointContext},
};

/// Kernel struct offsets, filled from BTF by user space at load time.
#[unsafe(no_mangle)]
static OFFSETS: Offsets = Offsets::ZERO;

/// Tgids whose activity is recorded.
#[map]
static TRACKED: HashMap<u32, u8> = HashMap::with_max_entries(65536, 0);

/// All records; user space may resize it at load time.
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(16 * 1024 * 1024, 0);

/// `BPF_RB_NO_WAKEUP`: records never wake the reader; it drains the ring
/// on a short timer instead, so a busy traced process does not pay a
/// wakeup (and a context switch) per record.
const RB_NO_WAKEUP: u64 = 1;

/// Failed ring-buffer reserves, per CPU, indexed by event kind.
#[map]
static LOSS: PerCpuArray<u64> = PerCpuArray::with_max_entries(KIND_SLOTS, 0);

/// Per-CPU record sequence numbers, one counter per stream.
#[map]
static SEQ: PerCpuArray<u64> = PerCpuArray::with_max_entries(SEQ_STREAMS, 0);

/// Per-CPU scratch space to read a failed exec's argv into (too big for the stack).
#[map]
static SCRATCH: PerCpuArray<ArgvStage> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn offsets() -> &'static Offsets {
    // The value is patched into the object after compilation, so reads of
    // it must not be folded to the zeros compiled in. Laundering the address
    // through a volatile read does that while loading only the fields used
    // (a volatile read of the whole struct copied all of it every time).
    let p: *const Offsets = &OFFSETS;
    unsafe { &*core::ptr::read_volatile(&p) }
}

#[inline(always)]
fn current_tgid() -> u32 {
    (bpf_get_current_pid_tgid() >> 32) as u32
}

#[inline(always)]
fn is_tracked(tgid: u32) -> bool {
    unsafe { TRACKED.get(&tgid).is_some() }
}

/// The next sequence number of `stream` on this CPU. Call it only where a
/// record is then submitted or counted as lost, so that a gap in the numbers
/// means a record that never arrived and nothing else. Programs that share a
/// stream never interleave on a CPU (task context with preemption off; the
/// TCP tracepoint, which may run in softirq, has its own stream and cannot
/// nest in itself), so a plain increment is exact.
#[inline(always)]
fn next_seq(stream: u32) -> u64 {
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
fn lose_record(stream: u32, slot: u32) {
    next_seq(stream);
    count_loss(slot);
}

#[inline(always)]
fn count_loss(slot: u32) {
    if let Some(p) = LOSS.get_ptr_mut(slot) {
        unsafe { *p += 1 };
    }
}

#[inline(always)]
unsafe fn read_ptr(addr: *const u8) -> *const u8 {
    unsafe { bpf_probe_read_kernel(addr as *const *const u8).unwrap_or(core::ptr::null()) }
}

#[inline(always)]
unsafe fn read_u32(addr: *const u8) -> u32 {
    unsafe { bpf_probe_read_kernel(addr as *const u32).unwrap_or(0) }
}

#[inline(always)]
unsafe fn read_u64(addr: *const u8) -> u64 {
    unsafe { bpf_probe_read_kernel(addr as *const u64).unwrap_or(0) }
}

/// Fills the common header for the current task.
#[inline(always)]
unsafe fn fill_header(h: *mut Header, kind: EventKind, seq: u64, off: &Offsets) {
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
        generated::bpf_get_current_comm((*h).comm.as_mut_ptr() as *mut c_void, 16);
    }
}

/// Reserves a `T` record (which starts with a [`Header`]) in the ring,
/// fills its header for the current task and the rest with `fill`, and
/// submits it; a full ring is counted as loss of `kind`.
#[inline(always)]
fn emit<T: 'static>(kind: EventKind, fill: impl FnOnce(*mut T, &Offsets)) {
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

/// Per-CPU scratch for path walks (slot 0: cwd, slot 1: exe); copied into
/// the record afterwards. The walk runs under bpf_loop, so the verifier checks
/// one step once instead of every unrolled iteration.
#[map]
static PATH_SCRATCH: PerCpuArray<PathRecord> = PerCpuArray::with_max_entries(2, 0);

/// Per-CPU scratch for a packed walk (an opened file's kernel path): names
/// leaf first, NUL-terminated; room for one more name past the limit, so a
/// step never needs more than a mask to stay in bounds.
#[map]
static PACKED_SCRATCH: PerCpuArray<[u8; PATH_PACKED_MAX + PATH_PACKED_NAME]> =
    PerCpuArray::with_max_entries(1, 0);

/// State of one path walk, on the caller's stack.
#[repr(C)]
struct WalkCtx {
    dentry: u64,
    mnt: u64,
    mnt_root: u64,
    depth: u32,
    flags: u32,
    /// PathRecord walks: the PATH_SCRATCH slot written.
    slot: u32,
    /// Packed walks (1): names go to PACKED_SCRATCH at `pos` instead.
    packed: u32,
    pos: u32,
    _pad: u32,
}

/// One step up the dentry tree: 0 to continue, 1 to stop.
extern "C" fn walk_step(_index: u64, ctx: *mut c_void) -> i64 {
    let c = ctx as *mut WalkCtx;
    let off = offsets();
    unsafe {
        let Some(rec) = PATH_SCRATCH.get_ptr_mut((*c).slot) else {
            (*c).flags |= PATH_READ_FAILED;
            return 1;
        };
        let dentry = (*c).dentry as *const u8;
        let mnt = (*c).mnt as *const u8;
        if dentry == (*c).mnt_root as *const u8 {
            // Top of this mount: continue from its mountpoint in the parent.
            let parent_mnt = read_ptr(mnt.add(off.mount_parent as usize));
            if parent_mnt.is_null() {
                (*c).flags |= PATH_READ_FAILED;
                return 1;
            }
            if parent_mnt == mnt {
                (*c).flags |= PATH_COMPLETE;
                return 1;
            }
            (*c).dentry = read_ptr(mnt.add(off.mount_mountpoint as usize)) as u64;
            (*c).mnt = parent_mnt as u64;
            (*c).mnt_root =
                read_ptr(parent_mnt.add((off.mount_mnt + off.vfsmount_root) as usize)) as u64;
            return 0;
        }
        let parent = read_ptr(dentry.add(off.dentry_parent as usize));
        if parent.is_null() {
            (*c).flags |= PATH_READ_FAILED;
            return 1;
        }
        if parent == dentry {
            // A filesystem root that is not the mount root: not reachable from "/".
            (*c).flags |= PATH_DETACHED;
            return 1;
        }
        let qstr = dentry.add(off.dentry_name as usize);
        let name_len = read_u32(qstr.add(off.qstr_len as usize)) as usize;
        let name = read_ptr(qstr.add(off.qstr_name as usize));
        if (*c).packed != 0 {
            pack_name(c, name, name_len);
            if (*c).flags & PATH_TOO_DEEP != 0 {
                return 1;
            }
        } else {
            let depth = (*c).depth as usize;
            if depth >= PATH_DEPTH {
                (*c).flags |= PATH_TOO_DEEP;
                return 1;
            }
            if name_len >= PATH_NAME_MAX {
                (*c).flags |= PATH_NAME_CUT;
            }
            let slot = (*rec).names.as_mut_ptr().add(depth) as *mut u8;
            if bpf_probe_read_kernel_str(
                slot as *mut c_void,
                PATH_NAME_MAX as u32,
                name as *const c_void,
            ) < 0
            {
                *slot = 0;
                (*c).flags |= PATH_READ_FAILED;
            }
        }
        (*c).depth += 1;
        (*c).dentry = parent as u64;
        0
    }
}

/// Appends one name (NUL-terminated) to the packed walk's scratch.
#[inline(always)]
unsafe fn pack_name(c: *mut WalkCtx, name: *const u8, name_len: usize) {
    unsafe {
        let Some(buf) = PACKED_SCRATCH.get_ptr_mut(0) else {
            (*c).flags |= PATH_READ_FAILED;
            return;
        };
        let pos = (*c).pos as usize;
        if pos >= PATH_PACKED_MAX {
            (*c).flags |= PATH_TOO_DEEP;
            return;
        }
        if name_len >= PATH_PACKED_NAME {
            (*c).flags |= PATH_NAME_CUT;
        }
        // pos < PATH_PACKED_MAX (a power of two): the mask only tells the
        // verifier so; the buffer has PATH_PACKED_NAME bytes of room beyond.
        let dst = (buf as *mut u8).add(pos & (PATH_PACKED_MAX - 1));
        let mut n = bpf_probe_read_kernel_str(
            dst as *mut c_void,
            PATH_PACKED_NAME as u32,
            name as *const c_void,
        );
        if n <= 0 {
            *dst = 0;
            n = 1;
            (*c).flags |= PATH_READ_FAILED;
        }
        (*c).pos += n as u32;
    }
}

/// The kernel path of an open file (`struct file *`) into `out` (at most
/// PATH_PACKED_MAX bytes, see [`PATH_PACKED_MAX`]): returns the bytes used
/// and the walk's `PATH_*` flags.
#[inline(always)]
unsafe fn walk_file_packed(file: *const u8, out: *mut u8, off: &Offsets) -> (i32, u32) {
    unsafe {
        let path = file.add(off.file_path as usize);
        let dentry = read_ptr(path.add(off.path_dentry as usize));
        let vfsmnt = read_ptr(path.add(off.path_mnt as usize));
        let Some(buf) = PACKED_SCRATCH.get_ptr_mut(0) else {
            return (0, PATH_READ_FAILED);
        };
        if dentry.is_null() || vfsmnt.is_null() {
            return (0, PATH_READ_FAILED);
        }
        let mut ctx = WalkCtx {
            dentry: dentry as u64,
            mnt: vfsmnt.wrapping_sub(off.mount_mnt as usize) as u64,
            mnt_root: read_ptr(vfsmnt.add(off.vfsmount_root as usize)) as u64,
            depth: 0,
            flags: 0,
            slot: 0,
            packed: 1,
            pos: 0,
            _pad: 0,
        };
        // Components plus mount crossings; the byte limit usually ends it first.
        bpf_loop(
            64,
            walk_step as *mut c_void,
            &mut ctx as *mut WalkCtx as *mut c_void,
            0,
        );
        if ctx.flags & (PATH_COMPLETE | PATH_TOO_DEEP | PATH_DETACHED | PATH_READ_FAILED) == 0 {
            ctx.flags |= PATH_TOO_DEEP;
        }
        let mut used = ctx.pos as usize;
        if used > PATH_PACKED_MAX {
            // The last name ran past the limit: it is cut.
            ctx.flags |= PATH_TOO_DEEP;
            used = PATH_PACKED_MAX;
        }
        raw_read_kernel(
            out as *mut c_void,
            PATH_PACKED_MAX as u32,
            buf as *const c_void,
        );
        (used as i32, ctx.flags)
    }
}

/// The `struct file *` behind `fd` in the current task's fd table (null
/// when there is none).
#[inline(always)]
unsafe fn fd_file(fd: u64, off: &Offsets) -> *const u8 {
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        let files = read_ptr(task.add(off.task_files as usize));
        if files.is_null() {
            return core::ptr::null();
        }
        let fdt = read_ptr(files.add(off.files_fdt as usize));
        if fdt.is_null() || fd >= read_u32(fdt.add(off.fdtable_max_fds as usize)) as u64 {
            return core::ptr::null();
        }
        let fds = read_ptr(fdt.add(off.fdtable_fd as usize));
        if fds.is_null() {
            return core::ptr::null();
        }
        read_ptr(fds.add((fd as usize) * 8))
    }
}

/// Rebuilds the path of a `struct path *` from dentries into `out`, leaf
/// first, crossing mounts up to the root of the mount namespace.
#[inline(always)]
unsafe fn walk_path(path: *const u8, out: *mut PathRecord, slot: u32, off: &Offsets) {
    unsafe {
        let Some(rec) = PATH_SCRATCH.get_ptr_mut(slot) else {
            (*out).depth = 0;
            (*out).flags = PATH_READ_FAILED;
            return;
        };
        let dentry = read_ptr(path.add(off.path_dentry as usize));
        let vfsmnt = read_ptr(path.add(off.path_mnt as usize));
        let mut ctx = WalkCtx {
            dentry: dentry as u64,
            mnt: vfsmnt.wrapping_sub(off.mount_mnt as usize) as u64,
            mnt_root: read_ptr(vfsmnt.add(off.vfsmount_root as usize)) as u64,
            depth: 0,
            flags: 0,
            slot,
            packed: 0,
            pos: 0,
            _pad: 0,
        };
        if dentry.is_null() || vfsmnt.is_null() {
            ctx.flags = PATH_READ_FAILED;
        } else {
            // Components plus a few mount crossings.
            bpf_loop(
                (PATH_DEPTH + 8) as u32,
                walk_step as *mut c_void,
                &mut ctx as *mut WalkCtx as *mut c_void,
                0,
            );
            if ctx.flags & (PATH_COMPLETE | PATH_TOO_DEEP | PATH_DETACHED | PATH_READ_FAILED) == 0 {
                // Loop bound reached (too many mount crossings).
                ctx.flags |= PATH_TOO_DEEP;
            }
        }
        (*rec).depth = ctx.depth;
        (*rec).flags = ctx.flags;
        raw_read_kernel(
            out as *mut c_void,
            core::mem::size_of::<PathRecord>() as u32,
            rec as *const c_void,
        );
    }
}

// ---------------------------------------------------------------- fork

#[btf_tracepoint(function = "sched_process_fork")]
pub fn sched_process_fork(ctx: BtfTracePointContext) -> u32 {
    let tgid = current_tgid();
    if !is_tracked(tgid) {
        return 0;
    }
    let off = offsets();
    let child: *const u8 = ctx.arg(1);
    let child_tgid = unsafe { read_u32(child.add(off.task_tgid as usize)) };
    let child_tid = unsafe { read_u32(child.add(off.task_pid as usize)) };
    if child_tgid == tgid || child_tgid == 0 {
        // A new thread of a tracked process: already covered by its tgid.
        return 0;
    }
    if TRACKED.insert(&child_tgid, &1, 0).is_err() {
        count_loss(LOSS_SLOT_TRACK_FULL);
    }
    emit::<ForkEvent>(EventKind::Fork, |ev, _| unsafe {
        (*ev).child_pid = child_tgid;
        (*ev).child_tid = child_tid;
    });
    0
}

// ---------------------------------------------------------------- exec

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

/// Walks the current task's working directory into `out`.
#[inline(always)]
unsafe fn walk_cwd(task: *const u8, out: *mut PathRecord, off: &Offsets) {
    unsafe {
        let fs = read_ptr(task.add(off.task_fs as usize));
        if fs.is_null() {
            (*out).depth = 0;
            (*out).flags = PATH_READ_FAILED;
        } else {
            walk_path(fs.add(off.fs_pwd as usize), out, 0, off);
        }
    }
}

#[btf_tracepoint(function = "sched_process_exec")]
pub fn sched_process_exec(ctx: BtfTracePointContext) -> u32 {
    if !is_tracked(current_tgid()) {
        return 0;
    }
    let task: *const u8 = ctx.arg(0);
    let old_tid: u32 = ctx.arg::<u64>(1) as u32;
    let bprm: *const u8 = ctx.arg(2);
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
        if file.is_null() {
            (*ev).exe.depth = 0;
            (*ev).exe.flags = PATH_READ_FAILED;
        } else {
            walk_path(file.add(off.file_path as usize), &mut (*ev).exe, 1, off);
            let inode = read_ptr(file.add(off.file_inode as usize));
            if !inode.is_null() {
                (*ev).exe_ino = read_u64(inode.add(off.inode_ino as usize));
                let sb = read_ptr(inode.add(off.inode_sb as usize));
                if !sb.is_null() {
                    (*ev).exe_dev = read_u32(sb.add(off.sb_dev as usize));
                }
            }
        }
    });
    0
}

/// A failed execve/execveat of a tracked process, seen at its syscall exit:
/// the caller's memory is intact, so filename and argv are read from it.
#[inline(always)]
fn exec_failed(filename: u64, argv: u64, ret: i64) {
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
    });
}

// ---------------------------------------------------------------- exit

#[btf_tracepoint(function = "sched_process_exit")]
pub fn sched_process_exit(ctx: BtfTracePointContext) -> u32 {
    let tgid = current_tgid();
    if !is_tracked(tgid) {
        return 0;
    }
    let group_dead = ctx.arg::<u64>(1) & 0xff != 0;
    if !group_dead {
        return 0;
    }
    // The kernel closes what is still open: flush that I/O first, so it
    // precedes the exit.
    let unlisted = io_flush_process(tgid, true);
    let task: *const u8 = ctx.arg(0);
    emit::<ExitEvent>(EventKind::Exit, |ev, off| unsafe {
        (*ev).exit_code = read_u32(task.add(off.task_exit_code as usize));
        (*ev).flags = if unlisted { EXIT_IO_UNLISTED } else { 0 };
    });
    let _ = TRACKED.remove(&tgid);
    0
}

// ---------------------------------------------------------------- files and sockets

/// Per-CPU space to build a `SysEvent` before it is copied to the ring.
#[map]
static SYS_SCRATCH: PerCpuArray<SysEvent> = PerCpuArray::with_max_entries(1, 0);

/// Reads/writes per (tgid << 32 | fd), summed until close.
#[map]
static IO: HashMap<u64, IoAgg> = HashMap::with_max_entries(65536, 0);

/// The fds each tracked process has aggregates in `IO` for, so exec and
/// exit can flush them without user space sweeping the whole map.
#[map]
static IO_FDS: HashMap<u32, IoFdList> = HashMap::with_max_entries(65536, 0);

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
fn io_flush_process(tgid: u32, exiting: bool) -> bool {
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

/// Sockets (tgid << 32 | fd) connected to port 53: their writes are DNS queries.
#[map]
static DNS_FDS: HashMap<u64, u8> = HashMap::with_max_entries(4096, 0);

/// TCP sockets a tracked process is connecting: sock pointer → tgid.
#[map]
static TCP_SOCKS: LruHashMap<u64, u32> = LruHashMap::with_max_entries(16384, 0);

#[inline(always)]
fn is_dns_fd(key: u64) -> bool {
    unsafe { DNS_FDS.get(&key).is_some() }
}

/// Drops a closed fd from `DNS_FDS`. Looked up first: the lookup is
/// lockless, a delete takes the bucket lock even when the key is absent
/// (the usual case, on every close).
#[inline(always)]
fn forget_dns_fd(key: u64) {
    if is_dns_fd(key) {
        let _ = DNS_FDS.remove(&key);
    }
}

#[inline(always)]
fn fd_key(tgid: u32, fd: u64) -> u64 {
    ((tgid as u64) << 32) | (fd & 0xffff_ffff)
}

/// Reads a NUL-terminated user string into `dst` (SYS_BUF bytes).
#[inline(always)]
unsafe fn user_str(src: u64, dst: *mut u8) -> i32 {
    if src == 0 {
        return 0;
    }
    unsafe {
        bpf_probe_read_user_str(dst as *mut c_void, SYS_BUF as u32, src as *const c_void) as i32
    }
}

/// Reads up to `len` bytes (at most `max`) of user memory into `dst`.
#[inline(always)]
unsafe fn user_bytes(src: u64, len: u64, max: u32, dst: *mut u8) -> i32 {
    if src == 0 {
        return 0;
    }
    let n = if len > max as u64 { max } else { len as u32 };
    let n = n & (SYS_BUF as u32 * 2 - 1);
    let n = if n > SYS_BUF as u32 {
        SYS_BUF as u32
    } else {
        n
    };
    unsafe {
        if generated::bpf_probe_read_user(dst as *mut c_void, n, src as *const c_void) < 0 {
            return -14;
        }
    }
    n as i32
}

/// True when a sockaddr (family + big-endian port) names port 53 over IP.
#[inline(always)]
unsafe fn is_dns_addr(sa: *const u8) -> bool {
    unsafe {
        let family = u16::from_le_bytes([*sa, *sa.add(1)]);
        (family == 2 || family == 10) && *sa.add(2) == 0 && *sa.add(3) == 53
    }
}

/// Adds a successful read or write to the fd's aggregate.
#[inline(always)]
fn io_account(tgid: u32, fd: u64, is_write: bool, bytes: i64) {
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
fn io_flush(tgid: u32, fd: u64) {
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

/// Reads the first iovec of a `struct user_msghdr` into `buf2` (DNS payload).
#[inline(always)]
unsafe fn msghdr_payload(msg: u64, dst: *mut u8) -> i32 {
    unsafe {
        let iov: u64 = bpf_probe_read_user((msg + 16) as *const u64).unwrap_or(0);
        if iov == 0 {
            return 0;
        }
        let base: u64 = bpf_probe_read_user(iov as *const u64).unwrap_or(0);
        let len: u64 = bpf_probe_read_user((iov + 8) as *const u64).unwrap_or(0);
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
        let inode = read_ptr(file.add(off.file_inode as usize));
        if !inode.is_null() {
            (*ev).ino = read_u64(inode.add(off.inode_ino as usize));
            let sb = read_ptr(inode.add(off.inode_sb as usize));
            if !sb.is_null() {
                (*ev).dev = read_u32(sb.add(off.sb_dev as usize));
            }
        }
        let (used, flags) = walk_file_packed(file, (*ev).buf2.as_mut_ptr(), off);
        (*ev).path_flags = flags | PATH_WALKED;
        (l1, used, SYS_EVENT_TWO)
    }
}

/// Records one finished syscall of a tracked process from its arguments
/// (as the registers still hold them at exit) and its result.
#[inline(always)]
fn finish(tgid: u32, op: u32, a: [u64; 6], ret: i64) {
    let dns_key = fd_key(tgid, a[0]);
    match op {
        op::WRITE | op::PWRITE64 | op::WRITEV | op::PWRITEV | op::PWRITEV2 => {
            io_account(tgid, a[0], true, ret);
            let dns = op == op::WRITE && ret > 0 && is_dns_fd(dns_key);
            if !dns {
                return;
            }
        }
        op::READ | op::PREAD64 | op::READV | op::PREADV | op::PREADV2 => {
            io_account(tgid, a[0], false, ret);
            return;
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
            return;
        }
        op::CLOSE => {
            if ret == 0 {
                io_flush(tgid, a[0]);
                forget_dns_fd(dns_key);
            }
        }
        // dup2/dup3 close their target fd implicitly: flush what it did first.
        op::DUP2 | op::DUP3 => {
            if ret >= 0 && a[0] != a[1] {
                io_flush(tgid, a[1]);
                forget_dns_fd(fd_key(tgid, a[1]));
            }
        }
        // Only the fcntl commands that make a new fd matter to the fd table.
        op::FCNTL if a[1] != 0 && a[1] != 1030 => return,
        _ => {}
    }
    let Some(ev) = SYS_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    let off = offsets();
    unsafe {
        // The sequence number is set just before the record is sent: the
        // arms below may still decide there is nothing worth a record.
        fill_header(&mut (*ev).header, EventKind::Sys, 0, off);
        (*ev).op = op;
        (*ev).ret = ret;
        (*ev).args = a;
        (*ev).how_flags = 0;
        (*ev).path_flags = 0;
        (*ev).ino = 0;
        (*ev).dev = 0;
        (*ev)._pad = 0;
        let b1 = (*ev).buf1.as_mut_ptr();
        let b2 = (*ev).buf2.as_mut_ptr();
        let mut l1 = 0i32;
        let mut l2 = 0i32;
        let size = match op {
            op::OPEN | op::CREAT | op::OPENAT | op::OPENAT2 => {
                let (given, kernel, size) = open_record(ev, op, &a, ret, off);
                (l1, l2) = (given, kernel);
                size
            }
            op::UNLINK | op::RMDIR | op::MKDIR | op::TRUNCATE | op::CHDIR => {
                l1 = user_str(a[0], b1);
                SYS_EVENT_ONE
            }
            op::UNLINKAT | op::MKDIRAT => {
                l1 = user_str(a[1], b1);
                SYS_EVENT_ONE
            }
            op::RENAME | op::LINK | op::SYMLINK => {
                l1 = user_str(a[0], b1);
                l2 = user_str(a[1], b2);
                SYS_EVENT_TWO
            }
            op::RENAMEAT | op::RENAMEAT2 | op::LINKAT => {
                l1 = user_str(a[1], b1);
                l2 = user_str(a[3], b2);
                SYS_EVENT_TWO
            }
            op::SYMLINKAT => {
                l1 = user_str(a[0], b1);
                l2 = user_str(a[2], b2);
                SYS_EVENT_TWO
            }
            op::CONNECT | op::BIND => {
                l1 = user_bytes(a[1], a[2], 128, b1);
                if op == op::CONNECT && l1 >= 4 && is_dns_addr(b1) {
                    let _ = DNS_FDS.insert(&dns_key, &1, 0);
                }
                SYS_EVENT_ONE
            }
            op::ACCEPT | op::ACCEPT4 => {
                if ret >= 0 && a[1] != 0 {
                    let len: i32 = bpf_probe_read_user(a[2] as *const i32).unwrap_or(0);
                    l1 = user_bytes(a[1], len.max(0) as u64, 128, b1);
                }
                SYS_EVENT_ONE
            }
            op::SENDTO => {
                let dns_fd = is_dns_fd(dns_key);
                if a[4] != 0 {
                    l1 = user_bytes(a[4], a[5], 128, b1);
                }
                let dns = dns_fd || (l1 >= 4 && is_dns_addr(b1));
                if a[4] == 0 && !dns {
                    // A send on a connected socket: its peer is known from connect.
                    return;
                }
                if dns {
                    l2 = user_bytes(a[1], a[2], SYS_BUF as u32, b2);
                    SYS_EVENT_TWO
                } else {
                    SYS_EVENT_ONE
                }
            }
            op::SENDMSG | op::SENDMMSG => {
                // struct mmsghdr starts with a struct user_msghdr.
                let msg = a[1];
                let name: u64 = bpf_probe_read_user(msg as *const u64).unwrap_or(0);
                let namelen: u32 = bpf_probe_read_user((msg + 8) as *const u32).unwrap_or(0);
                if name != 0 {
                    l1 = user_bytes(name, namelen as u64, 128, b1);
                }
                let dns = is_dns_fd(dns_key) || (l1 >= 4 && is_dns_addr(b1));
                if name == 0 && !dns {
                    return;
                }
                if dns {
                    l2 = msghdr_payload(msg, b2);
                    SYS_EVENT_TWO
                } else {
                    SYS_EVENT_ONE
                }
            }
            op::WRITE => {
                (*ev).op = op::DNS_WRITE;
                l2 = user_bytes(a[1], ret as u64, SYS_BUF as u32, b2);
                SYS_EVENT_TWO
            }
            _ => SYS_EVENT_BARE,
        };
        (*ev).len1 = l1;
        (*ev).len2 = l2;
        // Only the bytes read: the last buffer in the record is cut to its
        // length (most paths are far shorter than SYS_BUF), which keeps the
        // ring, the copies and the reader's memory small.
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
    let regs: *const u8 = ctx.arg(0);
    let ret: i64 = ctx.arg(1);
    unsafe {
        // The registers we need all lie in pt_regs' first 16 words: one
        // read, straight into this stack slot.
        let mut words = core::mem::MaybeUninit::<[u64; 16]>::uninit();
        if raw_read_kernel(
            words.as_mut_ptr() as *mut c_void,
            core::mem::size_of::<[u64; 16]>() as u32,
            regs as *const c_void,
        ) < 0
        {
            return 0;
        }
        let words = words.assume_init_ref();
        let word = |offset: u32| words[(offset as usize / 8) & 15];
        let nr = word(off.regs_nr);
        let op = op_of_syscall(nr);
        if op.is_none() && nr != NR_EXECVE && nr != NR_EXECVEAT {
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
        match op {
            Some(op) => finish(tgid, op, a, ret),
            // A successful exec is recorded by sched_process_exec.
            None if ret < 0 && nr == NR_EXECVE => exec_failed(a[0], a[1], ret),
            None if ret < 0 => exec_failed(a[1], a[2], ret),
            None => {}
        }
    }
    0
}

/// `thread_info.status` bit: the current syscall is a 32-bit one.
const TS_COMPAT: u32 = 0x0002;

/// x86-64 numbers of execve and execveat (their failures are recorded here).
const NR_EXECVE: u64 = 59;
const NR_EXECVEAT: u64 = 322;

/// TCP outcome of a connect: the SYN_SENT transition happens in the
/// connecting task (we note the socket); later ones run in softirq with an
/// unrelated `current`, so the record is built from what we noted.
#[tracepoint]
pub fn inet_sock_set_state(ctx: TracePointContext) -> u32 {
    const TCP_ESTABLISHED: i32 = 1;
    const TCP_SYN_SENT: i32 = 2;
    const TCP_CLOSE: i32 = 7;
    unsafe {
        let sk: u64 = ctx.read_at(8).unwrap_or(0);
        let oldstate: i32 = ctx.read_at(16).unwrap_or(0);
        let newstate: i32 = ctx.read_at(20).unwrap_or(0);
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
                (*ev).sport = ctx.read_at(24).unwrap_or(0);
                (*ev).dport = ctx.read_at(26).unwrap_or(0);
                (*ev).family = ctx.read_at(28).unwrap_or(0);
                (*ev)._pad = 0;
                if (*ev).family == 10 {
                    (*ev).saddr = ctx.read_at(40).unwrap_or([0; 16]);
                    (*ev).daddr = ctx.read_at(56).unwrap_or([0; 16]);
                } else {
                    let s4: [u8; 4] = ctx.read_at(32).unwrap_or([0; 4]);
                    let d4: [u8; 4] = ctx.read_at(36).unwrap_or([0; 4]);
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

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
