//! Probe reads of kernel and user memory, with the zero/null a failed read
//! stands for.

use core::ffi::c_void;

use agentsight_common::SYS_BUF;
use aya_ebpf::helpers::{bpf_probe_read_kernel, generated, generated::bpf_probe_read_user_str};

/// `-EFAULT`: what a failed user read reports as its length.
const EFAULT_NEG: i32 = -14;

#[inline(always)]
pub(crate) unsafe fn read_ptr(addr: *const u8) -> *const u8 {
    unsafe { bpf_probe_read_kernel(addr as *const *const u8).unwrap_or(core::ptr::null()) }
}

#[inline(always)]
pub(crate) unsafe fn read_u32(addr: *const u8) -> u32 {
    unsafe { bpf_probe_read_kernel(addr as *const u32).unwrap_or(0) }
}

#[inline(always)]
pub(crate) unsafe fn read_u64(addr: *const u8) -> u64 {
    unsafe { bpf_probe_read_kernel(addr as *const u64).unwrap_or(0) }
}

/// Reads a NUL-terminated user string into `dst` (SYS_BUF bytes).
#[inline(always)]
pub(crate) unsafe fn user_str(src: u64, dst: *mut u8) -> i32 {
    if src == 0 {
        return 0;
    }
    unsafe {
        bpf_probe_read_user_str(dst as *mut c_void, SYS_BUF as u32, src as *const c_void) as i32
    }
}

/// Reads up to `len` bytes (at most `max`) of user memory into `dst`.
#[inline(always)]
pub(crate) unsafe fn user_bytes(src: u64, len: u64, max: u32, dst: *mut u8) -> i32 {
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
            return EFAULT_NEG;
        }
    }
    n as i32
}
