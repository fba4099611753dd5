//! Views over captures opened read-only: the summary (`show`), the event
//! stream (`export`), OTLP traces (`otlp`), an MCP call's server (`mcp`), which capture to read (`select`), and which session a
//! live process belongs to (`pid`), and the redaction of secrets in shared
//! artifacts (`redact`). They only read; they never modify a file.

pub mod export;
pub mod mcp;
pub mod otlp;
pub mod perfetto;
pub mod pid;
pub mod redact;
pub mod run;
pub mod select;
pub mod show;
