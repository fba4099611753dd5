//! A provider process the way the drivers hold it: started from a
//! [`Spawner`] command (its own session and process group), its stdin fed
//! by a thread (a provider that stops reading must not block us past a
//! deadline), waited for with deadlines, and killed with its whole process
//! group on drop — the tools it left behind too, also those that left the
//! group (`sweep`: we are their subreaper).

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::{MessageError, Spawner};

/// How often an exit is polled for while waiting with a deadline.
const POLL: Duration = Duration::from_millis(20);

/// The providers started and not yet reaped, by pid (= process group). A
/// provider is added and reaped under this lock, so [`stop_all`] never
/// signals a group whose leader was reaped (its id could be reused).
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Set by [`stop_all`]: no provider starts any more.
static STOPPED: AtomicBool = AtomicBool::new(false);

fn live() -> MutexGuard<'static, Vec<u32>> {
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// We were asked to stop (a signal): every running provider's process group
/// is killed and none starts any more. Returns how many were running.
pub fn stop_all() -> usize {
    let live = live();
    STOPPED.store(true, Ordering::SeqCst);
    for &pid in live.iter() {
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    live.len()
}

/// Whether [`stop_all`] was called.
pub fn stopped() -> bool {
    STOPPED.load(Ordering::SeqCst)
}

/// A running provider; its process group dies with this value.
pub struct ProviderChild {
    child: Child,
    /// Set once reaped.
    status: Option<ExitStatus>,
}

/// One write for the input thread, and where to say how it went.
type Write1 = (Vec<u8>, SyncSender<std::io::Result<()>>);

/// The provider's stdin, written by a thread of its own: a write that the
/// provider does not take before the deadline is a timeout, not a hang.
/// Dropped (or [`Input::close`]d), the provider sees end of input.
pub struct Input {
    tx: Option<SyncSender<Write1>>,
}

impl Input {
    fn spawn(mut stdin: ChildStdin) -> Self {
        let (tx, rx): (SyncSender<Write1>, Receiver<Write1>) = sync_channel(1);
        std::thread::spawn(move || {
            for (bytes, done) in rx {
                let r = stdin.write_all(&bytes).and_then(|()| stdin.flush());
                let failed = r.is_err();
                let _ = done.send(r);
                if failed {
                    return;
                }
            }
        });
        Input { tx: Some(tx) }
    }

    /// Writes `bytes`, waiting at most until `deadline`.
    pub fn write(&self, bytes: Vec<u8>, deadline: Instant) -> Result<(), MessageError> {
        let closed = || MessageError::Failed("the provider's input is already closed".into());
        let tx = self.tx.as_ref().ok_or_else(closed)?;
        let (done_tx, done_rx) = sync_channel(1);
        // Never blocks: a write still pending (the provider stopped
        // reading) is the same timeout again.
        tx.try_send((bytes, done_tx)).map_err(|e| match e {
            TrySendError::Full(_) => {
                MessageError::Timeout("the provider stopped reading its input".into())
            }
            TrySendError::Disconnected(_) => closed(),
        })?;
        match done_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(MessageError::Failed(format!(
                "writing to the provider: {e}"
            ))),
            Err(RecvTimeoutError::Timeout) => Err(MessageError::Timeout(
                "the provider stopped reading its input".into(),
            )),
            Err(RecvTimeoutError::Disconnected) => Err(closed()),
        }
    }

    /// End of input for the provider (once the pending write is done).
    pub fn close(&mut self) {
        self.tx = None;
    }
}

impl ProviderChild {
    /// Starts `program args` from `spawner`; its stdin (fed by a thread)
    /// and its stdout.
    pub fn spawn(
        spawner: &Spawner,
        program: &Path,
        args: &[OsString],
    ) -> Result<(ProviderChild, Input, ChildStdout), MessageError> {
        let mut live = live();
        if stopped() {
            return Err(MessageError::Failed(
                "interrupted before the agent was started".into(),
            ));
        }
        // Before the first provider: an orphan of its tree is ours to end.
        super::sweep::become_subreaper().map_err(|e| {
            MessageError::Failed(format!("cannot become the agent's subreaper: {e}"))
        })?;
        let mut child = spawner.command(program, args).spawn().map_err(|e| {
            MessageError::Failed(format!("cannot start {}: {e}", program.display()))
        })?;
        live.push(child.id());
        drop(live);
        let stdout = child.stdout.take();
        let stdin = child.stdin.take();
        let mut me = ProviderChild {
            child,
            status: None,
        };
        let (Some(stdout), Some(stdin)) = (stdout, stdin) else {
            me.kill();
            return Err(MessageError::Failed(format!(
                "{}: no pipes to the provider",
                program.display()
            )));
        };
        Ok((me, Input::spawn(stdin), stdout))
    }

    /// [`ProviderChild::spawn`], then `input` written and stdin closed (the
    /// providers that take one message per process).
    pub fn start(
        spawner: &Spawner,
        program: &Path,
        args: &[OsString],
        input: Vec<u8>,
    ) -> Result<(ProviderChild, ChildStdout), MessageError> {
        let (me, mut stdin, stdout) = Self::spawn(spawner, program, args)?;
        // Not waited for: a provider that exits before reading says why in
        // its status and output; one that never reads is caught by the
        // acknowledgement deadline.
        if let Some(tx) = stdin.tx.take() {
            let (done, _) = sync_channel(1);
            let _ = tx.send((input, done));
        }
        Ok((me, stdout))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the provider has exited. Its group and the rest
    /// of its turn's processes (the tools it left behind) are killed before
    /// it is reaped: while it is an unreaped zombie its pid, and so the
    /// group id, cannot be taken by anyone else.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() && self.has_exited() {
            self.reap();
        }
        self.status
    }

    /// Whether the provider has exited, without reaping it (`WNOWAIT`).
    fn has_exited(&self) -> bool {
        // Safety: waitid fills the zeroed siginfo; `si_pid` stays 0 while the
        // child runs (WNOHANG).
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_PID,
                self.child.id(),
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            r == 0 && info.si_pid() != 0
        }
    }

    fn kill_group(&self) {
        // The child leads its own session and group (`setsid` in the
        // spawner): the group id is its pid.
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
    }

    /// Waits for the exit until `deadline`; `None` if it is still running.
    pub fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Some(st) = self.exited() {
                return Some(st);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            std::thread::sleep(POLL.min(deadline - now));
        }
    }

    /// Kills the provider's process group and the rest of its turn's
    /// processes (the tools it started too) and reaps the provider. Once
    /// reaped, they were killed already.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            self.reap();
        }
    }

    /// Kills the group and the rest of the turn's processes, then reaps
    /// the leader, under the lock of [`LIVE`]. The orphans we adopted are
    /// this turn's when no other turn runs (`session message` runs one;
    /// the bridge's concurrent turns end them with the last one).
    fn reap(&mut self) {
        let mut live = live();
        let pid = self.child.id();
        live.retain(|&p| p != pid);
        self.kill_group();
        super::sweep::end_turn(pid, live.is_empty(), &live);
        self.status = self.child.wait().ok();
    }
}

impl Drop for ProviderChild {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `exit status 3`, `killed by signal 9`: for error details.
pub fn describe(st: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => st.to_string(),
    }
}
