//! How a recording ended, and the summary the CLI prints of it.

use std::{path::PathBuf, time::Duration};

/// How the run ended, for the summary and the exit status.
#[derive(Debug)]
pub struct RecordOutcome {
    pub output: PathBuf,
    /// The command's exit status, mapped like a shell does (128 + signal).
    pub command_status: Option<i32>,
    pub events: u64,
    pub processes: u64,
    pub lost: u64,
    pub gap_missing: u64,
    pub failed_programs: Vec<String>,
    pub end_reason: String,
    pub store_error: Option<String>,
    /// Storing stopped because the disk was full (the capture was still
    /// finished and says so): when, and what was not stored.
    pub disk_full: Option<crate::store::DiskFull>,
    /// Events not stored because the capture reached `--max-size`.
    pub not_stored: u64,
    pub elapsed: Duration,
    /// The recorder's peak resident memory, KiB.
    pub peak_rss_kib: u64,
    /// With `program_stats`: how often the kernel programs ran and for how
    /// long, all programs together.
    pub program_runs: Option<(u64, Duration)>,
    /// The recorder's CPU time (user + system).
    pub cpu: Duration,
}

impl RecordOutcome {
    /// The status to go on with: the command's (0 without one), or 1 when
    /// the disk filled up and it was 0 (evidence was lost: never a clean
    /// exit); `None` when storing failed and the command had no status of
    /// its own (exit 1).
    pub fn exit_status(&self) -> Option<i32> {
        if self.store_error.is_some() && self.command_status.is_none() {
            return None;
        }
        let status = self.command_status.unwrap_or(0);
        Some(if self.disk_full.is_some() && status == 0 {
            1
        } else {
            status
        })
    }
}

pub fn fmt_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

pub(super) fn shell_status(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

/// The default output name: `./agentsight-YYYYmmdd-HHMMSS.db` in local time.
pub fn default_output() -> PathBuf {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
        .map(|t| t.tv_sec())
        .unwrap_or(0);
    // Safety: localtime_r fills the tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = now;
    unsafe { libc::localtime_r(&t, &mut tm) };
    PathBuf::from(format!(
        "agentsight-{:04}{:02}{:02}-{:02}{:02}{:02}.db",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    ))
}

/// One-paragraph summary printed at the end of a recording.
pub fn summary_text(o: &RecordOutcome) -> String {
    let mut s = format!(
        "agentsight: recorded {} events from {} processes in {} → {}\n",
        o.events,
        o.processes,
        fmt_elapsed(o.elapsed),
        o.output.display()
    );
    s.push_str(&format!(
        "agentsight: lost {} events (kernel ring buffer), {} missing by sequence; ended: {}\n",
        o.lost, o.gap_missing, o.end_reason
    ));
    if o.not_stored > 0 {
        s.push_str(&format!(
            "agentsight: {} events not stored: the capture reached --max-size (counted as loss)\n",
            o.not_stored
        ));
    }
    if let Some(st) = o.command_status {
        s.push_str(&format!("agentsight: command exit status {st}\n"));
    }
    s.push_str(&format!(
        "agentsight: recorder used {:.2} s CPU, peak {:.1} MiB\n",
        o.cpu.as_secs_f64(),
        o.peak_rss_kib as f64 / 1024.0
    ));
    if let Some((runs, time)) = o.program_runs {
        s.push_str(&format!(
            "agentsight: kernel programs ran {runs} times, {:.1} ms in all\n",
            time.as_secs_f64() * 1e3
        ));
    }
    for f in &o.failed_programs {
        s.push_str(&format!("agentsight: not attached: {f}\n"));
    }
    if let Some(e) = &o.store_error {
        s.push_str(&format!(
            "agentsight: storing stopped early: {e} (what was written before stays readable)\n"
        ));
    }
    if let Some(full) = &o.disk_full {
        s.push_str(&format!(
            "agentsight: storing stopped: {} (counted as loss; what was stored before stays readable)\n",
            full.message()
        ));
    }
    s
}
