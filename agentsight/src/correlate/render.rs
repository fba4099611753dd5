//! Text rendering of a correlation: a timeline a person scans in a terminal.
//! Colour only when asked for (a TTY without `NO_COLOR`).

use std::fmt::Write;

use super::report::{Activity, Flags, McpServerInfo, PromptReport, Report, ToolReport, describe};
// Every string from the capture or the transcript is shown through `v`
// (control, bidi and format characters escaped): it cannot start a line of
// ours or act on the terminal, with or without colour.
use crate::rawtext::visible as v;
use crate::store::read::ContainerRef;

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
    fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }
    fn yellow(&self, s: &str) -> String {
        self.paint("33", s)
    }
    fn cyan(&self, s: &str) -> String {
        self.paint("36", s)
    }
    fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
}

/// `HH:MM:SS.mmm` of an RFC 3339 timestamp (UTC).
fn hms(ts: &str) -> &str {
    ts.get(11..23).unwrap_or(ts)
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.chars().map(|c| if c == '\n' { '⏎' } else { c }).collect();
    let flat = v(&flat).into_owned();
    if flat.chars().count() > max {
        let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    } else {
        flat
    }
}

fn activity_line(st: &Style, a: &Activity) -> String {
    let mut line = format!(
        "{}  {:<7} pid {:<7} {}",
        v(hms(&a.ts)),
        a.op.as_str(),
        a.pid,
        one_line(&describe(a), 100)
    );
    if a.op == super::Op::Exec
        && let Some(c) = a.exit_code
    {
        let _ = write!(line, "  → exit {c}");
    }
    if let Some(r) = a.reason {
        line.push_str(&format!("  {}", st.dim(&format!("[{r}]"))));
    }
    if let Some(b) = &a.blocked {
        let what = format!("BLOCKED ({}, {})", v(&b.rule), v(&b.mechanism));
        line.push_str(&format!("  {}", st.yellow(&what)));
    }
    if a.late {
        line.push_str(&format!("  {}", st.yellow("LATE")));
    }
    line.push_str(&container_marker(a.container.as_ref(), "  "));
    line
}

/// `[container NAME]` (its short id when it has no name) after a process
/// or tree of a container; nothing for the host's.
fn container_marker(c: Option<&ContainerRef>, sep: &str) -> String {
    c.map(|c| format!("{sep}[container {}]", v(c.name.as_deref().unwrap_or(&c.id))))
        .unwrap_or_default()
}

/// Renders the report; `colour` adds ANSI styling.
pub fn text(r: &Report, colour: bool) -> String {
    let st = Style { on: colour };
    let mut o = String::new();
    header(&mut o, &st, r);
    clock(&mut o, &st, r);
    for p in &r.prompts {
        prompt(&mut o, &st, p);
    }
    flags(&mut o, &st, &r.flags);
    bookkeeping_and_trees(&mut o, &st, r);
    continued_externally(&mut o, &st, r);
    if let Some(w) = &r.wire {
        wire_section(&mut o, &st, w);
    }
    o
}

/// The model traffic of the session (`record --wire`) as text: one line per
/// exchange (sizes sent and received, ids, usage; never content), then what
/// one side has and the other lacks. Used by `correlate` and `session show
/// --wire`.
pub fn wire_text(w: &super::wire::WireReport, colour: bool) -> String {
    let mut o = String::new();
    wire_section(&mut o, &Style { on: colour }, w);
    o
}

