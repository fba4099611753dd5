//! The report written into an output file: what `report -o` and `record
//! --report` share.

use std::path::{Path, PathBuf};

use crate::{
    audit::{self, Policy},
    outfile::{OutFileError, UserFile},
    store::{Capture, StoreError},
};

use super::{ReportError, Summary};

#[derive(Debug, thiserror::Error)]
pub enum ReportFileError {
    #[error(transparent)]
    Open(#[from] StoreError),
    /// Not a `source`: the message says it once (a source shown in the
    /// message was printed twice by the CLI's error chain).
    #[error("auditing {path}: {reason}")]
    Audit {
        path: String,
        reason: audit::AuditError,
    },
    /// Its store and correlate errors name the capture themselves.
    #[error(transparent)]
    Report(ReportError),
    #[error(transparent)]
    Output(#[from] OutFileError),
}

/// A report written: where, and the line that tells what it holds.
pub struct Written {
    pub path: PathBuf,
    /// Said once to the reader: the capture was read from a private copy.
    pub note: Option<String>,
    pub summary: Summary,
    /// The page's size, KiB (rounded up).
    pub kib: usize,
}

impl Written {
    /// One line: where the report is, what it holds and what it aggregated.
    pub fn line(&self) -> String {
        format!(
            "report {} ({} sessions, {} tool calls, {} KiB{})",
            self.path.display(),
            self.summary.sessions,
            self.summary.tool_calls,
            self.kib,
            if self.summary.aggregated.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} parts aggregated, listed in it",
                    self.summary.aggregated.len()
                )
            }
        )
    }
}

/// Renders the report of the capture at `db` (with the findings of
/// `policy`; secrets redacted when `redact`) into `out`, which is left as
/// it was if anything fails.
pub fn write(
    db: &Path,
    policy: Option<&Policy>,
    redact: bool,
    out: UserFile,
) -> Result<Written, ReportFileError> {
    // No page walk at open: the page is built in full before `out` is
    // touched, and a damaged page among the rows it reads fails the build,
    // naming the file (the walk was half of the time on 2M events).
    let cap = Capture::open_quick(db)?;
    let findings = policy
        .map(|p| audit::audit(&cap, p))
        .transpose()
        .map_err(|reason| ReportFileError::Audit {
            path: db.display().to_string(),
            reason,
        })?;
    write_page(&cap, findings.as_ref(), redact, out)
}

/// [`write`] of a capture already open, with its findings already made
/// (`record --report --audit` audits once for both).
pub fn write_page(
    cap: &Capture,
    findings: Option<&audit::Report>,
    redact: bool,
    out: UserFile,
) -> Result<Written, ReportFileError> {
    let (page, summary) = super::html(cap, findings, redact).map_err(ReportFileError::Report)?;
    let path = out.path().to_owned();
    out.replace_with(page.as_bytes())?;
    Ok(Written {
        path,
        note: cap.note.clone(),
        summary,
        kib: page.len().div_ceil(1024),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A damaged page met while building the page: one message, naming the
    /// file once, however the caller prints the chain.
    #[test]
    fn a_read_failure_is_said_once() {
        let e = ReportFileError::Report(ReportError::Store(StoreError::Query {
            path: "/tmp/c.db".into(),
            reason: "database disk image is malformed".into(),
        }));
        let chain = format!("{:#}", anyhow::Error::from(e));
        assert_eq!(chain, "/tmp/c.db: database disk image is malformed");
    }
}
