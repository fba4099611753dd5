//! Renderers for an audit report: text for people, JSON for scripts, SARIF
//! 2.1.0 for code-scanning uploads, JUnit XML for CI test reporters.

use serde_json::{Value, json};

// Text: every line built from the capture (messages name paths and argv) is
// shown through `v`, so it stays one line and cannot act on the terminal.
// JSON, SARIF and JUnit carry the strings exactly.
use crate::rawtext::visible as v;

use super::{
    policy::Severity,
    report::{Access, Finding, Report},
};

fn argv_line(argv: &[String]) -> String {
    if argv.is_empty() {
        "(no argv)".to_string()
    } else {
        argv.join(" ")
    }
}

fn chain_line(f: &Finding) -> Option<String> {
    let p = f.process.as_ref()?;
    Some(
        p.chain
            .iter()
            .map(|c| format!("[{}] {}", c.pid, argv_line(&c.argv)))
            .collect::<Vec<_>>()
            .join(" → "),
    )
}

fn tool_line(f: &Finding) -> Option<String> {
    let s = f.session.as_ref()?;
    let mut t = format!("{} session {}", s.provider, s.session_id);
    if let Some(i) = s.tool_index {
        t += &format!(", tool call #{i}");
    }
    if let Some(name) = &s.tool {
        t += &format!(" {name}");
    }
    if let Some(c) = &s.call_id {
        t += &format!(" ({c})");
    }
    t += &format!(", {}", s.role);
    if let Some(r) = &s.reason {
        t += &format!(" by {r}");
    }
    Some(t)
}

fn evidence_line(f: &Finding) -> String {
    let e = &f.evidence;
    let mut parts = Vec::new();
    if !e.event_ids.is_empty() {
        let ids: Vec<String> = e.event_ids.iter().take(5).map(|i| i.to_string()).collect();
        let more = if e.event_ids.len() > 5 { ", …" } else { "" };
        parts.push(format!("events.id {}{more}", ids.join(", ")));
    }
    if e.count > 1 {
        parts.push(format!("{} times", e.count));
    }
    if let Some(fl) = &e.flags {
        parts.push(format!("flags {fl}"));
    }
    if let Some(r) = e.result {
        parts.push(match &e.errno {
            Some(er) => format!("result {r} ({er})"),
            None => format!("result {r}"),
        });
    }
    if let Some(m) = &e.matched {
        parts.push(format!("policy entry {m:?}"));
    }
    if let Some(d) = &e.detail {
        parts.push(d.clone());
    }
    parts.join("; ")
}

/// A folded finding's group and its examples, one line each.
fn folded_lines(f: &Finding) -> Vec<String> {
    let Some(g) = &f.folded else {
        return Vec::new();
    };
    let mut lines = vec![format!(
        "folded   {} findings matching {} in {} process(es); the first {}:",
        g.findings,
        g.pattern,
        g.processes,
        g.examples.len()
    )];
    for e in &g.examples {
        let mut l = format!("  - {}", e.message);
        if let Some(t) = &e.time {
            l += &format!(" at {t}");
        }
        if let Some(p) = &e.process {
            l += &format!(" by [{}] {}", p.pid, argv_line(&p.argv));
        }
        if let Some(c) = &e.container {
            l += &format!(" [container {}]", c.label());
        }
        if e.evidence.count > 1 {
            l += &format!(" ({} times)", e.evidence.count);
        }
        lines.push(l);
    }
    lines
}

fn summary(r: &Report) -> String {
    format!(
        "audit {}: {} error(s), {} warning(s), {} note(s)",
        if r.passed() { "PASSED" } else { "FAILED" },
        r.count(Severity::Error),
        r.count(Severity::Warning),
        r.count(Severity::Note)
    )
}

