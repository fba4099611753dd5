//! `--docker-container NAME` on `sessions`, `session show` and `correlate`:
//! the sessions of running containers, read inside each by `agentsight
//! bridge` (see docs/bridge.md). Only the protocol's structured results cross.

use anyhow::{Context, Result};

use agentsight::bridge::{
    Bridge, BridgeSet, CallError, Docker, ErrorCode, FanoutList, protocol::ListParams,
};
use agentsight::sessions::AgentSession;

/// Exit status of a `sessions` list that names failed containers but lists
/// the healthy ones (every container failing is an error: 2).
pub const PARTIAL_LIST: i32 = 3;

/// A current-thread runtime for the bridges' children, timeouts and fan-out.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the bridge runtime")
}

/// The bridge of each container, built (validated, inspected) before any is
/// used; a container whose bridge cannot be built is returned as failed. A
/// name given twice is one container.
fn bridges(names: &[String]) -> (Vec<Bridge>, Vec<CallError>) {
    let docker = Docker::new("docker");
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for name in names.iter().filter(|n| seen.insert(n.as_str())) {
        match docker.bridge(name) {
            Ok(b) => ok.push(b),
            Err(e) => failed.push(CallError {
                container: name.clone(),
                code: ErrorCode::Failed,
                message: e.to_string(),
            }),
        }
    }
    (ok, failed)
}

/// The merged list of every container's sessions (filtered inside each
/// container, newest first, at most `params.limit`), and the containers
/// that failed.
pub fn list(names: &[String], params: ListParams) -> Result<FanoutList> {
    let (ok, mut failed) = bridges(names);
    let set = BridgeSet::new(ok);
    let mut listed = runtime()?.block_on(set.list_with(params));
    failed.append(&mut listed.failed);
    listed.failed = failed;
    Ok(listed)
}

/// The one container holding session `id` (exact id), fail-closed: any
/// container that fails, or the id in two containers, fails the lookup.
pub fn get(names: &[String], id: &str) -> Result<(String, AgentSession)> {
    let (ok, failed) = bridges(names);
    if let Some(f) = failed.first() {
        anyhow::bail!("looking up session {id}: {f}");
    }
    let set = BridgeSet::new(ok);
    Ok(runtime()?.block_on(set.get(id))?)
}
