//! The kernel's map of tracked tgids (`u32` → `u8`), reached by raw bpf(2)
//! calls rather than aya's map handle: the recorder's child inserts itself
//! between fork and exec, where only async-signal-safe calls are allowed, and
//! the enforcement decider looks a pid up per permission event with one
//! syscall and nothing else (no allocation, no lock).

use std::os::fd::RawFd;

/// The `bpf_attr` prefix of the map element commands.
#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;

/// One map element command on key `pid` with the value at `value`.
fn map_elem(cmd: libc::c_long, map_fd: RawFd, pid: u32, value: *mut u8) -> libc::c_long {
    let key: u32 = pid;
    let attr = MapElemAttr {
        map_fd: map_fd as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: value as u64,
        flags: 0,
    };
    // Safety: attr is a valid bpf_attr prefix for the element commands; key
    // and value point to live locals of the map's key and value sizes.
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            &attr as *const MapElemAttr,
            std::mem::size_of::<MapElemAttr>(),
        )
    }
}

/// Whether `pid` is in the tracked map: one `BPF_MAP_LOOKUP_ELEM`.
pub fn contains(map_fd: RawFd, pid: u32) -> bool {
    let mut value: u8 = 0;
    map_elem(BPF_MAP_LOOKUP_ELEM, map_fd, pid, &mut value) == 0
}

/// Puts `pid` in the tracked map. Async-signal-safe.
pub fn insert(map_fd: RawFd, pid: u32) -> std::io::Result<()> {
    let mut value: u8 = 1;
    if map_elem(BPF_MAP_UPDATE_ELEM, map_fd, pid, &mut value) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
