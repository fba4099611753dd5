//! `cargo xtask bench top`: the cost of `agentsight top` over the
//! 10,001-transcript bench home (`bench sessions`' generator), watching with
//! inotify beside the polling baseline (`top --polling`), in one run:
//! - latency: 100 appends to a live Claude transcript, each timed from the
//!   write to the `top --json` line that shows it (p50/p95/max; target p95
//!   ≤ 2 s);
//! - start-up: `top --once --json` to its snapshot (target ≤ 1.5 s);
//! - idle CPU over 60 s with nothing changing (target < 1 % of a core);
//! - peak RSS (target ≤ 64 MiB);
//!
//! and start-up over crowded project directories (5,000 Claude transcripts
//! in one; 100 × 1,000), all recent, so every one is read: `top --once`
//! beside `sessions` listing the same tree (wall time, peak RSS).
//!
//! Set `AGENTSIGHT_BENCH_DIR` to choose where the data goes and
//! `AGENTSIGHT_BENCH_KEEP=1` to keep it; `AGENTSIGHT_BENCH_IDLE_S` shortens
//! the idle window (for a quick look; the recorded figures use 60 s);
//! `AGENTSIGHT_BENCH_TOP=crowded` runs only the crowded directories (no
//! 10,001-transcript home, a few hundred MB).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::bench_sessions::{BENCH_HOME_BYTES, build_bench_home, drop_caches, free_bytes};

const APPENDS: usize = 100;
/// Between appends: longer than a polling period, so every append is seen
/// on its own.
const APPEND_GAP: Duration = Duration::from_millis(1300);
const LIVE_ID: &str = "b0b0b0b0-0000-4000-8000-00000000b0b0";

