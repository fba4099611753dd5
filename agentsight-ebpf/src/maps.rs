//! Every map of the object and the offsets global, with the two lookups each
//! program starts with (the current tgid, whether it is tracked).
//!
//! `#[map]` names a map by its static's identifier (the macro emits
//! `export_name`, which takes only a literal), so each static is checked at
//! compile time against its name constant in `agentsight-common`, which user
//! space looks it up by.

use agentsight_common::{
    ArgvStage, ContainerNs, GLOBAL_OFFSETS, GLOBAL_TRACKED_CGROUP_COUNT, IoAgg, IoFdList,
    KIND_SLOTS, MAP_DNS_FDS, MAP_EVENTS, MAP_IO, MAP_IO_FDS, MAP_LOSS, MAP_PACKED_SCRATCH,
    MAP_PATH_SCRATCH, MAP_SCRATCH, MAP_SEQ, MAP_SYS_SCRATCH, MAP_TCP_SOCKS, MAP_TLS_CALLS,
    MAP_TLS_SEEN, MAP_TLS_SOCK_FDS, MAP_TRACKED, MAP_TRACKED_CGROUPS, Offsets, PATH_PACKED_MAX,
    PATH_PACKED_NAME, PathRecord, SEQ_STREAMS, SysEvent, TlsCall,
};
use aya_ebpf::{
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_pid_tgid},
    macros::map,
    maps::{HashMap, LruHashMap, PerCpuArray, RingBuf},
};

/// True when two names are equal; `const` so the checks below fail the build.
pub(crate) const fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Fails the build when an item's name (a map static, a global, a program)
/// differs from its constant; the item is referenced so that the check
/// follows a rename.
macro_rules! named {
    ($item:ident, $name:expr) => {
        const _: () = {
            let _ = &$item;
            assert!(
                crate::maps::same_name(stringify!($item), $name),
                "the item's name differs from its constant in agentsight-common"
            );
        };
    };
}
pub(crate) use named;

/// Kernel struct offsets, filled from BTF by user space at load time.
#[unsafe(no_mangle)]
static OFFSETS: Offsets = Offsets::ZERO;
named!(OFFSETS, GLOBAL_OFFSETS);

/// Tgids whose activity is recorded.
#[map]
pub(crate) static TRACKED: HashMap<u32, u8> = HashMap::with_max_entries(65536, 0);
named!(TRACKED, MAP_TRACKED);

/// How many cgroups user space put in `TRACKED_CGROUPS`, set at load time;
/// 0 (no `--container`) keeps the untracked path free of the lookup.
#[unsafe(no_mangle)]
static TRACKED_CGROUP_COUNT: u32 = 0;
named!(TRACKED_CGROUP_COUNT, GLOBAL_TRACKED_CGROUP_COUNT);

/// Cgroup v2 ids of the recorded containers → each one's pid namespace.
#[map]
pub(crate) static TRACKED_CGROUPS: HashMap<u64, ContainerNs> = HashMap::with_max_entries(64, 0);
named!(TRACKED_CGROUPS, MAP_TRACKED_CGROUPS);

/// All records; user space may resize it at load time.
#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(16 * 1024 * 1024, 0);
named!(EVENTS, MAP_EVENTS);

/// Failed ring-buffer reserves, per CPU, indexed by event kind.
#[map]
pub(crate) static LOSS: PerCpuArray<u64> = PerCpuArray::with_max_entries(KIND_SLOTS, 0);
named!(LOSS, MAP_LOSS);

/// Per-CPU record sequence numbers, one counter per stream.
#[map]
pub(crate) static SEQ: PerCpuArray<u64> = PerCpuArray::with_max_entries(SEQ_STREAMS, 0);
named!(SEQ, MAP_SEQ);

/// Per-CPU scratch space to read a failed exec's argv into (too big for the stack).
#[map]
pub(crate) static SCRATCH: PerCpuArray<ArgvStage> = PerCpuArray::with_max_entries(1, 0);
named!(SCRATCH, MAP_SCRATCH);

/// Per-CPU scratch for path walks (slot 0: cwd, slot 1: exe); copied into
/// the record afterwards. The walk runs under bpf_loop, so the verifier checks
/// one step once instead of every unrolled iteration.
#[map]
pub(crate) static PATH_SCRATCH: PerCpuArray<PathRecord> = PerCpuArray::with_max_entries(2, 0);
named!(PATH_SCRATCH, MAP_PATH_SCRATCH);

/// Per-CPU scratch for a packed walk (an opened file's kernel path): names
/// leaf first, NUL-terminated; room for one more name past the limit, so a
/// step never needs more than a mask to stay in bounds.
#[map]
pub(crate) static PACKED_SCRATCH: PerCpuArray<[u8; PATH_PACKED_MAX + PATH_PACKED_NAME]> =
    PerCpuArray::with_max_entries(1, 0);
