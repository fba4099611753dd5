//! A session's timeline as inline SVG, on one clock (wall ms: transcript
//! times as written, capture times through the capture's anchors): prompts,
//! a bar per tool call (linked to its details) with the lifetimes of the
//! processes attributed to it under it, late activity and unexplained
//! activity as ticks. Hover titles carry the details (no script needed).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use super::{
    MAX_LANES, MAX_TICKS, MAX_TIMELINE_CALLS, esc,
    flags::{CallFlags, status_word},
    writing::Page,
};
use crate::correlate::{Op, Report, ToolReport, describe};
use crate::sessions::ToolStatus;
use crate::sessions::util::parse_ts;

const WIDTH: f64 = 1100.0;
const LABEL: f64 = 250.0;
const ROW: f64 = 22.0;
const TOP: f64 = 34.0;

/// Maps wall ms onto the plot's x range.
struct Scale {
    t0: i64,
    span: f64,
}

impl Scale {
    fn x(&self, ms: i64) -> f64 {
        LABEL + (ms - self.t0) as f64 / self.span * (WIDTH - LABEL - 10.0)
    }
}

/// A call's start and end in wall ms (an end the transcript lacks is the start).
fn call_span(t: &ToolReport) -> Option<(i64, i64)> {
    let start = parse_ts(t.start.as_deref()?)?;
    let end = t.end.as_deref().and_then(parse_ts).unwrap_or(start);
    Some((start, end.max(start)))
}

/// The processes a call started (its attributed execs: not the agent's own
/// process, whose file work a call may claim): row id, start, end.
fn call_processes(p: &Page, t: &ToolReport) -> Vec<(i64, i64, Option<i64>)> {
    let mut seen = HashSet::new();
    t.activity
        .iter()
        .filter(|a| a.op == Op::Exec && seen.insert(a.process_id))
        .filter_map(|a| {
            let q = p.m.process(a.process_id)?;
            let (s, e) = p.m.lifetime_ms(q);
            Some((q.id, s, e))
        })
        .collect()
}

fn time_range(p: &Page, r: &Report, calls: &[&ToolReport]) -> Option<(i64, i64)> {
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    let mut take = |ms: i64| {
        lo = lo.min(ms);
        hi = hi.max(ms);
    };
    r.prompts
        .iter()
        .filter_map(|pr| parse_ts(pr.ts.as_deref()?))
        .for_each(&mut take);
    for t in calls {
        if let Some((s, e)) = call_span(t) {
            take(s);
            take(e);
        }
        for (_, s, e) in call_processes(p, t) {
            take(s);
            if let Some(e) = e {
                take(e);
            }
        }
    }
    for a in r.flags.observed_not_claimed.iter().take(MAX_TICKS) {
        take(p.m.wall_ms(a.mono_ns));
    }
    (lo <= hi).then_some((lo, hi))
}

pub(super) fn svg(
    p: &mut Page,
    si: usize,
    r: &Report,
    flags: &HashMap<usize, CallFlags>,
) -> String {
    let all: Vec<&ToolReport> = r.prompts.iter().flat_map(|pr| &pr.tools).collect();
    let calls = &all[..all.len().min(MAX_TIMELINE_CALLS)];
    let Some((t0, t1)) = time_range(p, r, calls) else {
        return "<p class=\"note\">No timed prompt, call or activity to draw.</p>".into();
    };
    let scale = Scale {
        t0,
        span: (t1 - t0).max(1) as f64,
    };
    let height = TOP + ROW * (calls.len() as f64 + 2.0) + 6.0;
    let mut s = format!(
        "<figure class=\"timeline-fig\"><svg class=\"timeline\" id=\"timeline-{si}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height:.0}\" role=\"img\" aria-label=\"timeline of session {}\">",
        esc(&r.session.session_id)
    );
    axis(&scale, t1, height, &mut s);
    prompts_row(&scale, r, &mut s);
    for (row, t) in calls.iter().enumerate() {
        call_row(
            p,
            si,
            &scale,
            TOP + ROW * (row as f64 + 1.0),
            t,
            flags.get(&t.tool_index),
            &mut s,
        );
    }
    unexplained_row(
        p,
        si,
        &scale,
        TOP + ROW * (calls.len() as f64 + 1.0),
        r,
        &mut s,
    );
    s.push_str("</svg>");
    legend(&mut s);
    if all.len() > calls.len() {
        let _ = write!(
            s,
            "<p class=\"note\">{} more tool calls are not drawn (listed below).</p>",
            all.len() - calls.len()
        );
        p.aggregate(format!(
            "session {} timeline: {} of {} tool calls drawn",
            r.session.session_id,
            calls.len(),
            all.len()
        ));
    }
    s.push_str("</figure>");
    s
}

fn axis(scale: &Scale, t1: i64, height: f64, s: &mut String) {
    let span = (t1 - scale.t0).max(1);
    for i in 0..=5 {
        let ms = scale.t0 + span * i / 5;
        let x = scale.x(ms);
        let anchor = if i == 5 { "end" } else { "middle" };
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"14\" x2=\"{x:.1}\" y2=\"{height:.0}\"/><text class=\"axis\" x=\"{x:.1}\" y=\"11\" text-anchor=\"{anchor}\">+{:.2} s</text>",
            (ms - scale.t0) as f64 / 1000.0
        );
    }
    let _ = write!(
        s,
        "<text class=\"axis\" x=\"4\" y=\"11\">{}</text>",
        esc(&crate::sessions::util::format_ts(scale.t0))
    );
}

