//! `agentsight report --db FILE -o report.html [--policy FILE]`, and the
//! report `record --report FILE` writes at the end of a recording.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use agentsight::{audit::Policy, store::Capture};

/// Write one self-contained HTML report of a capture.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The capture to read (opened read-only).
    #[arg(long)]
    pub db: PathBuf,
    /// The HTML file to write (a new 0600 file renamed over it; never through a link).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Audit the capture with this policy and link each finding to the rows
    /// it cites.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Show recorded text exactly: by default secret-looking values (API
    /// keys, tokens, passwords, URL credentials) are shown as ‹redacted›.
    #[arg(long)]
    pub no_redact: bool,
}

/// The page of `db` (with the findings of `policy`; secrets redacted
/// unless `no_redact`) and what it holds.
fn build(
    db: &Path,
    policy: Option<&Policy>,
    no_redact: bool,
) -> Result<(String, agentsight::report::Summary)> {
    let cap = Capture::open(db)?;
    super::say_note(&cap);
    let audit = policy
        .map(|p| agentsight::audit::audit(&cap, p))
        .transpose()
        .with_context(|| format!("auditing {}", db.display()))?;
    agentsight::report::html(&cap, audit.as_ref(), !no_redact)
        .with_context(|| format!("reporting {}", db.display()))
}

/// Renders the report of `db` (with the findings of `policy`) into `out`
/// (removed again if this run created it and the report failed); prints
/// where it is, what it holds and what it aggregated.
pub(super) fn write(
    db: &Path,
    policy: Option<&Policy>,
    no_redact: bool,
    out: super::UserFile,
) -> Result<()> {
    let (page, summary) = match build(db, policy, no_redact) {
        Ok(built) => built,
        Err(e) => {
            out.abandon();
            return Err(e);
        }
    };
    let path = out.path().to_owned();
    out.replace_with(page.as_bytes())?;
    agentsight::sayln!(
        "agentsight: report {} ({} sessions, {} tool calls, {} KiB{})",
        path.display(),
        summary.sessions,
        summary.tool_calls,
        page.len().div_ceil(1024),
        if summary.aggregated.is_empty() {
            String::new()
        } else {
            format!(
                "; {} parts aggregated, listed in it",
                summary.aggregated.len()
            )
        }
    );
    Ok(())
}

pub fn run(a: &ReportArgs) -> Result<i32> {
    // A policy that does not parse fails before anything is written.
    let policy = a.policy.as_deref().map(Policy::load).transpose()?;
    let out = super::UserFile::open(&a.output)?;
    write(&a.db, policy.as_ref(), a.no_redact, out)?;
    Ok(0)
}
