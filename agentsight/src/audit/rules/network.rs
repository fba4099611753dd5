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

#[cfg(test)]
mod tests {
    //! `record --enforce` refuses in the kernel exactly what this rule
    //! reports: the compiled rules (`NetworkRule::enforced`) run through the
    //! very function the kernel programs run (`NetPolicy::verdict`) agree
    //! with `net_verdicts` on every destination of a grid.

    use std::net::IpAddr;

    use agentsight_common::net_policy::{NetVerdict, normalized};

    use super::*;
    use crate::audit::policy::Policy;
    use crate::store::{audit_reads::FullEvent, read::EventRecord};

    fn connect(addr: &str, port: u16) -> FullEvent {
        let family = if addr.contains(':') { "ipv6" } else { "ipv4" };
        FullEvent {
            record: EventRecord {
                kind: "connect".into(),
                family: Some(family.into()),
                addr: Some(addr.into()),
                port: Some(i64::from(port)),
                ..EventRecord::default()
            },
            kind: EventKind::Connect,
            exe: None,
            filename: None,
            repeat: None,
            tcp_state: None,
            dev: None,
            ino: None,
        }
    }

    /// What the kernel program decides for `addr:port`, given the address
    /// as the connect4/connect6 hook hands it over.
    fn kernel(policy: &Policy, addr: &str, port: u16) -> NetVerdict {
        let plan = policy.network.enforced().unwrap().unwrap();
        let ip: IpAddr = addr.parse().unwrap();
        let (words, v4_hook) = match ip {
            IpAddr::V4(a) => ([u32::from_ne_bytes(a.octets()), 0, 0, 0], true),
            IpAddr::V6(a) => {
                let o = a.octets();
                let w = |i: usize| u32::from_ne_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
                ([w(0), w(4), w(8), w(12)], false)
            }
        };
        let (words, ipv4) = normalized(words, v4_hook);
        plan.policy.verdict(words, ipv4, port)
    }

    #[test]
    fn the_kernel_refuses_exactly_what_the_audit_reports() {
        let policies = [
            "",
            "[network]\nallow_loopback = true\n",
            "[network]\nallow_dns = false\nallow = [\"127.0.0.1:8080\", \"10.0.0.0/8:443\", \"[::1]:9000\", \":22\", \"fd00::/8\", \"api.example.com\"]\ndeny = [\"10.1.0.0/16\", \"[::1]:9001\", \"*:25\"]\n",
            "[network]\nallow_loopback = true\ndeny = [\"127.0.0.1:6000\", \"0.0.0.0/0:7000\"]\nallow = [\"192.168.1.1\"]\n",
            "[network]\nallow = [\"::/0\", \"[::/0]:1\"]\ndeny = [\"::1\"]\n",
        ];
        let dests = [
            ("127.0.0.1", 8080),
            ("127.0.0.1", 8081),
            ("127.0.0.1", 6000),
            ("127.5.6.7", 53),
            ("0.0.0.0", 80),
            ("10.2.3.4", 443),
            ("10.2.3.4", 80),
            ("10.1.2.3", 443),
            ("192.168.1.1", 7000),
            ("192.168.1.1", 1),
            ("8.8.8.8", 53),
            ("8.8.8.8", 25),
            ("1.2.3.4", 22),
            ("::1", 9000),
            ("::1", 9001),
            ("::1", 9002),
            ("::", 5),
            ("fd00::5", 1),
            ("fe80::1", 53),
            ("2001:db8::1", 22),
            ("::ffff:127.0.0.1", 8080),
            ("::ffff:10.1.2.3", 1),
            ("::ffff:8.8.8.8", 443),
        ];
        let mut checked = 0;
        for src in policies {
            let policy = Policy::parse(src, "p.toml").unwrap();
            let denied = RuleMeta {
                id: policy.network.denied_id.clone(),
                ..policy.network.meta.clone()
            };
            for (addr, port) in dests {
                let audit = net_verdicts(&policy.network, &denied, &connect(addr, port));
                let expected = match audit.first() {
                    None => "allow",
                    Some((m, ..)) if m.id == "network-denied" => "denied",
                    Some(_) => "undeclared",
                };
                let got = match kernel(&policy, addr, port) {
                    NetVerdict::Allow => "allow",
                    NetVerdict::Denied(_) => "denied",
                    NetVerdict::Undeclared => "undeclared",
                };
                assert_eq!(got, expected, "policy {src:?}, {addr} port {port}");
                checked += 1;
            }
        }
        assert_eq!(checked, 5 * 23);
    }

    #[test]
    fn too_many_destinations_cannot_be_enforced() {
        let allow: Vec<String> = (0..65).map(|i| format!("\"10.0.0.{i}\"")).collect();
        let src = format!("[network]\nallow = [{}]\n", allow.join(", "));
        let policy = Policy::parse(&src, "p.toml").unwrap();
        assert_eq!(
            policy.network.enforced().unwrap_err(),
            "more than 64 address or port destinations in [network] allow and deny"
        );
        let off = Policy::parse("[network]\nenabled = false\n", "p.toml").unwrap();
        assert_eq!(off.network.enforced(), Ok(None));
    }
}