/// One block per finding, most severe first, then a summary line.
pub fn text(r: &Report) -> String {
    let mut s = format!(
        "capture {}\npolicy  {}\nworkspace {}\n\n",
        v(&r.capture),
        v(&r.policy),
        v(r.workspace.as_deref().unwrap_or("(unknown)"))
    );
    for f in &r.findings {
        s += &format!(
            "{} [{}] {}{}\n",
            f.severity.as_str().to_uppercase(),
            v(&f.rule),
            v(&f.message),
            if f.blocked { " (blocked)" } else { "" }
        );
        if let Some(t) = &f.time {
            s += &format!("    when     {}\n", v(t));
        }
        if let Some(a) = &f.argv {
            s += &format!("    argv     {}\n", v(&argv_line(a)));
        }
        if let Some(c) = chain_line(f) {
            s += &format!("    process  {}\n", v(&c));
        }
        if let Some(c) = &f.container {
            s += &format!("    container {}\n", v(&c.label()));
        }
        if let Some(t) = tool_line(f) {
            s += &format!("    tool     {}\n", v(&t));
        }
        let e = evidence_line(f);
        if !e.is_empty() {
            s += &format!("    evidence {}\n", v(&e));
        }
        for line in folded_lines(f) {
            s += &format!("    {}\n", v(&line));
        }
    }
    if !r.findings.is_empty() {
        s.push('\n');
    }
    s += &summary(r);
    s.push('\n');
    s
}

/// One-line summary, for stderr when the report goes to a file.
pub fn summary_line(r: &Report) -> String {
    summary(r)
}

pub fn json(r: &Report) -> Value {
    json!({
        "capture": r.capture,
        "policy": r.policy,
        "workspace": r.workspace,
        "home": r.home,
        "tmpdirs": r.tmpdirs,
        "correlations": r.correlations,
        "passed": r.passed(),
        "counts": {
            "error": r.count(Severity::Error),
            "warning": r.count(Severity::Warning),
            "note": r.count(Severity::Note),
        },
        "rules": r.rules,
        "findings": r.findings,
    })
}

/// An absolute path as a `file://` URI, percent-encoding what RFC 3986
/// does not allow in a path.
fn file_uri(path: &str) -> String {
    let mut s = String::from("file://");
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            s.push(b as char);
        } else {
            s += &format!("%{b:02X}");
        }
    }
    s
}

/// SARIF 2.1.0: one run, one rule per policy rule, one result per finding.
/// Every result carries a location (GitHub code scanning rejects results
/// without one): the file for file findings, else the capture itself.
pub fn sarif(r: &Report) -> Value {
    let rules: Vec<Value> = r
        .rules
        .iter()
        .map(|ru| {
            json!({
                "id": ru.id,
                "name": ru.id,
                "shortDescription": {"text": ru.description},
                "defaultConfiguration": {"level": ru.severity.as_str()},
            })
        })
        .collect();
    let capture_abs = std::path::absolute(&r.capture)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| r.capture.clone());
    let results: Vec<Value> = r
        .findings
        .iter()
        .map(|f| {
            let rule_index = r.rules.iter().position(|x| x.id == f.rule);
            let (uri, what) = match &f.path {
                Some(p) if p.starts_with('/') && f.access != Some(Access::Exec) => {
                    (file_uri(p), "path")
                }
                _ => (file_uri(&capture_abs), "capture"),
            };
            let mut text = f.message.clone();
            if let Some(c) = chain_line(f) {
                text += &format!(". Process: {c}");
            }
            if let Some(c) = &f.container {
                text += &format!(". Container: {}", c.label());
            }
            if let Some(t) = &f.time {
                text += &format!(". At {t}");
            }
            if let Some(t) = tool_line(f) {
                text += &format!(". Tool: {t}");
            }
            let mut res = json!({
                "ruleId": f.rule,
                "level": f.severity.as_str(),
                "message": {"text": text},
                "locations": [{
                    "physicalLocation": {"artifactLocation": {"uri": uri}},
                    "message": {"text": what},
                }],
                "properties": {
                    "kind": f.kind,
                    "access": f.access,
                    "path": f.path,
                    "addr": f.addr,
                    "port": f.port,
                    "query": f.query,
                    "argv": f.argv,
                    "time": f.time,
                    "process": f.process,
                    "session": f.session,
                    "evidence": f.evidence,
                    "folded": f.folded,
                },
            });
            if let (Some(i), Some(obj)) = (rule_index, res.as_object_mut()) {
                obj.insert("ruleIndex".into(), json!(i));
            }
            // Only for a container's process: host results stay as they were.
            if let (Some(c), Some(props)) = (&f.container, res.get_mut("properties"))
                && let Some(obj) = props.as_object_mut()
            {
                obj.insert("container".into(), json!(c));
            }
            res
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "agentsight",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "invocations": [{"executionSuccessful": true}],
            "artifacts": [{"location": {"uri": file_uri(&capture_abs)}, "description": {"text": "agentsight capture"}}],
            "results": results,
        }],
    })
}

