//! The page: head (inline CSS, CSP), run facts, LOSS, findings, the process
//! tree, files and network, unbound trees, what was aggregated, and the one
//! small script (it only opens the `<details>` a link points into).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use super::{MAX_FINDINGS, MAX_TREE, ReportModel, Summary, esc, esc_clip, session, writing::Page};
use crate::{
    audit,
    store::read::ProcessRecord,
    views::show::{command_line, count_word},
};

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:0 16px 48px;color:#1d2330;background:#fbfbfd}
h1{font-size:22px;margin:18px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d8dce6;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12.5px;word-break:break-all}
table{border-collapse:collapse;margin:4px 0 10px;width:100%}td,th{border-bottom:1px solid #e4e7ee;padding:3px 6px;text-align:left;vertical-align:top}th{font-weight:600;color:#4a5266;font-size:12.5px}
.sub{color:#5b6478;margin:0}.loss{border:2px solid #1e8e3e;background:#edf8f0;border-radius:6px;padding:8px 14px;margin:14px 0}.loss.nonzero{border-color:#c5221f;background:#fdecea}
.loss h2{border:0;margin:0;padding:0;font-size:20px;letter-spacing:.04em}.loss p{margin:4px 0 0;font-size:15px}
.badge{display:inline-block;border-radius:9px;padding:0 7px;font-size:12px;margin-left:4px;background:#e8ebf2;color:#333}
.badge.cno{background:#fff0d9;color:#8a4b00}.badge.mismatch,.badge.failed{background:#fde2e1;color:#a50e0e}.badge.late{background:#efe3ff;color:#5b2a9b}.badge.unexplained{background:#fff6c9;color:#6a5400}
details.call{border:1px solid #dde1ea;border-radius:5px;margin:4px 0;background:#fff}details.call>summary{padding:4px 8px;cursor:pointer}details.call[data-flags]:not([data-flags=""]){border-left:4px solid #e67e00}
details.call .body{padding:2px 10px 8px}.prompt{margin:14px 0 4px;padding:6px 10px;background:#eef2fb;border-radius:5px;white-space:pre-wrap}
.tree details{margin-left:14px}.tree>details{margin-left:0}.tree .leaf{margin-left:28px}.tree summary{cursor:pointer}
:target{outline:2px solid #f29900;outline-offset:1px}.note{color:#5b6478;font-size:13px}
svg.timeline{width:100%;height:auto;background:#fff;border:1px solid #dde1ea;border-radius:5px}
svg .lbl{font:11px ui-monospace,monospace;fill:#333}svg .axis{font:10px sans-serif;fill:#666}svg .grid{stroke:#eceff4}
svg .bar{fill:#3b6fd4}svg .bar.failed{fill:#c5221f}svg .bar.flag-cno{fill:#fff;stroke:#e67e00;stroke-width:2;stroke-dasharray:3 2}
svg .bar.flag-mismatch{stroke:#a50e0e;stroke-width:2.5}svg .proc{fill:#7fb07f}svg .proc.open{fill:#b7d4b7}
svg .prompt{fill:#1d2330}svg .late-tick{fill:#7b3fc4}svg .unexplained-tick{fill:#d9a400}svg a:hover .bar{opacity:.8}
tr.flag-wire td,p.flag-wire{background:#eef4ff}
.legend span{margin-right:14px}.sw{display:inline-block;width:14px;height:9px;margin-right:4px;vertical-align:middle}
"#;

/// Opens every `<details>` around the element a link or the address points
/// to (the page reads without it: everything is in the DOM).
/// The fragment is looked up as written first (a call's anchor holds its id
/// percent-encoded: see `anchors`), then decoded.
const SCRIPT: &str = "function agentsightOpen(){var h=location.hash.slice(1);if(!h)return;var e=document.getElementById(h);if(!e){try{e=document.getElementById(decodeURIComponent(h));}catch(x){}}for(;e;e=e.parentElement){if(e.tagName==='DETAILS')e.open=true;}}addEventListener('hashchange',agentsightOpen);agentsightOpen();";

pub(super) fn render(m: &ReportModel, findings: Option<&audit::Report>) -> (String, Summary) {
    let mut p = Page::new(m);
    let loss = loss_section(m);
    let facts = facts_section(m);
    let sessions = session::sessions(&mut p);
    let tree = tree_section(&mut p);
    let activity = activity_section(m);
    let enforcement = enforcement_section(m);
    let unbound = unbound_section(&mut p);
    let findings = findings.map(|f| findings_section(&mut p, f));
    if p.calls_cut.0 > 0 {
        let (calls, acts) = p.calls_cut;
        p.aggregate(format!(
            "{calls} tool calls: {acts} activities beyond the first {} of each counted per operation (under each call)",
            super::MAX_CALL_ROWS
        ));
    }
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>agentsight report: {}</title><style>{STYLE}</style></head><body>\
         <h1>agentsight report</h1><p class=\"sub\">capture <code>{}</code></p>",
        esc(&m.capture),
        esc(&m.capture)
    );
    out.push_str(&loss);
    out.push_str(&facts);
    out.push_str(&aggregated_section(&p.aggregated));
    out.push_str(&enforcement);
    if let Some(f) = findings {
        out.push_str(&f);
    }
    for part in [&sessions, &tree, &activity, &unbound] {
        out.push_str(part);
    }
    let _ = writeln!(out, "<script>{SCRIPT}</script></body></html>");
    let summary = Summary {
        sessions: m.sessions.len(),
        tool_calls: p.tool_calls,
        aggregated: p.aggregated,
    };
    (out, summary)
}

/// LOSS, first and prominent, zero included.
fn loss_section(m: &ReportModel) -> String {
    let l = &m.loss;
    let class = if l.is_zero() {
        "loss zero"
    } else {
        "loss nonzero"
    };
    let mut s = format!(
        "<section id=\"loss\" class=\"{class}\"><h2>LOSS: {}</h2><p class=\"loss-line\">{}</p>",
        if l.is_zero() {
            "none (0 events lost, 0 missing)".to_owned()
        } else {
            format!(
                "{} lost, {} missing",
                l.loss.lost_in_kernel() + l.loss.not_stored,
                l.loss.missing_by_sequence
            )
        },
        esc(&l.line())
    );
    if !m.meta.recorder_finished {
        s.push_str("<p><strong>INCOMPLETE:</strong> the recorder did not finish; what follows its last stored record is unknown.</p>");
    }
    s.push_str("</section>");
    s
}

fn facts_section(m: &ReportModel) -> String {
    let f = &m.meta;
    let text = |v: &Option<String>| esc(v.as_deref().unwrap_or_default());
    let mut s = String::from("<section id=\"facts\"><h2>Run</h2><table>");
    let mut row = |k: &str, v: String| {
        let _ = write!(s, "<tr><th>{k}</th><td>{v}</td></tr>");
    };
    row(
        "recorded",
        format!("{} → {}", text(&f.started_at), text(&f.ended_at)),
    );
    row("host", format!("{} ({})", text(&f.host), text(&f.kernel)));
    if !f.command.is_empty() {
        let status = f
            .command_exit_status
            .map(|st| format!(" → exit status {st}"))
            .unwrap_or_default();
        row(
            "command",
            format!(
                "<code>{}</code>{status}",
                esc_clip(&command_line(&f.command))
            ),
        );
    }
    if let Some(r) = &f.end_reason {
        row("ended", esc(r));
    }
    // "Complete" as every export says it: the recorder finished and nothing
    // was lost (the OTLP root's `agentsight.capture.complete`).
    row(
        "complete",
        if m.completeness.complete() {
            "yes"
        } else {
            "NO"
        }
        .into(),
    );
    row(
        "recorder finished",
        if f.recorder_finished { "yes" } else { "NO" }.into(),
    );
    row("events", m.events.to_string());
    row("processes", m.processes.len().to_string());
    row("sessions", m.sessions.len().to_string());
    s.push_str("</table></section>");
    s
}

fn aggregated_section(aggregated: &[String]) -> String {
    if aggregated.is_empty() {
        return "<p class=\"note\" id=\"aggregated\">Nothing was aggregated: every row is listed.</p>"
            .into();
    }
    let mut s = String::from(
        "<section id=\"aggregated\"><h2>Aggregated</h2><p class=\"note\">Beyond what a person can read, this report counts instead of listing:</p><ul>",
    );
    for a in aggregated {
        let _ = write!(s, "<li>{}</li>", esc(a));
    }
    s.push_str("</ul></section>");
    s
}

/// The process tree: nested `<details>`, each process `proc-ID`.
fn tree_section(p: &mut Page) -> String {
    let m = p.m;
    let ids: HashSet<i64> = m.processes.iter().map(|q| q.id).collect();
    let mut kids: HashMap<Option<i64>, Vec<&ProcessRecord>> = HashMap::new();
    for q in &m.processes {
        kids.entry(q.parent_id.filter(|id| ids.contains(id)))
            .or_default()
            .push(q);
    }
    let mut s = String::from("<section id=\"tree\"><h2>Process tree</h2><div class=\"tree\">");
    // An explicit stack (no recursion: a capture may hold a deep chain);
    // `None` closes a `<details>`.
    let mut stack: Vec<Option<(&ProcessRecord, usize)>> = kids
        .get(&None)
        .map(|v| v.iter().rev().map(|q| Some((*q, 0))).collect())
        .unwrap_or_default();
    let mut shown = 0usize;
    while let Some(item) = stack.pop() {
        let Some((q, depth)) = item else {
            s.push_str("</div></details>");
            continue;
        };
        if shown == MAX_TREE {
            continue;
        }
        shown += 1;
        let line = process_line(m, q, m.loss.exits_known);
        let id = p.id(format!("proc-{}", q.id));
        match kids.get(&Some(q.id)) {
            Some(children) => {
                let open = if depth < 2 { " open" } else { "" };
                let _ = write!(s, "<details{open}{id}><summary>{line}</summary><div>");
                stack.push(None);
                stack.extend(children.iter().rev().map(|c| Some((*c, depth + 1))));
            }
            None => {
                let _ = write!(s, "<div class=\"leaf\"{id}>{line}</div>");
            }
        }
    }
    if m.processes.is_empty() {
        s.push_str("<p class=\"note\">No process was recorded.</p>");
    }
    s.push_str("</div></section>");
    if shown < m.processes.len() {
        p.aggregate(format!(
            "process tree: {} of {} processes not listed (the first {MAX_TREE} by start time are)",
            m.processes.len() - shown,
            m.processes.len()
        ));
    }
    s
}

/// `PID argv [duration, outcome]`, escaped.
pub(super) fn process_line(m: &ReportModel, q: &ProcessRecord, exits_known: bool) -> String {
    let cmd = if q.argv.is_empty() {
        format!("[{}]", q.comm.as_deref().unwrap_or_default())
    } else {
        crate::sessions::util::join_argv(&q.argv)
    };
    let outcome = match (q.exit_code, q.signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ if exits_known => "still running at end".to_owned(),
        _ => "no exit seen".to_owned(),
    };
    let (start, end) = m.lifetime_ms(q);
    let dur = end
        .map(|e| format!("{} ms", e - start))
        .unwrap_or_else(|| "—".into());
    format!(
        "<span class=\"mono\">{}</span> <code>{}</code> <span class=\"note\">[{dur}, {outcome}]</span>",
        q.pid,
        esc_clip(&cmd)
    )
}

/// Files written, read and changed, network destinations, DNS names (the
/// same sections as `show`).
fn activity_section(m: &ReportModel) -> String {
    let mut s = String::from("<section id=\"files-network\"><h2>Files and network</h2>");
    for sec in &m.activity {
        let _ = write!(s, "<h3>{}</h3>", esc(sec.title));
        if sec.rows.is_empty() {
            s.push_str("<p class=\"note\">(none)</p>");
            continue;
        }
        s.push_str("<table>");
        for (what, a, b) in &sec.rows {
            let _ = write!(
                s,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc_clip(what),
                count_word(*a),
                count_word(*b)
            );
        }
        s.push_str("</table>");
    }
    s.push_str("</section>");
    s
}

/// Most denials the report lists one per row (the rest are counted).
const MAX_DENIAL_ROWS: usize = 200;

/// `record --enforce`: the mode, the counts, the rules only audited, one
/// row per access refused (time, process, access, file, rule, mechanism).
/// Nothing for a capture recorded without it.
fn enforcement_section(m: &ReportModel) -> String {
    let Some((meta, rows)) = &m.enforcement else {
        return String::new();
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "<section id=\"enforcement\"><h2>Enforcement: {} blocked</h2>\
         <p class=\"note\">record --enforce, mode <code>{}</code>: {} refused; {} not stored</p>",
        crate::store::enforcement::blocked_total(rows),
        esc(&meta.mode),
        crate::store::enforcement::kind_counts(rows),
        meta.lost
    );
    if !meta.audited_not_enforced.is_empty() {
        let _ = write!(
            s,
            "<p class=\"note\">audited, not enforced: {}</p>",
            esc(&meta.audited_not_enforced.join(", "))
        );
    }
    if meta.refused_allowed > 0 {
        let _ = write!(
            s,
            "<p class=\"note\">refused though the policy allows them (Landlock cannot grant them): {} write(s): {}</p>",
            meta.refused_allowed,
            esc(&meta.refused_allowed_paths.join(", "))
        );
    }
    if !rows.is_empty() {
        s.push_str("<table>");
        for r in rows.iter().take(MAX_DENIAL_ROWS) {
            let who = r
                .process_id
                .and_then(|id| m.process(id))
                .map(|q| {
                    let argv = crate::sessions::util::join_argv(&q.argv);
                    format!(" {}", esc_clip(&argv))
                })
                .unwrap_or_default();
            let _ = write!(
                s,
                "<tr id=\"denial-{}\"><td>{}</td><td>pid {}{who}</td><td>{}</td><td><code>{}</code></td><td>{} ({})</td></tr>",
                r.id,
                esc(&crate::clock::rfc3339_ns(
                    m.anchors.wall_ns(r.mono_ns).max(0) as u64
                )),
                r.pid,
                r.kind.as_str(),
                esc_clip(&r.target()),
                esc(&r.rule),
                esc(&r.mechanism)
            );
        }
        s.push_str("</table>");
        if rows.len() > MAX_DENIAL_ROWS {
            let _ = write!(
                s,
                "<p class=\"note\">… {} more</p>",
                rows.len() - MAX_DENIAL_ROWS
            );
        }
    }
    s.push_str("</section>");
    s
}

fn unbound_section(p: &mut Page) -> String {
    let m = p.m;
    let mut s = String::from("<section id=\"unbound\"><h2>Unbound trees</h2>");
    if !m.has_bindings {
        s.push_str("<p class=\"note\">This capture holds no sessions or bindings (recorded before binding, or by an older version): every tree is unbound.</p>");
    } else if m.unbound.is_empty() {
        s.push_str("<p class=\"note\">None: every process tree was bound to a session.</p>");
    }
    if !m.unbound.is_empty() {
        s.push_str("<table><tr><th>root</th><th>status</th><th>argv</th><th>note</th></tr>");
        for t in &m.unbound {
            let link = if p.has(&format!("proc-{}", t.root_process_id)) {
                format!("<a href=\"#proc-{}\">{}</a>", t.root_process_id, t.root_pid)
            } else {
                t.root_pid.to_string()
            };
            let _ = write!(
                s,
                "<tr class=\"unbound\"><td>{link}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                t.status,
                esc_clip(&crate::sessions::util::join_argv(&t.root_argv)),
                esc(t.note.as_deref().unwrap_or(""))
            );
        }
        s.push_str("</table>");
    }
    s.push_str("</section>");
    s
}

/// Where a finding points in this page: the first cited event listed, else
/// its process in the tree, else its tool call.
fn finding_target(p: &Page, f: &audit::Finding) -> Option<String> {
    if let Some(id) = f
        .evidence
        .event_ids
        .iter()
        .map(|e| format!("ev-{e}"))
        .find(|id| p.has(id))
    {
        return Some(id);
    }
    if let Some(pr) = &f.process {
        let id = format!("proc-{}", pr.process_id);
        if p.has(&id) {
            return Some(id);
        }
    }
    let tool = f.session.as_ref()?;
    let s =
        p.m.sessions
            .iter()
            .position(|r| r.session.session_id == tool.session_id)?;
    let id = p.calls.get(s, usize::try_from(tool.tool_index?).ok()?);
    p.has(&id).then_some(id)
}

fn findings_section(p: &mut Page, report: &audit::Report) -> String {
    let mut s = format!(
        "<section id=\"findings\"><h2>Audit findings ({} errors, {} warnings, {} notes)</h2><p class=\"note\">policy <code>{}</code></p>",
        report.count(audit::Severity::Error),
        report.count(audit::Severity::Warning),
        report.count(audit::Severity::Note),
        esc(&report.policy)
    );
    if report.findings.is_empty() {
        s.push_str("<p>No finding.</p>");
    } else {
        s.push_str("<table><tr><th>severity</th><th>rule</th><th>finding</th><th>cites</th></tr>");
    }
    for (i, f) in report.findings.iter().take(MAX_FINDINGS).enumerate() {
        let cites = match finding_target(p, f) {
            Some(id) => format!("<a class=\"cite\" href=\"#{id}\">{id}</a>"),
            None => "<span class=\"note\">not listed in this report</span>".into(),
        };
        let _ = write!(
            s,
            "<tr class=\"finding {}\" id=\"finding-{i}\"><td>{}</td><td>{}</td><td>{}</td><td>{cites}</td></tr>",
            f.severity.as_str(),
            f.severity.as_str(),
            esc(&f.rule),
            esc_clip(&f.message)
        );
    }
    if !report.findings.is_empty() {
        s.push_str("</table>");
    }
    if report.findings.len() > MAX_FINDINGS {
        p.aggregate(format!(
            "audit findings: {} of {} not listed (the first {MAX_FINDINGS} are)",
            report.findings.len() - MAX_FINDINGS,
            report.findings.len()
        ));
    }
    s.push_str("</section>");
    s
}
