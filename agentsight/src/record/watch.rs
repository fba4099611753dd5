//! Waiting for the end of the run (the command exits, a signal, the
//! duration, the last container) while doing the periodic work.

use std::{
    process::Child,
    sync::{
        Arc,
        atomic::{AtomicI32, Ordering},
    },
    time::{Duration, Instant},
};

use crate::{
    capture::{
        container::{self, ContainerInfo},
        reader::ReaderStats,
    },
    clock::{Anchor, mono_now_ns},
    store::StoreMsg,
};

use super::{
    Notice, RecordError, RecordOptions, host_agent,
    outcome::shell_status,
    tracker::{Tracker, tracked_count},
};

/// Signals that ask us to stop, counted by the handler thread.
pub(super) struct Signals {
    pub(super) interrupt: Arc<AtomicI32>,
    pub(super) terminate: Arc<AtomicI32>,
}

pub(super) fn install_signals() -> Result<Signals, RecordError> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let interrupt = Arc::new(AtomicI32::new(0));
    let terminate = Arc::new(AtomicI32::new(0));
    let mut sigs = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| RecordError::Other(format!("cannot install signal handlers: {e}")))?;
    let (i, t) = (interrupt.clone(), terminate.clone());
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for s in sigs.forever() {
                if s == SIGINT {
                    i.fetch_add(1, Ordering::SeqCst);
                } else {
                    t.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
        .map_err(|e| RecordError::Other(format!("cannot start signal thread: {e}")))?;
    Ok(Signals {
        interrupt,
        terminate,
    })
}

/// How long the root command's environment is watched for its TMPDIR.
pub(super) const TMPDIR_WINDOW: Duration = Duration::from_secs(1);

/// How the watched run ended.
pub(super) struct Watched {
    pub(super) end_reason: String,
    pub(super) command_status: Option<i32>,
    /// /proc/PID/fd evidence for session matching (see `matching`).
    pub(super) fd_obs: Vec<crate::matching::FdObservation>,
    pub(super) started: Instant,
}

/// Why the run stops now, from the signals counted so far.
///
/// With a command, Ctrl-C reaches it through the terminal and it decides;
/// SIGTERM/SIGHUP are passed on. We stop when it exits, or 5 s after a
/// forwarded signal, or at a second Ctrl-C.
pub(super) fn stop_by_signal(
    signals: &Signals,
    child: Option<&Child>,
    term_forwarded_at: &mut Option<Instant>,
) -> Option<String> {
    let ints = signals.interrupt.load(Ordering::SeqCst);
    let terms = signals.terminate.load(Ordering::SeqCst);
    let Some(c) = child else {
        return (ints > 0 || terms > 0).then(|| "stopped by signal".into());
    };
    if terms > 0 && term_forwarded_at.is_none() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        *term_forwarded_at = Some(Instant::now());
    }
    if ints > 1 {
        return Some("interrupted twice".into());
    }
    if ints == 1 && term_forwarded_at.is_none() {
        *term_forwarded_at = Some(Instant::now());
    }
    term_forwarded_at
        .is_some_and(|t| t.elapsed() > Duration::from_secs(5))
        .then(|| "stopped by signal; the command did not exit within 5 s".into())
}

/// The main thread's periodic work while the run lasts.
pub(super) struct Periodic {
    pub(super) status: Instant,
    pub(super) events: u64,
    pub(super) anchor: Instant,
    pub(super) scan: Instant,
    pub(super) fd_scan: Instant,
    pub(super) tls_scan: Instant,
}

impl Periodic {
    pub(super) fn new() -> Self {
        let now = Instant::now();
        Self {
            status: now,
            events: 0,
            anchor: now,
            scan: now,
            fd_scan: now,
            tls_scan: now,
        }
    }