pub fn run(agentsight: &Path) -> Result<()> {
    let base = std::env::var_os("AGENTSIGHT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("agentsight-bench-top-{}", std::process::id()));
    std::fs::create_dir_all(&base)?;
    let only_crowded = std::env::var("AGENTSIGHT_BENCH_TOP").is_ok_and(|v| v == "crowded");
    if !only_crowded
        && let Some(free) = free_bytes(&base)
        && free < BENCH_HOME_BYTES
    {
        bail!(
            "{} has {:.1} GB free; the bench needs about {:.1} GB",
            base.display(),
            free as f64 / 1e9,
            BENCH_HOME_BYTES as f64 / 1e9
        );
    }
    let r = if only_crowded {
        Ok(())
    } else {
        bench(agentsight, &base)
    };
    let r = r.and_then(|()| crowded(agentsight, &base));
    if std::env::var_os("AGENTSIGHT_BENCH_KEEP").is_some() {
        println!("data kept in {}", base.display());
    } else {
        let _ = std::fs::remove_dir_all(&base);
    }
    r
}

/// Figures of one watching mode.
struct Figures {
    startup_cold: Option<Duration>,
    startup_warm: Duration,
    latency: Vec<Duration>,
    idle_cpu_pct: f64,
    idle_s: u64,
    rss_peak_kib: u64,
    candidates: u64,
}

fn bench(bin: &Path, base: &Path) -> Result<()> {
    let home = base.join("home");
    println!("building the bench home in {} …", home.display());
    let t = Instant::now();
    let (gens, big) = build_bench_home(&home)?;
    let bytes: u64 = gens.iter().map(|g| g.bytes).sum::<u64>() + big.bytes;
    println!(
        "  {} transcripts, {:.2} GB, generated in {:.1} s",
        gens.len() + 1,
        bytes as f64 / 1e9,
        t.elapsed().as_secs_f64()
    );
    let live = home
        .join(".claude/projects/-bench-live")
        .join(format!("{LIVE_ID}.jsonl"));
    std::fs::create_dir_all(live.parent().context("live dir")?)?;
    std::fs::write(&live, user_line(0) + "\n")?;

    let inotify = measure(bin, &home, &live, false)?;
    let polling = measure(bin, &home, &live, true)?;
    println!("\nagentsight top (release: {})", bin.display());
    println!(
        "  {:<40} {:>14} {:>14}   target",
        "", "inotify", "polling (1 s)"
    );
    let row = |name: &str, a: String, b: String, target: &str| {
        println!("  {name:<40} {a:>14} {b:>14}   {target}");
    };
    row(
        "candidates",
        inotify.candidates.to_string(),
        polling.candidates.to_string(),
        "",
    );
    if let (Some(a), Some(b)) = (inotify.startup_cold, polling.startup_cold) {
        row("start-up, cold page cache", ms(a), ms(b), "≤ 1500 ms");
    }
    row(
        "start-up, warm (median of 5)",
        ms(inotify.startup_warm),
        ms(polling.startup_warm),
        "≤ 1500 ms",
    );
    for (name, q) in [("p50", 0.5), ("p95", 0.95), ("max", 1.0)] {
        row(
            &format!("append → --json line, {name} (n={APPENDS})"),
            ms(quantile(&inotify.latency, q)),
            ms(quantile(&polling.latency, q)),
            if name == "p95" { "≤ 2000 ms" } else { "" },
        );
    }
    row(
        &format!("idle CPU over {} s (% of one core)", inotify.idle_s),
        format!("{:.2} %", inotify.idle_cpu_pct),
        format!("{:.2} %", polling.idle_cpu_pct),
        "< 1 %",
    );
    row(
        "peak RSS (VmHWM)",
        format!("{:.1} MiB", inotify.rss_peak_kib as f64 / 1024.0),
        format!("{:.1} MiB", polling.rss_peak_kib as f64 / 1024.0),
        "≤ 64 MiB",
    );
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn quantile(v: &[Duration], q: f64) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    if s.is_empty() {
        return Duration::ZERO;
    }
    let i = ((s.len() as f64 * q).ceil() as usize).clamp(1, s.len()) - 1;
    s[i]
}

fn top_cmd(bin: &Path, home: &Path, polling: bool, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    // Transcript states only: the issue's cost targets are without kernel
    // programs (as root, top would otherwise load them).
    c.arg("top")
        .args(args)
        .arg("--no-kernel")
        .arg("--home")
        .arg(home);
    if polling {
        c.arg("--polling");
    }
    c
}

fn measure(bin: &Path, home: &Path, live: &Path, polling: bool) -> Result<Figures> {
    println!(
        "measuring {} …",
        if polling { "polling" } else { "inotify" }
    );
    let once = |c: &mut Command| -> Result<(Duration, serde_json::Value)> {
        let t = Instant::now();
        let out = c.output()?;
        let el = t.elapsed();
        if !out.status.success() {
            bail!("top --once: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok((el, serde_json::from_slice(&out.stdout)?))
    };
    let startup_cold = if drop_caches() {
        Some(once(&mut top_cmd(bin, home, polling, &["--once", "--json"]))?.0)
    } else {
        None
    };
    let mut warm = Vec::new();
    let mut candidates = 0;
    for _ in 0..5 {
        let (d, v) = once(&mut top_cmd(bin, home, polling, &["--once", "--json"]))?;
        candidates = v["candidates"].as_u64().unwrap_or(0);
        warm.push(d);
    }
    let (latency, idle_cpu_pct, idle_s, rss_peak_kib) = stream_figures(bin, home, live, polling)?;
    println!(
        "  start-up warm {}, latency p50 {} p95 {} max {}, idle CPU {idle_cpu_pct:.2} %, peak RSS {:.1} MiB",
        ms(quantile(&warm, 0.5)),
        ms(quantile(&latency, 0.5)),
        ms(quantile(&latency, 0.95)),
        ms(quantile(&latency, 1.0)),
        rss_peak_kib as f64 / 1024.0
    );
    Ok(Figures {
        startup_cold,
        startup_warm: quantile(&warm, 0.5),
        latency,
        idle_cpu_pct,
        idle_s,
        rss_peak_kib,
        candidates,
    })
}

/// Reads `top --json` lines on a thread; each with its arrival time.
fn spawn_stream(mut c: Command) -> Result<(Child, mpsc::Receiver<(Instant, String)>)> {
    let mut child = c.stdout(Stdio::piped()).spawn()?;
    let out = child.stdout.take().context("stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send((Instant::now(), l)).is_err() {
                break;
            }
        }
    });
    Ok((child, rx))
}

