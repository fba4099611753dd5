//! `agentsight-bench`: the synthetic captures and baselines that
//! `cargo xtask bench correlate` and `cargo xtask bench audit` time the
//! release `agentsight` against. Built and run by xtask only; never shipped.

mod audit;
mod correlate;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use agentsight::store::Capture;

#[derive(Parser, Debug)]
#[command(
    name = "agentsight-bench",
    about = "Synthetic captures for xtask's benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Write a synthetic capture (one long agent session); prints the
    /// session id and the number of events written.
    Synthesize {
        #[arg(long)]
        db: PathBuf,
        #[arg(long, default_value_t = 1_000_000)]
        events: u64,
        #[arg(long, default_value_t = 500)]
        calls: usize,
    },
    /// Time the naive full-scan correlate baseline on a synthetic capture;
    /// prints seconds and attributions found.
    Naive {
        #[arg(long)]
        db: PathBuf,
    },
    /// Rewrite N library reads of a synthetic capture into writes outside
    /// the allowed roots; prints how many were rewritten.
    Inject {
        #[arg(long)]
        db: PathBuf,
        #[arg(long)]
        n: u64,
        /// Leave each write in its process instead of one writer.
        #[arg(long)]
        spread: bool,
    },
    /// Audit with the approach before (queries per finding, no groups).
    AuditBaseline {
        #[arg(long)]
        db: PathBuf,
        #[arg(long)]
        policy: PathBuf,
        /// Where the JSON report goes [default: stdout].
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

fn say(line: &str) -> Result<()> {
    writeln!(std::io::stdout(), "{line}").context("write to stdout")
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Synthesize { db, events, calls } => {
            let n = correlate::synthesize(&db, events, calls)?;
            say(&format!("{} {n}", correlate::SESSION_ID))
        }
        Cmd::Naive { db } => {
            let cap = Capture::open_quick(&db)?;
            let s = cap
                .stored_sessions(correlate::SESSION_ID)?
                .into_iter()
                .next()
                .context("no bench session in the capture")?;
            // The naive baseline reads the file with its own SQL: agentsight
            // keeps its connection private.
            let conn = rusqlite::Connection::open_with_flags(
                &db,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .with_context(|| format!("opening {}", db.display()))?;
            let t = std::time::Instant::now();
            let n = correlate::naive(&conn, &s.session)
                .with_context(|| format!("naive scan of {}", db.display()))?;
            say(&format!("{} {n}", t.elapsed().as_secs_f64()))
        }
        Cmd::Inject { db, n, spread } => {
            let layout = if spread {
                audit::Layout::Spread
            } else {
                audit::Layout::OneProcess
            };
            let done = audit::inject_findings(&db, n, layout)?;
            say(&done.to_string())
        }
        Cmd::AuditBaseline { db, policy, output } => audit::baseline(&db, &policy, output),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "agentsight-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
