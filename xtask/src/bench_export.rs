//! `cargo xtask bench export`: the synthetic 2,000,000-event capture of
//! `agentsight-bench synthesize` (500 tool calls, their processes, reads,
//! writes, connections; the summaries a recorder keeps counted once) read
//! by the release binary, each figure beside a baseline measured in the same
//! run on the same capture:
//! - `show` from the kept summaries, beside `show --scan` (every event
//!   scanned, as before); the two outputs must be the same bytes;
//! - `export --format jsonl` in rows/s, beside `export --by-view` (every
//!   text looked up per row through the `events` view, a JSON value built
//!   per line, as before); the two files must be the same bytes;
//! - `report`, beside `report --scan`;
//! - every other `export --format` of [`EXPORT_FORMATS`] and the time
//!   headless Chromium takes to load the report beside an empty page.
//!
//! Targets: show < 0.5 s, jsonl ≥ 1,000,000 rows/s, report < 2 s and
//! ≤ 10 MB, each other export < 10 s.
//!
//! `AGENTSIGHT_BENCH_DIR` chooses where the capture and outputs go;
//! `AGENTSIGHT_BENCH_KEEP=1` keeps them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::bench_audit::{Measured, measure};

const EVENTS: u64 = 2_000_000;
const CALLS: usize = 500;
/// The `export --format` values measured besides jsonl. Each writes to
/// `-o FILE`.
pub const EXPORT_FORMATS: &[&str] = &["otlp-json", "perfetto"];
const SHOW_TARGET: Duration = Duration::from_millis(500);
const JSONL_TARGET_ROWS_PER_S: f64 = 1_000_000.0;
const REPORT_TARGET: Duration = Duration::from_secs(2);
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

