//! `agentsight audit`: policy checks over a capture, for CI gates.
//!
//! A policy (`policy`) is checked against a read-only capture (`eval`, in
//! phases: `context`, `rules` by family, the `scan` over the events,
//! `complete`, `fold`) and the findings (`report`) are rendered as text,
//! JSON, SARIF 2.1.0 or JUnit XML (`render`). See `docs/audit.md`.

mod blocked;
mod complete;
mod context;
pub mod eval;
pub mod fold;
pub mod inodes;
pub mod policy;
pub mod render;
pub mod report;
mod rules;
mod scan;

pub use eval::{audit, audit_with};
pub use policy::{Policy, PolicyError, Severity};
pub use report::{Finding, Report, Strategy};

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "the capture has no root process to take the workspace from (recorded with --pid or --agent?): set `workspace` in the policy (needed by {pattern:?})"
    )]
    NoWorkspace { pattern: String },
    #[error("policy pattern {pattern:?}: {reason}")]
    Pattern { pattern: String, reason: String },
}

#[cfg(test)]
mod container_tests;
#[cfg(test)]
mod tests;
