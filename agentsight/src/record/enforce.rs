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
    enforce::{
        Denial, Enforcer, Totals,
        landlock::{self, WritePlan, WriteRules},
        network::NetEnforcement,
    },
    privileges::{self, FileCreds},
    store::{CaptureRw, StoreMsg, Writer, enforcement::EnforcementMeta, meta::key},
};

use super::{
    Notice, RecordError, RecordOptions, landlock_denials::Refusal, target::Target, tracker::Tracker,
};

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
    /// The write rules the command takes on (`landlock`).
    writes: Option<WriteRules>,
    /// With `best-effort`: why the write rules could not be enforced.
    writes_refused: Option<String>,
    forwarder: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Enforcing {
    /// The Landlock ruleset the command takes on before it runs.
    pub(super) fn landlock_fd(&self) -> Option<std::os::fd::RawFd> {
        self.writes.as_ref().map(WriteRules::raw_fd)
    }

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
    target: &Target,
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
    // Last: the roots it creates are removed again if the start fails.
    let (writes, writes_refused) =
        match e.plan.writes.as_ref().map(|w| write_rules(opts, target, w)) {
            None => (None, None),
            Some(Ok(w)) => (Some(w), None),
            Some(Err(why)) if e.best_effort => (None, Some(why.to_string())),
            Some(Err(why)) => return Err(why.into()),
        };
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
        writes,
        writes_refused,
        forwarder: Some(forwarder),
        stop,
    }))
}

/// What is left to say of the enforcement once the capture is finished:
/// the writes Landlock refused are read from it then.
pub(super) struct EnforceEnd {
    totals: Totals,
    network: bool,
    audited: Vec<String>,
    writes: Option<(WritePlan, WriteRules)>,
}

/// Stops the decider; stores meta `enforcement` (and the denials not
/// stored as loss `enforcement_denial`); the summary is said by [`end`].
pub(super) fn stop(
    opts: &RecordOptions,
    mut enforcing: Enforcing,
    writer: &Writer,
) -> Option<EnforceEnd> {
    let e = opts.enforce.as_ref()?;
    // The decider first (no denial after), then the last hand-over.
    let enforcer = enforcing.enforcer.take()?;
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
    audited.extend(enforcing.writes_refused.take());
    let meta = EnforcementMeta {
        mode: if e.best_effort {
            "best-effort"
        } else {
            "enforce"
        }
        .to_owned(),
        blocked_reads: totals.reads,
        blocked_writes: 0,
        blocked_execs: totals.execs,
        blocked_connects: totals.connects,
        blocked_sends: totals.sends,
        lost: totals.lost,
        marked: (e.plan.files.len() + e.plan.dirs.len()) as u64,
        audited_not_enforced: audited.clone(),
        refused_allowed: 0,
        refused_allowed_paths: Vec::new(),
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
    let writes = e.plan.writes.clone().zip(enforcing.writes.take());
    Some(EnforceEnd {
        totals,
        network: e.plan.network.is_some(),
        audited,
        writes,
    })
}

/// Once the capture is finished: the writes Landlock refused, read from
/// its failed calls (`landlock::refused`), stored with their count, the
/// roots created for the run removed if left empty, and the summary said.
/// Runs as the user (the capture is theirs).
pub(super) fn end(
    opts: &RecordOptions,
    target: &Target,
    mut end: EnforceEnd,
    notify: &mut dyn FnMut(Notice),
) {
    if let Some((plan, rules)) = end.writes.take() {
        let mut allowed_line = String::new();
        match refused_writes(opts, target, &plan) {
            Ok((n, allowed)) => {
                end.totals.writes = n;
                if let Some(first) = allowed.first() {
                    allowed_line = format!(
                        "; {} the policy allows refused all the same (Landlock cannot grant them), first {first}",
                        plural(allowed.len() as u64, "write", "writes")
                    );
                }
            }
            Err(why) => notify(Notice::Warning(format!(
                "--enforce: the writes Landlock refused were not stored: {why}"
            ))),
        }
        // As the user who owns them; without that identity, left in place.
        if let Some(Ok(_as_user)) = user_creds(target).map(|c| privileges::AsUser::enter(&c)) {
            landlock::remove_empty(&rules.created);
        }
        let mut line = end.totals.summary(true, end.network);
        line += &allowed_line;
        push_audited(&mut line, &end.audited);
        notify(Notice::Enforced(line));
        return;
    }
    let mut line = end.totals.summary(false, end.network);
    push_audited(&mut line, &end.audited);
    notify(Notice::Enforced(line));
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn push_audited(line: &mut String, audited: &[String]) {
    if !audited.is_empty() {
        *line += &format!("; audited, not enforced: {}", audited.join(", "));
    }
}

/// Finds and stores the refused writes: how many the policy denies, and
/// the paths of those it allows.
fn refused_writes(
    opts: &RecordOptions,
    target: &Target,
    plan: &WritePlan,
) -> Result<(u64, Vec<String>), String> {
    let Some(u) = &target.user else {
        return Ok((0, Vec::new()));
    };
    let user = landlock::User {
        uid: u.uid,
        gids: std::iter::once(u.gid)
            .chain(u.groups.iter().copied())
            .collect(),
    };
    let cap = crate::store::Capture::open(&opts.output).map_err(|e| e.to_string())?;
    let kinds: Vec<&str> = super::landlock_denials::WRITE_KINDS
        .iter()
        .map(|k| k.as_str())
        .collect();
    let calls = cap
        .reader()
        .refused_file_calls(&kinds)
        .map_err(|e| e.to_string())?;
    drop(cap);
    let (mut denied, mut allowed): (Vec<Denial>, Vec<String>) = (Vec::new(), Vec::new());
    for (ev, repeat) in calls {
        match super::landlock_denials::refused(&ev, plan, &user) {
            Some(Refusal::Denied(d)) => denied.push(Denial { repeat, ..d }),
            Some(Refusal::Allowed(p)) => allowed.extend(std::iter::repeat_n(p, repeat as usize)),
            None => {}
        }
    }
    if denied.is_empty() && allowed.is_empty() {
        return Ok((0, allowed));
    }
    CaptureRw::open(&opts.output)
        .and_then(|c| c.add_write_denials(&denied, &allowed))
        .map_err(|e| e.to_string())?;
    Ok((denied.iter().map(|d| d.repeat).sum(), allowed))
}

/// The command's user, as file credentials.
fn user_creds(target: &Target) -> Option<FileCreds> {
    target.user.as_ref().map(|u| FileCreds {
        uid: u.uid,
        gid: u.gid,
        groups: u.groups.clone(),
    })
}

/// The write rules for the command: Landlock applies only to a command
/// `record` starts. The missing roots are created as its user.
fn write_rules(
    opts: &RecordOptions,
    target: &Target,
    plan: &WritePlan,
) -> Result<WriteRules, crate::enforce::EnforceError> {
    if opts.command.is_empty() {
        return Err(crate::enforce::EnforceError::Unavailable {
            rule: plan.rule.clone(),
            reason: "Landlock applies only to a command record starts (record -- COMMAND)"
                .to_owned(),
        });
    }
    let _as_user = user_creds(target)
        .map(|c| privileges::AsUser::enter(&c))
        .transpose()
        .map_err(|e| crate::enforce::EnforceError::Unavailable {
            rule: plan.rule.clone(),
            reason: e.to_string(),
        })?;
    plan.ruleset()
}
