//! Names user space finds the kernel object's maps, globals and programs by.
//!
//! The kernel crate's `#[map]` statics must be named by string literals (the
//! macro emits `export_name`), so it checks at compile time that each static's
//! name equals its constant here; user space looks everything up by these
//! constants, and a unit test of `agentsight` checks that the built object
//! holds exactly [`MAP_NAMES`] and [`PROGRAM_NAMES`].

/// Tgids whose activity is recorded (user space inserts the recorded command).
pub const MAP_TRACKED: &str = "TRACKED";
/// The ring buffer every record goes through (user space sets its size).
pub const MAP_EVENTS: &str = "EVENTS";
/// Failed ring-buffer reserves, per CPU, indexed by event kind.
pub const MAP_LOSS: &str = "LOSS";
/// Per-CPU record sequence numbers, one per stream.
pub const MAP_SEQ: &str = "SEQ";
/// Per-CPU scratch for a failed exec's argv.
pub const MAP_SCRATCH: &str = "SCRATCH";
/// Per-CPU scratch for dentry walks into a `PathRecord`.
pub const MAP_PATH_SCRATCH: &str = "PATH_SCRATCH";
/// Per-CPU scratch for a packed walk (an opened file's kernel path).
pub const MAP_PACKED_SCRATCH: &str = "PACKED_SCRATCH";
/// Per-CPU space to build a `SysEvent` in.
pub const MAP_SYS_SCRATCH: &str = "SYS_SCRATCH";
/// Read/write aggregates per (tgid << 32 | fd).
pub const MAP_IO: &str = "IO";
/// The fds each tracked process has aggregates in `IO` for.
pub const MAP_IO_FDS: &str = "IO_FDS";
/// Sockets connected to port 53.
pub const MAP_DNS_FDS: &str = "DNS_FDS";
/// TCP sockets a tracked process is connecting.
pub const MAP_TCP_SOCKS: &str = "TCP_SOCKS";

/// Cgroup (v2) ids of the recorded containers: a process in one joins
/// `TRACKED` at its first fork or exec (user space fills it before attaching).
pub const MAP_TRACKED_CGROUPS: &str = "TRACKED_CGROUPS";

/// TLS calls in flight, per thread (`TlsCall`).
pub const MAP_TLS_CALLS: &str = "TLS_CALLS";

/// Socket fds of tracked processes (tgid << 32 | fd), from socket/accept
/// results until close: the fds a TLS call's syscall may name.
pub const MAP_TLS_SOCK_FDS: &str = "TLS_SOCK_FDS";

/// The probed library files each tracked process called the TLS functions
/// of (tgid << 32 | file index, the attach cookie's high half): user space
/// names a short-lived process's libraries from it, even when no scan of
/// its maps caught them.
pub const MAP_TLS_SEEN: &str = "TLS_SEEN";

/// `record --enforce`'s network rules (one `NetPolicy`), read by the cgroup
/// socket-address programs.
pub const MAP_NET_POLICY: &str = "NET_POLICY";
/// Connects and sends those programs refused (`NetDenial`), for user space.
pub const MAP_NET_DENIALS: &str = "NET_DENIALS";
/// Refusals `NET_DENIALS` had no room for, per CPU (index 0).
pub const MAP_NET_DENIAL_LOSS: &str = "NET_DENIAL_LOSS";

/// Every map of the kernel object.
pub const MAP_NAMES: [&str; 19] = [
    MAP_TRACKED,
    MAP_EVENTS,
    MAP_LOSS,
    MAP_SEQ,
    MAP_SCRATCH,
    MAP_PATH_SCRATCH,
    MAP_PACKED_SCRATCH,
    MAP_SYS_SCRATCH,
    MAP_IO,
    MAP_IO_FDS,
    MAP_DNS_FDS,
    MAP_TCP_SOCKS,
    MAP_TRACKED_CGROUPS,
    MAP_TLS_CALLS,
    MAP_TLS_SOCK_FDS,
    MAP_TLS_SEEN,
    MAP_NET_POLICY,
    MAP_NET_DENIALS,
    MAP_NET_DENIAL_LOSS,
];

/// The global holding the kernel struct offsets ([`crate::Offsets`]) user
/// space fills from BTF at load time.
pub const GLOBAL_OFFSETS: &str = "OFFSETS";

/// The global holding how many cgroups user space put in
/// [`MAP_TRACKED_CGROUPS`] (set at load time): 0 keeps the untracked fast
/// path free of the cgroup lookup.
pub const GLOBAL_TRACKED_CGROUP_COUNT: &str = "TRACKED_CGROUP_COUNT";

/// BTF tracepoint `sched_process_fork` (and the program's name).
pub const PROG_SCHED_PROCESS_FORK: &str = "sched_process_fork";
/// BTF tracepoint `sched_process_exec` (and the program's name).
pub const PROG_SCHED_PROCESS_EXEC: &str = "sched_process_exec";
/// BTF tracepoint `sched_process_exit` (and the program's name).
pub const PROG_SCHED_PROCESS_EXIT: &str = "sched_process_exit";
/// Raw tracepoint `sys_exit` (and the program's name).
pub const PROG_SYS_EXIT: &str = "sys_exit";
/// Tracepoint `sock:inet_sock_set_state` (and the program's name).
pub const PROG_INET_SOCK_SET_STATE: &str = "inet_sock_set_state";
/// Category of the `inet_sock_set_state` tracepoint.
pub const TRACEPOINT_CATEGORY_SOCK: &str = "sock";

/// Uprobe at the entry of every captured TLS function (attached per library
/// file by user space; the attach cookie says which function).
pub const PROG_TLS_ENTER: &str = "tls_enter";
/// Uretprobe at the return of the same functions.
pub const PROG_TLS_RETURN: &str = "tls_return";

/// Cgroup socket-address programs of `record --enforce` (attached to the
/// root cgroup only while enforcing; they refuse for tracked processes only).
pub const PROG_NET_CONNECT4: &str = "net_connect4";
pub const PROG_NET_CONNECT6: &str = "net_connect6";
pub const PROG_NET_SENDMSG4: &str = "net_sendmsg4";
pub const PROG_NET_SENDMSG6: &str = "net_sendmsg6";

/// Programs attached once at load, to kernel hooks.
pub const KERNEL_PROGRAM_NAMES: [&str; 5] = [
    PROG_SCHED_PROCESS_FORK,
    PROG_SCHED_PROCESS_EXEC,
    PROG_SCHED_PROCESS_EXIT,
    PROG_SYS_EXIT,
    PROG_INET_SOCK_SET_STATE,
];

/// Every program of the kernel object.
pub const PROGRAM_NAMES: [&str; 11] = [
    PROG_SCHED_PROCESS_FORK,
    PROG_SCHED_PROCESS_EXEC,
    PROG_SCHED_PROCESS_EXIT,
    PROG_SYS_EXIT,
    PROG_INET_SOCK_SET_STATE,
    PROG_TLS_ENTER,
    PROG_TLS_RETURN,
    PROG_NET_CONNECT4,
    PROG_NET_CONNECT6,
    PROG_NET_SENDMSG4,
    PROG_NET_SENDMSG6,
];