fn wire_section(o: &mut String, st: &Style, w: &super::wire::WireReport) {
    let _ = writeln!(
        o,
        "{}",
        st.bold(&format!(
            "model traffic (wire): {} exchange(s) in the capture; {} joined to this session, {} of its trees the transcript does not show, {} not model calls",
            w.exchanges_in_capture,
            w.turns.len(),
            w.not_in_transcript.len(),
            w.not_model_calls.len()
        ))
    );
    let mut rows: Vec<(&super::wire::WireTurn, bool)> = w
        .turns
        .iter()
        .map(|t| (t, true))
        .chain(w.not_in_transcript.iter().map(|t| (t, false)))
        .collect();
    rows.sort_by_key(|(t, _)| (t.mono_ns.0, t.exchange));
    for (t, joined) in rows {
        let how = if joined {
            format!("joined by {}", v(&t.joined_by))
        } else {
            st.yellow("NOT IN THE TRANSCRIPT")
        };
        let usage = t.usage.map_or_else(
            || "usage -".to_owned(),
            |u| {
                format!(
                    "usage in {} out {} cache_read {} cache_write {}",
                    u.input, u.output, u.cache_read, u.cache_creation
                )
            },
        );
        let status = match (t.status, &t.error) {
            (_, Some(e)) => st.red(&format!("error {}", v(e))),
            (Some(code), None) => format!("status {code}"),
            (None, None) => "no status".to_owned(),
        };
        let _ = writeln!(
            o,
            "  #{} {}  {} {}  {}\n    sent: system {} B, tools {} ({} B), history {} message(s) ({} B), request {} B\n    got: {} B{}{}, {usage}, stop {}, {status}",
            t.exchange,
            v(&t.time),
            st.cyan(&v(t.model.as_deref().unwrap_or("-"))),
            v(t.response_id.as_deref().unwrap_or("")),
            how,
            t.system_bytes,
            t.tools_offered,
            t.tools_bytes,
            t.messages,
            t.history_bytes,
            t.request_bytes,
            t.response_bytes,
            if t.tool_calls.is_empty() {
                ""
            } else {
                ", calls "
            },
            v(&t.tool_calls.join(" ")),
            v(t.stop_reason.as_deref().unwrap_or("-")),
        );
    }
    let lists: [(&str, &[String]); 3] = [
        (
            "transcript turns with no model call captured",
            &w.transcript_turns_without_exchange,
        ),
        (
            "tool calls the model requested that the transcript lacks",
            &w.calls_requested_not_in_transcript,
        ),
        (
            "tool calls in the transcript never requested on the wire",
            &w.calls_not_requested_on_wire,
        ),
    ];
    for (title, ids) in lists {
        if !ids.is_empty() {
            let _ = writeln!(
                o,
                "  {} ({}): {}",
                st.yellow(title),
                ids.len(),
                v(&ids.join(", "))
            );
        }
    }
    for d in &w.usage_differences {
        let _ = writeln!(
            o,
            "  {} {}: wire in {} out {} cache_read {} cache_write {}; transcript in {} out {} cache_read {} cache_write {}",
            st.yellow("usage differs for"),
            v(&d.response_id),
            d.wire.input,
            d.wire.output,
            d.wire.cache_read,
            d.wire.cache_creation,
            d.transcript.input,
            d.transcript.output,
            d.transcript.cache_read,
            d.transcript.cache_creation
        );
    }
}

/// The session message submissions that continued this session while
/// recording.
fn continued_externally(o: &mut String, st: &Style, r: &Report) {
    if r.external_messages.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "{}",
        st.bold("continued externally (agentsight session message)")
    );
    for m in &r.external_messages {
        let _ = writeln!(
            o,
            "  {}  {}{}  by {} (uid {}) as uid {}  {} bytes  {}{}{}",
            crate::clock::rfc3339_ns(crate::store::read::ms_to_ns(m.time_ms)),
            v(&m.transport),
            m.container
                .as_deref()
                .map(|c| format!(" in container {}", v(c)))
                .unwrap_or_default(),
            v(&m.invoking_user),
            m.invoking_uid,
            m.run_as_uid,
            m.message_bytes,
            v(m.outcome.as_deref().unwrap_or("outcome unknown")),
            m.detail
                .as_deref()
                .map(|d| format!(" ({})", v(d)))
                .unwrap_or_default(),
            m.provider_pid
                .map(|p| format!("  provider pid {p}"))
                .unwrap_or_default(),
        );
    }
}

/// The session, the capture and the trees bound to the session.
fn header(o: &mut String, st: &Style, r: &Report) {
    let s = &r.session;
    let _ = writeln!(
        o,
        "{} {} ({})  cwd {}",
        st.bold("session"),
        st.bold(&v(&s.session_id)),
        s.provider,
        v(s.cwd.as_deref().unwrap_or("?"))
    );
    let _ = writeln!(
        o,
        "  {} → {}   transcript {} ({})",
        v(s.start.as_deref().unwrap_or("?")),
        v(s.end.as_deref().unwrap_or("?")),
        v(&s.source_path),
        r.session_source
    );
    let _ = writeln!(o, "{} {}", st.bold("capture"), v(&r.capture));
    if r.bindings.is_empty() {
        let _ = writeln!(
            o,
            "  {}",
            st.red("no process tree of this capture is bound to the session")
        );
    }
    for b in &r.bindings {
        let _ = writeln!(
            o,
            "  tree pid {} ({}) bound by {} ×{}{}{}",
            b.root_pid,
            one_line(&crate::sessions::util::join_argv(&b.root_argv), 60),
            st.green(b.evidence.as_str()),
            b.evidence_count,
            b.evidence_path
                .as_deref()
                .map(|p| format!(" of {}", v(p)))
                .unwrap_or_default(),
            container_marker(b.container.as_ref(), " ")
        );
    }
}

