//! Records shared by agentsight's kernel programs and user space.
//!
//! Every record written to the ring buffer starts with a [`Header`]; its `kind`
//! says which struct follows. Layouts are `#[repr(C)]` and plain old data so
//! user space can read them straight from ring-buffer bytes.
#![no_std]

/// Bounds on what one exec record carries (stated in the README too).
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
}

/// Number of slots in the loss array (kinds are 1-based; slot 0 unused).
pub const KIND_SLOTS: u32 = 8;
/// Loss slot counting children that could not join the tracked map (map full).
pub const LOSS_SLOT_TRACK_FULL: u32 = 7;

impl EventKind {
    pub fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::Fork),
            2 => Some(Self::Exec),
            3 => Some(Self::ExecFailed),
            4 => Some(Self::Exit),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Fork => "fork",
            Self::Exec => "exec",
            Self::ExecFailed => "exec_failed",
            Self::Exit => "exit",
        }
    }
}

/// Common prefix of every record.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Header {
    pub kind: u32,
    /// CPU that produced the record; `seq` counts per CPU.
    pub cpu: u32,
    /// Per-CPU sequence number, incremented for every record attempted
    /// (including ones whose reserve failed), so a gap means loss.
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
    pub _pad: u32,
    pub comm: [u8; 16],
}

/// A new process (not a thread) was forked by a tracked process.
/// Header `pid`/`tid` are the parent's.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ForkEvent {
    pub header: Header,
    pub child_pid: u32,
    pub child_tid: u32,
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

/// A successful exec (from sched_process_exec), with argv read at
/// sys_enter_execve(at) and the cwd and binary walked from dentries.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ExecEvent {
    pub header: Header,
    /// Pid before exec (differs when a non-leader thread execs).
    pub old_tid: u32,
    /// Number of arguments the caller passed (may exceed what was kept).
    pub argc: u32,
    /// Number of arguments kept in `argv`.
    pub argv_kept: u32,
    /// Bytes of `argv` used.
    pub argv_len: u32,
    /// `ARGV_*` flags.
    pub argv_flags: u32,
    /// Errno for a failed exec, 0 on success.
    pub errno: i32,
    pub filename: [u8; FILENAME_MAX],
    pub argv: [u8; ARGV_BUF],
    pub cwd: PathRecord,
    pub exe: PathRecord,
}

/// Some arguments were not kept (count or byte bound reached).
pub const ARGV_TRUNCATED: u32 = 1;
/// Reading an argument pointer or string from user memory failed.
pub const ARGV_READ_FAILED: u32 = 2;
/// No argv was staged at syscall entry (e.g. exec via a path we do not hook).
pub const ARGV_MISSING: u32 = 4;

/// The last thread of a tracked process exited.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ExitEvent {
    pub header: Header,
    /// `task_struct.exit_code`: `status << 8` for a normal exit, or the
    /// terminating signal number (bit 7 set when a core was dumped).
    pub exit_code: u32,
    pub _pad: u32,
}

/// Argv staged at execve entry, keyed by thread id until the exec completes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ArgvStage {
    pub argc: u32,
    pub argv_kept: u32,
    pub argv_len: u32,
    pub argv_flags: u32,
    pub filename: [u8; FILENAME_MAX],
    pub argv: [u8; ARGV_BUF * 2],
}

/// Kernel struct offsets, read from BTF in user space at load time and
/// handed to the programs as globals. Names follow `struct.member`.
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
    };
}

// Safety: Offsets is repr(C) and made of u32s only, valid for any bit pattern.
#[cfg(feature = "user")]
unsafe impl aya::Pod for Offsets {}
