//! `record --enforce`: denied reads and denied executables refused before
//! they happen, for the recorded tree only, by fanotify permission events
//! (see `docs/enforce.md`).
//!
//! At start every denied file's inode gets a `FAN_OPEN_PERM` mark, every
//! directory a pattern covers entirely a `FAN_OPEN_PERM |
//! FAN_EVENT_ON_CHILD` mark, and every denied executable's inode a
//! `FAN_OPEN_EXEC_PERM` mark, in one `FAN_CLASS_CONTENT` group. The decider
//! (`decider`) answers each permission event by one fact only: is the
//! event's process in the kernel's tracked set (the `TRACKED` map, read
//! with one `bpf(2)` lookup) — `FAN_DENY` if so, `FAN_ALLOW` otherwise —
//! and hands the denial to its sink without ever waiting for it.
//!
//! This module knows nothing of captures: the recorder resolves the policy
//! into a [`Plan`] and stores the [`Denial`]s the sink is given.

mod decider;
pub mod landlock;
pub mod network;
pub mod sentinel;

use std::{
    os::fd::{AsFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
};

use nix::sys::fanotify::{EventFFlags, Fanotify, InitFlags, MarkFlags, MaskFlags};

/// The rule id of a denied read (the policy's `[denied_paths]` rule).
pub const RULE_DENIED_PATH: &str = "denied-path";
/// The rule id of a denied exec (the policy's `[executables]` rule).
pub const RULE_DENIED_EXECUTABLE: &str = "denied-executable";
/// The mechanism a denied read or exec names.
pub const MECHANISM: &str = "fanotify";

/// What a denial refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenialKind {
    Read,
    /// A write outside the allowed roots (Landlock).
    Write,
    Exec,
    /// A connect (TCP, or a UDP socket's default destination).
    Connect,
    /// A datagram sent to an explicit destination.
    Send,
}

impl DenialKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Exec => "exec",
            Self::Connect => "connect",
            Self::Send => "send",
        }
    }

    /// A read or an exec: refused on the file's inode, whose device and
    /// inode the denial names (a write names only its path).
    pub fn by_identity(self) -> bool {
        matches!(self, Self::Read | Self::Exec)
    }

    /// A connect or a send (its denial names a destination, not a file).
    pub fn is_network(self) -> bool {
        matches!(self, Self::Connect | Self::Send)
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "read" => Some(Self::Read),
            "write" => Some(Self::Write),
            "exec" => Some(Self::Exec),
            "connect" => Some(Self::Connect),
            "send" => Some(Self::Send),
            _ => None,
        }
    }
}

/// One file to mark, as resolved when recording starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: DenialKind,
    pub path: String,
    /// The kernel's device encoding (`sb->s_dev`, the capture's `dev`).
    pub dev: i64,
    pub ino: i64,
    /// The policy rule the mark enforces (`denied-path`, …).
    pub rule: String,
}

/// Everything to mark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub files: Vec<Target>,
    /// Directories a read pattern covers entirely (`~/.ssh/**`): their
    /// immediate children, existing or created later, are denied too.
    pub dirs: Vec<(String, String)>,
    /// The `[network]` rules, when enforced (`network`).
    pub network: Option<network::NetPlan>,
    /// Writes outside the allowed roots, when enforced (`landlock`).
    pub writes: Option<landlock::WritePlan>,
}

/// One access refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub kind: DenialKind,
    /// The path resolved at start; for a file created later in a marked
    /// directory, the kernel's name for the event's file; empty for a
    /// connect or a send (`dest`).
    pub path: String,
    pub dev: i64,
    pub ino: i64,
    pub pid: u32,
    /// CLOCK_MONOTONIC ns of the decision.
    pub mono_ns: u64,
    pub rule: String,
    /// [`MECHANISM`] or [`network::MECHANISM`].
    pub mechanism: &'static str,
    /// A refused connect's or send's destination.
    pub dest: Option<network::Destination>,
    /// How many calls it stands for: 1, or for a write Landlock refused,
    /// the stored call's `repeat` (identical failures back to back, one
    /// row).
    pub repeat: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum EnforceError {
    #[error("--enforce: cannot enforce {rule}: {reason}")]
    Unavailable { rule: String, reason: String },
    #[error("--enforce: cannot start the decider thread: {0}")]
    Thread(std::io::Error),
}

