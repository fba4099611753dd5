//! The container bridge: native sessions that live inside a running container,
//! read there by `agentsight bridge` and returned to the host as structured
//! results only (provider credentials never leave the container).
//!
//! - [`protocol`]: the newline-delimited JSON frames, the seven error codes
//!   and the bounds (docs/bridge.md).
//! - [`server`]: the in-container side (`agentsight bridge` on stdin/stdout).
//! - [`docker`]: a container's [`Bridge`], from `crate::docker` (names and
//!   paths validated before any docker call, `docker inspect` and the
//!   identity lookups, each bounded to 10 s).
//! - [`client`]: the host side: one long-lived bridge child per container,
//!   its lock and timeouts, and the fail-closed fan-out (§3, §6, §7).
//!
//! Invariant: the host learns only what the protocol's payloads carry;
//! nothing else of the container's files crosses.

pub mod client;
pub mod docker;
pub mod protocol;
pub mod server;

pub use crate::docker::{
    ContainerLookups, ContainerName, Docker, DockerError, Identity, IdentityError, InvalidInput,
    bridge_argv, identity_from_inspect, validate_container_path,
};
pub use client::{
    Bridge, BridgeSet, CallError, ContainerSession, FanoutList, LookupError, MessageFailure,
};
pub use protocol::{ErrorCode, Payload, Request, WireError};
pub use server::Server;
