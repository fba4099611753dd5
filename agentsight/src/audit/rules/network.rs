//! `network-undeclared` and `network-denied`: connections, sends and DNS
//! names against the policy's destinations.

use super::Rules;
use crate::audit::{
    AuditError,
    context::{Ctx, Ev},
    fold::{Collector, TcpRef},
    policy::{Destination, NetworkRule, Policy, RuleMeta, is_loopback, parse_addr},
    report::Access,
};
use crate::store::events::EventKind;

pub(in crate::audit) fn net_event(
    ctx: &Ctx,
    policy: &Policy,
    rules: &Rules,
    ev: &Ev,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let n = &policy.network;
    if !n.meta.enabled {
        return Ok(());
    }
    for (meta, message, matched, is_dns_name) in net_verdicts(n, &rules.denied, ev) {
        let access = if is_dns_name {
            Access::Dns
        } else if ev.kind == EventKind::Connect {
            Access::Connect
        } else {
            Access::Send
        };
        let mut p = ctx.base(ev, &meta, message, access);
        // A non-blocking connect's outcome is a later tcp_state event: say
        // whether the connection was made (once the pass has seen it).
        if !is_dns_name
            && ev.errno.as_deref() == Some("EINPROGRESS")
            && let (Some(process_id), Some(addr), Some(port)) = (ev.process_id, &ev.addr, ev.port)
        {
            p.tcp = Some(TcpRef {
                process_id,
                addr: addr.clone(),
                port,
                mono_ns: ev.mono_ns,
            });
        }
        if is_dns_name {
            p.finding.query = ev.query.clone();
        } else {
            p.finding.addr = ev.addr.clone();
            p.finding.port = ev.port.and_then(|p| u16::try_from(p).ok());
        }
        p.finding.evidence.matched = matched;
        ctx.complete_if_per_finding(&mut p)?;
        out.add(p, Some(ev));
    }
    Ok(())
}

/// (rule, message, matched entry, is a DNS name finding)
fn net_verdicts(
    n: &NetworkRule,
    denied: &RuleMeta,
    ev: &Ev,
) -> Vec<(RuleMeta, String, Option<String>, bool)> {
    let mut out = Vec::new();
    // DNS names asked: checked against the name entries.
    if let Some(qs) = &ev.query {
        let mut names: Vec<Destination> = n
            .allow
            .iter()
            .filter(|d| matches!(d, Destination::Name { .. }))
            .cloned()
            .collect();
        names.extend(n.agent_services.iter().cloned());
        for name in qs.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some(d) = n.deny.iter().find(|d| d.matches_name(name)) {
                out.push((
                    denied.clone(),
                    format!("DNS query for denied name {name}"),
                    Some(d.text().to_string()),
                    true,
                ));
            } else if !names.iter().any(|d| d.matches_name(name)) {
                out.push((
                    n.meta.clone(),
                    format!("DNS query for undeclared name {name}"),
                    None,
                    true,
                ));
            }
        }
    }
    if !matches!(ev.family.as_deref(), Some("ipv4" | "ipv6")) {
        return out;
    }
    let Some(ip) = ev.addr.as_deref().and_then(parse_addr) else {
        return out;
    };
    let port = ev.port.and_then(|p| u16::try_from(p).ok());
    let dest = format!(
        "{}:{}",
        ev.addr.as_deref().unwrap_or("?"),
        port.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
    );
    let failed = match (&ev.errno, ev.result) {
        (Some(e), Some(r)) if r < 0 && e != "EINPROGRESS" => format!(" (failed: {e})"),
        _ => String::new(),
    };
    if let Some(d) = n.deny.iter().find(|d| d.matches_addr(ip, port)) {
        out.push((
            denied.clone(),
            format!("{} to denied destination {dest}{failed}", ev.kind),
            Some(d.text().to_string()),
            false,
        ));
        return out;
    }
    // Port 53 is the resolver: the names asked are what the policy checks.
    if n.allow_dns && port == Some(53) {
        return out;
    }
    if n.allow_loopback && is_loopback(ip) {
        return out;
    }
    if !n.allow.iter().any(|d| d.matches_addr(ip, port)) {
        let lo = if is_loopback(ip) { "loopback " } else { "" };
        out.push((
            n.meta.clone(),
            format!("{} to undeclared {lo}destination {dest}{failed}", ev.kind),
            None,
            false,
        ));
    }
    out
}