/// Counts kept by the decider, read at the end.
#[derive(Debug, Default)]
pub struct Stats {
    pub reads: AtomicU64,
    pub execs: AtomicU64,
    pub allowed: AtomicU64,
    /// Denials the sink refused (its queue was full): counted, never silent.
    pub lost: AtomicU64,
    /// Events the decider could not read (queue overflow, bad version).
    pub errors: AtomicU64,
}

/// The counts at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub reads: u64,
    /// Writes Landlock refused (read from the capture at the end).
    pub writes: u64,
    pub execs: u64,
    pub connects: u64,
    pub sends: u64,
    pub allowed: u64,
    pub lost: u64,
    pub errors: u64,
}

impl Totals {
    /// "enforce: 3 accesses blocked (2 reads, 1 exec)", with the writes
    /// when they were enforced (`writes`), the connects and sends when the
    /// network rules were (`network`).
    pub fn summary(&self, writes: bool, network: bool) -> String {
        let n = self.reads + self.writes + self.execs + self.connects + self.sends;
        let plural =
            |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut parts = vec![plural(self.reads, "read", "reads")];
        if writes {
            parts.push(plural(self.writes, "write", "writes"));
        }
        parts.push(plural(self.execs, "exec", "execs"));
        if network {
            parts.push(plural(self.connects, "connect", "connects"));
            parts.push(plural(self.sends, "send", "sends"));
        }
        let mut s = format!(
            "enforce: {} blocked ({})",
            plural(n, "access", "accesses"),
            parts.join(", ")
        );
        if self.lost > 0 {
            s += &format!(", {} not stored (queue full)", self.lost);
        }
        s
    }
}

/// A running enforcement: the group (its marks live as long as it does)
/// and the decider thread.
pub struct Enforcer {
    /// Holds the group too, and stops the tree if the recorder ends
    /// without releasing it (`sentinel`).
    sentinel: Option<sentinel::Sentinel>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<Stats>,
    /// Rules whose marks the kernel refused (`best_effort` only): audited,
    /// not enforced.
    pub refused: Vec<String>,
}

/// The fanotify group with its marks placed.
fn marked(plan: &Plan, best_effort: bool) -> Result<(Fanotify, Vec<String>), EnforceError> {
    let group = Fanotify::init(
        InitFlags::FAN_CLASS_CONTENT | InitFlags::FAN_CLOEXEC,
        EventFFlags::O_RDONLY | EventFFlags::O_LARGEFILE | EventFFlags::O_CLOEXEC,
    )
    .map_err(|e| EnforceError::Unavailable {
        rule: plan
            .files
            .first()
            .map_or(RULE_DENIED_PATH.to_owned(), |t| t.rule.clone()),
        reason: format!(
            "fanotify_init: {e}{}",
            if e == nix::errno::Errno::EPERM {
                " (needs CAP_SYS_ADMIN: run as root)"
            } else {
                ""
            }
        ),
    })?;
    let mut refused = Vec::new();
    let mut place = |rule: &str, path: &str, mask: MaskFlags| -> Result<(), EnforceError> {
        let r = group.mark(
            MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_DONT_FOLLOW,
            mask,
            nix::fcntl::AT_FDCWD,
            Some(path),
        );
        match r {
            Ok(()) => Ok(()),
            Err(e) if best_effort => {
                tracing::warn!("fanotify mark on {path} refused: {e}");
                refused.push(format!("{rule} ({path}: fanotify_mark: {e})"));
                Ok(())
            }
            Err(e) => Err(EnforceError::Unavailable {
                rule: format!("{rule} for {path}"),
                reason: format!("fanotify_mark: {e}"),
            }),
        }
    };
    for t in &plan.files {
        // A target is a file: a read or an exec.
        let mask = match t.kind {
            DenialKind::Exec => MaskFlags::FAN_OPEN_EXEC_PERM,
            _ => MaskFlags::FAN_OPEN_PERM,
        };
        place(&t.rule, &t.path, mask)?;
    }
    for (dir, rule) in &plan.dirs {
        place(
            rule,
            dir,
            MaskFlags::FAN_OPEN_PERM | MaskFlags::FAN_EVENT_ON_CHILD,
        )?;
    }
    Ok((group, refused))
}

