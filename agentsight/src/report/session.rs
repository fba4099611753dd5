//! One bound session: its facts and bindings, flag counts, the timeline,
//! every tool call with its processes, files, connections and DNS names,
//! and the unexplained, unobserved, mismatched and late lists.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use super::{
    MAX_CALL_ROWS, MAX_CALLS_LISTED, MAX_UNEXPLAINED, esc, esc_clip,
    flags::{CallFlags, status_word},
    timeline,
    writing::Page,
};
use crate::correlate::{Activity, Op, Report, ToolReport, describe, report::McpServerInfo};

/// Each call's flags, by tool index.
pub(super) fn flags_by_call(r: &Report) -> HashMap<usize, CallFlags<'_>> {
    let mut by: HashMap<usize, CallFlags> = HashMap::new();
    for c in &r.flags.claimed_not_observed {
        by.entry(c.tool_index).or_default().cno.push(c);
    }
    for c in &r.flags.mismatches {
        by.entry(c.tool_index).or_default().mismatch.push(c);
    }
    for c in &r.flags.late {
        by.entry(c.tool_index).or_default().late.push(c);
    }
    by
}

pub(super) fn sessions(p: &mut Page) -> String {
    let m = p.m;
    let mut s = String::from("<section id=\"sessions\"><h2>Sessions</h2>");
    if m.sessions.is_empty() {
        s.push_str("<p class=\"note\">No session is bound in this capture: there are no tool calls to show. The process tree below is everything that was recorded.</p>");
    }
    for (si, r) in m.sessions.iter().enumerate() {
        session(p, si, r, &mut s);
    }
    s.push_str("</section>");
    s
}

fn session(p: &mut Page, si: usize, r: &Report, s: &mut String) {
    let flags = flags_by_call(r);
    let info = &r.session;
    let _ = write!(
        s,
        "<section class=\"session\" id=\"session-{si}\"><h2>Session {} <code>{}</code></h2><table>",
        esc(&info.provider),
        esc(&info.session_id)
    );
    let mut row = |k: &str, v: String| {
        let _ = write!(s, "<tr><th>{k}</th><td>{v}</td></tr>");
    };
    row(
        "cwd",
        format!("<code>{}</code>", esc(info.cwd.as_deref().unwrap_or("—"))),
    );
    row(
        "transcript",
        format!("<code>{}</code>", esc(&info.source_path)),
    );
    row("models", esc(&info.models.join(", ")));
    row(
        "time",
        format!(
            "{} → {}",
            esc(info.start.as_deref().unwrap_or("?")),
            esc(info.end.as_deref().unwrap_or("?"))
        ),
    );
    let bindings: Vec<String> = r
        .bindings
        .iter()
        .map(|b| {
            format!(
                "tree of <a href=\"#proc-{}\">{}</a> <code>{}</code> by {} ({}×)",
                b.root_process_id,
                b.root_pid,
                esc_clip(&crate::sessions::util::join_argv(&b.root_argv)),
                b.evidence,
                b.evidence_count
            )
        })
        .collect();
    row("bound", bindings.join("<br>"));
    row(
        "clock",
        format!(
            "tolerance {} ms ({}), skew {} ms",
            r.clock.tolerance_ms, r.clock.tolerance_basis, r.clock.skew_ms
        ),
    );
    s.push_str("</table>");
    flag_counts(r, si, s);
    s.push_str(&timeline::svg(p, si, r, &flags));
    calls(p, si, r, &flags, s);
    super::wire::section(p, si, r, s);
    unexplained(p, si, r, s);
    runtime_activity(p, si, r, s);
    flag_lists(p, si, r, s);
    bookkeeping(p, r, s);
    s.push_str("</section>");
}

/// The agent's writes to its own state (transcripts, caches): counted, not flagged.
fn bookkeeping(p: &mut Page, r: &Report, s: &mut String) {
    let _ = write!(
        s,
        "<h3>Agent bookkeeping (not flagged): {}</h3>",
        r.agent_bookkeeping.len()
    );
    if r.agent_bookkeeping.is_empty() {
        s.push_str("<p class=\"note\">None.</p>");
        return;
    }
    s.push_str("<table class=\"bookkeeping\"><tr><th>op</th><th>count</th><th>path</th></tr>");
    for b in r.agent_bookkeeping.iter().take(MAX_UNEXPLAINED) {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            b.op,
            b.count,
            esc_clip(&b.path)
        );
    }
    s.push_str("</table>");
    if r.agent_bookkeeping.len() > MAX_UNEXPLAINED {
        let _ = write!(
            s,
            "<p class=\"note\">{} more paths not listed.</p>",
            r.agent_bookkeeping.len() - MAX_UNEXPLAINED
        );
        p.aggregate(format!(
            "session {}: {} of {} agent bookkeeping paths not listed",
            r.session.session_id,
            r.agent_bookkeeping.len() - MAX_UNEXPLAINED,
            r.agent_bookkeeping.len()
        ));
    }
}