fn live_output(line: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    v["rows"]
        .as_array()?
        .iter()
        .find(|r| r["session_id"] == LIVE_ID)?["tokens"]["output"]
        .as_u64()
}

/// Latencies of the appends, then idle CPU and peak RSS of the same process.
fn stream_figures(
    bin: &Path,
    home: &Path,
    live: &Path,
    polling: bool,
) -> Result<(Vec<Duration>, f64, u64, u64)> {
    let (mut child, rx) = spawn_stream(top_cmd(bin, home, polling, &["--json"]))?;
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .context("no first snapshot within 30 s")?;
    let base_tokens = live_output(&first.1).context("the live session is not listed")?;
    let mut lat = Vec::with_capacity(APPENDS);
    for i in 0..APPENDS {
        std::thread::sleep(APPEND_GAP);
        let mut f = std::fs::OpenOptions::new().append(true).open(live)?;
        let t = Instant::now();
        let tag = if polling { "p" } else { "i" };
        f.write_all((assistant_line(tag, i) + "\n").as_bytes())?;
        drop(f);
        let out_tokens = base_tokens + i as u64 + 1;
        let end = t + Duration::from_secs(10);
        loop {
            let Some(left) = end.checked_duration_since(Instant::now()) else {
                bail!("append {i} did not show within 10 s");
            };
            let (at, l) = match rx.recv_timeout(left) {
                Ok(x) => x,
                Err(_) => bail!("append {i} did not show within 10 s"),
            };
            if live_output(&l).is_some_and(|n| n >= out_tokens) {
                lat.push(at.duration_since(t));
                break;
            }
        }
    }
    let idle_s: u64 = std::env::var("AGENTSIGHT_BENCH_IDLE_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let pid = child.id();
    let t0 = cpu_ticks(pid)?;
    std::thread::sleep(Duration::from_secs(idle_s));
    let t1 = cpu_ticks(pid)?;
    // SAFETY: sysconf reads a constant of the running system.
    let hz = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        n if n > 0 => n as f64,
        _ => 100.0,
    };
    let cpu = (t1 - t0) as f64 / hz / idle_s as f64 * 100.0;
    let rss = status_kib(pid, "VmHWM:")?;
    let _ = child.kill();
    let _ = child.wait();
    Ok((lat, cpu, idle_s, rss))
}

fn cpu_ticks(pid: u32) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = s.rsplit_once(") ").context("stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the name.
    Ok(f[11].parse::<u64>()? + f[12].parse::<u64>()?)
}

fn status_kib(pid: u32, key: &str) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let l = s.lines().find(|l| l.starts_with(key)).context("status")?;
    Ok(l.split_whitespace().nth(1).context("value")?.parse()?)
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%3fZ")
        .to_string()
}

fn user_line(i: usize) -> String {
    format!(
        r#"{{"type":"user","uuid":"bench-u-{i}","parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/bench/live","sessionId":"{LIVE_ID}","version":"2.1.233","timestamp":"{}","message":{{"role":"user","content":"Keep going ({i})"}}}}"#,
        now_rfc3339()
    )
}

/// An assistant turn with one output token: each append moves the live
/// row's token count by one, so its `--json` line is unmistakable. Message
/// ids are unique per run (`tag`): a repeated id is one response, counted once.
fn assistant_line(tag: &str, i: usize) -> String {
    format!(
        r#"{{"type":"assistant","uuid":"bench-a-{tag}{i}","parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/bench/live","sessionId":"{LIVE_ID}","version":"2.1.233","timestamp":"{}","requestId":"req_{tag}{i}","message":{{"id":"msg_{tag}{i}","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"text","text":"Step {i} done."}}],"stop_reason":"end_turn","stop_sequence":null,"usage":{{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}}}}"#,
        now_rfc3339()
    )
}

/// Crowded project directories: (what, projects, transcripts in each).
const CROWDS: [(&str, usize, usize); 2] = [
    ("5,000 in one directory", 1, 5_000),
    ("100 directories × 1,000", 100, 1_000),
];

