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
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;

/// One map element command on key `pid` with the value at `value`.
fn map_elem(cmd: libc::c_long, map_fd: RawFd, pid: u32, value: *mut u8) -> libc::c_long {
    let key: u32 = pid;
    map_cmd(cmd, map_fd, &key as *const u32 as u64, value as u64)
}

/// One map command with its key and value (or next key) pointers.
fn map_cmd(cmd: libc::c_long, map_fd: RawFd, key: u64, value: u64) -> libc::c_long {
    let attr = MapElemAttr {
        map_fd: map_fd as u32,
        _pad: 0,
        key,
        value,
        flags: 0,
    };
    // Safety: attr is a valid bpf_attr prefix for the element commands; key
    // and value are null or point to live locals of the map's key and
    // value sizes.
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

/// Every pid in the tracked map now (`BPF_MAP_GET_NEXT_KEY` from the
/// start). A key removed meanwhile makes the kernel start over from the
/// first key: a key seen twice ends the walk.
pub fn pids(map_fd: RawFd) -> Vec<u32> {
    let mut out = std::collections::BTreeSet::new();
    let mut key: Option<u32> = None;
    loop {
        let mut next: u32 = 0;
        let key_ptr = key.as_ref().map_or(0, |k| k as *const u32 as u64);
        if map_cmd(
            BPF_MAP_GET_NEXT_KEY,
            map_fd,
            key_ptr,
            &mut next as *mut u32 as u64,
        ) != 0
        {
            break;
        }
        if !out.insert(next) {
            break;
        }
        key = Some(next);
    }
    out.into_iter().collect()
}
