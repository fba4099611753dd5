//! Loading and attaching the kernel programs, and the maps user space drives.

use std::{collections::BTreeMap, path::Path};

use agentsight_common::{
    ContainerNs, EventKind, GLOBAL_OFFSETS, GLOBAL_TRACKED_CGROUP_COUNT, IoAgg, KIND_SLOTS,
    LOSS_SLOT_IO_FULL, LOSS_SLOT_TRACK_FULL, MAP_EVENTS, MAP_IO, MAP_LOSS, MAP_SEQ, MAP_TLS_SEEN,
    MAP_TRACKED, MAP_TRACKED_CGROUPS, PROG_INET_SOCK_SET_STATE, PROG_SCHED_PROCESS_EXEC,
    PROG_SCHED_PROCESS_EXIT, PROG_SCHED_PROCESS_FORK, PROG_SYS_EXIT, PROG_TLS_ENTER,
    PROG_TLS_RETURN, TRACEPOINT_CATEGORY_SOCK,
};
use aya::{
    Btf, Ebpf, EbpfLoader,
    maps::{HashMap, MapData, PerCpuArray, RingBuf},
    programs::{
        BtfTracePoint, CgroupAttachMode, CgroupSockAddr, RawTracePoint, TracePoint, UProbe,
        links::FdLink,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};

use super::btf::{BtfError, VMLINUX_BTF, kernel_offsets};

/// The kernel object built by build.rs, embedded in the binary.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/agentsight"));

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "this agentsight binary was built without its kernel programs (AYA_BUILD_SKIP); rebuild without it"
    )]
    NoObject,
    #[error(transparent)]
    Btf(#[from] BtfError),
    #[error("loading the kernel programs failed: {0}")]
    Load(String),
    #[error("map {0} missing from the kernel object")]
    MissingMap(&'static str),
    #[error("map {name}: {reason}")]
    Map { name: &'static str, reason: String },
    #[error("no kernel program could be attached: {0}")]
    NothingAttached(String),
}

/// How a program is attached.
#[derive(Clone, Debug)]
pub enum Hook {
    /// Classic tracepoint (category, name): needs tracefs.
    TracePoint(&'static str, String),
    /// BTF tracepoint by name.
    BtfTracePoint(&'static str),
    /// Raw tracepoint by name.
    RawTracePoint(&'static str),
}

/// Programs in the object, with the hook each attaches to. File and socket
/// syscalls and failed execs all go through one raw `sys_exit` program; no
/// program runs at syscall entry (each would tax every syscall of every
/// process).
pub fn programs() -> Vec<(String, Hook)> {
    let mut out: Vec<(String, Hook)> = [
        PROG_SCHED_PROCESS_FORK,
        PROG_SCHED_PROCESS_EXEC,
        PROG_SCHED_PROCESS_EXIT,
    ]
    .into_iter()
    .map(|n| (n.to_owned(), Hook::BtfTracePoint(n)))
    .collect();
    out.push((PROG_SYS_EXIT.to_owned(), Hook::RawTracePoint(PROG_SYS_EXIT)));
    out.push((
        PROG_INET_SOCK_SET_STATE.to_owned(),
        Hook::TracePoint(
            TRACEPOINT_CATEGORY_SOCK,
            PROG_INET_SOCK_SET_STATE.to_owned(),
        ),
    ));
    out
}

/// Outcome of attaching one program; stored with the capture.
#[derive(Clone, Debug)]
pub struct ProgramStatus {
    pub name: String,
    pub hook: String,
    pub error: Option<String>,
}

/// Loaded, attached programs and the maps user space uses.
pub struct Probes {
    pub ebpf: Ebpf,
    pub tracked: HashMap<MapData, u32, u8>,
    /// Per-fd read/write aggregates not yet flushed by a close; taken by
    /// the reader, which flushes a process's at its exit and the rest at stop.
    pub io: Option<HashMap<MapData, u64, IoAgg>>,
    pub loss: PerCpuArray<MapData, u64>,
    pub programs: Vec<ProgramStatus>,
    /// A note about tracefs, when we had to mount it.
    pub tracefs_note: Option<String>,
    /// Whether the TLS uprobes (loaded always) were attached to a library
    /// file (`record --wire`): until then they are not running programs.
    pub tls_attached: bool,
    /// Whether `record --enforce`'s network programs (loaded only then)
    /// were attached: until then they are not running programs.
    pub net_attached: bool,
}

pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Classic tracepoints attach through tracefs, which is not mounted at boot
/// on some machines: mount it, and say so.
pub fn ensure_tracefs() -> Result<Option<String>, String> {
    if Path::new(TRACEFS).join("events").exists() {
        return Ok(None);
    }
    nix::mount::mount(
        Some("nodev"),
        TRACEFS,
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|e| {
        format!(
            "tracefs is not mounted at {TRACEFS} and mounting it failed ({e}); run `mount -t tracefs nodev {TRACEFS}` as root"
        )
    })?;
    Ok(Some(format!("mounted tracefs at {TRACEFS}")))
}

impl Probes {
    /// Loads the object, attaches every program it can, and reports each
    /// program's outcome. Fails only when nothing at all could be attached.
    /// A process in one of `cgroups` (cgroup v2 ids of recorded containers)
    /// joins the tracked set at its first fork or exec.
    pub fn load(ring_bytes: u32, cgroups: &[(u64, ContainerNs)]) -> Result<Self, LoadError> {
        if OBJECT.is_empty() {
            return Err(LoadError::NoObject);
        }
        let offsets = kernel_offsets(Path::new(VMLINUX_BTF))?;
        let btf = Btf::from_sys_fs().map_err(|e| LoadError::Load(format!("kernel BTF: {e}")))?;
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .override_global(GLOBAL_OFFSETS, &offsets, true)
            .override_global(GLOBAL_TRACKED_CGROUP_COUNT, &(cgroups.len() as u32), true)
            .map_max_entries(MAP_EVENTS, ring_bytes)
            .load(OBJECT)
            .map_err(|e| LoadError::Load(error_chain(&e)))?;
        // Filled before any program is attached, so no process of a
        // container is looked up against an empty set.
        insert_cgroups(&mut ebpf, cgroups)?;

        let tracefs = ensure_tracefs();
        let mut statuses = Vec::new();
        for (name, hook) in programs() {
            let hook_name = match &hook {
                Hook::TracePoint(c, n) => format!("tracepoint/{c}/{n}"),
                Hook::BtfTracePoint(n) => format!("tp_btf/{n}"),
                Hook::RawTracePoint(n) => format!("raw_tracepoint/{n}"),
            };
            let error = attach(&mut ebpf, &btf, &name, &hook, &tracefs).err();
            if let Some(e) = &error {
                tracing::warn!(program = %name, hook = %hook_name, "not attached: {e}");
            }
            statuses.push(ProgramStatus {
                name,
                hook: hook_name,
                error,
            });
        }
        let kernel_failed = statuses.iter().all(|p| p.error.is_some());
        // The TLS uprobes are loaded now and attached per library file
        // later (`capture::tls`); one that does not load leaves TLS undecrypted.
        for name in [PROG_TLS_ENTER, PROG_TLS_RETURN] {
            let error = load_uprobe(&mut ebpf, name).err();
            if let Some(e) = &error {
                tracing::warn!(program = %name, "not loaded: {e}");
            }
            statuses.push(ProgramStatus {
                name: name.to_owned(),
                hook: "uprobe/<TLS library>".to_owned(),
                error,
            });
        }
        let programs = statuses;
        if kernel_failed {
            let why = programs
                .iter()
                .filter_map(|p| p.error.as_deref().map(|e| format!("{}: {e}", p.name)))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(LoadError::NothingAttached(why));
        }

        let tracked = take_map(&mut ebpf, MAP_TRACKED)?;
        let tracked = HashMap::try_from(tracked).map_err(|e| LoadError::Map {
            name: MAP_TRACKED,
            reason: e.to_string(),
        })?;
        let io = take_map(&mut ebpf, MAP_IO)?;
        let io = HashMap::try_from(io).map_err(|e| LoadError::Map {
            name: MAP_IO,
            reason: e.to_string(),
        })?;
        let loss = take_map(&mut ebpf, MAP_LOSS)?;
        let loss = PerCpuArray::try_from(loss).map_err(|e| LoadError::Map {
            name: MAP_LOSS,
            reason: e.to_string(),
        })?;
        Ok(Self {
            ebpf,
            tracked,
            io: Some(io),
            loss,
            programs,
            tracefs_note: tracefs.ok().flatten(),
            tls_attached: false,
            net_attached: false,
        })
    }

    /// The per-CPU sequence counters, taken once by the reader to find loss
    /// at the very end of a CPU's run (no later record reveals that gap).
    pub fn take_seq(&mut self) -> Result<PerCpuArray<MapData, u64>, LoadError> {
        let map = take_map(&mut self.ebpf, MAP_SEQ)?;
        PerCpuArray::try_from(map).map_err(|e| LoadError::Map {
            name: MAP_SEQ,
            reason: e.to_string(),
        })
    }

    /// The ring buffer, taken once by the reader.
    pub fn take_ring(&mut self) -> Result<RingBuf<MapData>, LoadError> {
        let map = take_map(&mut self.ebpf, MAP_EVENTS)?;
        RingBuf::try_from(map).map_err(|e| LoadError::Map {
            name: MAP_EVENTS,
            reason: e.to_string(),
        })
    }

    /// Attaches the TLS entry and return probes to each `(tls_fn number,
    /// file offset)` of `target`, for every process that maps it (the
    /// programs keep to tracked ones); `file` is the index the calls of a
    /// process are noted under ([`Probes::take_tls_seen`]). Stops at the
    /// first failure.
    pub fn attach_tls(
        &mut self,
        target: &Path,
        funcs: &[(u32, u64)],
        file: u32,
    ) -> Result<(), String> {
        for name in [PROG_TLS_ENTER, PROG_TLS_RETURN] {
            let program = self
                .ebpf
                .program_mut(name)
                .ok_or_else(|| format!("program {name} missing from the kernel object"))?;
            let p: &mut UProbe = program.try_into().map_err(|e| error_chain(&e))?;
            for &(func, offset) in funcs {
                let point = UProbeAttachPoint {
                    location: UProbeAttachLocation::AbsoluteOffset(offset),
                    cookie: Some(u64::from(file) << 32 | u64::from(func)),
                };
                p.attach(point, target, UProbeScope::AllProcesses)
                    .map_err(|e| format!("{name} at {offset:#x}: {}", error_chain(&e)))?;
            }
        }
        self.tls_attached = true;
        Ok(())
    }

    /// The kernel's note of (pid, probed file) pairs whose TLS functions ran.
    fn tls_seen_map(&mut self) -> Result<HashMap<&mut MapData, u64, u8>, LoadError> {
        let map = self
            .ebpf
            .map_mut(MAP_TLS_SEEN)
            .ok_or(LoadError::MissingMap(MAP_TLS_SEEN))?;
        HashMap::try_from(map).map_err(|e| tls_seen_err(e.to_string()))
    }

    /// The indexes (below `files`) of the probed files whose TLS functions
    /// process `pid` called, taken out of the kernel's note.
    pub fn take_tls_seen(&mut self, pid: u32, files: u32) -> Result<Vec<u32>, LoadError> {
        let mut seen = self.tls_seen_map()?;
        let mut out = Vec::new();
        for file in 0..files {
            let key = u64::from(pid) << 32 | u64::from(file);
            if seen.get(&key, 0).is_ok() {
                out.push(file);
                seen.remove(&key)
                    .map_err(|e| tls_seen_err(format!("remove {pid}/{file}: {e}")))?;
            }
        }
        Ok(out)
    }

    /// Every process still in the kernel's note → the indexes of the files
    /// it called (processes that ended before any scan named them), taken.
    pub fn drain_tls_seen(&mut self) -> Result<BTreeMap<u32, Vec<u32>>, LoadError> {
        let mut seen = self.tls_seen_map()?;
        let keys: Vec<u64> = seen.keys().filter_map(Result::ok).collect();
        let mut out: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for key in keys {
            out.entry((key >> 32) as u32).or_default().push(key as u32);
            seen.remove(&key)
                .map_err(|e| tls_seen_err(format!("remove {key:#x}: {e}")))?;
        }
        for files in out.values_mut() {
            files.sort_unstable();
        }
        Ok(out)
    }

    pub fn track(&mut self, pid: u32) -> Result<(), LoadError> {
        self.tracked.insert(pid, 1, 0).map_err(|e| LoadError::Map {
            name: MAP_TRACKED,
            reason: format!("insert {pid}: {e}"),
        })
    }

    /// Kernel-side loss so far, summed over CPUs: (kind name, count).
    pub fn loss_counts(&self) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        for slot in 1..KIND_SLOTS {
            let name = match EventKind::from_u32(slot) {
                Some(k) => k.name(),
                None if slot == LOSS_SLOT_TRACK_FULL => "tracked_map_full",
                None if slot == LOSS_SLOT_IO_FULL => "io_map_full",
                None => continue,
            };
            let total = match self.loss.get(&slot, 0) {
                Ok(values) => values.iter().sum(),
                Err(e) => {
                    tracing::warn!("reading loss counter {name}: {e}");
                    0
                }
            };
            out.push((name, total));
        }
        out
    }
}

/// `record --enforce`'s network programs, attached: the refusals' ring and
/// loss counter, and a descriptor of each link (a link stays attached while
/// any descriptor of it is open: the enforce sentinel holds copies).
pub struct NetAttached {
    pub denials: RingBuf<MapData>,
    pub loss: PerCpuArray<MapData, u64>,
    pub links: Vec<std::os::fd::OwnedFd>,
    /// The links as aya holds them (dropping one closes its descriptor).
    _owned: Vec<FdLink>,
}

impl Probes {
    /// Puts `policy` in the kernel's `NET_POLICY` and attaches the four
    /// socket-address programs to the root cgroup v2, beside any other
    /// program there. They refuse for tracked processes only.
    pub fn attach_net(
        &mut self,
        policy: &agentsight_common::net_policy::NetPolicy,
    ) -> Result<NetAttached, String> {
        use agentsight_common::{
            MAP_NET_DENIAL_LOSS, MAP_NET_DENIALS, PROG_NET_CONNECT4, PROG_NET_CONNECT6,
            PROG_NET_SENDMSG4, PROG_NET_SENDMSG6,
        };
        self.set_net_policy(policy)?;
        // The cgroup v2 hierarchy's mount (`/sys/fs/cgroup`, or
        // `/sys/fs/cgroup/unified` on a hybrid machine): every process is in
        // a cgroup below it.
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let mount = super::container::cgroup2_mount(&mountinfo)
            .ok_or("no cgroup v2 file system is mounted")?;
        let root = std::fs::File::open(&mount).map_err(|e| format!("{}: {e}", mount.display()))?;
        let mut owned = Vec::new();
        let mut links = Vec::new();
        for name in [
            PROG_NET_CONNECT4,
            PROG_NET_CONNECT6,
            PROG_NET_SENDMSG4,
            PROG_NET_SENDMSG6,
        ] {
            let program = self
                .ebpf
                .program_mut(name)
                .ok_or_else(|| format!("program {name} missing from the kernel object"))?;
            let p: &mut CgroupSockAddr = program.try_into().map_err(|e| error_chain(&e))?;
            p.load()
                .map_err(|e| format!("{name}: {}", error_chain(&e)))?;
            let id = p
                // Through a BPF link (kernel ≥ 5.7), which the kernel always
                // attaches beside the others (it takes no attach flags:
                // `AllowMultiple` there is EINVAL).
                .attach(&root, CgroupAttachMode::Single)
                .map_err(|e| format!("{name}: {}", error_chain(&e)))?;
            let link: FdLink = p
                .take_link(id)
                .map_err(|e| format!("{name}: {}", error_chain(&e)))?
                .try_into()
                .map_err(|e| format!("{name}: not a link descriptor: {e}"))?;
            let link_id = link
                .info()
                .map_err(|e| format!("{name}: link info: {}", error_chain(&e)))?
                .id();
            links.push(link_fd(link_id).map_err(|e| format!("{name}: link fd: {e}"))?);
            owned.push(link);
        }
        let denials = take_map(&mut self.ebpf, MAP_NET_DENIALS).map_err(|e| e.to_string())?;
        let denials = RingBuf::try_from(denials).map_err(|e| format!("{MAP_NET_DENIALS}: {e}"))?;
        let loss = take_map(&mut self.ebpf, MAP_NET_DENIAL_LOSS).map_err(|e| e.to_string())?;
        let loss =
            PerCpuArray::try_from(loss).map_err(|e| format!("{MAP_NET_DENIAL_LOSS}: {e}"))?;
        self.net_attached = true;
        Ok(NetAttached {
            denials,
            loss,
            links,
            _owned: owned,
        })
    }

    /// Replaces the kernel's network rules (the programs read them at each
    /// connect: a rule added while enforcing holds from the next one).
    pub fn set_net_policy(
        &mut self,
        policy: &agentsight_common::net_policy::NetPolicy,
    ) -> Result<(), String> {
        use agentsight_common::MAP_NET_POLICY;
        let map = self
            .ebpf
            .map_mut(MAP_NET_POLICY)
            .ok_or_else(|| format!("map {MAP_NET_POLICY} missing from the kernel object"))?;
        let mut map: aya::maps::Array<&mut MapData, agentsight_common::net_policy::NetPolicy> =
            aya::maps::Array::try_from(map).map_err(|e| format!("{MAP_NET_POLICY}: {e}"))?;
        map.set(0, *policy, 0)
            .map_err(|e| format!("{MAP_NET_POLICY}: {e}"))
    }
}

/// A new descriptor of the BPF link `id` (`BPF_LINK_GET_FD_BY_ID`): aya
/// keeps its own private, and the sentinel needs one it can inherit.
fn link_fd(id: u32) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
    #[repr(C)]
    struct GetFdById {
        id: u32,
        next_id: u32,
        open_flags: u32,
    }
    let attr = GetFdById {
        id,
        next_id: 0,
        open_flags: 0,
    };
    // Safety: attr is the bpf_attr prefix of the GET_FD_BY_ID commands.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_GET_FD_BY_ID,
            &attr as *const GetFdById,
            std::mem::size_of::<GetFdById>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Safety: the kernel returned a new descriptor that nothing else owns;
    // it is close-on-exec (bpf(2) sets O_CLOEXEC on the fds it returns).
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Takes (and removes) the I/O aggregates of `pid`, or of every process
/// when `pid` is None: (pid, fd, aggregate).
pub fn drain_io(io: &mut HashMap<MapData, u64, IoAgg>, pid: Option<u32>) -> Vec<(u32, i32, IoAgg)> {
    let keys: Vec<u64> = io
        .keys()
        .filter_map(|k| k.ok())
        .filter(|k| pid.is_none_or(|p| (k >> 32) as u32 == p))
        .collect();
    let mut out = Vec::new();
    for k in keys {
        if let Ok(agg) = io.get(&k, 0) {
            out.push(((k >> 32) as u32, k as u32 as i32, agg));
        }
        let _ = io.remove(&k);
    }
    out
}

fn insert_cgroups(ebpf: &mut Ebpf, cgroups: &[(u64, ContainerNs)]) -> Result<(), LoadError> {
    if cgroups.is_empty() {
        return Ok(());
    }
    let map = ebpf
        .map_mut(MAP_TRACKED_CGROUPS)
        .ok_or(LoadError::MissingMap(MAP_TRACKED_CGROUPS))?;
    let mut map: HashMap<&mut MapData, u64, ContainerNs> =
        HashMap::try_from(map).map_err(|e| LoadError::Map {
            name: MAP_TRACKED_CGROUPS,
            reason: e.to_string(),
        })?;
    for &(id, ns) in cgroups {
        map.insert(id, ns, 0).map_err(|e| LoadError::Map {
            name: MAP_TRACKED_CGROUPS,
            reason: format!("insert {id}: {e}"),
        })?;
    }
    Ok(())
}

fn take_map(ebpf: &mut Ebpf, name: &'static str) -> Result<aya::maps::Map, LoadError> {
    ebpf.take_map(name).ok_or(LoadError::MissingMap(name))
}

fn load_uprobe(ebpf: &mut Ebpf, name: &str) -> Result<(), String> {
    let program = ebpf
        .program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the kernel object"))?;
    let p: &mut UProbe = program.try_into().map_err(|e| error_chain(&e))?;
    p.load().map_err(|e| error_chain(&e))
}

fn attach(
    ebpf: &mut Ebpf,
    btf: &Btf,
    name: &str,
    hook: &Hook,
    tracefs: &Result<Option<String>, String>,
) -> Result<(), String> {
    let program = ebpf
        .program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the kernel object"))?;
    match hook {
        Hook::TracePoint(category, tp) => {
            if let Err(e) = tracefs {
                return Err(e.clone());
            }
            let p: &mut TracePoint = program.try_into().map_err(|e| error_chain(&e))?;
            p.load().map_err(|e| error_chain(&e))?;
            p.attach(category, tp).map_err(|e| error_chain(&e))?;
        }
        Hook::BtfTracePoint(tp) => {
            let p: &mut BtfTracePoint = program.try_into().map_err(|e| error_chain(&e))?;
            p.load(tp, btf).map_err(|e| error_chain(&e))?;
            p.attach().map_err(|e| error_chain(&e))?;
        }
        Hook::RawTracePoint(tp) => {
            let p: &mut RawTracePoint = program.try_into().map_err(|e| error_chain(&e))?;
            p.load().map_err(|e| error_chain(&e))?;
            p.attach(tp).map_err(|e| error_chain(&e))?;
        }
    }
    Ok(())
}

/// An error with its sources, on one line (aya nests the useful part). A
/// verifier log is cut to its last lines, which say why the load failed.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let full = full_chain(e);
    let lines: Vec<&str> = full.lines().collect();
    if lines.len() <= 4 {
        return lines.join(" ");
    }
    format!("{} … {}", lines[0], lines[lines.len() - 3..].join(" "))
}

fn full_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        let part = src.to_string();
        if !s.contains(&part) {
            s.push_str(": ");
            s.push_str(&part);
        }
        cur = src.source();
    }
    s
}

fn tls_seen_err(reason: String) -> LoadError {
    LoadError::Map {
        name: MAP_TLS_SEEN,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use std::{
        collections::{BTreeMap, BTreeSet},
        path::Path,
    };

    use agentsight_common::{
        KERNEL_PROGRAM_NAMES, MAP_NAMES, PROG_TLS_ENTER, PROG_TLS_RETURN, PROGRAM_NAMES,
        inet_sock_set_state_format,
    };
    use aya_obj::ProgramSection;

    use super::{Hook, OBJECT, TRACEFS, programs};

    /// The kernel crate checks each map static's name against its constant at
    /// compile time; this checks the other way round, on the object user
    /// space embeds: it holds exactly the maps and programs named in
    /// agentsight-common, each program of the kind its hook attaches.
    #[test]
    fn object_holds_exactly_the_named_maps_and_programs() {
        let hooked = programs();
        let attached: BTreeSet<&str> = hooked.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(attached, BTreeSet::from(KERNEL_PROGRAM_NAMES));
        if OBJECT.is_empty() {
            eprintln!("object check skipped: built without the kernel programs (AYA_BUILD_SKIP)");
            return;
        }
        let object = aya_obj::Object::parse(OBJECT).expect("the embedded kernel object parses");
        // Sections holding globals (.rodata, .bss, .data) are maps to aya too.
        let maps: BTreeSet<&str> = object
            .maps
            .keys()
            .map(String::as_str)
            .filter(|name| !name.starts_with('.'))
            .collect();
        assert_eq!(maps, BTreeSet::from(MAP_NAMES));
        let in_object: BTreeSet<&str> = object.programs.keys().map(String::as_str).collect();
        assert_eq!(in_object, BTreeSet::from(PROGRAM_NAMES));
        for (name, hook) in programs() {
            let section = &object.programs[&name].section;
            let kind_matches = match hook {
                Hook::TracePoint(..) => matches!(section, ProgramSection::TracePoint),
                Hook::BtfTracePoint(_) => matches!(section, ProgramSection::BtfTracePoint),
                Hook::RawTracePoint(_) => matches!(section, ProgramSection::RawTracePoint),
            };
            assert!(kind_matches, "{name}: hook {hook:?}, section {section:?}");
        }
        let enter = &object.programs[PROG_TLS_ENTER].section;
        assert!(matches!(enter, ProgramSection::UProbe { .. }), "{enter:?}");
        let ret = &object.programs[PROG_TLS_RETURN].section;
        assert!(matches!(ret, ProgramSection::URetProbe { .. }), "{ret:?}");
    }

    /// The offsets the TCP program reads must be the ones this machine's
    /// format file gives (skipped where tracefs cannot be read).
    #[test]
    fn inet_sock_set_state_offsets_match_the_format_file() {
        let path = Path::new(TRACEFS).join("events/sock/inet_sock_set_state/format");
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("format check skipped: {} is not readable", path.display());
            return;
        };
        let offsets: BTreeMap<&str, usize> = text.lines().filter_map(field_offset).collect();
        for (name, offset) in inet_sock_set_state_format::FIELDS {
            assert_eq!(offsets.get(name), Some(&offset), "field {name} in {text}");
        }
    }

    /// `field:__u8 saddr[4];\toffset:32;\tsize:4;\tsigned:0;` → ("saddr", 32).
    fn field_offset(line: &str) -> Option<(&str, usize)> {
        let mut parts = line.trim().split(';');
        let declaration = parts.next()?.strip_prefix("field:")?;
        let name = declaration.rsplit(' ').next()?.split('[').next()?;
        let offset = parts.next()?.trim().strip_prefix("offset:")?.parse().ok()?;
        Some((name, offset))
    }
}
