//! Where each tool call is in the page. A call's row is anchored by its
//! native call id (`call_…`, `toolu_…`: the `call_id` of `correlate
//! --json`, OTLP's `gen_ai.tool.call.id`), so `report.html#call-toolu_01A`
//! opens it: `call-` and the id percent-encoded, every byte but ASCII
//! letters, digits and `-._~` written `%XX` (an id with quotes, `<` or
//! spaces is still one valid fragment and attribute value). A call with no
//! id, an id used twice in the page, or one that would read like the
//! fallback is anchored by position instead: `call-SESSION-INDEX` (session
//! and tool index in the page, from 0).

use std::collections::{HashMap, HashSet};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::ReportModel;

/// RFC 3986's unreserved characters are kept; everything else is encoded.
const FRAGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The anchor a native call id gives its row (before any fallback).
pub fn of_call_id(call_id: &str) -> String {
    format!("call-{}", utf8_percent_encode(call_id, FRAGMENT))
}

/// The anchor of a call by its place in the page.
fn positional(si: usize, ti: usize) -> String {
    format!("call-{si}-{ti}")
}

/// Whether `anchor` has the shape of a positional one (`call-N-N`).
fn looks_positional(anchor: &str) -> bool {
    anchor
        .strip_prefix("call-")
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(a, b)| {
            [a, b]
                .iter()
                .all(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
        })
}

/// Every call's anchor, by (session index, tool index).
pub(super) struct CallAnchors(HashMap<(usize, usize), String>);

impl CallAnchors {
    pub fn of(m: &ReportModel) -> Self {
        let mut uses: HashMap<String, usize> = HashMap::new();
        let calls: Vec<(usize, usize, Option<String>)> = m
            .sessions
            .iter()
            .enumerate()
            .flat_map(|(si, r)| {
                r.prompts
                    .iter()
                    .flat_map(|p| &p.tools)
                    .map(move |t| (si, t.tool_index, t.call_id.as_deref().map(of_call_id)))
            })
            .collect();
        for (_, _, a) in &calls {
            if let Some(a) = a {
                *uses.entry(a.clone()).or_default() += 1;
            }
        }
        let mut taken = HashSet::new();
        let mut by = HashMap::new();
        for (si, ti, a) in calls {
            let anchor = a
                .filter(|a| uses[a] == 1 && !looks_positional(a))
                .unwrap_or_else(|| positional(si, ti));
            // A tool index listed twice in one session keeps the first.
            if taken.insert(anchor.clone()) {
                by.insert((si, ti), anchor);
            }
        }
        Self(by)
    }

    /// The anchor of call `ti` of session `si` (positional if unknown).
    pub fn get(&self, si: usize, ti: usize) -> String {
        self.0
            .get(&(si, ti))
            .cloned()
            .unwrap_or_else(|| positional(si, ti))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_become_fragments() {
        assert_eq!(of_call_id("toolu_01AbC"), "call-toolu_01AbC");
        assert_eq!(of_call_id("call_x-y.z~"), "call-call_x-y.z~");
        assert_eq!(
            of_call_id("a\"b <c>'d%é#/"),
            "call-a%22b%20%3Cc%3E%27d%25%C3%A9%23%2F"
        );
        assert!(looks_positional("call-0-12"));
        assert!(!looks_positional("call-0-1a"));
        assert!(!looks_positional("call-toolu_1"));
    }
}
