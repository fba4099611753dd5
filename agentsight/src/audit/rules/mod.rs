//! The rules, by family: each file judges one kind of evidence and adds
//! its findings to the [`Collector`]. This module holds what they share:
//! the rule list as reported and the metas they fire under.

pub(in crate::audit) mod completeness;
pub(in crate::audit) mod correlated;
pub(in crate::audit) mod exec;
pub(in crate::audit) mod files;
pub(in crate::audit) mod mcp;
pub(in crate::audit) mod messages;
pub(in crate::audit) mod network;
pub(in crate::audit) mod paths;
pub(in crate::audit) mod wire;

use super::{
    fold::{Collector, Pending},
    policy::{Policy, RuleMeta, Severity},
    report::{Evidence, Finding, FindingKind, RuleInfo},
};

/// The rules as reported, and the metas the phases fire under.
pub(in crate::audit) struct Rules {
    pub infos: Vec<RuleInfo>,
    pub denied: RuleMeta,
    pub loss_severity: Severity,
    pub unexplained: RuleMeta,
    pub claims: RuleMeta,
    pub notes: RuleMeta,
}

impl Rules {
    pub fn new(policy: &Policy) -> Self {
        let mut infos: Vec<RuleInfo> = Vec::new();
        let mut add = |m: &RuleMeta, sev: Severity, description: &str| {
            if m.enabled && !infos.iter().any(|r| r.id == m.id) {
                infos.push(RuleInfo {
                    id: m.id.clone(),
                    severity: sev,
                    description: description.to_string(),
                });
            }
        };
        let (w, d, x, n) = (
            &policy.writes,
            &policy.denied_paths,
            &policy.executables,
            &policy.network,
        );
        add(
            &w.meta,
            w.meta.severity,
            "File writes and deletes only under the allowed roots",
        );
        add(
            &d.meta,
            d.meta.severity,
            "Paths never to be read or written",
        );
        // `[container]`'s rules, when they have ids of their own (by
        // default they share the host rules' ids).
        if let Some(c) = &policy.container {
            add(
                &c.writes.meta,
                c.writes.meta.severity,
                "File writes and deletes only under the allowed roots (in containers)",
            );
            add(
                &c.denied_paths.meta,
                c.denied_paths.meta.severity,
                "Paths never to be read or written (in containers)",
            );
        }
        add(
            &x.meta,
            x.meta.severity,
            "Executables denied (or not in the allow list)",
        );
        add(
            &n.meta,
            n.meta.severity,
            "Network destinations and DNS names not declared in the policy",
        );
        let denied = RuleMeta {
            id: n.denied_id.clone(),
            severity: n.meta.severity,
            enabled: n.meta.enabled,
        };
        add(
            &denied,
            n.meta.severity,
            "Network destinations the policy denies",
        );
        let loss_severity = if policy.require_no_loss {
            policy.loss.severity
        } else {
            Severity::Note
        };
        add(
            &policy.loss,
            loss_severity,
            "The capture is complete: no lost events, no sequence gaps",
        );
        let mode_meta = |id: &str, mode: &crate::audit::policy::Mode| RuleMeta {
            id: id.into(),
            severity: mode.severity().unwrap_or(Severity::Note),
            enabled: mode.severity().is_some(),
        };
        let unexplained = mode_meta("unexplained-activity", &policy.unexplained_activity);
        let claims = mode_meta("claims-mismatch", &policy.claims_mismatch);
        add(
            &unexplained,
            unexplained.severity,
            "Activity no tool call explains (from correlate)",
        );
        add(
            &claims,
            claims.severity,
            "Tool calls claimed but not observed, or with mismatched outcomes (from correlate)",
        );
        let m = &policy.external_messages;
        add(
            m,
            m.severity,
            "Sessions continued by agentsight session message while recording",
        );
        if let Some(mcp) = &policy.mcp {
            add(
                &mcp.meta,
                mcp.meta.severity,
                "MCP servers only as the policy's [mcp] allows them (by name or command)",
            );
            let remote = RuleMeta {
                id: mcp.remote_id.clone(),
                ..mcp.meta.clone()
            };
            add(
                &remote,
                remote.severity,
                "Remote MCP servers only at the URLs the policy's [mcp] declares",
            );
        }
        let notes = RuleMeta {
            id: "audit-note".into(),
            severity: Severity::Note,
            enabled: true,
        };
        add(&notes, Severity::Note, "What the audit could not check");
        Self {
            infos,
            denied,
            loss_severity,
            unexplained,
            claims,
            notes,
        }
    }
}

/// A finding without an event (loss, gaps, notes).
pub(in crate::audit) fn plain(
    meta_id: &str,
    severity: Severity,
    kind: FindingKind,
    message: String,
) -> Finding {
    Finding {
        rule: meta_id.to_string(),
        severity,
        message,
        kind,
        access: None,
        path: None,
        addr: None,
        port: None,
        query: None,
        argv: None,
        time: None,
        process: None,
        container: None,
        session: None,
        evidence: Evidence::default(),
        folded: None,
        blocked: false,
    }
}

pub(in crate::audit) fn add_plain(out: &mut Collector, f: Finding) {
    out.add(
        Pending {
            finding: f,
            process: None,
            tcp: None,
        },
        None,
    );
}

pub(in crate::audit) fn note(out: &mut Collector, rules: &Rules, message: String) {
    add_plain(
        out,
        plain(&rules.notes.id, Severity::Note, FindingKind::Note, message),
    );
}
