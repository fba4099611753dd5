//! `top` as root: the kernel programs through `livecap::KernelWatch`, adapted
//! to the live model's `KernelSource` (the library's `top` needs no part of
//! the capture pipeline).

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::TopArgs;
use agentsight::livecap::{KernelWatch, KernelWatchError, KernelWatchOptions};
use agentsight::record::RecordError;
use agentsight::top::{KernelColumns, KernelSession, KernelSource};

/// Loads the kernel programs. A failure is fatal only with `--record`
/// (asked for explicitly); otherwise `top` says why once and runs without
/// kernel columns (every snapshot then says `"kernel": false`).
pub fn start(args: &TopArgs) -> Result<Option<Arc<KernelWatch>>> {
    let mut opts = KernelWatchOptions::new(args.home.clone());
    opts.record_to = args.record.clone();
    match KernelWatch::start(&opts) {
        Ok(w) => Ok(Some(Arc::new(w))),
        // Only a failure of the programs themselves is called one; the
        // `--record` file's own errors name the file.
        Err(e @ KernelWatchError::Record(RecordError::Store(_))) if args.record.is_some() => {
            Err(e).context("top --record")
        }
        Err(e) if args.record.is_some() => Err(e).context("loading the kernel programs"),
        Err(e) => {
            agentsight::sayln!(
                "agentsight: warning: no kernel columns (loading the kernel programs failed: {e}); --no-kernel silences this"
            );
            Ok(None)
        }
    }
}

struct Source(Arc<KernelWatch>);

impl KernelSource for Source {
    fn sessions(&mut self) -> Result<HashMap<String, KernelSession>, String> {
        match self.0.snapshot() {
            Ok(s) => Ok(s
                .sessions
                .into_iter()
                .map(|(id, c)| {
                    let columns = KernelColumns {
                        processes_alive: c.processes_alive,
                        execs_per_s: c.execs_per_s,
                        files_written: c.files_written,
                        connections: c.connections,
                        lost_events: c.lost_events,
                        as_of_mono_ns: c.as_of_mono_ns,
                    };
                    (
                        id,
                        KernelSession {
                            columns,
                            process: c.process,
                        },
                    )
                })
                .collect()),
            Err(e) => {
                tracing::warn!(error = %e, "kernel snapshot failed");
                Err(format!("the live recording failed: {e}"))
            }
        }
    }
}

pub fn source(w: &Arc<KernelWatch>) -> Box<dyn KernelSource> {
    Box::new(Source(w.clone()))
}

/// Ends the watch: a `--record` capture is finished, bound and correlated;
/// a temporary one is deleted.
pub fn stop(w: Arc<KernelWatch>, args: &TopArgs) -> Result<()> {
    let Ok(w) = Arc::try_unwrap(w) else {
        anyhow::bail!("the kernel watch is still in use");
    };
    let stopped = w.stop().context("finishing the kernel watch")?;
    if let Some(p) = stopped.kept.or(args.record.clone()) {
        agentsight::sayln!("agentsight: capture kept in {}", p.display());
    }
    Ok(())
}

/// What the kernel saw of one session's tool calls (detail pane).
pub enum KernelActivity {
    /// The session is not bound to a process tree (recorded before `top`
    /// started, or elsewhere): the transcript alone is shown.
    NotBound,
    /// Reading the live capture failed.
    Error(String),
    /// Per tool call, the lines of what the kernel attributed to it, and
    /// what happened outside every call.
    Bound {
        calls: Vec<CallActivity>,
        outside: OutsideCalls,
    },
}

/// The session's activity outside every call, split as correlate splits it:
/// the agent runtime's own (grouped, not flagged) and the unexplained.
#[derive(Debug, Default, PartialEq)]
pub struct OutsideCalls {
    /// Activities of the runtime and the helpers it started outside calls.
    pub runtime_total: usize,
    /// `(program, activities)`, in correlate's order.
    pub runtime_programs: Vec<(String, usize)>,
    /// Activities nothing accounts for, one line each (`pid COMM OP WHAT`).
    pub unexplained: Vec<String>,
}

/// One activity as a detail line: `pid COMM OP WHAT`.
fn activity_line(a: &agentsight::correlate::Activity) -> String {
    format!(
        "pid {} {} {} {}",
        a.pid,
        a.comm,
        a.op,
        agentsight::correlate::describe(a)
    )
}

/// The kernel's lines for one tool call, matched to the transcript's call by
/// its id, else by its position (`tool_index`).
pub struct CallActivity {
    pub call_id: Option<String>,
    pub tool_index: usize,
    pub lines: Vec<String>,
}

/// Per tool call, the processes and file/network activity the kernel
/// attributed to it (detail pane).
pub fn activity(w: &KernelWatch, session_id: &str, last: usize) -> KernelActivity {
    let found = match w.activity(session_id, last) {
        Ok(r) => r,
        Err(KernelWatchError::NotBound(_)) => return KernelActivity::NotBound,
        Err(e) => return KernelActivity::Error(e.to_string()),
    };
    let calls = found
        .tools
        .iter()
        .map(|t| CallActivity {
            call_id: t.call_id.clone(),
            tool_index: t.tool_index,
            lines: t.activity.iter().map(activity_line).collect(),
        })
        .collect();
    let outside = OutsideCalls {
        runtime_total: found.runtime.iter().map(|g| g.count).sum(),
        runtime_programs: found
            .runtime
            .iter()
            .map(|g| (g.program.clone(), g.count))
            .collect(),
        unexplained: found.unexplained.iter().map(activity_line).collect(),
    };
    KernelActivity::Bound { calls, outside }
}
