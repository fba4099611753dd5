//! The end of a turn's processes, wherever they went. A tool that leaves
//! the agent's process group (`setsid`, `setpgid`) or double-forks is out
//! of reach of `killpg`; with us as the child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), an orphan in the agent's tree is reparented
//! to us instead of to init, so the turn's processes are always the
//! agent's descendants plus the orphans we adopted — found in /proc by
//! parent, killed until none runs, and the adopted ones reaped.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::raw::c_long;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use procfs::process::{ProcState, Process, all_processes};

/// The longest a sweep keeps killing (a process in uninterruptible sleep
/// dies only when it wakes).
const BOUND: Duration = Duration::from_secs(3);
/// Between two passes: what a killed process needs to become a zombie.
const PAUSE: Duration = Duration::from_millis(5);

/// Makes this process the child subreaper of everything it starts (once;
/// the setting is per process and not inherited by our children).
pub fn become_subreaper() -> std::io::Result<()> {
    static DONE: OnceLock<Result<(), i32>> = OnceLock::new();
    let r = DONE.get_or_init(|| {
        // Safety: prctl with plain integer arguments.
        match unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) } {
            0 => Ok(()),
            _ => Err(Errno::last_raw()),
        }
    });
    r.map_err(std::io::Error::from_raw_os_error)
}

/// One process as a sweep sees it.
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: i32,
    ppid: i32,
    session: i32,
    /// Since boot, in clock ticks: with the pid, the process's identity.
    start: u64,
    zombie: bool,
}

fn processes() -> Vec<Proc> {
    let Ok(all) = all_processes() else {
        return Vec::new();
    };
    all.filter_map(Result::ok)
        .filter_map(|p| p.stat().ok())
        .map(|s| Proc {
            pid: s.pid,
            ppid: s.ppid,
            session: s.session,
            start: s.starttime,
            zombie: matches!(s.state(), Ok(ProcState::Zombie | ProcState::Dead)),
        })
        .collect()
}

/// `roots` and all their descendants in `procs`.
fn trees(procs: &[Proc], roots: &[i32]) -> Vec<Proc> {
    let mut children: HashMap<i32, Vec<&Proc>> = HashMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut stack: Vec<&Proc> = procs.iter().filter(|p| roots.contains(&p.pid)).collect();
    while let Some(p) = stack.pop() {
        if seen.insert(p.pid) {
            out.push(*p);
            stack.extend(children.get(&p.pid).into_iter().flatten());
        }
    }
    out
}

/// The orphans we adopted: children of ours outside our own session (a
/// provider's descendants can never join it: each provider starts a
/// session of its own), other than `provider` and the still running
/// providers `live`.
fn adopted(procs: &[Proc], provider: i32, live: &[u32]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let own_session = nix::unistd::getsid(None).map_or(-1, Pid::as_raw);
    procs
        .iter()
        .filter(|p| p.ppid == me && p.session != own_session && p.pid != provider)
        .filter(|p| !live.contains(&(p.pid as u32)))
        .map(|p| p.pid)
        .collect()
}

/// Whether `p`'s pid still names the process `p` saw (its start time).
fn same_process(p: &Proc) -> bool {
    Process::new(p.pid)
        .and_then(|q| q.stat())
        .is_ok_and(|s| s.starttime == p.start)
}

/// SIGKILL to exactly the process `p` saw: through a pidfd opened and then
/// checked to be the same process, so a pid reused since the snapshot is
/// never hit. Without pidfds (a kernel before 5.3, a seccomp filter that
/// refuses them), `kill` right after the same check.
fn kill_exact(p: &Proc) -> Result<(), Errno> {
    // Safety: pidfd_open(pid, 0) returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p.pid, 0) };
    if fd < 0 {
        return match Errno::last() {
            Errno::ESRCH => Ok(()),
            Errno::ENOSYS | Errno::EPERM if same_process(p) => {
                match nix::sys::signal::kill(Pid::from_raw(p.pid), Signal::SIGKILL) {
                    Ok(()) | Err(Errno::ESRCH) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Errno::ENOSYS | Errno::EPERM => Ok(()),
            e => Err(e),
        };
    }
    // Safety: a descriptor just returned to us, owned once.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    if !same_process(p) {
        return Ok(());
    }
    use std::os::fd::AsRawFd;
    // Safety: pidfd_send_signal(fd, sig, NULL, 0) on our open pidfd.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL as c_long,
            std::ptr::null::<libc::siginfo_t>(),
            0 as c_long,
        )
    };
    match (r, Errno::last()) {
        (0, _) | (_, Errno::ESRCH) => Ok(()),
        (_, e) => Err(e),
    }
}

/// Kills `provider`'s process tree and, with `adopted_too` (no other turn
/// is running: what we adopted can only be this turn's), every orphan we
/// adopted with its tree; pass after pass until none of them runs, then
/// reaps the adopted ones. `live`: the providers of turns still running,
/// never touched. The provider itself is left to its owner to reap.
pub fn end_turn(provider: u32, adopted_too: bool, live: &[u32]) {
    let provider = provider as i32;
    let until = Instant::now() + BOUND;
    // Processes we may not signal (a set-uid program the agent ran).
    let mut refused: HashSet<(i32, u64)> = HashSet::new();
    loop {
        let procs = processes();
        let mut roots = vec![provider];
        if adopted_too {
            roots.extend(adopted(&procs, provider, live));
        }
        let running: Vec<Proc> = trees(&procs, &roots)
            .into_iter()
            .filter(|p| !p.zombie && !refused.contains(&(p.pid, p.start)))
            .collect();
        if running.is_empty() {
            break;
        }
        if Instant::now() >= until {
            tracing::warn!(
                left = running.len(),
                "session message: processes of the turn still running after {BOUND:?} of SIGKILL"
            );
            break;
        }
        for p in &running {
            if kill_exact(p).is_err() {
                refused.insert((p.pid, p.start));
            }
        }
        std::thread::sleep(PAUSE);
    }
    if adopted_too {
        for pid in adopted(&processes(), provider, live) {
            let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: i32, ppid: i32) -> Proc {
        Proc {
            pid,
            ppid,
            session: 1,
            start: 0,
            zombie: false,
        }
    }

    #[test]
    fn a_tree_is_its_roots_and_every_descendant() {
        let procs = [
            proc(10, 1),
            proc(11, 10),
            proc(12, 11),
            proc(13, 1),
            proc(14, 13),
            proc(15, 10),
        ];
        let mut pids: Vec<i32> = trees(&procs, &[10]).iter().map(|p| p.pid).collect();
        pids.sort();
        assert_eq!(pids, vec![10, 11, 12, 15]);
        let mut pids: Vec<i32> = trees(&procs, &[12, 13]).iter().map(|p| p.pid).collect();
        pids.sort();
        assert_eq!(pids, vec![12, 13, 14]);
        assert!(trees(&procs, &[99]).is_empty());
    }
}