impl Enforcer {
    /// Places every mark of `plan` and starts the decider. `tracked` is a
    /// descriptor of the kernel's tracked-tgid map; `sink` takes a denial
    /// without blocking and says whether it took it. Without `best_effort`
    /// a mark the kernel refuses fails the start (nothing is marked then:
    /// the group goes with the error). `backstop`: the executable to start
    /// the sentinel with, and the capture it notes a stopped tree in;
    /// `held`: more descriptors the sentinel keeps open as long as it
    /// lives (the network programs' links: attached while it holds them).
    pub fn start(
        plan: &Plan,
        tracked: OwnedFd,
        sink: Box<dyn FnMut(Denial) -> bool + Send>,
        best_effort: bool,
        backstop: Option<(&std::path::Path, Option<&std::path::Path>)>,
        held: &[std::os::fd::BorrowedFd<'_>],
    ) -> Result<Self, EnforceError> {
        let (group, mut refused) = marked(plan, best_effort)?;
        let sentinel = match backstop {
            None => None,
            Some((exe, capture)) => {
                match sentinel::Sentinel::spawn(
                    exe,
                    group.as_fd(),
                    tracked.as_fd(),
                    held,
                    capture,
                    best_effort,
                ) {
                    Ok(s) => Some(s),
                    Err(e) if best_effort => {
                        refused.push(e.to_string());
                        None
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Stats::default());
        let decider = decider::Decider::new(group, tracked, plan, sink, stats.clone());
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("enforce".into())
            .spawn(move || decider.run(&s))
            .map_err(EnforceError::Thread)?;
        Ok(Self {
            sentinel,
            stop,
            thread: Some(thread),
            stats,
            refused,
        })
    }

    /// Releases the sentinel, then stops the decider (its group closes:
    /// the marks vanish) and returns the counts.
    pub fn stop(mut self) -> Totals {
        if let Some(s) = self.sentinel.take() {
            s.release();
        }
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the enforce decider panicked");
        }
        let n = |a: &AtomicU64| a.load(Ordering::Acquire);
        Totals {
            writes: 0,
            connects: 0,
            sends: 0,
            reads: n(&self.stats.reads),
            execs: n(&self.stats.execs),
            allowed: n(&self.stats.allowed),
            lost: n(&self.stats.lost),
            errors: n(&self.stats.errors),
        }
    }
}

impl Drop for Enforcer {
    fn drop(&mut self) {
        drop(self.sentinel.take());
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A user-space `dev_t` as the kernel stores it in `sb->s_dev`
/// (`MKDEV(major, minor)` = major << 20 | minor), the capture's encoding.
pub fn kernel_dev(dev: u64) -> i64 {
    let (major, minor) = (libc::major(dev) as i64, libc::minor(dev) as i64);
    (major << 20) | minor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_reads_and_execs() {
        let t = Totals {
            reads: 2,
            execs: 1,
            ..Totals::default()
        };
        assert_eq!(
            t.summary(false, false),
            "enforce: 3 accesses blocked (2 reads, 1 exec)"
        );
        let t = Totals {
            writes: 2,
            ..Totals::default()
        };
        assert_eq!(
            t.summary(true, false),
            "enforce: 2 accesses blocked (0 reads, 2 writes, 0 execs)"
        );
        let t = Totals {
            reads: 1,
            connects: 2,
            ..Totals::default()
        };
        assert_eq!(
            t.summary(true, true),
            "enforce: 3 accesses blocked (1 read, 0 writes, 0 execs, 2 connects, 0 sends)"
        );
        let t = Totals {
            reads: 1,
            lost: 4,
            ..Totals::default()
        };
        assert_eq!(
            t.summary(false, false),
            "enforce: 1 access blocked (1 read, 0 execs), 4 not stored (queue full)"
        );
    }
}
