//! `agentsight enforce-sentinel` (hidden): the backstop of `record
//! --enforce`, started by the recorder itself (`enforce::sentinel`). It
//! holds the fanotify group and the tracked map; if the recorder ends
//! without releasing it, it stops the tree and notes so in the capture.

use std::path::PathBuf;

use agentsight::enforce::sentinel;
use agentsight::store::{
    CaptureRw, enforcement::BackstopMeta, enforcement::EnforcementMeta, meta::key,
};

#[derive(clap::Args, Debug, Clone)]
pub struct SentinelArgs {
    /// The fanotify group's descriptor (held, never read).
    #[arg(long)]
    pub group: i32,
    /// The kernel's tracked map.
    #[arg(long)]
    pub tracked: i32,
    /// The read end of the recorder's pipe.
    #[arg(long)]
    pub released: i32,
    /// The recorder's pid (for the message).
    #[arg(long)]
    pub recorder: u32,
    /// The capture to note a stopped tree in.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// `--enforce=best-effort` (for the note).
    #[arg(long)]
    pub best_effort: bool,
}

/// Waits for the recorder; exit 0 when released or when the whole tree was
/// stopped, 1 when some of it still ran after the wait.
pub fn run(a: &SentinelArgs) -> anyhow::Result<i32> {
    let Some(b) = sentinel::watch(a.released, a.tracked) else {
        return Ok(0);
    };
    eprintln!(
        "agentsight: enforce: the recorder (pid {}) ended without stopping enforcement: its tree was stopped and killed ({} process(es){}), so nothing of it ran unenforced",
        a.recorder,
        b.killed.len(),
        if b.still_running.is_empty() {
            String::new()
        } else {
            format!(", {} still running after 10 s", b.still_running.len())
        }
    );
    if let Some(db) = &a.db
        && let Err(e) = note(db, a, &b)
    {
        eprintln!(
            "agentsight: enforce: the stopped tree is not noted in {}: {e:#}",
            db.display()
        );
    }
    // The group's descriptor closes with this process, after the tree.
    Ok(if b.still_running.is_empty() { 0 } else { 1 })
}

/// Meta `enforcement` with the backstop (the recorder never stored its own).
fn note(db: &std::path::Path, a: &SentinelArgs, b: &sentinel::Backstop) -> anyhow::Result<()> {
    let cap = CaptureRw::open(db)?;
    let meta = EnforcementMeta {
        mode: if a.best_effort {
            "best-effort"
        } else {
            "enforce"
        }
        .to_owned(),
        backstop: Some(BackstopMeta {
            recorder_pid: a.recorder,
            killed: b.killed.clone(),
            still_running: b.still_running.clone(),
        }),
        ..EnforcementMeta::default()
    };
    cap.put_meta(key::ENFORCEMENT, &serde_json::to_string(&meta)?)?;
    Ok(())
}
