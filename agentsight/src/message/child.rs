//! A provider process the way the drivers hold it: started from a
//! [`Spawner`] command, the message written to its stdin by a thread (a
//! provider that stops reading must not block us past a deadline), waited
//! for with deadlines, and killed with its whole process group on drop.

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdout, ExitStatus};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::{MessageError, Spawner};

/// How often an exit is polled for while waiting with a deadline.
const POLL: Duration = Duration::from_millis(20);

/// A running provider; its process group dies with this value unless it
/// has exited and been reaped.
pub struct ProviderChild {
    child: Child,
    /// Set once reaped: the pid (and process group id) may be reused after.
    status: Option<ExitStatus>,
}

impl ProviderChild {
    /// Starts `program args` from `spawner`, writes `input` to its stdin and
    /// then closes it (the providers take one message per process), and
    /// hands back its stdout.
    pub fn start(
        spawner: &Spawner,
        program: &Path,
        args: &[OsString],
        input: Vec<u8>,
    ) -> Result<(ProviderChild, ChildStdout), MessageError> {
        let mut child = spawner.command(program, args).spawn().map_err(|e| {
            MessageError::Failed(format!("cannot start {}: {e}", program.display()))
        })?;
        let stdout = child.stdout.take();
        let stdin = child.stdin.take();
        let mut me = ProviderChild {
            child,
            status: None,
        };
        let (Some(stdout), Some(mut stdin)) = (stdout, stdin) else {
            me.kill();
            return Err(MessageError::Failed(format!(
                "{}: no pipes to the provider",
                program.display()
            )));
        };
        // A write error means the provider already exited: its status and
        // output tell why, so the error itself adds nothing.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        Ok((me, stdout))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the provider has exited (reaping it).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
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

    /// Kills the provider's process group (the tools it started too) and
    /// reaps it.
    pub fn kill(&mut self) {
        if self.exited().is_some() {
            return;
        }
        // The child leads its own group (`process_group(0)` in the spawner).
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
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