fn prompts_row(scale: &Scale, r: &Report, s: &mut String) {
    let _ = write!(
        s,
        "<text class=\"lbl\" x=\"4\" y=\"{:.0}\">prompts</text>",
        TOP + 4.0
    );
    for pr in &r.prompts {
        let Some(ms) = pr.ts.as_deref().and_then(parse_ts) else {
            continue;
        };
        let x = scale.x(ms);
        let text: String = super::shown(&pr.text).chars().take(200).collect();
        let _ = write!(
            s,
            "<path class=\"prompt\" d=\"M{:.1} {:.0} l5 -9 h-10 z\"><title>prompt at {}: {}</title></path>",
            x,
            TOP + 8.0,
            esc(pr.ts.as_deref().unwrap_or("")),
            esc(&text)
        );
    }
}

fn call_row(
    p: &Page,
    si: usize,
    scale: &Scale,
    y: f64,
    t: &ToolReport,
    flags: Option<&CallFlags>,
    s: &mut String,
) {
    let words = flags.map(CallFlags::words).unwrap_or_default();
    let mut class = String::from("bar");
    for w in &words {
        class.push_str(match *w {
            "claimed-not-observed" => " flag-cno",
            "mismatch" => " flag-mismatch",
            _ => " flag-late",
        });
    }
    if t.status == ToolStatus::Failed {
        class.push_str(" failed");
    }
    let label: String = format!("#{} {}", t.tool_index, t.name)
        .chars()
        .take(34)
        .collect();
    let procs = call_processes(p, t);
    let _ = write!(
        s,
        "<a href=\"#{}\"><g class=\"call-row\" data-flags=\"{}\"><title>#{} {}{} ({}){}; {} processes</title><text class=\"lbl\" x=\"4\" y=\"{:.0}\">{}</text>",
        p.calls.get(si, t.tool_index),
        words.join(" "),
        t.tool_index,
        esc(&t.name),
        t.call_id
            .as_deref()
            .map(|c| format!(" {}", esc(c)))
            .unwrap_or_default(),
        status_word(t.status),
        if words.is_empty() {
            String::new()
        } else {
            format!(" — {}", words.join(", "))
        },
        procs.len(),
        y + 12.0,
        esc(&label)
    );
    if let Some((start, end)) = call_span(t) {
        let (x0, x1) = (scale.x(start), scale.x(end));
        let _ = write!(
            s,
            "<rect class=\"{class}\" x=\"{x0:.1}\" y=\"{:.0}\" width=\"{:.1}\" height=\"9\" rx=\"2\"/>",
            y + 2.0,
            (x1 - x0).max(2.0)
        );
    }
    for (lane, (id, start, end)) in procs.iter().take(MAX_LANES).enumerate() {
        let x0 = scale.x(*start);
        let x1 = scale.x(end.unwrap_or(*start));
        let argv =
            p.m.process(*id)
                .map(|q| crate::sessions::util::join_argv(&q.argv))
                .unwrap_or_default();
        let argv: String = super::shown(&argv).chars().take(200).collect();
        let _ = write!(
            s,
            "<rect class=\"proc{}\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"2\"><title>{}</title></rect>",
            if end.is_none() { " open" } else { "" },
            y + 13.0 + lane as f64 * 2.5,
            (x1 - x0).max(1.5),
            esc(&argv)
        );
    }
    for a in t.activity.iter().filter(|a| a.late).take(MAX_LANES * 4) {
        let _ = write!(
            s,
            "<rect class=\"late-tick\" x=\"{:.1}\" y=\"{:.0}\" width=\"2\" height=\"14\"><title>late: {} {}</title></rect>",
            scale.x(p.m.wall_ms(a.mono_ns)),
            y,
            a.op,
            esc(&describe(a))
        );
    }
    s.push_str("</g></a>");
}

fn unexplained_row(p: &Page, si: usize, scale: &Scale, y: f64, r: &Report, s: &mut String) {
    let all = &r.flags.observed_not_claimed;
    let _ = write!(
        s,
        "<a href=\"#unexplained-{si}\"><g class=\"unexplained-row\"><text class=\"lbl\" x=\"4\" y=\"{:.0}\">unexplained ({})</text>",
        y + 12.0,
        all.len()
    );
    for a in all.iter().take(MAX_TICKS) {
        let what = match a.op {
            Op::Exec => describe(a),
            _ => format!("{} {}", a.op, describe(a)),
        };
        let what: String = super::shown(&what).chars().take(200).collect();
        let _ = write!(
            s,
            "<rect class=\"unexplained-tick\" x=\"{:.1}\" y=\"{:.0}\" width=\"2\" height=\"12\"><title>{}</title></rect>",
            scale.x(p.m.wall_ms(a.mono_ns)),
            y + 2.0,
            esc(&what)
        );
    }
    s.push_str("</g></a>");
}

fn legend(s: &mut String) {
    s.push_str(
        "<figcaption class=\"legend note\">\
         <span><i class=\"sw\" style=\"background:#3b6fd4\"></i>tool call</span>\
         <span><i class=\"sw\" style=\"background:#c5221f\"></i>failed</span>\
         <span><i class=\"sw\" style=\"border:2px dashed #e67e00\"></i>claimed, not observed</span>\
         <span><i class=\"sw\" style=\"border:2px solid #a50e0e\"></i>mismatch</span>\
         <span><i class=\"sw\" style=\"background:#7b3fc4\"></i>late activity</span>\
         <span><i class=\"sw\" style=\"background:#7fb07f\"></i>process lifetime</span>\
         <span><i class=\"sw\" style=\"background:#d9a400\"></i>unexplained</span>\
         <span>▼ prompt</span></figcaption>",
    );
}
