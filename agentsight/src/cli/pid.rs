//! `agentsight pid PID`: which session a live process belongs to, and why.

use std::path::PathBuf;

use anyhow::Result;

use agentsight::rawtext::visible as v;
use agentsight::views::pid::{PidQuery, lookup};

/// Which agent session a running process belongs to, with the evidence.
#[derive(clap::Args, Debug, Clone)]
pub struct PidArgs {
    pub pid: u32,
    /// Captures to consult for sticky bindings (repeatable); default: the
    /// `*.db` captures in the current directory.
    #[arg(long)]
    pub db: Vec<PathBuf>,
    /// Read transcripts from this home instead of the process owner's.
    #[arg(long, value_parser = super::absolute_path())]
    pub home: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &PidArgs) -> Result<i32> {
    let ans = lookup(&PidQuery {
        pid: a.pid,
        dbs: a.db.clone(),
        home: a.home.clone(),
        sticky: true,
    })?;
    let out = if a.json {
        serde_json::to_string_pretty(&ans)? + "\n"
    } else {
        // Ids, paths and cwds come from transcripts: shown escaped (rawtext).
        match (&ans.session_id, ans.evidence) {
            (Some(id), Some(ev)) => format!(
                "pid {}: {} session {} (evidence: {}; {})\n",
                ans.pid,
                v(ans.provider.as_deref().unwrap_or("?")),
                v(id),
                ev.as_str(),
                v(&ans.detail)
            ),
            _ => format!(
                "pid {}: no session ({}){}\n",
                ans.pid,
                v(&ans.detail),
                if ans.candidates.is_empty() {
                    String::new()
                } else {
                    format!("; candidates: {}", v(&ans.candidates.join(", ")))
                }
            ),
        }
    };
    super::write_stdout(out.as_bytes())?;
    Ok(if ans.session_id.is_some() { 0 } else { 1 })
}
