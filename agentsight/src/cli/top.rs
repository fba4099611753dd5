//! `agentsight top`: live agent states — a full-screen terminal UI, or
//! `--plain` text, or `--json` (one snapshot per line; `--once` for one).

mod kernel;
mod tui;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use nix::sys::signal::{SigSet, Signal};

use agentsight::sessions::Provider;
use agentsight::sessions::live::Thresholds;
use agentsight::top::{LiveTop, NotListedReason, Row, RowFilter, Snapshot, TopOptions};

#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// Read this home instead of the invoking user's.
    #[arg(long, value_parser = super::absolute_path())]
    pub home: Option<PathBuf>,
    /// The Claude desktop app's data directory [default: <home>/.config/Claude].
    #[arg(long, value_name = "DIR", value_parser = super::absolute_path())]
    pub desktop_dir: Option<PathBuf>,
    /// Print one snapshot and exit.
    #[arg(long)]
    pub once: bool,
    /// JSON: one snapshot object per line, a new line for every change
    /// (with --once, one object). Schema: docs/top.md.
    #[arg(long)]
    pub json: bool,
    /// Plain text instead of the full-screen UI (a new table per change).
    #[arg(long)]
    pub plain: bool,
    /// Also list idle, archived and hidden (subagent, `codex exec`) sessions.
    #[arg(short, long)]
    pub all: bool,
    /// Only this provider's sessions (claude, codex, gemini, cursor, copilot,
    /// opencode, qwen).
    #[arg(long)]
    pub provider: Option<Provider>,
    /// Watch by polling (every second) instead of inotify.
    #[arg(long)]
    pub polling: bool,
    /// As root: keep everything the kernel programs watched as a normal
    /// capture in FILE (bound and correlated when top ends).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// As root, do not load the kernel programs (no kernel columns).
    #[arg(long, conflicts_with = "record")]
    pub no_kernel: bool,
    /// Test only: multiply every state threshold by this factor.
    #[arg(long, hide = true, value_name = "F")]
    pub test_thresholds_scale: Option<f64>,
}

impl TopArgs {
    fn options(&self) -> Result<TopOptions> {
        let thresholds = match self.test_thresholds_scale {
            Some(f) if !(f.is_finite() && f > 0.0) => {
                anyhow::bail!("--test-thresholds-scale must be a positive number")
            }
            Some(f) => Thresholds::scaled(f),
            None => Thresholds::default(),
        };
        Ok(TopOptions {
            home: self.home.clone(),
            desktop_dir: self.desktop_dir.clone(),
            thresholds,
            polling: self.polling,
            ..Default::default()
        })
    }

    /// Kernel columns are wanted: root (under sudo or not) and not refused.
    pub fn wants_kernel(&self) -> bool {
        nix::unistd::geteuid().is_root() && !self.no_kernel
    }

    fn filter(&self) -> RowFilter {
        RowFilter {
            provider: self.provider,
            all: self.all,
        }
    }
}

/// SIGINT and SIGTERM, delivered to the event loop as messages: blocked in
/// every thread (before any is started) and taken by `sigwait` on one. Not
/// tokio's signal driver: it wakes itself through a socket pair, and `top`
/// makes no socket calls at all.
fn signal_waiter() -> Result<tokio::sync::mpsc::UnboundedReceiver<Signal>> {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.thread_block().context("blocking SIGINT/SIGTERM")?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(sig) = set.wait() {
            if tx.send(sig).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

pub fn run(args: &TopArgs) -> Result<i32> {
    let opts = args.options()?;
    let signals = signal_waiter()?;
    // Timers only: the I/O driver (and the signal driver tokio's process
    // feature pulls in with it) would open a socket pair.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("starting the event loop")?;
    let watch = if args.wants_kernel() {
        kernel::start(args)?
    } else {
        None
    };
    // Root is for the recorder's thread alone (loading, adoption, /proc
    // evidence). Everything top itself reads — transcripts, the desktop
    // store, the registry, the live capture — is read as the invoking user,
    // as every other command does; without a recorder, root is dropped.
    let _as_user = match &watch {
        Some(_) => agentsight::privileges::AsUser::maybe(
            agentsight::privileges::FileCreds::invoking_user().as_ref(),
        )
        .context("reading as the invoking user")?,
        None => {
            agentsight::privileges::drop_to_invoking_user()
                .context("dropping to the invoking user")?;
            None
        }
    };
    let code = rt.block_on(async {
        let source = watch.as_ref().map(kernel::source);
        let mut top = LiveTop::start(&opts, source).context("top")?;
        top.set_filter(args.filter());
        let full_screen = !args.json && !args.plain && !args.once && {
            use std::io::IsTerminal;
            std::io::stdout().is_terminal()
        };
        if full_screen {
            return tui::run(top, signals, watch.clone()).await;
        }
        stream(&mut top, args, signals).await
    });
    if let Some(w) = watch {
        kernel::stop(w, args)?;
    }
    code
}

/// `--json` / `--plain` / `--once`: print the snapshot, then one per change
/// until SIGINT/SIGTERM or a closed stdout.
async fn stream(
    top: &mut LiveTop,
    args: &TopArgs,
    mut signals: tokio::sync::mpsc::UnboundedReceiver<Signal>,
) -> Result<i32> {
    let first = top.snapshot();
    if !emit(&first, args)? || args.once {
        return Ok(0);
    }
    loop {
        tokio::select! {
            s = top.next_change() => {
                if !emit(&s, args)? {
                    return Ok(0);
                }
            }
            _ = signals.recv() => return Ok(0),
        }
    }
}

/// Prints one snapshot; false once stdout is closed.
fn emit(s: &Snapshot, args: &TopArgs) -> Result<bool> {
    let mut text = if args.json {
        serde_json::to_string(s).context("encoding the snapshot")?
    } else {
        plain(s)
    };
    text.push('\n');
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e).context("writing to stdout"),
    }
}