/// XML 1.0 text: escapes markup and drops characters XML cannot carry
/// (control characters an argv may hold).
fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o += "&amp;",
            '<' => o += "&lt;",
            '>' => o += "&gt;",
            '"' => o += "&quot;",
            '\'' => o += "&apos;",
            '\t' | '\n' | '\r' => o.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

/// JUnit XML: one test case per rule. A rule with error-level findings is a
/// failed case (what CI reporters show red); warnings and notes go to the
/// case's system-out so they are visible without failing it.
pub fn junit(r: &Report) -> String {
    let failed_rules = r
        .rules
        .iter()
        .filter(|ru| {
            r.findings
                .iter()
                .any(|f| f.rule == ru.id && f.severity == Severity::Error)
        })
        .count();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    s += &format!(
        "<testsuites name=\"agentsight audit\" tests=\"{}\" failures=\"{failed_rules}\" errors=\"0\">\n",
        r.rules.len()
    );
    s += &format!(
        "  <testsuite name=\"agentsight audit: {}\" tests=\"{}\" failures=\"{failed_rules}\" errors=\"0\" skipped=\"0\">\n",
        xml_escape(&r.capture),
        r.rules.len()
    );
    s += &format!(
        "    <properties>\n      <property name=\"capture\" value=\"{}\"/>\n      <property name=\"policy\" value=\"{}\"/>\n    </properties>\n",
        xml_escape(&r.capture),
        xml_escape(&r.policy)
    );
    for ru in &r.rules {
        let mine: Vec<&Finding> = r.findings.iter().filter(|f| f.rule == ru.id).collect();
        let errors: Vec<&&Finding> = mine
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .collect();
        s += &format!(
            "    <testcase classname=\"agentsight.audit\" name=\"{}\">\n",
            xml_escape(&ru.id)
        );
        if !errors.is_empty() {
            let body: Vec<String> = errors.iter().map(|f| finding_block(f)).collect();
            s += &format!(
                "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
                xml_escape(&ru.id),
                xml_escape(&format!(
                    "{} finding(s): {}",
                    errors.len(),
                    errors[0].message
                )),
                xml_escape(&body.join("\n"))
            );
        }
        let others: Vec<String> = mine
            .iter()
            .filter(|f| f.severity != Severity::Error)
            .map(|f| finding_block(f))
            .collect();
        if !others.is_empty() {
            s += &format!(
                "      <system-out>{}</system-out>\n",
                xml_escape(&others.join("\n"))
            );
        }
        s += "    </testcase>\n";
    }
    s += "  </testsuite>\n</testsuites>\n";
    s
}

fn finding_block(f: &Finding) -> String {
    let mut b = format!(
        "{}: {}{}",
        f.severity.as_str(),
        f.message,
        if f.blocked { " (blocked)" } else { "" }
    );
    if let Some(t) = &f.time {
        b += &format!("\n  when: {t}");
    }
    if let Some(c) = chain_line(f) {
        b += &format!("\n  process: {c}");
    }
    if let Some(c) = &f.container {
        b += &format!("\n  container: {}", c.label());
    }
    if let Some(t) = tool_line(f) {
        b += &format!("\n  tool: {t}");
    }
    let e = evidence_line(f);
    if !e.is_empty() {
        b += &format!("\n  evidence: {e}");
    }
    for line in folded_lines(f) {
        b += &format!("\n  {line}");
    }
    b
}

/// The formats a report is written in (`audit --format`, `record --audit-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Text,
    Json,
    Sarif,
    Junit,
}

/// The report as written out in `format`. Bytes that were not UTF-8 are
/// shown `\xNN` (see `rawtext`); the text's recorded strings are escaped
/// line by line by [`text`] and the whole is checked once more.
pub fn rendered(report: &Report, format: Format) -> Result<String, serde_json::Error> {
    use crate::rawtext::{escaped, escaped_json, visible_lines};
    Ok(match format {
        Format::Text => visible_lines(&text(report)).into_owned(),
        Format::Json => escaped_json(&serde_json::to_string_pretty(&json(report))?) + "\n",
        Format::Sarif => escaped_json(&serde_json::to_string_pretty(&sarif(report))?) + "\n",
        Format::Junit => escaped(&junit(report)),
    })
}