/// A figure beside its baseline: `  what  new  baseline  ×  target`.
fn pair(what: &str, new: &Measured, base: &Measured, target: &str) {
    let t = |m: &Measured| match m.status {
        Some(0) => format!("{:.2} s", m.wall.as_secs_f64()),
        Some(c) => format!("FAILED (exit {c})"),
        None => format!("> {:.0} s (killed)", m.wall.as_secs_f64()),
    };
    println!(
        "  {what:<24} {:>12} (peak RSS {:>6.1} MiB)   baseline {:>12} (peak RSS {:>6.1} MiB)   {:>5.1}× faster   target {target}",
        t(new),
        new.peak_kib as f64 / 1024.0,
        t(base),
        base.peak_kib as f64 / 1024.0,
        base.wall.as_secs_f64() / new.wall.as_secs_f64().max(1e-9),
    );
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn show_cmd(bin: &Path, db: &Path, scan: bool) -> Command {
    let mut c = Command::new(bin);
    c.arg("show");
    if scan {
        c.arg("--scan");
    }
    c.arg("--db").arg(db);
    c
}

/// `show` from the summaries beside `show --scan`; the same bytes.
fn bench_show(bin: &Path, db: &Path, failures: &mut Vec<String>) -> Result<()> {
    let base = measure(&mut show_cmd(bin, db, true), CAP)?;
    let new = measure(&mut show_cmd(bin, db, false), CAP)?;
    pair("show", &new, &base, "< 0.5 s");
    let a = show_cmd(bin, db, false).output().context("show")?;
    let b = show_cmd(bin, db, true).output().context("show --scan")?;
    if a.stdout != b.stdout || !a.status.success() {
        failures.push("show differs from show --scan".into());
    } else {
        println!("    the same {} bytes from both", a.stdout.len());
    }
    if new.status != Some(0) || new.wall >= SHOW_TARGET {
        failures.push("show (target < 0.5 s)".into());
    }
    Ok(())
}

fn export_cmd(bin: &Path, db: &Path, by_view: bool, out: &Path) -> Command {
    let mut c = Command::new(bin);
    c.args(["export", "--format", "jsonl", "--db"]).arg(db);
    if by_view {
        c.arg("--by-view");
    }
    c.arg("-o").arg(out);
    c
}

/// `export --format jsonl` beside `export --by-view`, in rows/s; the same bytes.
fn bench_jsonl(bin: &Path, db: &Path, dir: &Path, failures: &mut Vec<String>) -> Result<()> {
    let (new_out, base_out) = (dir.join("export.jsonl"), dir.join("export-by-view.jsonl"));
    let base = measure(&mut export_cmd(bin, db, true, &base_out), CAP)?;
    let new = measure(&mut export_cmd(bin, db, false, &new_out), CAP)?;
    // Streamed, not read whole: a child's peak RSS counts its parent's at fork.
    let (same, lines, bytes) = same_lines(&new_out, &base_out)?;
    let rows = lines as f64;
    let rate = |m: &Measured| rows / m.wall.as_secs_f64().max(1e-9);
    pair("export --format jsonl", &new, &base, "≥ 1,000,000 rows/s");
    println!(
        "    {rows:.0} rows, {:.2} MB: {:.0} rows/s, baseline {:.0} rows/s",
        bytes as f64 / 1e6,
        rate(&new),
        rate(&base)
    );
    if !same || bytes == 0 {
        failures.push("export jsonl differs from export --by-view".into());
    } else {
        println!("    the same bytes from both");
    }
    if new.status != Some(0) || rate(&new) < JSONL_TARGET_ROWS_PER_S {
        failures.push("export --format jsonl (target ≥ 1,000,000 rows/s)".into());
    }
    Ok(())
}

/// Whether two files hold the same bytes, and the first's lines and size,
/// read a block at a time.
fn same_lines(a: &Path, b: &Path) -> Result<(bool, u64, u64)> {
    use std::io::Read;
    let open = |p: &Path| std::fs::File::open(p).with_context(|| format!("open {}", p.display()));
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let (mut same, mut lines, mut bytes) = (true, 0u64, 0u64);
    loop {
        let n = fa.read(&mut ba)?;
        let mut got = 0;
        while got < n {
            let m = fb.read(&mut bb[got..n])?;
            if m == 0 {
                break;
            }
            got += m;
        }
        same &= got == n && ba[..n] == bb[..n];
        lines += ba[..n].iter().filter(|&&c| c == b'\n').count() as u64;
        bytes += n as u64;
        if n == 0 {
            same &= fb.read(&mut bb)? == 0;
            return Ok((same, lines, bytes));
        }
    }
}

fn report_cmd(bin: &Path, db: &Path, scan: bool, out: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("report");
    if scan {
        c.arg("--scan");
    }
    c.arg("--db").arg(db).arg("-o").arg(out);
    c
}

pub fn run(bin: &Path) -> Result<()> {
    let tool = crate::bench_correlate::bench_tool()?;
    let dir = std::env::var_os("AGENTSIGHT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("agentsight-bench-export"));
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let db = dir.join("export-2m.db");
    let _ = std::fs::remove_file(&db);
    crate::run(
        Command::new(&tool)
            .args(["synthesize", "--events", &EVENTS.to_string()])
            .args(["--calls", &CALLS.to_string(), "--db"])
            .arg(&db),
    )?;
    println!(
        "export bench: {EVENTS} events, {CALLS} tool calls, capture {:.0} MB, load average {}",
        std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0) as f64 / 1e6,
        loadavg()
    );
    let mut failures = Vec::new();
    bench_show(bin, &db, &mut failures)?;
    bench_jsonl(bin, &db, &dir, &mut failures)?;
    let page = dir.join("report.html");
    let _ = std::fs::remove_file(&page);
    let base = measure(
        &mut report_cmd(bin, &db, true, &dir.join("report-scan.html")),
        CAP,
    )?;
    let m = measure(&mut report_cmd(bin, &db, false, &page), CAP)?;
    pair("report", &m, &base, "< 2 s");
    let size = std::fs::metadata(&page).map(|m| m.len()).unwrap_or(0);
    println!("    page {:.2} MB", size as f64 / 1e6);
    if m.status != Some(0) || size > REPORT_MAX_BYTES || m.wall >= REPORT_TARGET {
        failures.push("report (target < 2 s, ≤ 10 MB)".into());
    }
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
        if m.status != Some(0) || m.wall >= EXPORT_TARGET {
            failures.push(format!("export --format {format} (target < 10 s)"));
        }
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
    println!("  load average at the end {}", loadavg());
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
