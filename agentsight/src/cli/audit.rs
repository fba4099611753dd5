//! `agentsight audit --db FILE --policy POLICY [--format …] [-o OUT]`.
//!
//! Exit status: 0 no error-level finding, 1 error-level findings, 2 usage or
//! input errors (bad policy, unreadable capture, unwritable output).

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::ValueEnum;

use agentsight::{
    audit::{self, Policy, Report},
    store::Capture,
};

#[derive(Clone, Copy, Debug, ValueEnum, Default)]
pub enum AuditFormat {
    #[default]
    Text,
    Json,
    Sarif,
    Junit,
}

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    /// The capture to audit (opened read-only).
    #[arg(long)]
    pub db: PathBuf,
    /// The policy file (TOML; see docs/audit.md).
    #[arg(long)]
    pub policy: PathBuf,
    #[arg(long, value_enum, default_value_t = AuditFormat::Text)]
    pub format: AuditFormat,
    /// Write the report here instead of stdout (a one-line summary still goes to stderr).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

impl From<AuditFormat> for audit::render::Format {
    fn from(f: AuditFormat) -> Self {
        match f {
            AuditFormat::Text => Self::Text,
            AuditFormat::Json => Self::Json,
            AuditFormat::Sarif => Self::Sarif,
            AuditFormat::Junit => Self::Junit,
        }
    }
}

pub fn render(report: &Report, format: AuditFormat) -> Result<String> {
    Ok(audit::render::rendered(report, format.into())?)
}

/// Audits `db` with an already loaded policy; returns the report.
pub fn audit_capture(db: &Path, policy: &Policy) -> Result<Report> {
    let cap = Capture::open(db)?;
    super::say_note(&cap);
    Ok(audit::audit(&cap, policy)?)
}

/// Writes the rendered report and returns the exit status it implies.
pub fn emit(report: &Report, format: AuditFormat, output: Option<&Path>) -> Result<i32> {
    let text = render(report, format)?;
    match output {
        Some(path) => {
            // As the invoking user (the caller dropped to them under sudo),
            // never through a link, a new 0600 file renamed over the target.
            super::UserFile::open(path)?.replace_with(text.as_bytes())?;
            agentsight::sayln!("{}", audit::render::summary_line(report));
        }
        None => super::write_stdout(text.as_bytes())?,
    }
    Ok(if report.passed() { 0 } else { 1 })
}

pub fn run(a: &AuditArgs) -> Result<i32> {
    let policy = Policy::load(&a.policy)?;
    let report = audit_capture(&a.db, &policy)?;
    emit(&report, a.format, a.output.as_deref())
}
