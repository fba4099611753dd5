//! `cargo xtask bench audit`: the synthetic 1,000,000-event capture of
//! `bench correlate` with 2,000 / 4,000 / 8,000 / 100,000 of its library
//! reads turned into writes outside the allowed roots (the event count stays
//! the same), audited with the default policy by the release binary's
//! `audit` and, in the same run, by the approach before (queries per finding
//! and chain entry, every finding kept: `agentsight-bench audit-baseline`). Two
//! layouts: every write by one shell process (issue 18 point 8: findings ×
//! events per process) and writes spread over the run's processes. Prints
//! time and peak RSS of each. Target: `audit` with 100,000 findings < 5 s.
//!
//! `AGENTSIGHT_BENCH_DIR` chooses where the captures go;
//! `AGENTSIGHT_BENCH_BASELINE_S` caps each baseline run (default 120 s: it
//! is killed then, and reported as not finished).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

const EVENTS: u64 = 1_000_000;
const CALLS: usize = 500;
const FINDINGS: [u64; 4] = [2_000, 4_000, 8_000, 100_000];
const TARGET: Duration = Duration::from_secs(5);

/// One measured run: wall time, peak RSS (KiB), exit status (None: killed
/// at the cap).
pub(crate) struct Measured {
    pub wall: Duration,
    pub peak_kib: u64,
    pub status: Option<i32>,
}

fn peak_from_proc(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Runs `cmd` to its end or `cap`, whichever comes first.
pub(crate) fn measure(cmd: &mut Command, cap: Duration) -> Result<Measured> {
    let start = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let pid = child.id() as i32;
    let mut status = 0;
    // Safety: rusage is plain data filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r < 0 {
            bail!("wait4 failed: {}", std::io::Error::last_os_error());
        }
        if r == pid {
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            return Ok(Measured {
                wall: start.elapsed(),
                peak_kib: ru.ru_maxrss as u64,
                status: code.or(Some(-1)),
            });
        }
        if start.elapsed() >= cap {
            let peak_kib = peak_from_proc(pid);
            // Safety: kill and wait4 on our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::wait4(pid, &mut status, 0, &mut ru);
            }
            return Ok(Measured {
                wall: start.elapsed(),
                peak_kib,
                status: None,
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn output_of(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("starting {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed with {}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn shown(m: &Measured) -> String {
    let t = match m.status {
        None => format!("> {:.0} s (killed)", m.wall.as_secs_f64()),
        Some(_) => format!("{:.2} s", m.wall.as_secs_f64()),
    };
    format!("{t:>18}  {:>7.1} MiB", m.peak_kib as f64 / 1024.0)
}

/// What the new `audit` reported: (findings listed, occurrences of the
/// write rule counted).
fn summarise(report: &Path) -> Result<(usize, u64)> {
    let v: serde_json::Value = serde_json::from_slice(
        &std::fs::read(report).with_context(|| format!("reading {}", report.display()))?,
    )
    .context("audit JSON")?;
    let findings = v["findings"].as_array().map_or(0, Vec::len);
    let writes = v["findings"]
        .as_array()
        .map(|fs| {
            fs.iter()
                .filter(|f| f["rule"] == "write-outside-allowed")
                .filter_map(|f| f["evidence"]["count"].as_u64())
                .sum()
        })
        .unwrap_or(0);
    Ok((findings, writes))
}

pub fn run(bin: &Path) -> Result<()> {
    let dir = std::env::var_os("AGENTSIGHT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("agentsight-bench-audit"));
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let cap_s: u64 = std::env::var("AGENTSIGHT_BENCH_BASELINE_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let tool = super::bench_correlate::bench_tool()?;
    let base = dir.join("audit-base.db");
    let _ = std::fs::remove_file(&base);
    let t = Instant::now();
    output_of(
        Command::new(&tool)
            .args(["synthesize", "--events", &EVENTS.to_string()])
            .args(["--calls", &CALLS.to_string(), "--db"])
            .arg(&base),
    )?;
    let size = std::fs::metadata(&base).map(|m| m.len()).unwrap_or(0);
    let policy = dir.join("policy.toml");
    // The defaults, placed: the synthetic run's home, its API endpoint.
    std::fs::write(
        &policy,
        "home = \"/home/dev\"\n[network]\nallow = [\"10.0.0.1:443\"]\n",
    )?;
    println!(
        "audit bench: {EVENTS} events, capture {:.0} MB (synthesized in {:.1} s); default policy (home /home/dev, 10.0.0.1:443 allowed); baseline capped at {cap_s} s",
        size as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    println!(
        "  {:<8} {:>8}  {:>18}  {:>11}  {:>9}  {:>18}  {:>11}",
        "layout", "findings", "audit time", "peak RSS", "reported", "baseline time", "peak RSS"
    );
    let mut failed = Vec::new();
    for spread in [false, true] {
        for n in FINDINGS {
            let db = dir.join("audit-run.db");
            std::fs::copy(&base, &db).context("copy the base capture")?;
            let mut inject = Command::new(&tool);
            inject.args(["inject", "--n", &n.to_string(), "--db"]);
            inject.arg(&db);
            if spread {
                inject.arg("--spread");
            }
            let injected: u64 = output_of(&mut inject)?.trim().parse().unwrap_or(0);
            let report = dir.join("audit-report.json");
            let new = measure(
                Command::new(bin)
                    .args(["audit", "--format", "json", "--db"])
                    .arg(&db)
                    .arg("--policy")
                    .arg(&policy)
                    .arg("-o")
                    .arg(&report),
                Duration::from_secs(600),
            )?;
            let (listed, writes) = summarise(&report)?;
            let old = measure(
                Command::new(&tool)
                    .args(["audit-baseline", "--db"])
                    .arg(&db)
                    .arg("--policy")
                    .arg(&policy)
                    .arg("-o")
                    .arg(dir.join("baseline-report.json")),
                Duration::from_secs(cap_s),
            )?;
            let layout = if spread { "spread" } else { "one-proc" };
            println!(
                "  {layout:<8} {injected:>8}  {}  {listed:>9}  {}",
                shown(&new),
                shown(&old)
            );
            if new.status != Some(1) || writes != injected {
                failed.push(format!(
                    "{layout} {n}: audit exit {:?}, {writes} of {injected} writes reported",
                    new.status
                ));
            }
            if n == 100_000 && new.wall >= TARGET {
                failed.push(format!(
                    "{layout} {n}: {:.2} s (target < 5 s)",
                    new.wall.as_secs_f64()
                ));
            }
        }
    }
    println!("  (reported = findings listed after folding; every write is counted in them)");
    let _ = std::fs::remove_file(dir.join("audit-run.db"));
    let _ = std::fs::remove_file(&base);
    if failed.is_empty() {
        println!("  target: 100,000 findings < 5 s: PASS");
        Ok(())
    } else {
        bail!("audit bench: {}", failed.join("; "))
    }
}
