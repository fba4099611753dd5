//! Records shared by agentsight's kernel programs and user space.
//!
//! Every record written to the ring buffer starts with a [`Header`]; its `kind`
//! says which struct follows. Layouts are `#[repr(C)]` and plain old data so
//! user space can read them straight from ring-buffer bytes.
#![no_std]

pub mod inet_sock_set_state_format;
mod names;
pub use names::*;
pub mod net_policy;

/// Bounds on what one exec record carries (stated in docs/export.md too): a
/// failed exec's argv, read from the caller's pointer array, keeps at most
/// this many arguments.
pub const ARGV_MAX_ARGS: usize = 64;
/// Bytes of argv text kept per exec: each argument NUL-terminated, back to back.
pub const ARGV_BUF: usize = 4096;
/// Bytes of the filename as passed to execve.
pub const FILENAME_MAX: usize = 256;
/// A path is walked up to this many components (dentries) from the kernel.
pub const PATH_DEPTH: usize = 24;
/// Bytes kept of one path component (names are at most 255 bytes in Linux).
pub const PATH_NAME_MAX: usize = 128;

/// Event kinds; also the index into the per-CPU loss counter array.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Fork = 1,
    Exec = 2,
    ExecFailed = 3,
    Exit = 4,
    /// A file or socket syscall with its result ([`SysEvent`]).
    Sys = 5,
    /// Reads/writes on one fd aggregated until close ([`IoEvent`]).
    Io = 6,
    /// A TCP state change of a socket a tracked process connected ([`TcpStateEvent`]).
    TcpState = 7,
    /// TLS plaintext of one library call ([`TlsHead`] + data).
    Tls = 8,
}

/// Number of slots in the loss array (kinds are 1-based; slot 0 unused).
pub const KIND_SLOTS: u32 = 16;
/// Loss slot counting children that could not join the tracked map (map full).
pub const LOSS_SLOT_TRACK_FULL: u32 = 15;
/// Loss slot counting I/O aggregation entries that could not be created.
pub const LOSS_SLOT_IO_FULL: u32 = 13;

impl EventKind {
    pub fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::Fork),
            2 => Some(Self::Exec),
            3 => Some(Self::ExecFailed),
            4 => Some(Self::Exit),
            5 => Some(Self::Sys),
            6 => Some(Self::Io),
            7 => Some(Self::TcpState),
            8 => Some(Self::Tls),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Fork => "fork",
            Self::Exec => "exec",
            Self::ExecFailed => "exec_failed",
            Self::Exit => "exit",
            Self::Sys => "syscall",
            Self::Io => "io",
            Self::TcpState => "tcp_state",
            Self::Tls => "tls",
        }
    }
}

/// Common prefix of every record.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Header {
    pub kind: u32,
    /// CPU that produced the record; `seq` counts per CPU and stream.
    pub cpu: u32,
    /// Per-CPU, per-stream sequence number, taken only by a record that is
    /// then submitted or counted as lost (a failed reserve or output takes
    /// one too), so a gap means a record that never arrived.
    pub seq: u64,
    /// CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns).
    pub mono_ns: u64,
    /// Thread id (kernel pid) of the task the event is about.
    pub tid: u32,
    /// Process id (kernel tgid).
    pub pid: u32,
    /// Parent process id (real_parent's tgid) at event time.
    pub ppid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Which counter `seq` comes from ([`SEQ_STREAM_TASK`] or
    /// [`SEQ_STREAM_TCP`]).
    pub seq_stream: u32,
    pub comm: [u8; 16],
}

/// Sequence counter of the programs that run in task context with
/// preemption off (fork, exec, exit, sys_exit): they never interleave on a CPU.
pub const SEQ_STREAM_TASK: u32 = 0;
/// Sequence counter of the TCP state tracepoint, which can run in softirq
/// and so interrupt a task-context program between its number and its
/// submit; its own counter keeps each stream's numbers free of interleaving.
pub const SEQ_STREAM_TCP: u32 = 1;
/// Sequence counter of the TLS uprobes: they run in the traced task's
/// context, where (unlike a tracepoint) preemption may be on, so they keep
/// their numbers apart from the task stream's.
pub const SEQ_STREAM_TLS: u32 = 2;
/// Entries of the kernel's SEQ map.
pub const SEQ_STREAMS: u32 = 3;

