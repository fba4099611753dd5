//! `agentsight report --db FILE -o report.html [--policy FILE]`, and the
//! report `record --report FILE` writes at the end of a recording.

use std::path::{Path, PathBuf};

use anyhow::Result;

use agentsight::audit::Policy;

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
    /// Count by scanning every event even where the writer kept the
    /// summaries (the baseline of `cargo xtask bench export`).
    #[arg(long, hide = true)]
    pub scan: bool,
}

/// Writes the report and says where it is, what it holds and what it
/// aggregated.
pub(super) fn write(
    db: &Path,
    policy: Option<&Policy>,
    no_redact: bool,
    out: super::UserFile,
) -> Result<()> {
    let written = agentsight::report::file::write(db, policy, !no_redact, out)?;
    if let Some(n) = &written.note {
        agentsight::sayln!("agentsight: note: {n}");
    }
    agentsight::sayln!("agentsight: {}", written.line());
    Ok(())
}

pub fn run(a: &ReportArgs) -> Result<i32> {
    // A policy that does not parse fails before anything is written.
    let policy = a.policy.as_deref().map(Policy::load).transpose()?;
    let out = super::UserFile::open(&a.output)?;
    if a.scan {
        let cap = agentsight::store::Capture::open(&a.db)?.scan_only();
        let findings = policy
            .as_ref()
            .map(|p| agentsight::audit::audit(&cap, p))
            .transpose()?;
        let written =
            agentsight::report::file::write_page(&cap, findings.as_ref(), !a.no_redact, out)?;
        agentsight::sayln!("agentsight: {}", written.line());
        return Ok(0);
    }
    write(&a.db, policy.as_ref(), a.no_redact, out)?;
    Ok(0)
}