    pub(super) fn tick(&mut self, w: &mut WatchCtx<'_>) {
        if let Some(live) = &w.opts.live
            && live.anchor_request.swap(false, Ordering::AcqRel)
        {
            let _ = w.tracker.tx.send(StoreMsg::Anchor(Anchor::now("live")));
        }
        if let Some(agent) = host_agent(w.opts)
            && self.scan.elapsed() >= Duration::from_millis(250)
        {
            w.tracker.scan_agents(agent, w.notify);
            self.scan = Instant::now();
        }
        if self.status.elapsed() >= Duration::from_secs(1) {
            let loss = w.tracker.probes.loss_counts();
            let lost: u64 = loss.iter().map(|(_, n)| n).sum();
            let _ = w.tracker.tx.send(StoreMsg::Loss(loss));
            let events = w.stats.events.load(Ordering::Relaxed);
            let rate = (events - self.events) as f64 / self.status.elapsed().as_secs_f64();
            self.events = events;
            (w.notify)(Notice::Status {
                elapsed: w.started.elapsed(),
                processes: tracked_count(&w.tracker.probes),
                events_per_s: rate,
                lost,
            });
            self.status = Instant::now();
        }
        if w.tracker.tls.is_some() && self.tls_scan.elapsed() >= Duration::from_millis(10) {
            let pids: Vec<u32> = w
                .tracker
                .probes
                .tracked
                .keys()
                .filter_map(|k| k.ok())
                .collect();
            w.tracker.tls_tick(&pids);
            self.tls_scan = Instant::now();
        }
        if self.fd_scan.elapsed() >= Duration::from_secs(1) {
            let pids: Vec<u32> = w
                .tracker
                .probes
                .tracked
                .keys()
                .filter_map(|k| k.ok())
                .collect();
            let before = w.fd_obs.len();
            crate::matching::scan_fds(&pids, mono_now_ns(), w.fd_obs);
            if let Some(live) = &w.opts.live
                && let Ok(mut shared) = live.fd_observations.lock()
            {
                shared.extend_from_slice(&w.fd_obs[before..]);
            }
            self.fd_scan = Instant::now();
        }
        if self.anchor.elapsed() >= Duration::from_secs(10) {
            let _ = w.tracker.tx.send(StoreMsg::Anchor(Anchor::now("periodic")));
            self.anchor = Instant::now();
        }
    }
}

/// What the periodic work reaches.
pub(super) struct WatchCtx<'a> {
    pub(super) opts: &'a RecordOptions,
    pub(super) tracker: &'a mut Tracker,
    pub(super) stats: &'a ReaderStats,
    pub(super) notify: &'a mut dyn FnMut(Notice),
    pub(super) fd_obs: &'a mut Vec<crate::matching::FdObservation>,
    pub(super) started: Instant,
}

/// Waits for the end of the run (the command exits, a signal, the
/// duration) while doing the periodic work.
pub(super) fn watch(
    opts: &RecordOptions,
    signals: &Signals,
    mut child: Option<Child>,
    tracker: &mut Tracker,
    stats: &ReaderStats,
    only_containers: Option<&[ContainerInfo]>,
    notify: &mut dyn FnMut(Notice),
) -> Watched {
    let started = Instant::now();
    let mut containers_checked = started;
    let mut fd_obs = Vec::new();
    let mut periodic = Periodic::new();
    let mut command_status = None;
    let mut term_forwarded_at = None;
    let end_reason = loop {
        // Every 2 ms while the command's TMPDIR is watched (a short command
        // may exec its wrapper's target and finish within a few ms), then 50.
        std::thread::sleep(if child.is_some() && started.elapsed() < TMPDIR_WINDOW {
            Duration::from_millis(2)
        } else {
            Duration::from_millis(50)
        });
        if let Some(c) = child.as_mut() {
            match c.try_wait() {
                Ok(Some(status)) => {
                    command_status = Some(shell_status(status));
                    break "command exited".to_string();
                }
                Ok(None) => {}
                Err(e) => break format!("cannot wait for the command: {e}"),
            }
        }
        if let Some(why) = stop_by_signal(signals, child.as_ref(), &mut term_forwarded_at) {
            break why;
        }
        if opts
            .live
            .as_ref()
            .is_some_and(|l| l.stop.load(Ordering::Acquire))
        {
            break "stopped by its caller".to_string();
        }
        // A wrapper (`env TMPDIR=… agent`, `sh -c 'TMPDIR=… exec agent'`)
        // sets the command's TMPDIR after we started it: read the root's
        // environment as its execs leave it, for its first second only (a
        // later re-exec cannot widen what the audit allows). The child is
        // not reaped yet (try_wait above said so): its pid is still its own.
        if let Some(c) = child.as_ref()
            && started.elapsed() < TMPDIR_WINDOW
        {
            tracker.note_environment(c.id());
        }
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break "duration reached".to_string();
        }
        // Recording only containers: the run ends with the last of them.
        if let Some(cs) = only_containers
            && containers_checked.elapsed() >= Duration::from_millis(250)
        {
            containers_checked = Instant::now();
            if containers_stopped(cs) {
                break "every container stopped".to_string();
            }
        }
        periodic.tick(&mut WatchCtx {
            opts,
            tracker,
            stats,
            notify,
            fd_obs: &mut fd_obs,
            started,
        });
    };
    notify(Notice::Stopped);
    Watched {
        end_reason,
        command_status,
        fd_obs,
        started,
    }
}

/// True once no recorded container has a process left (its cgroup is
/// empty or gone).
pub(super) fn containers_stopped(containers: &[ContainerInfo]) -> bool {
    containers
        .iter()
        .all(|c| container::cgroup_pids(&c.cgroup_dir).is_none_or(|pids| pids.is_empty()))
}
