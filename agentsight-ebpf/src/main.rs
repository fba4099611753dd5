//! agentsight's kernel programs: process lifecycle of tracked trees.
//!
//! Every program first checks whether the current tgid is in `TRACKED` and
//! returns at once when it is not, so untracked processes pay one lookup.
//! Children join `TRACKED` here, at fork, before they first run.
#![no_std]
#![no_main]

use core::ffi::c_void;

use agentsight_common::{
    ARGV_BUF, ARGV_MAX_ARGS, ARGV_MISSING, ARGV_READ_FAILED, ARGV_TRUNCATED, ArgvStage, EventKind,
    ExecEvent, ExitEvent, FILENAME_MAX, ForkEvent, Header, KIND_SLOTS, LOSS_SLOT_TRACK_FULL,
    Offsets, PATH_COMPLETE, PATH_DEPTH, PATH_DETACHED, PATH_NAME_CUT, PATH_NAME_MAX,
    PATH_READ_FAILED, PATH_TOO_DEEP, PathRecord,
};
use aya_ebpf::{
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_task,
        bpf_get_current_uid_gid, bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel,
        bpf_probe_read_user,
        generated::{
            bpf_loop, bpf_probe_read_kernel as raw_read_kernel, bpf_probe_read_kernel_str,
            bpf_probe_read_user_str,
        },
    },
    macros::{btf_tracepoint, map, tracepoint},
    maps::{HashMap, LruHashMap, PerCpuArray, RingBuf},
    programs::{BtfTracePointContext, TracePointContext},
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

/// Failed ring-buffer reserves, per CPU, indexed by event kind.
#[map]
static LOSS: PerCpuArray<u64> = PerCpuArray::with_max_entries(KIND_SLOTS, 0);

/// Per-CPU record sequence numbers.
#[map]
static SEQ: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Argv read at execve entry, keyed by tid, consumed when the exec ends.
/// LRU so an exec that never reports back cannot fill the map.
#[map]
static ARGV_STAGE: LruHashMap<u32, ArgvStage> = LruHashMap::with_max_entries(4096, 0);

/// Per-CPU scratch space to build an `ArgvStage` (too big for the stack).
#[map]
static SCRATCH: PerCpuArray<ArgvStage> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn offsets() -> Offsets {
    // Volatile: the value is patched into the object after compilation.
    unsafe { core::ptr::read_volatile(&OFFSETS) }
}

#[inline(always)]
fn current_tgid() -> u32 {
    (bpf_get_current_pid_tgid() >> 32) as u32
}

#[inline(always)]
fn is_tracked(tgid: u32) -> bool {
    unsafe { TRACKED.get(&tgid).is_some() }
}

#[inline(always)]
fn next_seq() -> u64 {
    match SEQ.get_ptr_mut(0) {
        Some(p) => unsafe {
            *p += 1;
            *p
        },
        None => 0,
    }
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
        (*h)._pad = 0;
        (*h).comm = bpf_get_current_comm().unwrap_or([0; 16]);
    }
}

/// Per-CPU scratch for path walks (slot 0: cwd, slot 1: exe); copied into
/// the record afterwards. The walk runs under bpf_loop, so the verifier checks
/// one step once instead of every unrolled iteration.
#[map]
static PATH_SCRATCH: PerCpuArray<PathRecord> = PerCpuArray::with_max_entries(2, 0);

/// State of one path walk, on the caller's stack.
#[repr(C)]
struct WalkCtx {
    dentry: u64,
    mnt: u64,
    mnt_root: u64,
    depth: u32,
    flags: u32,
    slot: u32,
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
        let depth = (*c).depth as usize;
        if depth >= PATH_DEPTH {
            (*c).flags |= PATH_TOO_DEEP;
            return 1;
        }
        let qstr = dentry.add(off.dentry_name as usize);
        if read_u32(qstr.add(off.qstr_len as usize)) as usize >= PATH_NAME_MAX {
            (*c).flags |= PATH_NAME_CUT;
        }
        let name = read_ptr(qstr.add(off.qstr_name as usize));
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
        (*c).depth += 1;
        (*c).dentry = parent as u64;
        0
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
    let seq = next_seq();
    match EVENTS.reserve::<ForkEvent>(0) {
        Some(mut entry) => {
            let ev = entry.as_mut_ptr();
            unsafe {
                fill_header(&mut (*ev).header, EventKind::Fork, seq, &off);
                (*ev).child_pid = child_tgid;
                (*ev).child_tid = child_tid;
            }
            entry.submit(0);
        }
        None => count_loss(EventKind::Fork as u32),
    }
    0
}

// ---------------------------------------------------------------- exec

