//! agentsight: what AI coding agents really did on a machine.
//!
//! Two evidence layers are kept apart: system evidence captured by the kernel
//! programs (`capture`), and native evidence parsed from the agents' own
//! transcripts (`sessions`). Data flows one way: sources → model → store → views.

/// `eprint!` that never panics: a closed or broken stderr is ignored.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprintln!` that never panics: a closed or broken stderr is ignored.
#[macro_export]
macro_rules! sayln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod audit;
pub mod bridge;
pub mod capture;

pub mod clock;
pub mod correlate;
pub mod docker;
pub mod enforce;
pub mod enrich;
pub mod envreset;
pub mod livecap;
pub mod matching;
pub mod message;
pub mod message_log;
pub mod outfile;
pub mod privileges;
pub mod procinfo;
pub mod rawtext;
pub mod record;
pub mod report;
pub mod store;
pub mod top;
pub mod views;
mod vocabulary;

// The native evidence layer is its own crate (it knows nothing of captures);
// these keep the `crate::sessions::…` and `crate::safefs::…` paths.
pub use agentsight_sessions as sessions;
pub use agentsight_sessions::safefs;