/// A recorded container's pid namespace (`stat` of `/proc/PID/ns/pid` of its
/// init: `st_dev`, `st_ino`), the value of `TRACKED_CGROUPS`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContainerNs {
    pub pidns_dev: u64,
    pub pidns_ino: u64,
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for ContainerNs {}

/// A new process (not a thread) was forked by a tracked process.
/// Header `pid`/`tid` are the parent's.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ForkEvent {
    pub header: Header,
    pub child_pid: u32,
    pub child_tid: u32,
    /// The parent's cgroup v2 id (`bpf_get_current_cgroup_id`), which the
    /// child starts in: user space maps it to a recorded container.
    pub cgroup_id: u64,
}

/// A path rebuilt from dentries, leaf first: component `i` of `depth` is in
/// `names[i]`. `flags` says how the walk ended.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PathRecord {
    pub depth: u32,
    pub flags: u32,
    pub names: [[u8; PATH_NAME_MAX]; PATH_DEPTH],
}

/// The walk reached the root of the mount namespace: the path is complete.
pub const PATH_COMPLETE: u32 = 1;
/// More components than `PATH_DEPTH`: the path is missing its top.
pub const PATH_TOO_DEEP: u32 = 2;
/// At least one component was longer than `PATH_NAME_MAX - 1` and is cut.
pub const PATH_NAME_CUT: u32 = 4;
/// A kernel read failed during the walk.
pub const PATH_READ_FAILED: u32 = 8;
/// The dentry is unlinked (deleted) or not attached to a mount.
pub const PATH_DETACHED: u32 = 16;
/// A packed walk ran (so a `path_flags` of 0 means "no walk").
pub const PATH_WALKED: u32 = 32;

/// An exec: a successful one (from sched_process_exec, argv read from the
/// new program's stack, cwd and binary walked from dentries) or a failed
/// one (from the raw sys_exit, argv read from the caller's memory).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ExecEvent {
    pub header: Header,
    /// Pid before exec (differs when a non-leader thread execs).
    pub old_tid: u32,
    /// Number of arguments the caller passed (may exceed what was kept).
    pub argc: u32,
    /// Number of arguments in `argv` (for a successful exec: `argc`; when
    /// `argv` is cut, the last one kept is partial).
    pub argv_kept: u32,
    /// Bytes of `argv` used.
    pub argv_len: u32,
    /// `ARGV_*` flags.
    pub argv_flags: u32,
    /// Errno for a failed exec, 0 on success.
    pub errno: i32,
    /// A successful exec: the inode and device (`sb->s_dev`) of the file
    /// run (`bprm->file`); 0 otherwise.
    pub exe_ino: u64,
    pub exe_dev: u32,
    pub _pad: u32,
    /// The cgroup v2 id of the process at exec (`bpf_get_current_cgroup_id`).
    pub cgroup_id: u64,
    /// When that cgroup is a recorded container's and the process is in
    /// the container's pid namespace: that namespace's inode and the
    /// process's pid in it; 0 otherwise.
    pub pidns_ino: u64,
    pub ns_pid: u32,
    pub _pad2: u32,
    pub filename: [u8; FILENAME_MAX],
    pub argv: [u8; ARGV_BUF],
    pub cwd: PathRecord,
    pub exe: PathRecord,
}

/// Some arguments were not kept (count or byte bound reached).
pub const ARGV_TRUNCATED: u32 = 1;
/// Reading argv from user memory failed.
pub const ARGV_READ_FAILED: u32 = 2;

/// The last thread of a tracked process exited.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ExitEvent {
    pub header: Header,
    /// `task_struct.exit_code`: `status << 8` for a normal exit, or the
    /// terminating signal number (bit 7 set when a core was dumped).
    pub exit_code: u32,
    /// `EXIT_*` flags.
    pub flags: u32,
}

/// The process did I/O on more fds than the kernel listed for it: user space
/// must sweep the I/O map for its unlisted aggregates.
pub const EXIT_IO_UNLISTED: u32 = 1;

/// Fds per process whose I/O aggregates the kernel flushes itself at exec
/// and exit (more are flagged with [`EXIT_IO_UNLISTED`]).
pub const IO_FD_LIST: usize = 32;