fn clock(o: &mut String, st: &Style, r: &Report) {
    let c = &r.clock;
    let _ = writeln!(
        o,
        "{} {}; call windows ±{} ms ({}), argv matches searched ±{} ms; skew {} ms ({} samples{})",
        st.bold("clock"),
        c.basis,
        c.tolerance_ms,
        c.tolerance_basis,
        c.argv_search_ms,
        c.skew_ms,
        c.skew_samples,
        c.median_exec_delay_ms
            .map(|d| format!(", median call→exec {d} ms"))
            .unwrap_or_default()
    );
    if c.skew_ms > c.argv_search_ms {
        let _ = writeln!(
            o,
            "  {}",
            st.yellow("skew exceeds the tolerance: windows may miss activity")
        );
    }
}

/// One prompt of the timeline with its calls.
fn prompt(o: &mut String, st: &Style, p: &PromptReport) {
    let _ = writeln!(o);
    match p.index {
        Some(i) => {
            let _ = writeln!(
                o,
                "{} {}  {}",
                st.bold(&format!("▸ prompt {i}")),
                v(p.ts.as_deref().map(hms).unwrap_or("?")),
                one_line(&p.text, 100)
            );
        }
        None => {
            let _ = writeln!(o, "{}", st.bold("▸ before the first prompt"));
        }
    }
    for t in &p.tools {
        tool(o, st, t);
    }
}

/// One call: its line, command, paths and attributed activity.
fn tool(o: &mut String, st: &Style, t: &ToolReport) {
    let mut status = format!("{:?}", t.status).to_lowercase();
    let failed = status == "failed";
    // The transcript's own exit code, where it states one.
    if let Some(c) = t.exit_code {
        let _ = write!(status, " exit {c}");
    }
    let _ = writeln!(
        o,
        "  ● {} {}  {} → {}{}  {}",
        st.cyan(&v(&t.name)),
        st.dim(&v(t.call_id.as_deref().unwrap_or(""))),
        v(t.start.as_deref().map(hms).unwrap_or("?")),
        v(t.end.as_deref().map(hms).unwrap_or("?")),
        t.duration_ms
            .map(|d| format!(" ({d} ms)"))
            .unwrap_or_default(),
        if failed { st.red(&status) } else { status }
    );
    if let Some(m) = &t.mcp {
        let _ = writeln!(o, "      {}", mcp_line(m));
    }
    if let Some(cmd) = &t.command {
        let _ = writeln!(o, "      $ {}", one_line(cmd, 100));
    }
    for tp in &t.paths {
        let _ = writeln!(o, "      {} {}", tp.access.as_str(), v(&tp.path));
    }
    if t.activity.is_empty() {
        let _ = writeln!(o, "      {}", st.dim("(no activity attributed)"));
    }
    for a in &t.activity {
        let _ = writeln!(o, "      {}", activity_line(st, a));
    }
}

/// An MCP call's server: `mcp fs/write_file · stdio pid 123 (node
/// …/dist/index.js /w)`, `mcp notes/write_note · http http://…`, or `·
/// not configured`.
fn mcp_line(m: &McpServerInfo) -> String {
    let mut line = format!("mcp {}", v(&m.server));
    if let Some(t) = &m.tool {
        let _ = write!(line, "/{}", v(t));
    }
    let Some(transport) = &m.transport else {
        return line + " · not configured";
    };
    let _ = write!(line, " · {}", v(transport));
    if let Some(pid) = m.pid {
        let _ = write!(line, " pid {pid}");
    }
    if !m.command.is_empty() {
        // Long paths keep their last two components: `…/dist/index.js`.
        let words: Vec<String> = m
            .command
            .iter()
            .map(|w| {
                let parts: Vec<&str> = w.split('/').collect();
                if parts.len() > 3 {
                    format!("…/{}", parts[parts.len() - 2..].join("/"))
                } else {
                    w.clone()
                }
            })
            .collect();
        let _ = write!(line, " ({})", one_line(&words.join(" "), 60));
    }
    if let Some(u) = &m.url {
        let _ = write!(line, " {}", v(u));
    }
    line
}

