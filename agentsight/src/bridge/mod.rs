//! The container bridge: native sessions that live inside a running container,
//! read there by `agentsight bridge` and returned to the host as structured
//! results only (provider credentials never leave the container).
//!
//! - [`protocol`]: the newline-delimited JSON frames, the seven error codes
//!   and the bounds (docs/container-bridge.md §4–§5).
//! - [`server`]: the in-container side (`agentsight bridge` on stdin/stdout).
//! - [`validate`]: container names and container paths, checked before any
//!   docker call (§10).
//! - [`identity`]: the execution identity inside the container from
//!   `docker inspect`, and the `docker exec` argv of the bridge (§9).
//! - [`docker`]: `docker inspect` and the auxiliary `docker exec` lookups,
//!   each bounded (10 s), giving a container's [`Bridge`].
//! - [`client`]: the host side: one long-lived bridge child per container,
//!   its lock and timeouts, and the fail-closed fan-out (§3, §6, §7).
//!
//! Invariant: the host learns only what the protocol's payloads carry;
//! nothing else of the container's files crosses.

pub mod client;
pub mod docker;
pub mod identity;
pub mod protocol;
pub mod server;
pub mod validate;

pub use client::{Bridge, BridgeSet, CallError, ContainerSession, FanoutList, LookupError};
pub use docker::{Docker, DockerError};
pub use identity::{ContainerLookups, Identity, IdentityError, bridge_argv, identity_from_inspect};
pub use protocol::{ErrorCode, Payload, Request, WireError};
pub use server::Server;
pub use validate::{ContainerName, InvalidInput, validate_container_path};
