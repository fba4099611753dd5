//! agentsight: what AI coding agents really did on a machine.
//!
//! Two evidence layers are kept apart: system evidence captured by the kernel
//! programs (`capture`), and native evidence parsed from the agents' own
//! transcripts (`sessions`). Data flows one way: sources → model → store → views.

pub mod audit;
pub mod capture;
pub mod cli;
pub mod clock;
pub mod correlate;
pub mod matching;
pub mod privileges;
pub mod procinfo;
pub mod record;
pub mod sessions;
pub mod store;
pub mod views;