fn flag_counts(r: &Report, si: usize, s: &mut String) {
    let f = &r.flags;
    let _ = write!(
        s,
        "<p class=\"flag-counts\">tool calls {}; \
         <span class=\"badge cno\">claimed, not observed {}</span>\
         <a href=\"#unexplained-{si}\"><span class=\"badge unexplained\">unexplained {}</span></a>\
         <span class=\"badge mismatch\">mismatches {}</span>\
         <span class=\"badge late\">late {}</span>; \
         <a href=\"#runtime-{si}\">agent runtime outside calls {} (not flagged)</a></p>",
        r.session.tool_count,
        f.claimed_not_observed.len(),
        f.observed_not_claimed.len(),
        f.mismatches.len(),
        f.late.len(),
        r.runtime_activity.iter().map(|g| g.count).sum::<usize>()
    );
}

fn calls(p: &mut Page, si: usize, r: &Report, flags: &HashMap<usize, CallFlags>, s: &mut String) {
    s.push_str("<h3>Prompts and tool calls</h3>");
    let mut listed = 0usize;
    let total: usize = r.prompts.iter().map(|pr| pr.tools.len()).sum();
    for (k, prompt) in r.prompts.iter().enumerate() {
        let _ = write!(
            s,
            "<div class=\"prompt\" id=\"prompt-{si}-{k}\"><span class=\"note\">{} prompt</span>\n{}</div>",
            esc(prompt.ts.as_deref().unwrap_or("")),
            esc_clip(&prompt.text)
        );
        for t in &prompt.tools {
            if listed == MAX_CALLS_LISTED {
                break;
            }
            listed += 1;
            call(p, si, t, flags.get(&t.tool_index), s);
        }
    }
    p.tool_calls += total;
    if listed < total {
        let _ = write!(
            s,
            "<p class=\"note\">{} more tool calls not listed.</p>",
            total - listed
        );
        p.aggregate(format!(
            "session {}: {} of {total} tool calls not listed in detail (the first {MAX_CALLS_LISTED} are)",
            r.session.session_id,
            total - listed
        ));
    }
}