/// Start-up over crowded project directories: `top --once --json` beside
/// `sessions --json` (the baseline: the same discovery, 25 sessions parsed)
/// on the same tree, in the same run. Every transcript is recent, so `top`
/// reads each one's tail and parses it whole once.
fn crowded(bin: &Path, base: &Path) -> Result<()> {
    let mut lines = Vec::new();
    for (i, (what, projects, per)) in CROWDS.into_iter().enumerate() {
        let home = base.join(format!("crowd-{i}"));
        let _ = std::fs::remove_dir_all(&home);
        println!("building {what} in {} …", home.display());
        crowded_home(&home, projects, per)?;
        let out = base.join("crowd-out.json");
        let mut sessions = Command::new(bin);
        sessions
            .arg("sessions")
            .arg("--json")
            .arg("--home")
            .arg(&home);
        let mut top = top_cmd(bin, &home, false, &["--once", "--json"]);
        // Warms the page cache for both.
        run_to(&mut sessions, &out)?;
        let (s_wall, s_rss) = median_run(&mut sessions, &out)?;
        let (t_wall, t_rss) = median_run(&mut top, &out)?;
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out)?)?;
        let candidates = v["candidates"].as_u64().unwrap_or(0);
        if candidates != (projects * per) as u64 {
            bail!("top listed {candidates} candidates of {}", projects * per);
        }
        println!(
            "  sessions {} ({:.1} MiB), top {} ({:.1} MiB)",
            ms(s_wall),
            s_rss as f64 / 1024.0,
            ms(t_wall),
            t_rss as f64 / 1024.0
        );
        lines.push((what, s_wall, s_rss, t_wall, t_rss));
        let _ = std::fs::remove_dir_all(&home);
    }
    println!(
        "\ncrowded project directories, every transcript recent (release: {})",
        bin.display()
    );
    println!(
        "  {:<26} {:>14} {:>14} {:>16} {:>16}",
        "", "sessions wall", "top --once", "sessions RSS", "top --once RSS"
    );
    for (what, s_wall, s_rss, t_wall, t_rss) in lines {
        println!(
            "  {what:<26} {:>14} {:>14} {:>12.1} MiB {:>12.1} MiB",
            ms(s_wall),
            ms(t_wall),
            s_rss as f64 / 1024.0,
            t_rss as f64 / 1024.0
        );
    }
    Ok(())
}

/// `projects` Claude project directories of `per` small transcripts each
/// (a prompt and a response), written now.
fn crowded_home(home: &Path, projects: usize, per: usize) -> Result<()> {
    for p in 0..projects {
        let dir = home.join(format!(".claude/projects/-crowd-{p}"));
        std::fs::create_dir_all(&dir)?;
        for i in 0..per {
            let id = format!("{p:08x}-0000-4000-8000-{i:012x}");
            let text = format!(
                "{}\n{}\n",
                user_line(0).replace(LIVE_ID, &id),
                assistant_line("c", i).replace(LIVE_ID, &id)
            );
            std::fs::write(dir.join(format!("{id}.jsonl")), text)?;
        }
    }
    Ok(())
}

/// The median wall time of up to three runs (one when a run takes over
/// 10 s) and the largest peak RSS (KiB); stdout goes to `out`.
fn median_run(cmd: &mut Command, out: &Path) -> Result<(Duration, u64)> {
    let mut walls = Vec::new();
    let mut rss = 0;
    for _ in 0..3 {
        let (w, r) = run_to(cmd, out)?;
        walls.push(w);
        rss = rss.max(r);
        if w > Duration::from_secs(10) {
            break;
        }
    }
    Ok((quantile(&walls, 0.5), rss))
}

/// Runs `cmd` to its end, stdout to `out`: wall time and peak RSS (KiB).
fn run_to(cmd: &mut Command, out: &Path) -> Result<(Duration, u64)> {
    let t = Instant::now();
    let child = cmd
        .stdout(std::fs::File::create(out)?)
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let mut status = 0;
    // SAFETY: rusage is plain data filled by the kernel; the pid is our child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) } < 0 {
        bail!("wait4 failed: {}", std::io::Error::last_os_error());
    }
    let wall = t.elapsed();
    if status != 0 {
        bail!("{cmd:?} failed (wait status {status})");
    }
    Ok((wall, ru.ru_maxrss as u64))
}