/// The state as shown to a person.
pub fn state_word(r: &Row) -> &'static str {
    use agentsight::sessions::live::LiveState as S;
    match r.state {
        S::Idle => "idle",
        S::Working => "working",
        S::YourTurn => "your turn",
        S::Stalled => "stalled",
        S::RateLimited => "rate-limited",
        S::AuthRequired => "auth required",
        S::Unknown => "unknown",
    }
}

pub fn age_text(age_s: Option<u64>) -> String {
    match age_s {
        None => "–".into(),
        Some(s) if s < 60 => format!("{s}s"),
        Some(s) if s < 3600 => format!("{}m", s / 60),
        Some(s) if s < 86_400 => format!("{}h", s / 3600),
        Some(s) => format!("{}d", s / 86_400),
    }
}

pub fn tokens_text(r: &Row) -> String {
    match r.tokens {
        None => "–".into(),
        Some(t) => format!("{}/{}", short_count(t.input), short_count(t.output)),
    }
}

fn short_count(n: u64) -> String {
    match n {
        n if n < 10_000 => n.to_string(),
        n if n < 10_000_000 => format!("{}k", n / 1000),
        n => format!("{}M", n / 1_000_000),
    }
}

/// Kernel columns as text: "–" when not measured (never 0).
pub fn kernel_cells(r: &Row) -> [String; 5] {
    match &r.kernel {
        None => std::array::from_fn(|_| "–".to_string()),
        Some(k) => [
            k.processes_alive.to_string(),
            format!("{:.1}", k.execs_per_s),
            k.files_written.to_string(),
            k.connections.to_string(),
            k.lost_events.to_string(),
        ],
    }
}

/// Cuts text to `n` characters (an ellipsis marks the cut) on one line:
/// control, bidi and format characters shown escaped (`rawtext::visible`,
/// as every text output does).
pub fn clip(s: &str, n: usize) -> String {
    let one = agentsight::rawtext::visible(s);
    if one.chars().count() <= n {
        return one.into_owned();
    }
    let mut t: String = one.chars().take(n.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// Why sessions are not listed, as one line (the footer of the full screen
/// and of `--plain`); `None` when every session is listed. The reasons a
/// person would not expect (another user's transcript, an unreadable one)
/// name their first transcript.
pub fn not_listed_line(s: &Snapshot) -> Option<String> {
    if s.hidden_reasons.is_empty() {
        return None;
    }
    let parts: Vec<String> = s
        .hidden_reasons
        .iter()
        .map(|r| {
            let what = match r.reason {
                NotListedReason::Idle => "idle",
                NotListedReason::Archived => "archived",
                NotListedReason::Subagent => "subagent",
                NotListedReason::Exec => "codex exec",
                NotListedReason::OtherProvider => "other provider",
                NotListedReason::NotOwner => "not the home owner's file",
                NotListedReason::Unreadable => "unreadable",
            };
            let first = match (r.reason, r.paths.first()) {
                (NotListedReason::NotOwner | NotListedReason::Unreadable, Some(p)) => {
                    format!(" ({})", clip(&p.display().to_string(), 200))
                }
                _ => String::new(),
            };
            format!("{} {what}{first}", r.count)
        })
        .collect();
    Some(format!("not listed: {}", parts.join(", ")))
}

/// The columns of a row, as the full screen and `--plain` head them.
pub const COLUMNS: [&str; 12] = [
    "AGENT",
    "STATE",
    "TITLE",
    "CWD",
    "MODEL",
    "AGE",
    "TOKENS IN/OUT",
    "PROCS",
    "EXEC/S",
    "FILES",
    "CONN",
    "LOST",
];

/// A header line and one line per row (`--plain`).
fn plain(s: &Snapshot) -> String {
    let mut out = format!(
        "agentsight top  {}  {} session(s) listed, {} idle, {} hidden{}\n",
        s.at,
        s.rows.len(),
        s.not_listed.idle,
        s.not_listed.hidden,
        match s.degraded {
            Some(d) => format!("  degraded: {d}"),
            None => String::new(),
        }
    );
    let [a, st, ti, cw, mo, ag, to, pr, ex, fi, co, lo] = COLUMNS;
    out.push_str(&format!(
        "{a:<7} {st:<13} {ti:<30} {cw:<24} {mo:<18} {ag:>5} {to:>13} {pr:>5} {ex:>7} {fi:>5} {co:>5} {lo:>5}\n"
    ));
    for r in &s.rows {
        let k = kernel_cells(r);
        out.push_str(&format!(
            "{:<7} {:<13} {:<30} {:<24} {:<18} {:>5} {:>13} {:>5} {:>7} {:>5} {:>5} {:>5}\n",
            r.provider.as_str(),
            state_word(r),
            clip(r.title.as_deref().unwrap_or("–"), 30),
            clip(r.cwd.as_deref().unwrap_or("–"), 24),
            clip(r.model.as_deref().unwrap_or("–"), 18),
            age_text(r.age_s),
            tokens_text(r),
            k[0],
            k[1],
            k[2],
            k[3],
            k[4]
        ));
    }
    if let Some(l) = not_listed_line(s) {
        out.push_str(&l);
        out.push('\n');
    }
    out.pop();
    out
}