/// What a call names: its command, else its paths.
fn call_subject(t: &ToolReport) -> String {
    match &t.command {
        Some(c) => c.clone(),
        None => t
            .paths
            .iter()
            .map(|p| format!("{} {}", p.access.as_str(), p.path))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn call(p: &mut Page, si: usize, t: &ToolReport, flags: Option<&CallFlags>, s: &mut String) {
    let words = flags.map(CallFlags::words).unwrap_or_default();
    // Anchored by its native call id (see `anchors`), which it also shows.
    let id = p.id(p.calls.get(si, t.tool_index));
    let call_id = t
        .call_id
        .as_deref()
        .map(|c| format!(" <code class=\"call-id\">{}</code>", esc(c)))
        .unwrap_or_default();
    let mut badges = String::new();
    for w in &words {
        let class = match *w {
            "claimed-not-observed" => "cno",
            other => other,
        };
        let _ = write!(badges, "<span class=\"badge {class}\">{w}</span>");
    }
    let status = status_word(t.status);
    let _ = write!(
        s,
        "<details class=\"call status-{status}\"{id} data-flags=\"{}\" data-tool-index=\"{}\">\
         <summary><strong>#{} {}</strong>{call_id} <span class=\"badge{}\">{status}</span> <code>{}</code> \
         <span class=\"note\">{}</span>{badges}</summary><div class=\"body\">",
        words.join(" "),
        t.tool_index,
        t.tool_index,
        esc(&t.name),
        if status == "failed" { " failed" } else { "" },
        esc_clip(&call_subject(t)),
        t.duration_ms.map(|d| format!("{d} ms")).unwrap_or_default(),
    );
    if let Some(f) = flags {
        call_flag_lines(f, s);
    }
    if let Some(m) = &t.mcp {
        mcp_server(m, p.m.mcp_arguments.get(&(si, t.tool_index)), s);
    }
    activity_tables(p, t, s);
    s.push_str("</div></details>");
}

/// [`mcp_server`], for the tests.
#[cfg(test)]
pub(super) fn mcp_server_for_test(m: &McpServerInfo, arguments: Option<&String>, s: &mut String) {
    mcp_server(m, arguments, s);
}

/// An MCP call's server: name, tool, transport, kind and the process or
/// URL that served it; then the call's arguments (content: through
/// `esc_clip`, redacted as commands are). Its attributed activity follows
/// in the call's tables with reason `mcp_server`.
fn mcp_server(m: &McpServerInfo, arguments: Option<&String>, s: &mut String) {
    s.push_str("<h4>MCP server</h4><table class=\"mcp\">");
    let mut row = |k: &str, v: String| {
        let _ = write!(s, "<tr><th>{k}</th><td>{v}</td></tr>");
    };
    row("server", format!("<code>{}</code>", esc(&m.server)));
    if let Some(t) = &m.tool {
        row("tool", format!("<code>{}</code>", esc(t)));
    }
    row(
        "transport",
        esc(m.transport.as_deref().unwrap_or("— (not configured)")),
    );
    if let Some(k) = &m.kind {
        row("kind", esc(k));
    }
    match (m.pid, m.command.is_empty()) {
        (Some(pid), _) => row(
            "process",
            format!(
                "pid {pid} <code>{}</code>",
                esc_clip(&crate::sessions::util::join_argv(&m.command))
            ),
        ),
        (None, false) => row(
            "command",
            format!(
                "<code>{}</code> (no process of the run found)",
                esc_clip(&crate::sessions::util::join_argv(&m.command))
            ),
        ),
        (None, true) => {}
    }
    if let Some(u) = &m.url {
        row("url", format!("<code>{}</code>", esc_clip(u)));
    }
    if let Some(a) = arguments {
        row("arguments", format!("<code>{}</code>", esc_clip(a)));
    }
    s.push_str("</table>");
}

fn call_flag_lines(f: &CallFlags, s: &mut String) {
    let mut lines: Vec<(&str, String)> = Vec::new();
    lines.extend(
        f.cno
            .iter()
            .map(|c| ("claimed, not observed", format!("{}: {}", c.what, c.detail))),
    );
    lines.extend(
        f.mismatch
            .iter()
            .map(|c| ("mismatch", format!("{}: {}", c.kind, c.detail))),
    );
    lines.extend(f.late.iter().map(|c| {
        (
            "late",
            format!("{} ms after the result: {}", c.after_end_ms, c.detail),
        )
    }));
    if lines.is_empty() {
        return;
    }
    s.push_str("<ul class=\"call-flags\">");
    for (k, v) in lines {
        let _ = write!(s, "<li><strong>{k}</strong> {}</li>", esc_clip(&v));
    }
    s.push_str("</ul>");
}

/// The call's processes, files, connections and DNS names; past
/// [`MAX_CALL_ROWS`] activities, counts per operation.
fn activity_tables(p: &mut Page, t: &ToolReport, s: &mut String) {
    let shown = &t.activity[..t.activity.len().min(MAX_CALL_ROWS)];
    let procs: Vec<&Activity> = shown.iter().filter(|a| a.op == Op::Exec).collect();
    let files: Vec<&Activity> = shown
        .iter()
        .filter(|a| a.op != Op::Exec && !a.op.is_network())
        .collect();
    let net: Vec<&Activity> = shown.iter().filter(|a| a.op.is_network()).collect();
    if t.activity.is_empty() {
        s.push_str(
            "<p class=\"note\">No activity of the bound trees was attributed to this call.</p>",
        );
    }
    if !procs.is_empty() {
        s.push_str(
            "<h4>Processes</h4><table><tr><th>pid</th><th>argv</th><th>exit</th><th>why</th></tr>",
        );
        for a in procs {
            let id = p.id(format!("ev-{}", a.event_id));
            let _ = write!(
                s,
                "<tr class=\"proc-row\"{id}><td><a href=\"#proc-{}\">{}</a></td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                a.process_id,
                a.pid,
                esc_clip(&describe(a)),
                a.exit_code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "—".into()),
                reason_cell(a)
            );
        }
        s.push_str("</table>");
    }
    if !files.is_empty() {
        s.push_str("<h4>Files</h4><table><tr><th>op</th><th>path</th><th>by</th><th>why</th></tr>");
        for a in files {
            activity_row(p, a, s);
        }
        s.push_str("</table>");
    }
    if !net.is_empty() {
        s.push_str("<h4>Connections</h4><table><tr><th>op</th><th>destination</th><th>by</th><th>why</th></tr>");
        for a in net {
            activity_row(p, a, s);
        }
        s.push_str("</table>");
    }
    dns_list(p, t, s);
    if t.activity.len() > MAX_CALL_ROWS {
        let mut rest: BTreeMap<&str, usize> = BTreeMap::new();
        for a in &t.activity[MAX_CALL_ROWS..] {
            *rest.entry(a.op.as_str()).or_default() += 1;
        }
        let counts: Vec<String> = rest.iter().map(|(op, n)| format!("{op} {n}")).collect();
        let _ = write!(
            s,
            "<p class=\"note aggregated\">{} more activities, counted: {}</p>",
            t.activity.len() - MAX_CALL_ROWS,
            counts.join(", ")
        );
        p.calls_cut.0 += 1;
        p.calls_cut.1 += t.activity.len() - MAX_CALL_ROWS;
    }
}

fn reason_cell(a: &Activity) -> String {
    let mut c = a.reason.map(|r| r.as_str().to_owned()).unwrap_or_default();
    if let Some(b) = &a.blocked {
        let _ = write!(
            c,
            " <a class=\"badge late\" href=\"#denial-{}\">blocked: {} ({})</a>",
            b.denial_id,
            esc(&b.rule),
            esc(&b.mechanism)
        );
    }
    if a.late {
        c.push_str(" <span class=\"badge late\">late</span>");
    }
    c
}

fn activity_row(p: &mut Page, a: &Activity, s: &mut String) {
    let id = p.id(format!("ev-{}", a.event_id));
    let _ = write!(
        s,
        "<tr class=\"act {}{}\"{id}><td>{}</td><td><code>{}</code></td><td><a href=\"#proc-{}\">{}</a> {}</td><td>{}</td></tr>",
        a.op,
        if a.late { " late" } else { "" },
        a.op,
        esc_clip(&describe(a)),
        a.process_id,
        a.pid,
        esc(&a.comm),
        reason_cell(a)
    );
}

/// DNS names asked by the processes attributed to the call.
fn dns_list(p: &Page, t: &ToolReport, s: &mut String) {
    let procs: HashSet<i64> = t.activity.iter().map(|a| a.process_id).collect();
    let mut names: Vec<&str> = Vec::new();
    for q in procs.iter().filter_map(|id| p.m.dns.get(id)).flatten() {
        if !names.contains(&q.name.as_str()) {
            names.push(&q.name);
        }
    }
    if names.is_empty() {
        return;
    }
    names.sort_unstable();
    s.push_str("<h4>DNS names</h4><ul class=\"dns\">");
    for n in names.iter().take(MAX_CALL_ROWS) {
        let _ = write!(s, "<li><code>{}</code></li>", esc(n));
    }
    s.push_str("</ul>");
}

/// Activity no call explains; past [`MAX_UNEXPLAINED`], counts per
/// (who, op, program).
fn unexplained(p: &mut Page, si: usize, r: &Report, s: &mut String) {
    let all = &r.flags.observed_not_claimed;
    let _ = write!(
        s,
        "<h3 id=\"unexplained-{si}\">Unexplained activity (observed, no call claims it): {}</h3>",
        all.len()
    );
    if all.is_empty() {
        s.push_str("<p class=\"note\">None.</p>");
        return;
    }
    s.push_str("<table><tr><th>time</th><th>op</th><th>what</th><th>process</th><th>by</th></tr>");
    for a in all.iter().take(MAX_UNEXPLAINED) {
        let id = p.id(format!("ev-{}", a.event_id));
        let _ = write!(
            s,
            "<tr class=\"flag-unexplained\"{id}><td>{}</td><td>{}</td><td><code>{}</code></td><td><a href=\"#proc-{}\">{}</a> {}</td><td>{}</td></tr>",
            esc(&a.ts),
            a.op,
            esc_clip(&describe(a)),
            a.process_id,
            a.pid,
            esc(&a.comm),
            a.by.map(|b| b.as_str()).unwrap_or("")
        );
    }
    s.push_str("</table>");
    if all.len() > MAX_UNEXPLAINED {
        let mut rest: BTreeMap<(String, &str, &str), usize> = BTreeMap::new();
        for a in &all[MAX_UNEXPLAINED..] {
            let by = a.by.map(|b| b.as_str()).unwrap_or("");
            *rest.entry((a.comm.clone(), a.op.as_str(), by)).or_default() += 1;
        }
        s.push_str(
            "<p class=\"note aggregated\">Not listed, counted per program, op and who:</p><table>",
        );
        for ((comm, op, by), n) in &rest {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{op}</td><td>{by}</td><td>{n}</td></tr>",
                esc(comm)
            );
        }
        s.push_str("</table>");
        p.aggregate(format!(
            "session {}: {} of {} unexplained activities counted per program, op and who (the first {MAX_UNEXPLAINED} are listed)",
            r.session.session_id,
            all.len() - MAX_UNEXPLAINED,
            all.len()
        ));
    }
}