named!(PACKED_SCRATCH, MAP_PACKED_SCRATCH);

/// Per-CPU space to build a `SysEvent` before it is copied to the ring.
#[map]
pub(crate) static SYS_SCRATCH: PerCpuArray<SysEvent> = PerCpuArray::with_max_entries(1, 0);
named!(SYS_SCRATCH, MAP_SYS_SCRATCH);

/// Reads/writes per (tgid << 32 | fd), summed until close.
#[map]
pub(crate) static IO: HashMap<u64, IoAgg> = HashMap::with_max_entries(65536, 0);
named!(IO, MAP_IO);

/// The fds each tracked process has aggregates in `IO` for, so exec and
/// exit can flush them without user space sweeping the whole map.
#[map]
pub(crate) static IO_FDS: HashMap<u32, IoFdList> = HashMap::with_max_entries(65536, 0);
named!(IO_FDS, MAP_IO_FDS);

/// Sockets (tgid << 32 | fd) connected to port 53: their writes are DNS queries.
#[map]
pub(crate) static DNS_FDS: HashMap<u64, u8> = HashMap::with_max_entries(4096, 0);
named!(DNS_FDS, MAP_DNS_FDS);

/// TCP sockets a tracked process is connecting: sock pointer → tgid.
#[map]
pub(crate) static TCP_SOCKS: LruHashMap<u64, u32> = LruHashMap::with_max_entries(16384, 0);
named!(TCP_SOCKS, MAP_TCP_SOCKS);

/// TLS calls in flight, per thread (pid_tgid): noted at entry, taken at
/// return. LRU: a call whose return never came (its thread died in it)
/// cannot fill the map.
#[map]
pub(crate) static TLS_CALLS: LruHashMap<u64, TlsCall> = LruHashMap::with_max_entries(16384, 0);
named!(TLS_CALLS, MAP_TLS_CALLS);

/// Socket fds (tgid << 32 | fd) of tracked processes, from the results of
/// socket/accept until close: only these name a TLS call's connection (a
/// library also reads other files inside a call, e.g. the time zone).
/// LRU: sockets never closed cannot fill it.
#[map]
pub(crate) static TLS_SOCK_FDS: LruHashMap<u64, u8> = LruHashMap::with_max_entries(16384, 0);
named!(TLS_SOCK_FDS, MAP_TLS_SOCK_FDS);

/// (tgid << 32 | probed file index) of each tracked process that called a
/// TLS function of that file; user space takes a process's entries when
/// it writes the process's note. LRU: entries of processes whose note was
/// never written (a recorder killed) cannot fill it.
#[map]
pub(crate) static TLS_SEEN: LruHashMap<u64, u8> = LruHashMap::with_max_entries(16384, 0);
named!(TLS_SEEN, MAP_TLS_SEEN);

#[inline(always)]
pub(crate) fn offsets() -> &'static Offsets {
    // The value is patched into the object after compilation, so reads of
    // it must not be folded to the zeros compiled in. Laundering the address
    // through a volatile read does that while loading only the fields used
    // (a volatile read of the whole struct copied all of it every time).
    let p: *const Offsets = &OFFSETS;
    unsafe { &*core::ptr::read_volatile(&p) }
}

/// The current task's cgroup v2 id.
#[inline(always)]
pub(crate) fn current_cgroup() -> u64 {
    unsafe { bpf_get_current_cgroup_id() }
}

/// Whether the current task is in a recorded container's cgroup: only
/// asked for a tgid not tracked yet, and only when there are containers
/// (the count is patched in at load time, so it is read like `OFFSETS`).
#[inline(always)]
pub(crate) fn in_tracked_cgroup() -> bool {
    current_container().is_some()
}

/// The pid namespace of the recorded container whose cgroup the current
/// task is in; None at once when no container is recorded.
#[inline(always)]
pub(crate) fn current_container() -> Option<ContainerNs> {
    let p: *const u32 = &TRACKED_CGROUP_COUNT;
    let count = unsafe { core::ptr::read_volatile(p) };
    if count == 0 {
        return None;
    }
    let id = current_cgroup();
    unsafe { TRACKED_CGROUPS.get(&id).copied() }
}

#[inline(always)]
pub(crate) fn current_tgid() -> u32 {
    (bpf_get_current_pid_tgid() >> 32) as u32
}

#[inline(always)]
pub(crate) fn is_tracked(tgid: u32) -> bool {
    unsafe { TRACKED.get(&tgid).is_some() }
}
