//! The page being written, shared by the sections that write it: which
//! anchors exist (findings link only to rows that are there) and what was
//! aggregated.

use std::collections::HashSet;

use super::{ReportModel, anchors::CallAnchors};

/// The page being written: which anchors exist (findings link only to rows
/// that are there) and what was aggregated.
pub(super) struct Page<'a> {
    pub m: &'a ReportModel,
    ids: HashSet<String>,
    pub aggregated: Vec<String>,
    pub tool_calls: usize,
    /// Tool calls whose activity rows were cut, and the activities counted.
    pub calls_cut: (usize, usize),
    /// Each tool call's anchor (its native id, see `anchors`).
    pub calls: CallAnchors,
}

impl<'a> Page<'a> {
    pub fn new(m: &'a ReportModel) -> Self {
        Page {
            m,
            ids: HashSet::new(),
            aggregated: Vec::new(),
            tool_calls: 0,
            calls_cut: (0, 0),
            calls: CallAnchors::of(m),
        }
    }

    /// ` id="ID"` the first time `id` is used, nothing after (ids stay unique).
    pub fn id(&mut self, id: String) -> String {
        if self.ids.contains(&id) {
            return String::new();
        }
        let attr = format!(" id=\"{id}\"");
        self.ids.insert(id);
        attr
    }

    pub fn has(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// Notes an aggregation the reader must know about.
    pub fn aggregate(&mut self, what: String) {
        self.aggregated.push(what);
    }
}
