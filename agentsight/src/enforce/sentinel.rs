//! The backstop if the decider dies: a separate process holding the
//! fanotify group and the tracked map, which stops the recorded tree when
//! the recorder ends without saying so.
//!
//! fanotify fails open when its group closes: the marks vanish and waiting
//! opens are answered *allow*. The group closes when its last descriptor
//! does, so the sentinel keeps one: if the recorder is killed (SIGKILL, a
//! crash, the OOM killer), the marks stay and every permission event stays
//! unanswered — the tree's opens of denied files wait, they never succeed.
//! The sentinel sees the recorder's end as end-of-file on a pipe whose
//! write end only the recorder holds, freezes the tree (SIGSTOP: no more
//! forks), kills it (SIGKILL ends a wait on a permission event too), waits
//! until none of it runs, and only then lets its descriptor of the group
//! go. A recorder stopping normally writes [`RELEASED`] first: the sentinel
//! then leaves the tree alone.
//!
//! The tree is the kernel's tracked map (its programs are gone with the
//! recorder, so a child forked after the recorder's end is not in it) plus
//! every process whose parent is a stopped one, to a fixed point.

use std::{
    collections::BTreeSet,
    ffi::OsString,
    io::Read,
    os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd},
    os::unix::process::CommandExt,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::EnforceError;

/// The byte a recorder stopping normally writes before closing the pipe.
pub const RELEASED: u8 = b'R';

/// The hidden subcommand that runs [`watch`].
pub const SUBCOMMAND: &str = "enforce-sentinel";

/// How long the sentinel waits for the killed tree to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// The recorder's side: the sentinel process and the pipe's write end.
pub struct Sentinel {
    child: Child,
    release: Option<OwnedFd>,
}

/// What the sentinel did when the recorder ended without releasing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backstop {
    /// The processes of the tree stopped and killed.
    pub killed: Vec<u32>,
    /// Those still running when the sentinel gave up waiting.
    pub still_running: Vec<u32>,
}

impl Sentinel {
    /// Starts `exe SUBCOMMAND …` with the group, the tracked map and the
    /// pipe's read end (inherited: only these and `held` lose close-on-exec,
    /// in the child). `held` are kept open, unnamed, as long as the sentinel
    /// lives (the network programs' links: attached while any descriptor of
    /// them is open). `capture` is passed on, for the sentinel to note what
    /// it did.
    pub fn spawn(
        exe: &Path,
        group: BorrowedFd<'_>,
        tracked: BorrowedFd<'_>,
        held: &[BorrowedFd<'_>],
        capture: Option<&Path>,
        best_effort: bool,
    ) -> Result<Self, EnforceError> {
        let unavailable = |reason: String| EnforceError::Unavailable {
            rule: "the decider's backstop".to_owned(),
            reason,
        };
        let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| unavailable(format!("pipe: {e}")))?;
        let fds = [group.as_raw_fd(), tracked.as_raw_fd(), read_end.as_raw_fd()];
        let inherited: Vec<RawFd> = fds
            .iter()
            .copied()
            .chain(held.iter().map(|f| f.as_raw_fd()))
            .collect();
        let mut args: Vec<OsString> = vec![
            SUBCOMMAND.into(),
            "--group".into(),
            fds[0].to_string().into(),
            "--tracked".into(),
            fds[1].to_string().into(),
            "--released".into(),
            fds[2].to_string().into(),
            "--recorder".into(),
            std::process::id().to_string().into(),
        ];
        if let Some(c) = capture {
            args.extend(["--db".into(), c.as_os_str().to_owned()]);
        }
        if best_effort {
            args.push("--best-effort".into());
        }
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .env("RUST_LOG", "warn");
        // Safety: only async-signal-safe calls (fcntl, setsid) between fork
        // and exec.
        unsafe {
            cmd.pre_exec(move || {
                for &fd in &inherited {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                // Out of the terminal's process group: a Ctrl-C meant for
                // the recorder never ends the backstop first.
                libc::setsid();
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| unavailable(format!("start {}: {e}", exe.display())))?;
        drop(read_end);
        Ok(Self {
            child,
            release: Some(write_end),
        })
    }

    /// Tells the sentinel the recorder stops normally and waits for it to
    /// end (its descriptor of the group closes with it).
    pub fn release(mut self) {
        self.release_now();
    }

    fn release_now(&mut self) {
        if let Some(w) = self.release.take() {
            let _ = nix::unistd::write(&w, &[RELEASED]);
            drop(w);
            if let Err(e) = self.child.wait() {
                tracing::warn!("the enforce sentinel: {e}");
            }
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.release_now();
    }
}

/// The sentinel's body: waits for the recorder's word; on end-of-file
/// without it, stops the tree. `None`: released normally.
pub fn watch(released: RawFd, tracked: RawFd) -> Option<Backstop> {
    // Safety: the descriptor was handed over by the recorder for this
    // process alone.
    let mut pipe = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(released) };
    let mut byte = [0u8; 1];
    loop {
        match pipe.read(&mut byte) {
            Ok(1) if byte[0] == RELEASED => return None,
            Ok(1) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // End of file (or a read error): the recorder is gone.
            _ => break,
        }
    }
    Some(stop_tree(tracked))
}

/// Freezes the tree to a fixed point (the tracked map, then children of
/// stopped processes), kills it, and waits until none of it runs.
fn stop_tree(tracked: RawFd) -> Backstop {
    let own = std::process::id();
    let mut stopped: BTreeSet<u32> = BTreeSet::new();
    loop {
        let mut new: BTreeSet<u32> = crate::capture::tracked::pids(tracked).into_iter().collect();
        new.extend(children_of(&stopped));
        new.retain(|p| *p != own && !stopped.contains(p));
        if new.is_empty() {
            break;
        }
        for &p in &new {
            let _ = kill(Pid::from_raw(p as i32), Signal::SIGSTOP);
        }
        stopped.extend(new);
    }
    for &p in &stopped {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
    }
    let deadline = Instant::now() + GONE_WITHIN;
    let mut running: Vec<u32> = stopped.iter().copied().collect();
    while !running.is_empty() && Instant::now() < deadline {
        running.retain(|&p| is_running(p));
        std::thread::sleep(Duration::from_millis(5));
    }
    Backstop {
        killed: stopped.into_iter().collect(),
        still_running: running,
    }
}

/// The processes whose parent is one of `parents`, from `/proc`.
fn children_of(parents: &BTreeSet<u32>) -> Vec<u32> {
    if parents.is_empty() {
        return Vec::new();
    }
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.filter_map(|p| p.ok()?.stat().ok())
        .filter(|s| u32::try_from(s.ppid).is_ok_and(|pp| parents.contains(&pp)))
        .filter_map(|s| u32::try_from(s.pid).ok())
        .collect()
}

/// Whether `pid` still runs code: present and not a zombie.
fn is_running(pid: u32) -> bool {
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .is_ok_and(|s| s.state != 'Z' && s.state != 'X')
}
