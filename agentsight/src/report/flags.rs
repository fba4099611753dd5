//! A tool call's flags and status as the session list and the timeline
//! both show them.

use crate::correlate::{Claimed, Late, Mismatch};
use crate::sessions::ToolStatus;

/// The word of a call's status, as `correlate --json` spells it.
pub(super) fn status_word(s: ToolStatus) -> &'static str {
    match s {
        ToolStatus::Ok => "ok",
        ToolStatus::Failed => "failed",
        ToolStatus::Unknown => "unknown",
    }
}

/// The flags of one tool call, by kind.
#[derive(Default)]
pub(super) struct CallFlags<'a> {
    pub cno: Vec<&'a Claimed>,
    pub mismatch: Vec<&'a Mismatch>,
    pub late: Vec<&'a Late>,
}

impl CallFlags<'_> {
    /// The flag words of `data-flags` and the CSS classes (`flag-WORD`).
    pub fn words(&self) -> Vec<&'static str> {
        let mut w = Vec::new();
        if !self.cno.is_empty() {
            w.push("claimed-not-observed");
        }
        if !self.mismatch.is_empty() {
            w.push("mismatch");
        }
        if !self.late.is_empty() {
            w.push("late");
        }
        w
    }
}
