//! `agentsight report`: one self-contained HTML file of a capture — run facts
//! and LOSS, per bound session an SVG timeline and every tool call with what
//! its processes did, the process tree, files and network destinations,
//! unbound trees, and (with a policy) the audit findings linked to the rows
//! they cite.
//!
//! Built from the run model ([`crate::views::run::RunModel`]: `correlate` per stored
//! session plus the store's read API), never from a second copy of the
//! matching. The page is written by hand with `std::fmt::Write`: it is a few
//! fixed shapes, and a template engine would add a dependency and a second
//! escaping story for no gain. Every string from a capture or a transcript
//! goes through [`esc`] (an attacker controls argv, paths and transcript
//! text); the page has one script of ours, a CSP that forbids every network
//! load, and its static parts read without JavaScript.
//!
//! Bounded: beyond what a person can read, rows are aggregated into counts
//! and the page says what was aggregated (see the `MAX_*` bounds).
//!
//! Redacted by default: a report is made to be shared (attached to a CI
//! job), so [`esc`] also replaces secret-looking values
//! ([`crate::views::redact`]) unless the caller asks for the exact text.
//! Each tool call's row is anchored by its native call id
//! ([`anchors`]), the id `correlate --json` and OTLP give it.

mod anchors;
pub mod file;
mod flags;
mod model;
mod page;
mod session;
mod timeline;
mod wire;
mod writing;

use std::cell::Cell;
use std::fmt::Write as _;

pub use model::ReportModel;

use crate::{audit, correlate::CorrelateError, store::StoreError};

/// Tool calls drawn in a session's timeline.
pub const MAX_TIMELINE_CALLS: usize = 300;
/// Process lifetimes drawn under one tool call's bar.
pub const MAX_LANES: usize = 4;
/// Unexplained activities marked on a session's timeline.
pub const MAX_TICKS: usize = 2000;
/// Tool calls listed in detail per session.
pub const MAX_CALLS_LISTED: usize = 1000;
/// Activity rows listed per tool call (the rest are counted per operation).
pub const MAX_CALL_ROWS: usize = 25;
/// Unexplained activities listed per session (the rest counted per who/op/program).
pub const MAX_UNEXPLAINED: usize = 300;
/// Processes shown in the process tree.
pub const MAX_TREE: usize = 2000;
/// Audit findings listed.
pub const MAX_FINDINGS: usize = 1000;
/// Characters kept of one string (a prompt, an argv) before it is cut.
pub const MAX_TEXT: usize = 600;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Correlate(#[from] CorrelateError),
}

/// What was written, for the caller's one-line summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub sessions: usize,
    pub tool_calls: usize,
    /// What the page aggregated instead of listing, one phrase each.
    pub aggregated: Vec<String>,
}

/// The report of `cap` as one HTML document; `findings` (an audit of the
/// same capture) adds the findings section. With `redact`, secret-looking
/// values in every text shown are replaced ([`crate::views::redact`]).
pub fn html(
    cap: &crate::store::Capture,
    findings: Option<&audit::Report>,
    redact: bool,
) -> Result<(String, Summary), ReportError> {
    let model = ReportModel::load(cap)?;
    let _scope = RedactScope::enter(redact);
    Ok(page::render(&model, findings))
}

thread_local! {
    /// Whether [`esc`] redacts. Every string of the page goes through
    /// `esc`, so this one switch covers every section, present and future;
    /// [`html`] sets it for its render (on its own thread) and restores it.
    static REDACT: Cell<bool> = const { Cell::new(true) };
}

/// Sets [`REDACT`] while it lives.
struct RedactScope(bool);

impl RedactScope {
    fn enter(redact: bool) -> Self {
        Self(REDACT.replace(redact))
    }
}

impl Drop for RedactScope {
    fn drop(&mut self) {
        REDACT.set(self.0);
    }
}

/// `s` as the page may show it: secret-looking values replaced unless the
/// render was asked for the exact text. Text cut for a hover title is
/// redacted before the cut, so no part of a secret survives it.
pub(crate) fn shown(s: &str) -> std::borrow::Cow<'_, str> {
    if REDACT.get() {
        crate::views::redact::text(s)
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// HTML-escapes text from a capture or transcript for element content and
/// quoted attribute values. Bytes that were not UTF-8, control characters,
/// bidi and other invisible format characters are shown escaped first
/// (`rawtext::visible_lines`: U+202E must not turn "evil" into "live" on the
/// page); a newline stays one (white space in HTML). Secret-looking values
/// are redacted first ([`shown`]). Hand-written: five replacements are
/// smaller than a dependency.
pub fn esc(s: &str) -> String {
    esc_exact(&shown(s))
}

/// [`esc`] without redaction (of text already redacted).
fn esc_exact(s: &str) -> String {
    let s = crate::rawtext::visible_lines(s);
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// [`esc`] of at most [`MAX_TEXT`] characters, saying how many were cut
/// (redacted before the cut: no part of a secret survives it).
pub fn esc_clip(s: &str) -> String {
    let s = shown(s);
    let n = s.chars().count();
    if n <= MAX_TEXT {
        return esc_exact(&s);
    }
    let kept: String = s.chars().take(MAX_TEXT).collect();
    let mut out = esc_exact(&kept);
    let _ = write!(out, "… ({} more characters)", n - MAX_TEXT);
    out
}

#[cfg(test)]
mod tests;