/// The fds a process has I/O aggregates for (kernel-side bookkeeping).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IoFdList {
    /// Fds noted so far; may exceed [`IO_FD_LIST`] (then some are unlisted).
    pub count: u32,
    /// Set once the list overflowed: stays set across exec.
    pub overflowed: u32,
    pub fds: [u32; IO_FD_LIST],
}

/// Syscalls recorded as [`SysEvent`]s; the number says which arguments mean what.
pub mod op {
    pub const OPEN: u32 = 1;
    pub const OPENAT: u32 = 2;
    pub const OPENAT2: u32 = 3;
    pub const CREAT: u32 = 4;
    pub const UNLINK: u32 = 5;
    pub const UNLINKAT: u32 = 6;
    pub const RMDIR: u32 = 7;
    pub const RENAME: u32 = 8;
    pub const RENAMEAT: u32 = 9;
    pub const RENAMEAT2: u32 = 10;
    pub const MKDIR: u32 = 11;
    pub const MKDIRAT: u32 = 12;
    pub const TRUNCATE: u32 = 13;
    pub const FTRUNCATE: u32 = 14;
    pub const CHDIR: u32 = 15;
    pub const FCHDIR: u32 = 16;
    pub const SYMLINK: u32 = 17;
    pub const SYMLINKAT: u32 = 18;
    pub const LINK: u32 = 19;
    pub const LINKAT: u32 = 20;
    pub const CLOSE: u32 = 21;
    pub const DUP: u32 = 22;
    pub const DUP2: u32 = 23;
    pub const DUP3: u32 = 24;
    pub const FCNTL: u32 = 25;
    pub const CONNECT: u32 = 30;
    pub const BIND: u32 = 31;
    pub const LISTEN: u32 = 32;
    pub const ACCEPT: u32 = 33;
    pub const ACCEPT4: u32 = 34;
    pub const SENDTO: u32 = 35;
    pub const SENDMSG: u32 = 36;
    pub const SENDMMSG: u32 = 37;
    /// A write(2) on a socket connected to port 53 (DNS over TCP/UDP).
    pub const DNS_WRITE: u32 = 38;
    pub const SOCKET: u32 = 39;
    // Reads and writes are aggregated ([`super::IoEvent`]), not events.
    pub const WRITE: u32 = 50;
    pub const PWRITE64: u32 = 51;
    pub const WRITEV: u32 = 52;
    pub const PWRITEV: u32 = 53;
    pub const READ: u32 = 54;
    pub const PREAD64: u32 = 55;
    pub const READV: u32 = 56;
    pub const PREADV: u32 = 57;
    pub const PREADV2: u32 = 58;
    pub const PWRITEV2: u32 = 59;
    /// Bytes moved by the kernel between two fds: a read on the source fd
    /// and a write on the destination fd, each of the result's size.
    pub const SENDFILE: u32 = 60;
    pub const SPLICE: u32 = 61;
    pub const COPY_FILE_RANGE: u32 = 62;
}

/// Bytes kept of a path argument, or of a socket address.
pub const SYS_BUF: usize = 512;

/// A file or socket syscall: the raw arguments, the result, and up to two
/// buffers read from the caller's memory at syscall exit (paths, socket
/// addresses, or a DNS payload — which, depends on `op`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SysEvent {
    pub header: Header,
    pub op: u32,
    /// Bytes read into `buf1`/`buf2`, or -errno of the read.
    pub len1: i32,
    pub len2: i32,
    /// For a successful open: how the walk of the opened file's dentries
    /// ended (`PATH_*` flags); `buf2` then holds its names (see
    /// [`PATH_PACKED_MAX`]). 0 otherwise.
    pub path_flags: u32,
    /// Syscall return value: an fd, 0, or -errno.
    pub ret: i64,
    pub args: [u64; 6],
    /// open flags read from `struct open_how` for openat2; else 0.
    pub how_flags: u64,
    /// For a successful open: the opened file's inode number and device
    /// (`sb->s_dev`, the kernel's encoding); 0 otherwise.
    pub ino: u64,
    pub dev: u32,
    pub _pad: u32,
    pub buf1: [u8; SYS_BUF],
    pub buf2: [u8; SYS_BUF],
}

