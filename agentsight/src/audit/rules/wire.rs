//! `content-sent-to-model`, `relay-bypass`, `model-endpoint`: the wire layer
//! of a `record --wire` capture judged (`docs/wire.md`). Without stored
//! exchanges nothing is judged.
//!
//! Content: every denied file a tracked process read (the file rules note
//! them) is read again now, and each of its lines of at least
//! `min_line_bytes` is looked for in every request body sent after the read,
//! as is and as a JSON string escapes it. A file that changed since, or
//! cannot be read now, gives a note instead — never a silent pass.

use agentsight_wire::decode::{Limits, request_body};
use agentsight_wire::routes::Upstream;

use super::plain;
use crate::{
    audit::{
        AuditError,
        context::Ctx,
        fold::{Collector, Pending},
        policy::{Policy, Severity},
        report::{Finding, FindingKind},
    },
    clock::{Anchors, rfc3339_ns},
    store::{events::EventKind as K, meta::key, wire::WireExchangeRow},
};

/// Most bytes of a denied file read to look for its content.
const MAX_FILE_BYTES: u64 = 4 << 20;

pub(in crate::audit) fn exchanges(
    ctx: &Ctx,
    policy: &Policy,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let rule = &policy.wire;
    if !rule.meta.enabled {
        return Ok(());
    }
    let rows = ctx.cap.reader().wire_exchanges()?;
    let anchors = ctx.cap.anchors()?;
    if !rows.is_empty() {
        content_sent(ctx, policy, &rows, &anchors, out);
        endpoints(policy, &rows, &anchors, out);
    }
    bypass(ctx, policy, out)
}

fn add(out: &mut Collector, finding: Finding) {
    out.add(
        Pending {
            finding,
            process: None,
            tcp: None,
        },
        None,
    );
}

fn note(out: &mut Collector, id: &str, message: String) {
    add(out, plain(id, Severity::Note, FindingKind::Note, message));
}

