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
    enforce::{Denial, Enforcer},
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
    forwarder: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
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
fn forward(pending: Arc<Mutex<Vec<Denial>>>, tx: SyncSender<StoreMsg>, stop: Arc<AtomicBool>) {
    loop {
        let last = stop.load(Ordering::Acquire);
        let batch = std::mem::take(&mut *pending.lock().unwrap_or_else(|p| p.into_inner()));
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
    tracker: &Tracker,
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
    let enforcer = Enforcer::start(
        &e.plan,
        tracked,
        sink,
        e.best_effort,
        Some((&exe, Some(&opts.output))),
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let forwarder = {
        let (tx, stop) = (writer.sender(), stop.clone());
        std::thread::Builder::new()
            .name("enforce-forward".into())
            .spawn(move || forward(pending, tx, stop))
            .map_err(|err| RecordError::Other(format!("--enforce: start a thread: {err}")))?
    };
    tracing::info!(
        "enforcing: {} files, {} directories marked",
        e.plan.files.len(),
        e.plan.dirs.len()
    );
    Ok(Some(Enforcing {
        enforcer: Some(enforcer),
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
    let totals = enforcer.stop();
    enforcing.stop_forwarder();
    let mut audited: Vec<String> = e.audited_not_enforced.clone();
    audited.extend(refused.iter().map(|r| format!("{r}: mark refused")));
    let meta = EnforcementMeta {
        mode: if e.best_effort {
            "best-effort"
        } else {
            "enforce"
        }
        .to_owned(),
        blocked_reads: totals.reads,
        blocked_execs: totals.execs,
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
    let mut line = totals.summary();
    if !audited.is_empty() {
        line += &format!("; audited, not enforced: {}", audited.join(", "));
    }
    notify(Notice::Enforced(line));
}