/// A successful open's kernel path in `buf2`: the dentry names of the file
/// the fd refers to, leaf first, each NUL-terminated, crossing mounts up to
/// the root of the mount namespace; at most this many bytes (the walk stops
/// and flags `PATH_TOO_DEEP` beyond).
pub const PATH_PACKED_MAX: usize = SYS_BUF;
/// Longest name the packed walk reads in one step (with its NUL).
pub const PATH_PACKED_NAME: usize = 256;

/// Size of a [`SysEvent`] carrying no buffers / only `buf1` / both.
pub const SYS_EVENT_BARE: usize = core::mem::size_of::<SysEvent>() - 2 * SYS_BUF;
pub const SYS_EVENT_ONE: usize = core::mem::size_of::<SysEvent>() - SYS_BUF;
pub const SYS_EVENT_TWO: usize = core::mem::size_of::<SysEvent>();

/// Reads and writes on one fd of one process, summed in the kernel.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IoAgg {
    pub write_bytes: u64,
    pub write_calls: u64,
    pub read_bytes: u64,
    pub read_calls: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// An I/O aggregate flushed at close (from the kernel) or at exit/stop (by
/// user space, which then fills the header itself).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IoEvent {
    pub header: Header,
    pub fd: i32,
    pub _pad: u32,
    pub agg: IoAgg,
}

/// A TCP state change, keyed to the process that connected the socket.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TcpStateEvent {
    pub header: Header,
    pub oldstate: i32,
    pub newstate: i32,
    pub sport: u16,
    pub dport: u16,
    pub family: u16,
    pub _pad: u16,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
}

/// A failed exec's filename and argv, read from the caller's memory.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ArgvStage {
    pub argv_kept: u32,
    pub argv_len: u32,
    pub argv_flags: u32,
    pub filename: [u8; FILENAME_MAX],
    pub argv: [u8; ARGV_BUF * 2],
}

/// Kernel struct offsets, read from BTF in user space at load time and
/// handed to the programs as globals. Names follow `struct.member`.
/// The sys_exit program copies this many 8-byte words from the start of
/// `pt_regs` in one read; user space refuses offsets (`regs_args`, `regs_nr`)
/// outside them.
pub const PT_REGS_WORDS: usize = 16;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct Offsets {
    pub task_tgid: u32,
    pub task_pid: u32,
    pub task_real_parent: u32,
    pub task_exit_code: u32,
    pub task_fs: u32,
    pub fs_pwd: u32,
    pub path_mnt: u32,
    pub path_dentry: u32,
    pub dentry_parent: u32,
    pub dentry_name: u32,
    pub qstr_len: u32,
    pub qstr_name: u32,
    pub mount_mnt: u32,
    pub mount_parent: u32,
    pub mount_mountpoint: u32,
    pub vfsmount_root: u32,
    pub bprm_file: u32,
    pub bprm_filename: u32,
    pub bprm_argc: u32,
    pub file_path: u32,
    pub task_mm: u32,
    pub mm_arg_start: u32,
    pub mm_arg_end: u32,
    /// `pt_regs` members holding syscall arguments 1–6 (x86-64: di, si,
    /// dx, r10, r8, r9) and the syscall number (`orig_ax`).
    pub regs_args: [u32; 6],
    pub regs_nr: u32,
    /// `task_struct.thread_info.status`, whose TS_COMPAT bit marks a 32-bit
    /// syscall (its number means something else).
    pub task_ti_status: u32,
    /// The fd table: `task->files->fdt->fd[fd]`, bounded by `max_fds`.
    pub task_files: u32,
    pub files_fdt: u32,
    pub fdtable_fd: u32,
    pub fdtable_max_fds: u32,
    /// `file->f_inode->i_ino` and `->i_sb->s_dev`.
    pub file_inode: u32,
    pub inode_ino: u32,
    pub inode_sb: u32,
    pub sb_dev: u32,
}

