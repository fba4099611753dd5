//! The decider: one thread answering the group's permission events, by
//! "is the event's process in the tracked tree" alone. It never waits for
//! anything but the group: no store, no path text, no lock.

use std::{
    collections::HashMap,
    os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use nix::{
    poll::{PollFd, PollFlags, PollTimeout, poll},
    sys::fanotify::{Fanotify, FanotifyEvent, FanotifyResponse, MaskFlags, Response},
};

use super::{Denial, DenialKind, Plan, RULE_DENIED_EXECUTABLE, RULE_DENIED_PATH, Stats};

/// How often the loop looks at its stop flag while no event comes.
const POLL_MS: u16 = 100;

pub(super) struct Decider {
    group: Fanotify,
    tracked: OwnedFd,
    /// (kind, dev, ino) → (path at start, rule).
    known: HashMap<(DenialKind, i64, i64), (String, String)>,
    sink: Box<dyn FnMut(Denial) -> bool + Send>,
    stats: Arc<Stats>,
}

impl Decider {
    pub(super) fn new(
        group: Fanotify,
        tracked: OwnedFd,
        plan: &Plan,
        sink: Box<dyn FnMut(Denial) -> bool + Send>,
        stats: Arc<Stats>,
    ) -> Self {
        let known = plan
            .files
            .iter()
            .map(|t| ((t.kind, t.dev, t.ino), (t.path.clone(), t.rule.clone())))
            .collect();
        Self {
            group,
            tracked,
            known,
            sink,
            stats,
        }
    }

    /// Answers events until `stop` is set; then the group is closed (with
    /// `self`), and its marks with it.
    pub(super) fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            let mut fds = [PollFd::new(self.group.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(POLL_MS)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    tracing::error!("enforce: poll of the fanotify group failed: {e}");
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            let events = match self.group.read_events() {
                Ok(ev) => ev,
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
                Err(e) => {
                    tracing::error!("enforce: reading the fanotify group failed: {e}");
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            for ev in events {
                // The event (and its fd) is dropped, so closed, at the end
                // of each iteration, whatever happened.
                self.answer(&ev);
            }
        }
    }

    /// Answers one event at once, then hands over the evidence.
    fn answer(&mut self, ev: &FanotifyEvent) {
        let Some(fd) = ev.fd() else {
            // Queue overflow: no permission event is ever dropped by the
            // kernel, but say it.
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if !ev.check_version() {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        let pid = ev.pid().max(0) as u32;
        let deny = is_tracked(&self.tracked, pid);
        // Timed before the answer, while the process waits on it: a time
        // taken after could fall after the refused process ended (it exits
        // at once on EPERM while this thread is descheduled), and the
        // denial would name no process.
        let mono_ns = crate::clock::mono_now_ns();
        let verdict = if deny {
            Response::FAN_DENY
        } else {
            Response::FAN_ALLOW
        };
        if let Err(e) = self
            .group
            .write_response(FanotifyResponse::new(fd, verdict))
        {
            tracing::error!("enforce: answering pid {pid} failed: {e}");
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        if !deny {
            self.stats.allowed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let kind = if ev.mask().contains(MaskFlags::FAN_OPEN_EXEC_PERM) {
            DenialKind::Exec
        } else {
            DenialKind::Read
        };
        match kind {
            DenialKind::Exec => self.stats.execs.fetch_add(1, Ordering::Relaxed),
            _ => self.stats.reads.fetch_add(1, Ordering::Relaxed),
        };
        let denial = self.evidence(fd, kind, pid, mono_ns);
        if !(self.sink)(denial) {
            self.stats.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The denial's file by identity: (dev, ino) of the event's fd; its
    /// path as resolved at start, else (a file created later in a marked
    /// directory) the kernel's name for the fd.
    fn evidence(&self, fd: BorrowedFd<'_>, kind: DenialKind, pid: u32, mono_ns: u64) -> Denial {
        let (dev, ino) = nix::sys::stat::fstat(fd)
            .map(|st| (super::kernel_dev(st.st_dev), st.st_ino as i64))
            .unwrap_or((0, 0));
        let (path, rule) = self
            .known
            .get(&(kind, dev, ino))
            .cloned()
            .unwrap_or_else(|| {
                let path = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let rule = match kind {
                    DenialKind::Exec => RULE_DENIED_EXECUTABLE,
                    _ => RULE_DENIED_PATH,
                };
                (path, rule.to_owned())
            });
        Denial {
            kind,
            path,
            dev,
            ino,
            pid,
            mono_ns,
            rule,
            mechanism: super::MECHANISM,
            dest: None,
            repeat: 1,
        }
    }
}

/// Whether `pid` (a tgid) is in the kernel's tracked map: one
/// `BPF_MAP_LOOKUP_ELEM`, no other I/O.
fn is_tracked(map: &OwnedFd, pid: u32) -> bool {
    crate::capture::tracked::contains(map.as_raw_fd(), pid)
}
