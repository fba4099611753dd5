//! Paths rebuilt from dentries in the kernel: a `struct path` into a
//! [`PathRecord`] (cwd, executable), an open file's path packed into a
//! record buffer, the file behind an fd, and a file's inode identity.

use core::ffi::c_void;

use agentsight_common::{
    Offsets, PATH_COMPLETE, PATH_DEPTH, PATH_DETACHED, PATH_NAME_CUT, PATH_NAME_MAX,
    PATH_PACKED_MAX, PATH_PACKED_NAME, PATH_READ_FAILED, PATH_TOO_DEEP, PathRecord,
};
use aya_ebpf::helpers::{
    bpf_get_current_task,
    generated::{bpf_loop, bpf_probe_read_kernel as raw_read_kernel, bpf_probe_read_kernel_str},
};

use crate::{
    maps::{PACKED_SCRATCH, PATH_SCRATCH, offsets},
    read::{read_ptr, read_u32, read_u64},
};

/// Bytes of one `struct file *` in the fd table's array.
const FD_SLOT_BYTES: usize = 8;

/// `PATH_SCRATCH` slots: a task's cwd and an exec's binary are walked into
/// different ones (both go into one exec record).
pub(crate) const SLOT_CWD: u32 = 0;
pub(crate) const SLOT_EXE: u32 = 1;

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
pub(crate) unsafe fn walk_file_packed(file: *const u8, out: *mut u8, off: &Offsets) -> (i32, u32) {
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
pub(crate) unsafe fn fd_file(fd: u64, off: &Offsets) -> *const u8 {
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
        read_ptr(fds.add((fd as usize) * FD_SLOT_BYTES))
    }
}

/// Rebuilds the path of a `struct path *` from dentries into `out`, leaf
/// first, crossing mounts up to the root of the mount namespace.
#[inline(always)]
pub(crate) unsafe fn walk_path(path: *const u8, out: *mut PathRecord, slot: u32, off: &Offsets) {
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

/// Walks the current task's working directory into `out`.
#[inline(always)]
pub(crate) unsafe fn walk_cwd(task: *const u8, out: *mut PathRecord, off: &Offsets) {
    unsafe {
        let fs = read_ptr(task.add(off.task_fs as usize));
        if fs.is_null() {
            (*out).depth = 0;
            (*out).flags = PATH_READ_FAILED;
        } else {
            walk_path(fs.add(off.fs_pwd as usize), out, SLOT_CWD, off);
        }
    }
}

/// The inode number and device of an open file into `ino` and `dev`; each
/// is left as it was when it cannot be read.
#[inline(always)]
pub(crate) unsafe fn file_identity(file: *const u8, ino: *mut u64, dev: *mut u32, off: &Offsets) {
    unsafe {
        let inode = read_ptr(file.add(off.file_inode as usize));
        if !inode.is_null() {
            *ino = read_u64(inode.add(off.inode_ino as usize));
            let sb = read_ptr(inode.add(off.inode_sb as usize));
            if !sb.is_null() {
                *dev = read_u32(sb.add(off.sb_dev as usize));
            }
        }
    }
}
