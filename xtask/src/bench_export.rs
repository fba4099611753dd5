//! `cargo xtask bench export`: the synthetic 1,000,000-event capture of
//! `bench correlate` (500 tool calls, their processes, reads, writes,
//! connections; `agentsight-bench synthesize`) turned into each output by
//! the release binary — `report` and every `export --format` of
//! [`EXPORT_FORMATS`], `jsonl` first as the baseline — with the wall time,
//! peak RSS and output size of each, and the time headless Chromium takes
//! to load the report beside its time for an empty page. Targets: report
//! ≤ 10 MB, each export but the jsonl baseline < 10 s.
//!
//! `AGENTSIGHT_BENCH_DIR` chooses where the capture and outputs go;
//! `AGENTSIGHT_BENCH_KEEP=1` keeps them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::bench_audit::{Measured, measure};

const EVENTS: u64 = 1_000_000;
const CALLS: usize = 500;
/// The `export --format` values measured, the baseline (`jsonl`) first.
/// Each writes to `-o FILE`.
pub const EXPORT_FORMATS: &[&str] = &["jsonl", "otlp-json", "perfetto"];
const REPORT_MAX_BYTES: u64 = 10_000_000;
const EXPORT_TARGET: Duration = Duration::from_secs(10);
/// A bound on each measured run (a run past it is killed and reported).
const CAP: Duration = Duration::from_secs(300);
const CHROMIUM: &str = "/usr/bin/chromium";

fn line(what: &str, m: &Measured, out: &Path) -> u64 {
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    let time = match m.status {
        Some(0) => format!("{:.2} s", m.wall.as_secs_f64()),
        Some(c) => format!("FAILED (exit {c})"),
        None => format!("> {:.0} s (killed)", m.wall.as_secs_f64()),
    };
    println!(
        "  {what:<28} {time:>16}  peak RSS {:>7.1} MiB  output {:>8.2} MB",
        m.peak_kib as f64 / 1024.0,
        size as f64 / 1e6
    );
    size
}

/// Wall time of headless Chromium loading `page` and dumping its DOM.
fn chromium_load(page: &Path, dir: &Path) -> Result<Duration> {
    let profile = dir.join("chromium-profile");
    let _ = std::fs::remove_dir_all(&profile);
    let t = Instant::now();
    let out = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .context("run chromium")?;
    let d = t.elapsed();
    let _ = std::fs::remove_dir_all(&profile);
    if !out.status.success() {
        bail!("chromium failed on {}", page.display());
    }
    Ok(d)
}

pub fn run(bin: &Path) -> Result<()> {
    let tool = crate::bench_correlate::bench_tool()?;
    let dir = std::env::var_os("AGENTSIGHT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("agentsight-bench-export"));
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let db = dir.join("export-1m.db");
    let _ = std::fs::remove_file(&db);
    crate::run(
        Command::new(&tool)
            .args(["synthesize", "--events", &EVENTS.to_string()])
            .args(["--calls", &CALLS.to_string(), "--db"])
            .arg(&db),
    )?;
    println!(
        "export bench: {EVENTS} events, {CALLS} tool calls, capture {:.0} MB",
        std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0) as f64 / 1e6
    );
    let mut failures = Vec::new();
    for format in EXPORT_FORMATS {
        let out = dir.join(format!("export.{format}"));
        let _ = std::fs::remove_file(&out);
        let m = measure(
            Command::new(bin)
                .args(["export", "--db"])
                .arg(&db)
                .args(["--format", format, "-o"])
                .arg(&out),
            CAP,
        )?;
        line(&format!("export --format {format}"), &m, &out);
        // The target is the new formats'; jsonl is the baseline.
        if m.status != Some(0) || (*format != "jsonl" && m.wall >= EXPORT_TARGET) {
            failures.push(format!("export --format {format} (target < 10 s)"));
        }
    }
    let page = dir.join("report.html");
    let _ = std::fs::remove_file(&page);
    let m = measure(
        Command::new(bin)
            .args(["report", "--db"])
            .arg(&db)
            .arg("-o")
            .arg(&page),
        CAP,
    )?;
    let size = line("report", &m, &page);
    if m.status != Some(0) || size > REPORT_MAX_BYTES {
        failures.push("report (target ≤ 10 MB)".into());
    }
    if !Path::new(CHROMIUM).exists() {
        println!("  (no {CHROMIUM}: the report's load time was not measured)");
    } else if m.status == Some(0) {
        let empty = dir.join("empty.html");
        std::fs::write(&empty, "<!DOCTYPE html><title>empty</title>")?;
        let base = chromium_load(&empty, &dir)?;
        let load = chromium_load(&page, &dir)?;
        println!(
            "  chromium --headless --dump-dom: report {:.2} s, empty page {:.2} s (start-up baseline)",
            load.as_secs_f64(),
            base.as_secs_f64()
        );
    }
    if std::env::var_os("AGENTSIGHT_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("  kept: {}", dir.display());
    }
    if !failures.is_empty() {
        bail!("missed: {}", failures.join(", "));
    }
    Ok(())
}
