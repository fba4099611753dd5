//! `--enforce` around the recording: the marks placed and the decider
//! started once the kernel's tracked map exists and before any process of
//! the tree runs; stopped, counted and summed up once the run ended.

use std::os::fd::AsFd;
use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, Ordering},
    mpsc::SyncSender,
};
use std::time::Duration;

use aya::maps::IterableMap;

use crate::{
    enforce::{Denial, Enforcer, network::NetEnforcement},
    store::{StoreMsg, Writer, enforcement::EnforcementMeta, meta::key},
};

use super::{Notice, RecordError, RecordOptions, tracker::Tracker};

/// Denials waiting for the writer: a burst (a tool retrying a refused open
/// in a loop) is held here, not dropped, up to this many.
const PENDING_DENIALS: usize = 262_144;

/// How often the forwarder hands the pending denials to the writer.
const FORWARD_EVERY: Duration = Duration::from_millis(50);

/// `--enforce` while recording: the decider, and the thread that forwards
/// its denials to the writer in batches (one message and one transaction
/// per batch: a denial per message filled the writer's queue in a burst,
/// and the rest were lost).
pub(super) struct Enforcing {
    enforcer: Option<Enforcer>,
    /// The network programs (with `[network]` enforced): their refusals are
    /// drained by the forwarder.
    net: Option<Arc<Mutex<NetEnforcement>>>,
    /// With `best-effort`: why the network rules could not be enforced.
    net_refused: Option<String>,
    forwarder: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Enforcing {
    /// `record --wire`'s relay: the agents' connections to it are allowed,
    /// as `audit` declares them.
    pub(super) fn allow_relay(
        &self,
        tracker: &mut Tracker,
        addr: std::net::SocketAddr,
    ) -> Result<(), RecordError> {
        let Some(net) = &self.net else {
            return Ok(());
        };
        lock(net)
            .allow(&mut tracker.probes, addr, &addr.to_string())
            .map_err(|e| RecordError::Other(format!("--enforce: the relay's address: {e}")))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Enforcing {
    /// Stops the forwarder after a last hand-over (the decider is stopped
    /// first by the caller, or never ran).
    fn stop_forwarder(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(f) = self.forwarder.take() {
            let _ = f.join();
        }
    }
}

impl Drop for Enforcing {
    fn drop(&mut self) {
        // The decider before the forwarder: no denial after the last
        // hand-over.
        drop(self.enforcer.take());
        self.stop_forwarder();
    }
}

/// Hands the pending denials to the writer every [`FORWARD_EVERY`] until
/// `stop`, then once more. It may wait on the writer's queue; the decider
/// never does (it only appends under the lock).
fn forward(
    pending: Arc<Mutex<Vec<Denial>>>,
    net: Option<Arc<Mutex<NetEnforcement>>>,
    tx: SyncSender<StoreMsg>,
    stop: Arc<AtomicBool>,
) {
    loop {
        let last = stop.load(Ordering::Acquire);
        let mut batch = std::mem::take(&mut *lock(&pending));
        if let Some(n) = &net {
            lock(n).drain(&mut batch);
        }
        if !batch.is_empty() && tx.send(StoreMsg::Denials(batch)).is_err() {
            return;
        }
        if last {
            return;
        }
        std::thread::sleep(FORWARD_EVERY);
    }
}

/// With `--enforce`: the marks placed and the decider running. Without
/// `best_effort`, a mark the kernel refuses fails the start.
pub(super) fn start(
    opts: &RecordOptions,
    tracker: &mut Tracker,
    writer: &Writer,
) -> Result<Option<Enforcing>, RecordError> {
    let Some(e) = &opts.enforce else {
        return Ok(None);
    };
    let tracked = tracker
        .probes
        .tracked
        .map()
        .fd()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|err| RecordError::Other(format!("--enforce: the tracked map: {err}")))?;
    let pending: Arc<Mutex<Vec<Denial>>> = Arc::default();
    let held = pending.clone();
    // Never waits: beyond PENDING_DENIALS the decider counts the loss.
    let sink = Box::new(move |d| {
        let mut p = held.lock().unwrap_or_else(|p| p.into_inner());
        let room = p.len() < PENDING_DENIALS;
        if room {
            p.push(d);
        }
        room
    });
    // The sentinel is this very program (a hidden subcommand).
    let exe = std::env::current_exe()
        .map_err(|err| RecordError::Other(format!("--enforce: this program's path: {err}")))?;
    let mut refused_net = None;
    let net = match &e.plan.network {
        None => None,
        Some(plan) => match NetEnforcement::attach(&mut tracker.probes, plan) {
            Ok(n) => Some(n),
            Err(why) if e.best_effort => {
                refused_net = Some(format!(
                    "{}, {} ({why})",
                    plan.denied_rule, plan.undeclared_rule
                ));
                None
            }
            Err(why) => {
                return Err(crate::enforce::EnforceError::Unavailable {
                    rule: format!("{}, {}", plan.denied_rule, plan.undeclared_rule),
                    reason: format!("the cgroup socket programs: {why}"),
                }
                .into());
            }
        },
    };
    let held = net.as_ref().map(|n| n.link_fds()).unwrap_or_default();
    let enforcer = Enforcer::start(
        &e.plan,
        tracked,
        sink,
        e.best_effort,
        Some((&exe, Some(&opts.output))),
        &held,
    )?;
    drop(held);
    let net = net.map(|n| Arc::new(Mutex::new(n)));
    let stop = Arc::new(AtomicBool::new(false));
    let forwarder = {
        let (tx, stop, net) = (writer.sender(), stop.clone(), net.clone());
        std::thread::Builder::new()
            .name("enforce-forward".into())
            .spawn(move || forward(pending, net, tx, stop))
            .map_err(|err| RecordError::Other(format!("--enforce: start a thread: {err}")))?
    };
    tracing::info!(
        "enforcing: {} files, {} directories marked",
        e.plan.files.len(),
        e.plan.dirs.len()
    );
    Ok(Some(Enforcing {
        enforcer: Some(enforcer),
        net,
        net_refused: refused_net,
        forwarder: Some(forwarder),
        stop,
    }))
}

/// Stops the decider; stores meta `enforcement` (and the denials not
/// stored as loss `enforcement_denial`) and says the summary.
pub(super) fn stop(
    opts: &RecordOptions,
    mut enforcing: Enforcing,
    writer: &Writer,
    notify: &mut dyn FnMut(Notice),
) {
    let Some(e) = &opts.enforce else {
        return;
    };
    // The decider first (no denial after), then the last hand-over.
    let Some(enforcer) = enforcing.enforcer.take() else {
        return;
    };
    let refused = enforcer.refused.clone();
    let mut totals = enforcer.stop();
    enforcing.stop_forwarder();
    if let Some(n) = enforcing.net.take() {
        let n = lock(&n);
        totals.connects = n.connects;
        totals.sends = n.sends;
        totals.lost += n.lost();
    }
    let mut audited: Vec<String> = e.audited_not_enforced.clone();
    audited.extend(refused.iter().map(|r| format!("{r}: mark refused")));
    audited.extend(enforcing.net_refused.take());
    let meta = EnforcementMeta {
        mode: if e.best_effort {
            "best-effort"
        } else {
            "enforce"
        }
        .to_owned(),
        blocked_reads: totals.reads,
        blocked_execs: totals.execs,
        blocked_connects: totals.connects,
        blocked_sends: totals.sends,
        lost: totals.lost,
        marked: (e.plan.files.len() + e.plan.dirs.len()) as u64,
        audited_not_enforced: audited.clone(),
        backstop: None,
    };
    let tx = writer.sender();
    let _ = tx.send(StoreMsg::Meta(
        key::ENFORCEMENT.to_owned(),
        serde_json::to_string(&meta).unwrap_or_default(),
    ));
    if totals.lost > 0 {
        let _ = tx.send(StoreMsg::Loss(vec![("enforcement_denial", totals.lost)]));
    }
    let mut line = totals.summary(e.plan.network.is_some());
    if !audited.is_empty() {
        line += &format!("; audited, not enforced: {}", audited.join(", "));
    }
    notify(Notice::Enforced(line));
}