/// A flag section's heading: `none` when it is empty.
fn flag_heading(o: &mut String, title: &str, empty: bool) {
    let _ = writeln!(o, "  {title}: {}", if empty { "none" } else { "" });
}

fn flags(o: &mut String, st: &Style, f: &Flags) {
    let _ = writeln!(o);
    let _ = writeln!(o, "{}", st.bold("flagged"));
    if !f.before_recording.is_empty() {
        let calls: Vec<String> = f.before_recording.iter().map(|i| format!("#{i}")).collect();
        let _ = writeln!(
            o,
            "  before the recording (not judged): tool calls {}",
            calls.join(", ")
        );
    }
    flag_heading(
        o,
        "claimed but not observed",
        f.claimed_not_observed.is_empty(),
    );
    for c in &f.claimed_not_observed {
        let _ = writeln!(
            o,
            "    {} {} {}: {}",
            st.red("✗"),
            v(&c.name),
            v(c.call_id.as_deref().unwrap_or("")),
            v(&c.detail)
        );
    }
    flag_heading(
        o,
        "observed but not claimed",
        f.observed_not_claimed.is_empty(),
    );
    for a in &f.observed_not_claimed {
        let _ = writeln!(
            o,
            "    {} {}  ({})",
            st.red("?"),
            activity_line(st, a),
            a.by.map(|b| b.as_str()).unwrap_or("")
        );
    }
    flag_heading(o, "mismatches", f.mismatches.is_empty());
    for m in &f.mismatches {
        let _ = writeln!(
            o,
            "    {} {} {} [{}]: {}",
            st.red("≠"),
            v(&m.name),
            v(m.call_id.as_deref().unwrap_or("")),
            m.kind,
            v(&m.detail)
        );
    }
    flag_heading(o, "late activity", f.late.is_empty());
    for l in &f.late {
        let _ = writeln!(
            o,
            "    {} call {} {} {} {} ms after the call ended: {}",
            st.yellow("⏱"),
            v(l.call_id.as_deref().unwrap_or("")),
            v(hms(&l.ts)),
            l.op,
            l.after_end_ms,
            one_line(&l.detail, 80)
        );
    }
}

fn bookkeeping_and_trees(o: &mut String, st: &Style, r: &Report) {
    if !r.agent_bookkeeping.is_empty() {
        let _ = writeln!(o, "{}", st.bold("agent bookkeeping (not flagged)"));
        for b in &r.agent_bookkeeping {
            let _ = writeln!(o, "  {} ×{}  {}", b.op, b.count, v(&b.path));
        }
    }
    runtime_activity(o, st, r);
    if !r.unmatched_trees.is_empty() {
        let _ = writeln!(o, "{}", st.bold("trees bound to no session"));
        for t in &r.unmatched_trees {
            let _ = writeln!(
                o,
                "  pid {} ({}) {}{}{}",
                t.root_pid,
                one_line(&crate::sessions::util::join_argv(&t.root_argv), 60),
                t.status,
                t.note
                    .as_deref()
                    .map(|n| format!(": {}", v(n)))
                    .unwrap_or_default(),
                container_marker(t.container.as_ref(), " ")
            );
        }
    }
}

/// Examples shown per runtime group.
const RUNTIME_EXAMPLES: usize = 3;

/// The agent runtime's own activity outside every call, by program.
fn runtime_activity(o: &mut String, st: &Style, r: &Report) {
    if r.runtime_activity.is_empty() {
        return;
    }
    let total: usize = r.runtime_activity.iter().map(|g| g.count).sum();
    let _ = writeln!(
        o,
        "{} {total}",
        st.bold("agent runtime outside every call (not flagged):")
    );
    for g in &r.runtime_activity {
        let examples: Vec<String> = g
            .examples(RUNTIME_EXAMPLES)
            .iter()
            .map(|e| one_line(e, 80))
            .collect();
        let _ = writeln!(
            o,
            "  {} {} ×{} ({} process{}): {}",
            g.by,
            v(&g.program),
            g.count,
            g.processes,
            if g.processes == 1 { "" } else { "es" },
            examples.join("; ")
        );
    }
}