impl Offsets {
    /// All offsets zero: the value the kernel object carries until user space sets it.
    pub const ZERO: Self = Self {
        task_tgid: 0,
        task_pid: 0,
        task_real_parent: 0,
        task_exit_code: 0,
        task_fs: 0,
        fs_pwd: 0,
        path_mnt: 0,
        path_dentry: 0,
        dentry_parent: 0,
        dentry_name: 0,
        qstr_len: 0,
        qstr_name: 0,
        mount_mnt: 0,
        mount_parent: 0,
        mount_mountpoint: 0,
        vfsmount_root: 0,
        bprm_file: 0,
        bprm_filename: 0,
        bprm_argc: 0,
        file_path: 0,
        task_mm: 0,
        mm_arg_start: 0,
        mm_arg_end: 0,
        regs_args: [0; 6],
        regs_nr: 0,
        task_ti_status: 0,
        task_files: 0,
        files_fdt: 0,
        fdtable_fd: 0,
        fdtable_max_fds: 0,
        file_inode: 0,
        inode_ino: 0,
        inode_sb: 0,
        sb_dev: 0,
    };
}

// Safety: repr(C), integers only, valid for any bit pattern.
#[cfg(feature = "user")]
unsafe impl aya::Pod for Offsets {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for IoAgg {}

/// TLS library functions whose plaintext is captured: the uprobe's attach
/// cookie, so one entry and one return program serve them all.
pub mod tls_fn {
    /// `int SSL_write(SSL *, const void *buf, int num)`: returns bytes written.
    pub const SSL_WRITE: u32 = 1;
    /// `int SSL_read(SSL *, void *buf, int num)`: returns bytes read.
    pub const SSL_READ: u32 = 2;
    /// `int SSL_write_ex(SSL *, const void *buf, size_t num, size_t *written)`:
    /// returns 1 on success, the count in `*written`.
    pub const SSL_WRITE_EX: u32 = 3;
    /// `int SSL_read_ex(SSL *, void *buf, size_t num, size_t *readbytes)`.
    pub const SSL_READ_EX: u32 = 4;
    /// `ssize_t gnutls_record_send(gnutls_session_t, const void *, size_t)`.
    pub const GNUTLS_SEND: u32 = 5;
    /// `ssize_t gnutls_record_recv(gnutls_session_t, void *, size_t)`.
    pub const GNUTLS_RECV: u32 = 6;

    /// Whether the function sends (else it receives).
    pub const fn is_send(f: u32) -> bool {
        matches!(f, SSL_WRITE | SSL_WRITE_EX | GNUTLS_SEND)
    }

    /// The exported symbol of each function, by its number.
    pub const SYMBOLS: [(u32, &str); 6] = [
        (SSL_WRITE, "SSL_write"),
        (SSL_READ, "SSL_read"),
        (SSL_WRITE_EX, "SSL_write_ex"),
        (SSL_READ_EX, "SSL_read_ex"),
        (GNUTLS_SEND, "gnutls_record_send"),
        (GNUTLS_RECV, "gnutls_record_recv"),
    ];
}

/// Bytes of plaintext kept per TLS call; the rest is counted (`len` >
/// `data_len`), never silently dropped.
pub const TLS_DATA_MAX: usize = 16384;
/// A call of at most this many bytes takes the small record (ring space).
pub const TLS_DATA_SMALL: usize = 1024;

/// A TLS call in flight on one thread, noted at entry, read at return.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TlsCall {
    /// The connection object (`SSL *` / `gnutls_session_t`).
    pub conn: u64,
    pub buf: u64,
    /// For the `_ex` functions: where the library writes the count.
    pub count_ptr: u64,
    pub entry_ns: u64,
    /// [`tls_fn`] number.
    pub func: u32,
    /// The socket fd of the first read/write syscall the thread made inside
    /// the call; -1 when it made none (buffered data, a memory BIO).
    pub fd: i32,
    /// Nested calls of the functions inside the outer one (only the outer
    /// one is recorded).
    pub depth: u32,
    pub _pad: u32,
}

/// The fixed part of a TLS record; `data_len` bytes of plaintext follow.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TlsHead {
    pub header: Header,
    pub conn: u64,
    pub entry_ns: u64,
    /// Bytes the call moved (its result).
    pub len: u64,
    pub func: u32,
    pub fd: i32,
    /// Bytes of plaintext in the record (≤ [`TLS_DATA_MAX`]); 0 with a
    /// nonzero `len` when reading the caller's buffer failed.
    pub data_len: u32,
    /// `TLS_*` flags.
    pub flags: u32,
}

/// Reading the caller's buffer failed.
pub const TLS_READ_FAILED: u32 = 1;

/// A TLS record with room for `N` bytes of plaintext.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TlsRecord<const N: usize> {
    pub head: TlsHead,
    pub data: [u8; N],
}