/// Examples shown per runtime group.
const RUNTIME_EXAMPLES: usize = 3;

/// The agent runtime's own activity outside every call, one row per
/// program with its counts and first examples: listed, not flagged.
fn runtime_activity(p: &mut Page, si: usize, r: &Report, s: &mut String) {
    let groups = &r.runtime_activity;
    let _ = write!(
        s,
        "<h3 id=\"runtime-{si}\">Agent runtime outside every call (its own process and the helpers it started; not flagged): {}</h3>",
        groups.iter().map(|g| g.count).sum::<usize>()
    );
    if groups.is_empty() {
        s.push_str("<p class=\"note\">None.</p>");
        return;
    }
    s.push_str("<table class=\"runtime\"><tr><th>program</th><th>by</th><th>activities</th><th>processes</th><th>first examples</th></tr>");
    for g in groups.iter().take(MAX_UNEXPLAINED) {
        let examples: Vec<String> = g
            .examples(RUNTIME_EXAMPLES)
            .iter()
            .map(|e| format!("<code>{}</code>", esc_clip(e)))
            .collect();
        let _ = write!(
            s,
            "<tr class=\"runtime-group\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&g.program),
            g.by,
            g.count,
            g.processes,
            examples.join("<br>")
        );
    }
    s.push_str("</table>");
    if groups.len() > MAX_UNEXPLAINED {
        let _ = write!(
            s,
            "<p class=\"note\">{} more programs not listed.</p>",
            groups.len() - MAX_UNEXPLAINED
        );
        p.aggregate(format!(
            "session {}: {} of {} agent runtime programs not listed",
            r.session.session_id,
            groups.len() - MAX_UNEXPLAINED,
            groups.len()
        ));
    }
}

