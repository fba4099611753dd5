//! The model traffic of one session (`record --wire`), turn by turn: what
//! each request sent (sizes of the system prompt, the tools offered, the
//! history), what came back, and how it was joined to the transcript —
//! beside the transcript's own account, never merged into it. Nothing for
//! a capture recorded without `--wire`. No content is shown: sizes, ids,
//! counts only.

use std::fmt::Write as _;

use super::{MAX_UNEXPLAINED, esc, writing::Page};
use crate::correlate::{Report, wire::WireTurn};

/// The section, after the session's tool calls.
pub(super) fn section(p: &mut Page, si: usize, r: &Report, s: &mut String) {
    let Some(w) = &r.wire else {
        return;
    };
    let _ = write!(
        s,
        "<h3 id=\"wire-{si}\">Model traffic (wire): {} exchange(s) joined to this session, {} the transcript does not show</h3>",
        w.turns.len(),
        w.not_in_transcript.len()
    );
    if w.turns.is_empty() && w.not_in_transcript.is_empty() {
        s.push_str("<p class=\"note\">No model call of this session's trees was captured.</p>");
    } else {
        table(p, si, r, s);
    }
    if !w.not_model_calls.is_empty() {
        let _ = write!(
            s,
            "<p class=\"note\">{} other HTTPS exchange(s) of its processes (no model API): see the capture's MODEL TRAFFIC in <code>show</code>.</p>",
            w.not_model_calls.len()
        );
    }
    let lists: [(&str, &[String]); 3] = [
        (
            "Transcript turns with no model call captured",
            &w.transcript_turns_without_exchange,
        ),
        (
            "Tool calls the model requested that the transcript lacks",
            &w.calls_requested_not_in_transcript,
        ),
        (
            "Tool calls in the transcript the model never requested on the wire",
            &w.calls_not_requested_on_wire,
        ),
    ];
    for (title, ids) in lists {
        if ids.is_empty() {
            continue;
        }
        let shown: Vec<String> = ids
            .iter()
            .take(MAX_UNEXPLAINED)
            .map(|i| format!("<code>{}</code>", esc(i)))
            .collect();
        let _ = write!(
            s,
            "<p class=\"flag-wire\">{title} ({}): {}</p>",
            ids.len(),
            shown.join(", ")
        );
    }
    if !w.usage_differences.is_empty() {
        s.push_str("<table class=\"wire-usage\"><tr><th>response</th><th>usage on the wire</th><th>usage in the transcript</th></tr>");
        for d in &w.usage_differences {
            let _ = write!(
                s,
                "<tr class=\"flag-wire\"><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&d.response_id),
                usage_text(Some(&d.wire)),
                usage_text(Some(&d.transcript))
            );
        }
        s.push_str("</table>");
    }
}

/// One row per exchange, in time order; those the transcript does not
/// show are flagged.
fn table(p: &mut Page, si: usize, r: &Report, s: &mut String) {
    let Some(w) = &r.wire else {
        return;
    };
    let mut rows: Vec<(&WireTurn, bool)> = w
        .turns
        .iter()
        .map(|t| (t, false))
        .chain(w.not_in_transcript.iter().map(|t| (t, true)))
        .collect();
    rows.sort_by_key(|(t, _)| (t.mono_ns.0, t.exchange));
    s.push_str(
        "<table class=\"wire\"><tr><th>#</th><th>time</th><th>model</th><th>joined by</th>\
         <th>system</th><th>tools offered</th><th>history</th><th>request</th>\
         <th>response</th><th>tool calls requested</th><th>usage</th><th>stop</th><th>status</th></tr>",
    );
    for (t, hidden) in rows.iter().take(MAX_UNEXPLAINED) {
        let id = p.id(format!("wire-{si}-{}", t.exchange));
        let calls: Vec<String> = t
            .tool_calls
            .iter()
            .map(|c| format!("<code>{}</code>", esc(c)))
            .collect();
        let status = match (&t.error, t.status) {
            (Some(e), Some(st)) => format!("{st}: {}", esc(e)),
            (Some(e), None) => esc(e),
            (None, Some(st)) => st.to_string(),
            (None, None) => "—".to_owned(),
        };
        let _ = write!(
            s,
            "<tr{}{id}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} B</td><td>{} ({} B)</td>\
             <td>{} message(s), {} B</td><td>{} B</td><td>{} B</td><td>{}</td><td>{}</td><td>{}</td><td>{status}</td></tr>",
            if *hidden { " class=\"flag-wire\"" } else { "" },
            t.exchange,
            esc(&t.time),
            esc(t.model.as_deref().unwrap_or("—")),
            if *hidden {
                "not in the transcript".to_owned()
            } else {
                esc(&t.joined_by)
            },
            t.system_bytes,
            t.tools_offered,
            t.tools_bytes,
            t.messages,
            t.history_bytes,
            t.request_bytes,
            t.response_bytes,
            calls.join(" "),
            usage_text(t.usage.as_ref()),
            esc(t.stop_reason.as_deref().unwrap_or("—")),
        );
    }
    s.push_str("</table>");
    if rows.len() > MAX_UNEXPLAINED {
        let _ = write!(
            s,
            "<p class=\"note\">{} more exchanges not listed.</p>",
            rows.len() - MAX_UNEXPLAINED
        );
        p.aggregate(format!(
            "session {}: {} of {} model exchanges not listed",
            r.session.session_id,
            rows.len() - MAX_UNEXPLAINED,
            rows.len()
        ));
    }
}

/// "in 1200, out 80, cache read 1000, cache write 0".
fn usage_text(u: Option<&agentsight_wire::Usage>) -> String {
    match u {
        None => "—".to_owned(),
        Some(u) => {
            let mut t = format!(
                "in {}, out {}, cache read {}, cache write {}",
                u.input, u.output, u.cache_read, u.cache_creation
            );
            if u.reasoning > 0 {
                t += &format!(", reasoning {}", u.reasoning);
            }
            t
        }
    }
}