/// The lines of `text` that identify it, as byte strings to look for: each
/// line at least `min` bytes long (trimmed), and its JSON-escaped form.
fn needles(text: &[u8], min: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for line in text.split(|b| *b == b'\n') {
        let line = line.trim_ascii();
        if line.len() < min || out.iter().any(|(l, _)| l == line) {
            continue;
        }
        let escaped = serde_json::to_string(&String::from_utf8_lossy(line))
            .map(|s| s.trim_matches('"').as_bytes().to_vec())
            .unwrap_or_default();
        out.push((line.to_vec(), escaped));
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

fn content_sent(
    ctx: &Ctx,
    policy: &Policy,
    rows: &[WireExchangeRow],
    anchors: &Anchors,
    out: &mut Collector,
) {
    let rule = &policy.wire;
    let bodies: Vec<(usize, Vec<u8>)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (i, request_body(&r.raw, &Limits::default()).0))
        .collect();
    for (path, read) in ctx.history.sensitive_reads.borrow().iter() {
        let (process_id, read_ns, kind) = (&read.process_id, &read.mono_ns, read.kind.label());
        let text = match crate::safefs::read_small(std::path::Path::new(path), MAX_FILE_BYTES) {
            Ok(t) => t,
            Err(e) => {
                note(
                    out,
                    &rule.meta.id,
                    format!(
                        "content of {kind} file {path} not checked against the model traffic: {e}"
                    ),
                );
                continue;
            }
        };
        let needles = needles(&text, rule.min_line_bytes);
        if needles.is_empty() {
            note(
                out,
                &rule.meta.id,
                format!(
                    "content of {kind} file {path} not checked against the model traffic: no line of {} bytes or more",
                    rule.min_line_bytes
                ),
            );
            continue;
        }
        let mut hits: Vec<(usize, usize)> = Vec::new();
        for (i, body) in &bodies {
            if (rows[*i].raw.request.first_ns as i64) < *read_ns {
                continue;
            }
            let n = needles
                .iter()
                .filter(|(l, e)| contains(body, l) || contains(body, e))
                .count();
            if n > 0 {
                hits.push((*i, n));
            }
        }
        let Some(&(first, lines)) = hits.first() else {
            continue;
        };
        let row = &rows[first];
        // A tool's HTTPS (`curl -d @file`, cut from TLS) carried it, not a
        // model call: said as such.
        let (to, what) = if row.is_model_call() {
            (
                "the model".to_string(),
                format!(
                    "{} {}",
                    row.raw.route,
                    row.decoded.model.as_deref().unwrap_or("model not named")
                ),
            )
        } else {
            (
                row.raw.upstream.clone(),
                format!("tls, not a model API: {}", request_line(row)),
            )
        };
        let mut f = plain(
            &rule.meta.id,
            rule.meta.severity,
            FindingKind::WireExchange,
            format!(
                "content of {kind} file {path} was sent to {to}: {lines} of its {} identifying lines in exchange {} ({what}), {} exchange(s) in all",
                needles.len(),
                row.id,
                hits.len()
            ),
        );
        f.path = Some(path.clone());
        f.time = Some(rfc3339_ns(
            anchors.wall_ns(row.raw.request.first_ns).max(0) as u64
        ));
        f.process = ctx.process_info(*process_id, None);
        f.evidence.detail = Some(format!(
            "wire_exchanges.id = {}; upstream {}",
            hits.iter()
                .map(|(i, _)| rows[*i].id.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            row.raw.upstream
        ));
        add(out, f);
    }
}

/// `METHOD PATH` of an exchange's request, as decoded.
fn request_line(row: &WireExchangeRow) -> String {
    format!(
        "{} {}",
        row.decoded.method.as_deref().unwrap_or("?"),
        row.decoded.path.as_deref().unwrap_or("?")
    )
}

fn endpoints(policy: &Policy, rows: &[WireExchangeRow], anchors: &Anchors, out: &mut Collector) {
    let rule = &policy.wire;
    let Some(allowed) = &rule.allowed_endpoints else {
        return;
    };
    let mut seen: Vec<&str> = Vec::new();
    // A tool's HTTPS (TLS, no model API) is not model traffic: the network
    // rules judge its destination.
    for row in rows.iter().filter(|r| r.is_model_call()) {
        let up = row.raw.upstream.as_str();
        if allowed.iter().any(|a| a.trim_end_matches('/') == up) || seen.contains(&up) {
            continue;
        }
        seen.push(up);
        let mut f = plain(
            &rule.endpoint_id,
            rule.meta.severity,
            FindingKind::WireExchange,
            format!(
                "model traffic to {up} (route {}), not in [wire] allowed_endpoints",
                row.raw.route
            ),
        );
        f.time = Some(rfc3339_ns(
            anchors.wall_ns(row.raw.request.first_ns).max(0) as u64
        ));
        f.evidence.detail = Some(format!("first: wire_exchanges.id = {}", row.id));
        add(out, f);
    }
}

/// The relayed upstreams, from the capture's meta (`KNOB → URL`).
fn upstreams(ctx: &Ctx) -> Vec<(String, Upstream)> {
    let Ok(Some(json)) = ctx.cap.meta(key::WIRE_ROUTES) else {
        return Vec::new();
    };
    let routes: Vec<String> = serde_json::from_str(&json).unwrap_or_default();
    routes
        .iter()
        .filter_map(|r| {
            let (name, url) = r.split_once(" → ")?;
            Some((name.to_string(), Upstream::parse(url).ok()?))
        })
        .collect()
}

/// A tracked process that connected to a relayed upstream's address (an IP
/// or `localhost` upstream) or asked DNS for its host name reached the model
/// without the relay.
fn bypass(ctx: &Ctx, policy: &Policy, out: &mut Collector) -> Result<(), AuditError> {
    let rule = &policy.wire;
    let ups = upstreams(ctx);
    if ups.is_empty() {
        return Ok(());
    }
    let mut found: Vec<(String, i64)> = Vec::new();
    ctx.cap
        .full_events_of_kinds(&[K::Connect, K::DnsWrite], |ev| -> Result<(), AuditError> {
            for (name, up) in &ups {
                let hit = match ev.kind {
                    K::DnsWrite => !up.is_loopback()
                        && ev.query.as_deref().is_some_and(|q| {
                            q.trim_end_matches('.').eq_ignore_ascii_case(&up.host)
                        }),
                    _ => {
                        ev.result.is_none_or(|r| r >= 0 || r == -115)
                            && ev.port == Some(i64::from(up.port))
                            && ev.addr.as_deref().is_some_and(|a| {
                                a == up.host || (up.host == "localhost" && a == "127.0.0.1")
                            })
                    }
                };
                if !hit || found.contains(&(name.clone(), ev.process_id.unwrap_or(-1))) {
                    continue;
                }
                found.push((name.clone(), ev.process_id.unwrap_or(-1)));
                let how = match ev.kind {
                    K::DnsWrite => format!("asked DNS for {}", up.host),
                    _ => format!("connected to {}:{}", up.host, up.port),
                };
                let mut f = plain(
                    &rule.bypass_id,
                    rule.meta.severity,
                    FindingKind::Event(ev.kind.as_str().to_owned()),
                    format!(
                        "model traffic bypassed the relay: a recorded process {how}, the upstream of {name} ({})",
                        up.url()
                    ),
                );
                f.addr = ev.addr.clone();
                f.port = ev.port.and_then(|p| u16::try_from(p).ok());
                f.query = ev.query.clone();
                f.time = Some(rfc3339_ns(ev.wall_ns.max(0) as u64));
                f.process = ctx.process_info(ev.process_id, Some(ev.mono_ns));
                f.evidence.event_ids = vec![ev.id];
                f.evidence.count = 1;
                add(out, f);
            }
            Ok(())
        })?;
    Ok(())
}