/// Claimed-not-observed, mismatches and late, each linking to its call.
fn flag_lists(p: &Page, si: usize, r: &Report, s: &mut String) {
    let link = |ti: usize, name: &str| {
        format!(
            "<a href=\"#{}\">#{ti} {}</a>",
            p.calls.get(si, ti),
            esc(name)
        )
    };
    let f = &r.flags;
    let mut list = |title: &str, class: &str, rows: Vec<String>| {
        let _ = write!(s, "<h3>{title}: {}</h3>", rows.len());
        if rows.is_empty() {
            s.push_str("<p class=\"note\">None.</p>");
            return;
        }
        let _ = write!(s, "<ul class=\"{class}\">");
        for row in rows.iter().take(MAX_CALLS_LISTED) {
            let _ = write!(s, "<li>{row}</li>");
        }
        s.push_str("</ul>");
    };
    list(
        "Claimed, not observed",
        "flag-cno",
        f.claimed_not_observed
            .iter()
            .map(|c| {
                format!(
                    "{} {}: {}",
                    link(c.tool_index, &c.name),
                    c.what,
                    esc_clip(&c.detail)
                )
            })
            .collect(),
    );
    list(
        "Mismatches",
        "flag-mismatch",
        f.mismatches
            .iter()
            .map(|c| {
                format!(
                    "{} {}: {}",
                    link(c.tool_index, &c.name),
                    c.kind,
                    esc_clip(&c.detail)
                )
            })
            .collect(),
    );
    list(
        "Late (after the call's result)",
        "flag-late",
        f.late
            .iter()
            .map(|c| {
                format!(
                    "{} <a href=\"#ev-{}\">{} {}</a> {} ms after: {}",
                    link(c.tool_index, ""),
                    c.event_id,
                    c.op,
                    esc(&c.ts),
                    c.after_end_ms,
                    esc_clip(&c.detail)
                )
            })
            .collect(),
    );
}
