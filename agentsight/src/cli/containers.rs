//! `--docker-container NAME` on `sessions`, `session show`, `correlate` and
//! `record`: the sessions of running containers, read inside each by
//! `agentsight bridge` (see docs/bridge.md). Only the protocol's structured
//! results cross.

use std::sync::Arc;

use anyhow::{Context, Result};

use agentsight::bridge::{
    Bridge, BridgeSet, CallError, ContainerName, Docker, ErrorCode, FanoutList, MessageFailure,
    protocol::ListParams,
};
use agentsight::enrich::{ContainerSessions, ContainerSource};
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
    bridges_with(names, false)
}

/// [`bridges`], each started `--allow-messaging` when `messaging`.
fn bridges_with(names: &[String], messaging: bool) -> (Vec<Bridge>, Vec<CallError>) {
    let docker = Docker::new("docker");
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for name in names.iter().filter(|n| seen.insert(n.as_str())) {
        let built = if messaging {
            docker.messaging_bridge(name)
        } else {
            docker.bridge(name)
        };
        match built {
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

/// `session message --docker-container`: the configured containers'
/// bridges, each started `--allow-messaging`.
pub struct Messaging {
    runtime: tokio::runtime::Runtime,
    set: BridgeSet,
}

impl Messaging {
    /// Every bridge built (names checked, containers inspected), or the
    /// first container that failed.
    pub fn new(names: &[String]) -> Result<Self, MessageFailure> {
        let (ok, failed) = bridges_with(names, true);
        if let Some(f) = failed.into_iter().next() {
            return Err(MessageFailure::Call(f));
        }
        let runtime = runtime().map_err(|e| {
            MessageFailure::Call(CallError {
                container: names.join(", "),
                code: ErrorCode::Failed,
                message: format!("{e:#}"),
            })
        })?;
        Ok(Messaging {
            runtime,
            set: BridgeSet::new(ok),
        })
    }

    /// The one container holding session `id`, fail-closed (as [`get`]).
    pub fn find(&self, id: &str) -> Result<(String, AgentSession), MessageFailure> {
        self.runtime
            .block_on(self.set.get(id))
            .map_err(MessageFailure::Lookup)
    }

    /// Sends the message to `container`'s bridge (it must still be
    /// configured); the provider there acknowledged it: `(agent_type,
    /// transport)`.
    pub fn send(
        &self,
        container: &str,
        id: &str,
        text: &str,
    ) -> Result<(String, String), MessageFailure> {
        let Some(bridge) = self
            .set
            .bridges()
            .iter()
            .find(|b| b.container() == container)
        else {
            return Err(MessageFailure::Call(CallError {
                container: container.to_string(),
                code: ErrorCode::Failed,
                message: "the container is no longer configured".into(),
            }));
        };
        self.runtime
            .block_on(bridge.message(id, text))
            .map_err(MessageFailure::Call)
    }
}

/// `record --docker-container`: the containers' sessions for the matching
/// at the end of the recording, each read inside its container through its
/// bridge. Every name is checked before any docker call, and each container
/// is inspected (its `Id` is how the capture's process rows name it) and its
/// bridge built now, so a wrong name fails before anything is recorded.
pub fn record_source(names: &[String]) -> Result<Option<ContainerSource>> {
    if names.is_empty() {
        return Ok(None);
    }
    let parsed = names
        .iter()
        .map(|n| ContainerName::parse(n).with_context(|| format!("--docker-container {n:?}")))
        .collect::<Result<Vec<_>>>()?;
    let docker = Docker::new("docker");
    let mut bridges = Vec::new();
    for name in &parsed {
        let inspect = docker.inspect(name)?;
        let id = inspect
            .get(0)
            .and_then(|c| c.get("Id"))
            .and_then(|v| v.as_str())
            .with_context(|| format!("docker inspect {name}: no Id"))?
            .to_string();
        // The same container named twice (name and id) is asked once.
        if bridges.iter().any(|(known, _)| known == &id) {
            continue;
        }
        bridges.push((id, docker.bridge(name.as_str())?));
    }
    let runtime = runtime()?;
    Ok(Some(ContainerSource(Arc::new(RecordBridges {
        runtime,
        bridges,
    }))))
}

/// The recorded containers' bridges, by `docker inspect` Id.
struct RecordBridges {
    runtime: tokio::runtime::Runtime,
    bridges: Vec<(String, Bridge)>,
}

impl ContainerSessions for RecordBridges {
    fn serves(&self, container_id: &str) -> bool {
        self.bridges.iter().any(|(id, _)| id == container_id)
    }

    fn get(&self, container_id: &str, session_id: &str) -> Result<AgentSession, String> {
        let Some((_, bridge)) = self.bridges.iter().find(|(id, _)| id == container_id) else {
            return Err("not a --docker-container of this recording".into());
        };
        self.runtime
            .block_on(bridge.get(session_id))
            .map_err(|e| e.to_string())
    }
}