/// Reads filename and argv from user memory into `ARGV_STAGE[tid]`.
#[inline(always)]
fn stage_argv(filename: *const u8, argv: *const *const u8) {
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(stage) = SCRATCH.get_ptr_mut(0) else {
        return;
    };
    unsafe {
        let buf = (*stage).argv.as_mut_ptr();
        (*stage).argc = 0;
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
        for i in 0..ARGV_MAX_ARGS {
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
        (*stage).argv_kept = kept;
        (*stage).argv_len = if off > ARGV_BUF {
            ARGV_BUF as u32
        } else {
            off as u32
        };
        (*stage).argv_flags = flags;
        let _ = ARGV_STAGE.insert(&tid, &*stage, 0);
    }
}

#[tracepoint]
pub fn sys_enter_execve(ctx: TracePointContext) -> u32 {
    if !is_tracked(current_tgid()) {
        return 0;
    }
    unsafe {
        let filename: *const u8 = ctx.read_at(16).unwrap_or(core::ptr::null());
        let argv: *const *const u8 = ctx.read_at(24).unwrap_or(core::ptr::null());
        stage_argv(filename, argv);
    }
    0
}

#[tracepoint]
pub fn sys_enter_execveat(ctx: TracePointContext) -> u32 {
    if !is_tracked(current_tgid()) {
        return 0;
    }
    unsafe {
        let filename: *const u8 = ctx.read_at(24).unwrap_or(core::ptr::null());
        let argv: *const *const u8 = ctx.read_at(32).unwrap_or(core::ptr::null());
        stage_argv(filename, argv);
    }
    0
}

/// Copies a staged argv into an exec record.
#[inline(always)]
unsafe fn copy_stage(ev: *mut ExecEvent, stage: Option<*const ArgvStage>) {
    unsafe {
        match stage {
            Some(s) => {
                (*ev).argv_kept = (*s).argv_kept;
                (*ev).argv_len = (*s).argv_len;
                (*ev).argv_flags = (*s).argv_flags;
                raw_read_kernel(
                    (*ev).argv.as_mut_ptr() as *mut c_void,
                    ARGV_BUF as u32,
                    (*s).argv.as_ptr() as *const c_void,
                );
                raw_read_kernel(
                    (*ev).filename.as_mut_ptr() as *mut c_void,
                    FILENAME_MAX as u32,
                    (*s).filename.as_ptr() as *const c_void,
                );
            }
            None => {
                (*ev).argv_kept = 0;
                (*ev).argv_len = 0;
                (*ev).argv_flags = ARGV_MISSING;
                (*ev).filename[0] = 0;
            }
        }
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
    let off = offsets();
    let task: *const u8 = ctx.arg(0);
    let old_tid: u32 = ctx.arg::<u64>(1) as u32;
    let bprm: *const u8 = ctx.arg(2);
    let stage = ARGV_STAGE.get_ptr(&old_tid);
    let seq = next_seq();
    match EVENTS.reserve::<ExecEvent>(0) {
        Some(mut entry) => {
            let ev = entry.as_mut_ptr();
            unsafe {
                fill_header(&mut (*ev).header, EventKind::Exec, seq, &off);
                (*ev).old_tid = old_tid;
                (*ev).errno = 0;
                (*ev).argc = read_u32(bprm.add(off.bprm_argc as usize));
                copy_stage(ev, stage);
                // Prefer the kernel's copy of the filename: it is what was executed.
                let kname = read_ptr(bprm.add(off.bprm_filename as usize));
                if !kname.is_null() {
                    bpf_probe_read_kernel_str(
                        (*ev).filename.as_mut_ptr() as *mut c_void,
                        FILENAME_MAX as u32,
                        kname as *const c_void,
                    );
                }
                walk_cwd(task, &mut (*ev).cwd, &off);
                let file = read_ptr(bprm.add(off.bprm_file as usize));
                if file.is_null() {
                    (*ev).exe.depth = 0;
                    (*ev).exe.flags = PATH_READ_FAILED;
                } else {
                    walk_path(file.add(off.file_path as usize), &mut (*ev).exe, 1, &off);
                }
            }
            entry.submit(0);
        }
        None => count_loss(EventKind::Exec as u32),
    }
    let _ = ARGV_STAGE.remove(&old_tid);
    0
}

#[inline(always)]
fn exit_exec(ctx: &TracePointContext) {
    if !is_tracked(current_tgid()) {
        return;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    let ret: i64 = unsafe { ctx.read_at(16).unwrap_or(0) };
    if ret < 0 {
        let off = offsets();
        let stage = ARGV_STAGE.get_ptr(&tid);
        let seq = next_seq();
        match EVENTS.reserve::<ExecEvent>(0) {
            Some(mut entry) => {
                let ev = entry.as_mut_ptr();
                unsafe {
                    fill_header(&mut (*ev).header, EventKind::ExecFailed, seq, &off);
                    (*ev).old_tid = tid;
                    (*ev).errno = (-ret) as i32;
                    (*ev).argc = 0;
                    copy_stage(ev, stage);
                    let task = bpf_get_current_task() as *const u8;
                    walk_cwd(task, &mut (*ev).cwd, &off);
                    (*ev).exe.depth = 0;
                    (*ev).exe.flags = 0;
                }
                entry.submit(0);
            }
            None => count_loss(EventKind::ExecFailed as u32),
        }
    }
    let _ = ARGV_STAGE.remove(&tid);
}

#[tracepoint]
pub fn sys_exit_execve(ctx: TracePointContext) -> u32 {
    exit_exec(&ctx);
    0
}

#[tracepoint]
pub fn sys_exit_execveat(ctx: TracePointContext) -> u32 {
    exit_exec(&ctx);
    0
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
    let off = offsets();
    let task: *const u8 = ctx.arg(0);
    let seq = next_seq();
    match EVENTS.reserve::<ExitEvent>(0) {
        Some(mut entry) => {
            let ev = entry.as_mut_ptr();
            unsafe {
                fill_header(&mut (*ev).header, EventKind::Exit, seq, &off);
                (*ev).exit_code = read_u32(task.add(off.task_exit_code as usize));
                (*ev)._pad = 0;
            }
            entry.submit(0);
        }
        None => count_loss(EventKind::Exit as u32),
    }
    let _ = TRACKED.remove(&tgid);
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
