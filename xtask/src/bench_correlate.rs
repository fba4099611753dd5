//! `cargo xtask bench correlate`: synthesizes a 1,000,000-event capture with
//! the real store schema (one long agent session: 500 tool calls, their
//! processes, library reads, work-file writes, transcript appends and API
//! connections) and times the release binary's `correlate` on it, next to a
//! naive baseline (read every event, test every call against every event)
//! measured in the same run. Target: correlate under 1 s. The capture and
//! the baseline come from `agentsight-bench` (not part of the shipped
//! binary), built here in release.
//!
//! `AGENTSIGHT_BENCH_DIR` chooses where the capture goes;
//! `AGENTSIGHT_BENCH_KEEP=1` keeps it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

const EVENTS: u64 = 1_000_000;
const CALLS: usize = 500;
const RUNS: usize = 5;
const TARGET: Duration = Duration::from_secs(1);

fn timed(cmd: &mut Command) -> Result<(Duration, String)> {
    let t = Instant::now();
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .context("run agentsight")?;
    let d = t.elapsed();
    if !out.status.success() {
        bail!("{cmd:?} failed with {}", out.status);
    }
    Ok((d, String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// Builds `agentsight-bench` in release (the library part is the one
/// `build_release` just built) and returns its path.
pub fn bench_tool() -> Result<PathBuf> {
    let root = crate::workspace_root();
    crate::run(crate::cargo().current_dir(&root).args([
        "build",
        "--release",
        "-p",
        "agentsight-bench",
    ]))?;
    // Where cargo put it: CARGO_TARGET_DIR when set (a worktree's own).
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(target.join("release/agentsight-bench"))
}

pub fn run(bin: &Path) -> Result<()> {
    let tool = bench_tool()?;
    let dir = std::env::var_os("AGENTSIGHT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("agentsight-bench-correlate"));
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let db = dir.join("correlate-1m.db");
    let _ = std::fs::remove_file(&db);

    let (made, out) = timed(
        Command::new(&tool)
            .args(["synthesize", "--events", &EVENTS.to_string()])
            .args(["--calls", &CALLS.to_string(), "--db"])
            .arg(&db),
    )?;
    let mut it = out.split_whitespace();
    let sid = it
        .next()
        .context("no session id from the synthesizer")?
        .to_string();
    let events: u64 = it.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);

    let mut json_runs: Vec<Duration> = Vec::new();
    let mut json_out = String::new();
    for _ in 0..RUNS {
        let (d, o) = timed(
            Command::new(bin)
                .args(["correlate", &sid, "--json", "--db"])
                .arg(&db),
        )?;
        json_runs.push(d);
        json_out = o;
    }
    json_runs.sort();
    let (text_d, _) = timed(Command::new(bin).args(["correlate", &sid, "--db"]).arg(&db))?;
    let report: serde_json::Value =
        serde_json::from_str(&json_out).context("correlate --json output")?;
    let attributed: usize = report["prompts"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .flat_map(|p| p["tools"].as_array().cloned().unwrap_or_default())
                .map(|t| t["activity"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0);
    let (naive_wall, naive_out) = timed(Command::new(&tool).args(["naive", "--db"]).arg(&db))?;
    let naive_scan: f64 = naive_out
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);

    let median = json_runs[RUNS / 2];
    println!(
        "correlate bench: {events} events, {CALLS} tool calls, capture {:.0} MB (synthesized in {:.1} s)",
        size as f64 / 1e6,
        made.as_secs_f64()
    );
    println!(
        "  agentsight correlate --json   median {:.3} s (min {:.3}, max {:.3}, {RUNS} runs), {attributed} activities attributed",
        median.as_secs_f64(),
        json_runs[0].as_secs_f64(),
        json_runs[RUNS - 1].as_secs_f64()
    );
    println!(
        "  agentsight correlate (text)   {:.3} s",
        text_d.as_secs_f64()
    );
    println!(
        "  naive baseline (full scan, every call × every event)   {:.3} s scan, {:.3} s wall",
        naive_scan,
        naive_wall.as_secs_f64()
    );
    println!(
        "  target < {:.0} s: {}  ({:.1}× faster than the baseline)",
        TARGET.as_secs_f64(),
        if median < TARGET { "PASS" } else { "FAIL" },
        naive_wall.as_secs_f64() / median.as_secs_f64().max(1e-9)
    );
    if std::env::var_os("AGENTSIGHT_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_file(&db);
    } else {
        println!("  capture kept: {}", db.display());
    }
    if median >= TARGET {
        bail!(
            "correlate took {:.3} s (target < 1 s)",
            median.as_secs_f64()
        );
    }
    Ok(())
}
