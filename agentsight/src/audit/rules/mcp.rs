//! `mcp-server-not-allowed` and `mcp-remote-undeclared`: the MCP servers
//! the capture stored for its sessions (`mcp_servers`), judged by the
//! policy's `[mcp]` table. Without the table nothing is judged.

use super::plain;
use crate::{
    audit::{
        AuditError,
        context::Ctx,
        fold::{Collector, Pending},
        policy::{McpRule, Policy},
        report::FindingKind,
    },
    store::mcp::SessionMcpServer,
};

/// One finding per stored server the `[mcp]` table does not allow: a stdio
/// server neither named in `allowed_servers` nor matching an
/// `allowed_commands` glob; a remote (http, sse) server whose URL is not in
/// `allowed_urls`.
pub(in crate::audit) fn servers(
    ctx: &Ctx,
    policy: &Policy,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let Some(rule) = policy.mcp.as_ref().filter(|r| r.meta.enabled) else {
        return Ok(());
    };
    for s in ctx.cap.reader().all_mcp_servers()? {
        let Some((id, message)) = judge(rule, &s) else {
            continue;
        };
        let row = &s.server;
        let mut f = plain(id, rule.meta.severity, FindingKind::McpServer, message);
        if !row.command.is_empty() {
            f.argv = Some(row.command.clone());
        }
        f.process = ctx.process_info(row.process_id, None);
        f.container = ctx.container_of(row.process_id).cloned();
        f.evidence.detail = Some(format!(
            "server {} ({}) configured in {}",
            row.name, row.transport, row.source
        ));
        out.add(
            Pending {
                finding: f,
                process: None,
                tcp: None,
            },
            None,
        );
    }
    Ok(())
}

/// The rule id and message of a server `rule` does not allow.
fn judge<'r>(rule: &'r McpRule, s: &SessionMcpServer) -> Option<(&'r str, String)> {
    let row = &s.server;
    let session = format!("{} session {}", s.provider, s.session_id);
    // The store's transport words (`sessions::mcp::McpTransport`).
    let remote = matches!(row.transport.as_str(), "http" | "sse");
    if remote {
        let url = row.url.as_deref().unwrap_or("");
        if rule.allowed_urls.iter().any(|u| u == url) {
            return None;
        }
        return Some((
            &rule.remote_id,
            format!(
                "remote MCP server {} ({} {url}) of {session} is not declared in [mcp] allowed_urls",
                row.name, row.transport
            ),
        ));
    }
    let command = row.command.join(" ");
    let allowed = rule.allowed_servers.contains(&row.name)
        || rule
            .allowed_commands
            .iter()
            .any(|p| p.matcher.is_match(&command));
    (!allowed).then(|| {
        (
            rule.meta.id.as_str(),
            format!(
                "MCP server {} ({}: {command}) of {session} is not allowed by [mcp]",
                row.name, row.transport
            ),
        )
    })
}
