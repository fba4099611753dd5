//! The command line: parses arguments, calls the library, and turns errors
//! into one clear line on stderr with a meaningful exit status.

pub mod audit;
pub mod bridge;
mod config;
mod containers;
pub mod correlate;
pub mod message;
mod message_log;
mod otlp;
pub mod pid;
pub mod report;
pub mod sentinel;
pub mod sessions;
pub mod top;

pub(crate) use agentsight::outfile::UserFile;

use std::{ffi::OsString, io::IsTerminal, io::Write, path::PathBuf, time::Duration};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};

use agentsight::{
    procinfo::AgentName,
    record::{self, RecordOptions},
    store::Capture,
    views,
};

#[derive(Parser, Debug)]
#[command(
    name = "agentsight",
    version,
    about = "What AI coding agents really did on this machine"
)]
pub struct Cli {
    /// More log output (-v info, -vv debug). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Record an agent's process tree into a SQLite capture (needs root).
    Record(RecordArgs),
    /// Summarise a capture: run facts, loss, counts, the process tree.
    Show(ShowArgs),
    /// Export a capture: its events as JSON lines, or OTLP traces (file or push).
    Export(ExportArgs),
    /// List recent agent sessions from the agents' own transcripts.
    Sessions(sessions::SessionsArgs),
    /// One agent session in detail.
    #[command(subcommand)]
    Session(SessionCmd),
    /// Line up a session's tool calls with what its processes really did.
    Correlate(correlate::CorrelateArgs),
    /// Which agent session a running process belongs to, with the evidence.
    Pid(pid::PidArgs),
    /// Check a capture against a policy (exit 0 pass, 1 error-level findings, 2 bad input).
    Audit(audit::AuditArgs),
    /// Write one self-contained HTML report of a capture (timeline, tool calls, loss).
    Report(report::ReportArgs),
    /// Live agent states: which session works, waits for you, stalled, is rate-limited.
    Top(top::TopArgs),
    /// The in-container side of `--docker-container` (JSON lines on stdin/stdout).
    #[command(hide = true)]
    Bridge(bridge::BridgeArgs),
    /// The backstop of `record --enforce`, started by the recorder.
    #[command(hide = true, name = "enforce-sentinel")]
    EnforceSentinel(sentinel::SentinelArgs),
}

#[derive(Subcommand, Debug)]
pub enum SessionCmd {
    /// Show a session: prompts, tool calls with status and paths, responses, usage.
    Show(sessions::SessionShowArgs),
    /// Continue a session with one new message (off unless enabled).
    ///
    /// OFF by default: enable it with --allow-messaging, or with `messaging =
    /// true` in ~/.config/agentsight/config.toml (a file you own that no one
    /// else may write). The agent (Claude Code, Codex, Gemini CLI; Cursor is
    /// observe-only) runs as the transcript's owner, never as root, with a
    /// cleared environment, in the session's directory; nothing is ever
    /// approved on your behalf; every submission is appended to
    /// ~/.local/state/agentsight/messages.jsonl.
    ///
    /// Exit status: 0 the turn ended; 2 not enabled, bad input or no such
    /// session; 3 the session is live outside agentsight; 4 another message to
    /// it is being handled; 5 the agent cannot be messaged (Cursor); 6
    /// identity refused; 7 the agent failed; 8 no acknowledgement within 20 s,
    /// or the turn outlasted --turn-timeout.
    Message(message::MessageArgs),
}

#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// Capture file to create [default: ./agentsight-YYYYmmdd-HHMMSS.db].
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Record an already-running process and its descendants (repeatable).
    #[arg(long = "pid")]
    pub pids: Vec<u32>,
    /// Record a running Docker container (name or id; repeatable): every
    /// process in its cgroup, those running now and every later one
    /// (`docker exec` too). With no command or --pid (--agent only
    /// labels then), recording ends when every container has stopped.
    // A value that looks like an option is taken as the name, so the name
    // check (not clap) refuses it, in one line.
    #[arg(long = "container", value_name = "NAME|ID", allow_hyphen_values = true)]
    pub containers: Vec<String>,
    /// Bind the trees of this running Docker container (name or id;
    /// repeatable; usually also given to --container) to the sessions found
    /// inside it, read there through `agentsight bridge` (which must be on
    /// the container's PATH): a transcript written in a container is never
    /// read from the host path of the same name.
    #[arg(
        long = "docker-container",
        value_name = "NAME",
        allow_hyphen_values = true
    )]
    pub docker_containers: Vec<String>,
    /// Track every process of this agent, running now or started later,
    /// and label the rows it recognises (`processes.agent`). With
    /// --container: only label the agents inside the containers.
    #[arg(long, value_parser = agent_name())]
    pub agent: Option<AgentName>,
    /// Under sudo, also record other users' processes with --pid/--agent
    /// (by default only the caller's own are; meant for an administrator,
    /// and stored in the capture's meta as `all_users`).
    #[arg(long)]
    pub all_users: bool,
    /// Run the command as this user instead of the one who invoked sudo.
    #[arg(long)]
    pub user: Option<String>,
    /// Pass an environment variable to the command: NAME copies it from
    /// agentsight's environment, NAME=VALUE sets it (repeatable). Otherwise
    /// the command gets only the terminal/locale variables, HOME, USER,
    /// LOGNAME, SHELL and PATH=/usr/local/bin:/usr/bin:/bin.
    #[arg(long = "env", value_name = "NAME[=VALUE]", value_parser = parse_env)]
    pub env: Vec<agentsight::envreset::EnvArg>,
    /// Stop after this long, e.g. 30s, 5m, 1h.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Kernel ring buffer size in MiB (a power of two).
    #[arg(long, default_value_t = 16, value_parser = parse_ring_mib)]
    pub ring_mib: u32,
    /// Stop storing once the capture reaches this size (e.g. 500M, 2G; K, M,
    /// G are powers of 1024); what follows is counted as loss, per kind.
    #[arg(long, value_parser = parse_size)]
    pub max_size: Option<u64>,
    /// No live status line and no summary.
    #[arg(short, long)]
    pub quiet: bool,
    /// Do not copy the bound sessions' raw transcripts into the capture.
    #[arg(long)]
    pub no_transcripts: bool,
    /// Measure the kernel programs' own run time while recording (kernel BPF
    /// statistics: two clock reads per program run) and store it with the
    /// capture (meta `program_stats`).
    #[arg(long)]
    pub program_stats: bool,
    /// Also capture the model traffic: start a loopback relay and point the
    /// command's agents at it through their own base-URL settings; it
    /// forwards to the real upstream (TLS verified) and stores every request
    /// and response beside the other layers (docs/wire.md). Needs a command.
    #[arg(long, requires = "command")]
    pub wire: bool,
    /// Budget for transcript copies, all sessions together (MiB).
    #[arg(long, default_value_t = 256)]
    pub transcript_max_mib: u64,
    /// After recording, audit the capture with this policy and print the
    /// findings (exit non-zero if the command failed or the audit did).
    #[arg(long, value_name = "POLICY")]
    pub audit: Option<PathBuf>,
    /// Report format for --audit (printed to stderr, or written to --audit-output).
    #[arg(long, value_enum, default_value_t = audit::AuditFormat::Text, requires = "audit")]
    pub audit_format: audit::AuditFormat,
    /// Write the --audit report to this file.
    #[arg(long, requires = "audit")]
    pub audit_output: Option<PathBuf>,
    /// At the end, write the HTML report of the capture here (as `agentsight
    /// report`; with --audit, its findings are linked in it).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Show recorded text exactly in the --report page: by default
    /// secret-looking values are shown as ‹redacted›.
    #[arg(long, requires = "report")]
    pub no_redact: bool,
    /// Enforce the policy (--audit's, else the default policy) for the
    /// recorded tree only, before each access happens: reads of
    /// `[denied_paths] read` files and execs of `[executables] deny` ones are
    /// refused with EPERM (fanotify permission marks on their inodes), and so
    /// are connects and datagrams to destinations `[network]` denies or does
    /// not declare (cgroup socket programs), and writes outside the
    /// `[writes]` allowed roots with EACCES (a Landlock ruleset the command
    /// takes on before it runs); needs root. Every denial is stored and
    /// `audit` marks its finding blocked. Not enforced (audited only, listed
    /// in the capture and the summary): denied writes inside the allowed
    /// roots, `[executables] allow`, DNS names asked. If a rule cannot be
    /// enforced, recording refuses to start (exit 2); `--enforce=best-effort`
    /// records anyway and lists the rule as audited only. If the recorder
    /// dies, a sentinel stops and kills the tree. See docs/enforce.md.
    #[arg(
        long,
        value_enum,
        value_name = "MODE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "on"
    )]
    pub enforce: Option<EnforceMode>,
    /// The command to run and record.
    #[arg(last = true)]
    pub command: Vec<OsString>,
}

/// `--enforce` or `--enforce=best-effort`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EnforceMode {
    /// Refuse to start when a rule cannot be enforced.
    On,
    /// Record anyway; the rules that could not be enforced are audited only.
    BestEffort,
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The capture to read (opened read-only).
    #[arg(long)]
    pub db: PathBuf,
    /// Count by scanning every event even where the writer kept the
    /// summaries (the baseline of `cargo xtask bench export`).
    #[arg(long, hide = true)]
    pub scan: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExportFormat {
    Jsonl,
    /// A Perfetto trace (protobuf TrackEvent) for ui.perfetto.dev; needs -o.
    Perfetto,
    /// OpenTelemetry traces, GenAI semantic conventions, OTLP/JSON lines.
    OtlpJson,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The capture to read (opened read-only).
    #[arg(long)]
    pub db: PathBuf,
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    pub format: ExportFormat,
    /// Write to this file (a new 0600 file renamed over it) instead of standard output.
    #[arg(
        short = 'o',
        long,
        value_name = "FILE",
        conflicts_with = "otlp_endpoint"
    )]
    pub output: Option<PathBuf>,
    /// Push the OTLP traces over OTLP/HTTP to URL/v1/traces (without URL:
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT);
    /// headers, timeout and protocol from the OTEL_EXPORTER_OTLP_* variables.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    pub otlp_endpoint: Option<String>,
    /// Include prompt and response text, tool arguments and command lines
    /// in the OTLP traces (off by default).
    #[arg(long)]
    pub capture_content: bool,
    /// Write recorded text exactly into the Perfetto trace: by default
    /// secret-looking values are written ‹redacted› (jsonl is always exact).
    #[arg(long)]
    pub no_redact: bool,
    /// jsonl as it was written before (every text looked up per row through
    /// the `events` view): the baseline of `cargo xtask bench export`.
    #[arg(long, hide = true)]
    pub by_view: bool,
}

/// The units `--duration`/`--max-age` take. humantime knows more (`M` is
/// months to it, `y` years), but `5M` meant as minutes must not record for
/// five months: anything else is refused.
const DURATION_UNITS: [&str; 6] = ["ms", "s", "m", "h", "d", "w"];

/// Every `--home DIR` (and `top --desktop-dir`): made absolute against the
/// current directory once, while parsing, so a relative one means the same
/// directory everywhere after — `top` compares inotify's event paths (always
/// absolute) with it. Symlinks stay as given (no canonicalizing: the owner
/// check reads the path itself, and a missing one is reported there).
pub fn absolute_path() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser;
    clap::builder::PathBufValueParser::new().try_map(|p| std::path::absolute(&p))
}

/// `record --duration` and `sessions --max-age`: numbers with the units of
/// [`DURATION_UNITS`] (`30s`, `5m`, `1.5h`, `2d`, `1w`, `1h 30m`), parsed by
/// humantime; a bare number is seconds and a fraction may start with its
/// point (`.5s`). Narrower than the hand-written parser before it only in
/// odd forms: a point with no digit after it (`1.s`), and fractions of an
/// hour, day or week finer than a second, which humantime drops.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let units = s
        .split(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
        .filter(|u| !u.is_empty());
    if let Some(u) = units.into_iter().find(|u| !DURATION_UNITS.contains(u)) {
        return Err(format!(
            "bad duration {s:?}: unit {u:?} is not one of ms, s, m, h, d, w; use e.g. 30s, 5m, 1h"
        ));
    }
    let mut text = if s.starts_with('.') {
        format!("0{s}")
    } else {
        s.to_owned()
    };
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        text.push('s');
    }
    let too_large = || format!("duration {s:?} is too large");
    let d = humantime::parse_duration(&text).map_err(|e| match e {
        humantime::DurationError::NumberOverflow => too_large(),
        e => format!("bad duration {s:?}: {e}; use e.g. 30s, 5m, 1h"),
    })?;
    // The bound from before humantime, kept so what was refused stays refused:
    // seconds that reach 2^64 once taken as f64 (about 584 billion years).
    if d.as_secs_f64() >= u64::MAX as f64 {
        return Err(too_large());
    }
    Ok(d)
}

fn parse_env(s: &str) -> Result<agentsight::envreset::EnvArg, String> {
    agentsight::envreset::EnvArg::parse(std::ffi::OsStr::new(s)).map_err(|e| e.to_string())
}

/// `N`, `NK`, `NM`, `NG` (powers of 1024) → bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, 'B'),
    };
    let shift = match unit {
        'B' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        _ => return Err(format!("bad size {s:?}: use a number with K, M or G")),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad size {s:?}: use a number with K, M or G"))?;
    n.checked_mul(1u64 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("bad size {s:?}: out of range"))
}

fn parse_ring_mib(s: &str) -> Result<u32, String> {
    let n: u32 = s.parse().map_err(|_| format!("bad size {s:?}"))?;
    if n == 0 || !n.is_power_of_two() || n > 1024 {
        return Err("ring buffer size must be a power of two between 1 and 1024 MiB".into());
    }
    Ok(n)
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// Runs the CLI; returns the process exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            // One line: clap's first line names the argument and the problem
            // (the "try --help" hint after it is left out).
            let text = e.render().to_string();
            let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            agentsight::sayln!("agentsight: {}", line.trim_start_matches("error: "));
            return 2;
        }
        // --help / --version: print and exit 0 (a closed stdout is ignored).
        Err(e) => {
            let _ = e.print();
            return 0;
        }
    };
    init_logging(cli.verbose);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // One line, whatever a path or a container's answer in it holds.
            let e = format!("{e:#}");
            agentsight::sayln!("agentsight: error: {}", agentsight::rawtext::visible(&e));
            2
        }
    }
}

fn run(cli: Cli) -> Result<i32> {
    // Only `record` needs root. Under sudo every other command runs wholly
    // as the invoking user, so it reads and writes only what they could.
    // `top` keeps root only for its recorder's thread (KernelWatch creates
    // files as the caller, as record does); `top` itself reads as the caller
    // (cli::top::run).
    let keeps_root = match &cli.command {
        Cmd::Record(_) => true,
        Cmd::Top(a) => a.wants_kernel(),
        // As root the agent is started as the transcript's owner (setgroups,
        // setgid, setuid in the child); everything else it reads and writes
        // as the invoking user (cli::message).
        Cmd::Session(SessionCmd::Message(_)) => true,
        _ => false,
    };
    if !keeps_root {
        agentsight::privileges::drop_to_invoking_user()?;
    }
    // Transcripts are read only from an existing home and only if they are
    // its owner's files; a --home that does not exist is an error.
    let home = match &cli.command {
        Cmd::Sessions(a) => Some(a.home.as_deref()),
        Cmd::Session(SessionCmd::Show(a)) => Some(a.home.as_deref()),
        Cmd::Session(SessionCmd::Message(a)) => Some(a.home.as_deref()),
        Cmd::Correlate(a) => Some(a.home.as_deref()),
        Cmd::Top(a) => Some(a.home.as_deref()),
        _ => None,
    };
    match home {
        Some(Some(h)) => {
            agentsight::sessions::discovery::read_home_of_owner(Some(h))
                .map_err(|e| anyhow::anyhow!("--home: {e}"))?;
        }
        Some(None) => {
            // The default home: when there is none, discovery says so itself.
            let _ = agentsight::sessions::discovery::read_home_of_owner(None);
        }
        None => {}
    }
    match cli.command {
        Cmd::Record(a) => cmd_record(a),
        Cmd::Sessions(a) => sessions::run_sessions(&a),
        Cmd::Session(SessionCmd::Show(a)) => sessions::run_session_show(&a).map(|_| 0),
        Cmd::Session(SessionCmd::Message(a)) => message::run(&a),
        Cmd::Correlate(a) => correlate::run(&a),
        Cmd::Pid(a) => pid::run(&a),
        Cmd::Audit(a) => audit::run(&a),
        Cmd::Report(a) => report::run(&a),
        Cmd::Top(a) => top::run(&a),
        Cmd::Bridge(a) => bridge::run(&a),
        Cmd::EnforceSentinel(a) => sentinel::run(&a),
        Cmd::Show(a) => {
            // No page walk at open: the summary is built in full before a
            // line is printed, and reads either the kept summaries only or
            // every event (where a damaged page fails the query, naming the
            // file). The walk alone cost twice the summary on 2M events.
            let cap = Capture::open_quick(&a.db)?;
            let cap = if a.scan { cap.scan_only() } else { cap };
            say_note(&cap);
            // Each recorded string is shown escaped by `summary`; the whole
            // is checked once more (everything but our newlines; see rawtext).
            let summary = views::show::summary(&cap)?;
            let text = agentsight::rawtext::visible_lines(&summary);
            write_stdout(text.as_bytes())?;
            Ok(0)
        }
        Cmd::Export(a) => {
            // Checked before the capture is read.
            if matches!(a.format, ExportFormat::Perfetto) && a.output.is_none() {
                bail!(PERFETTO_NEEDS_OUTPUT);
            }
            if a.no_redact
                && (a.otlp_endpoint.is_some() || !matches!(a.format, ExportFormat::Perfetto))
            {
                bail!("--no-redact applies to --format perfetto (jsonl is never redacted)");
            }
            let cap = Capture::open(&a.db)?;
            say_note(&cap);
            if !cap.run_meta()?.recorder_finished {
                agentsight::say!(
                    "agentsight: warning: {} is incomplete; loss {}\n",
                    a.db.display(),
                    views::show::unknown_after(&cap)?
                );
            }
            if a.otlp_endpoint.is_some() || matches!(a.format, ExportFormat::OtlpJson) {
                return otlp::run(&a, &cap);
            }
            if a.capture_content {
                bail!("--capture-content applies to --format otlp-json and --otlp-endpoint");
            }
            match a.format {
                ExportFormat::Perfetto => export_perfetto(&cap, &a),
                _ => export_jsonl(&cap, &a),
            }
        }
    }
}

/// `export --format jsonl`: to stdout, or to `-o FILE`.
fn export_jsonl(cap: &Capture, a: &ExportArgs) -> Result<i32> {
    otlp::to_output(a.output.as_deref(), |out| {
        let written = if a.by_view {
            views::export::jsonl_by_view(cap, out)
        } else {
            views::export::jsonl(cap, out)
        };
        match written {
            Ok(_) => Ok(()),
            // A closed pipe (`| head`) is not an error.
            Err(views::export::ExportError::Io(e))
                if e.kind() == std::io::ErrorKind::BrokenPipe =>
            {
                Ok(())
            }
            Err(e) => Err(e).with_context(|| format!("exporting {}", a.db.display())),
        }
    })?;
    Ok(0)
}

const PERFETTO_NEEDS_OUTPUT: &str = "--format perfetto writes a binary trace: give -o FILE";

/// `export --format perfetto -o FILE`: a binary trace, so only to a file
/// (as the invoking user, a new 0600 file, never through a link; a failed
/// export leaves FILE as it was).
fn export_perfetto(cap: &Capture, a: &ExportArgs) -> Result<i32> {
    let Some(path) = &a.output else {
        bail!(PERFETTO_NEEDS_OUTPUT);
    };
    let mut done = None;
    otlp::to_output(Some(path), |out| {
        let x = views::perfetto::export(cap, out, !a.no_redact)
            .with_context(|| format!("exporting {}", a.db.display()))?;
        done = Some(x);
        Ok(())
    })?;
    if let Some(x) = done {
        agentsight::sayln!(
            "agentsight: wrote {}: {} sessions, {} tool calls, {} processes, {} events, {} flows ({} bytes)",
            path.display(),
            x.counts.sessions,
            x.counts.tool_slices,
            x.counts.processes,
            x.events,
            x.counts.flows,
            x.written.bytes
        );
    }
    Ok(0)
}

/// `--agent`'s words, from the library's vocabulary.
fn agent_name() -> impl clap::builder::TypedValueParser<Value = AgentName> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(AgentName::ALL.iter().map(|a| a.as_str()))
        .try_map(|s| AgentName::from_word(&s).ok_or_else(|| format!("unknown agent {s}")))
}

/// Tells the reader once how a capture that was not closed cleanly was read.
pub(crate) fn say_note(cap: &Capture) {
    if let Some(n) = &cap.note {
        agentsight::sayln!("agentsight: note: {n}");
    }
}

fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Prints what the recorder reports: warnings unless `--quiet` (a file it
/// could not clean up always), the status line only on a terminal.
fn say_notice(n: &record::Notice, quiet: bool, tty: bool) {
    use record::Notice;
    match n {
        Notice::Warning(w) if !quiet => agentsight::sayln!("agentsight: warning: {w}"),
        Notice::SkippedOtherUsers(count) if !quiet => agentsight::sayln!(
            "agentsight: skipped {count} process(es) of other users so far (under sudo only yours are recorded; --all-users records them)"
        ),
        Notice::Status {
            elapsed,
            processes,
            events_per_s,
            lost,
        } if tty => agentsight::say!(
            "\r\x1b[Kagentsight: recording {} | {processes} processes | {events_per_s:.0} events/s | lost {lost}",
            record::fmt_elapsed(*elapsed)
        ),
        Notice::Stopped if tty => agentsight::say!("\r\x1b[K"),
        Notice::CleanupFailed(w) => agentsight::sayln!("agentsight: warning: {w}"),
        Notice::Wire(w) if !quiet => agentsight::sayln!("agentsight: wire: {w}"),
        Notice::Enforced(line) => agentsight::sayln!("agentsight: {line}"),
        _ => {}
    }
}

/// `record`'s arguments as the library's request.
fn record_request(a: RecordArgs) -> record::RecordRequest {
    record::RecordRequest {
        options: RecordOptions {
            output: a.output.unwrap_or_else(record::default_output),
            command: a.command,
            pids: a.pids,
            containers: a.containers,
            container_sessions: None,
            agent: a.agent,
            user: a.user,
            env: a.env,
            duration: a.duration,
            ring_bytes: a.ring_mib * 1024 * 1024,
            all_users: a.all_users,
            copy_transcripts: !a.no_transcripts,
            program_stats: a.program_stats,
            wire: a.wire,
            max_bytes: a.max_size,
            start_meta: Vec::new(),
            transcript_budget: a.transcript_max_mib.saturating_mul(1024 * 1024),
            live: None,
            enforce: None,
        },
        audit: a.audit,
        audit_format: a.audit_format.into(),
        audit_output: a.audit_output,
        report: a.report,
        redact: !a.no_redact,
        docker_containers: a.docker_containers,
        enforce: a.enforce.map(|m| m == EnforceMode::BestEffort),
    }
}

fn cmd_record(a: RecordArgs) -> Result<i32> {
    let quiet = a.quiet;
    let tty = std::io::stderr().is_terminal() && !quiet;
    let request = record_request(a);
    let docker_containers = request.docker_containers.clone();
    let mut prepared = request.check_and_open()?;
    // `--docker-container`: the containers' bridges, built (names checked,
    // each inspected) before anything runs, once `check_and_open` allowed them.
    if !docker_containers.is_empty() {
        prepared.options.container_sessions = containers::record_source(&docker_containers)?;
    }
    let recorded = prepared.record(&mut |n| say_notice(&n, quiet, tty))?;
    let Some(status) = recorded_status(&recorded.outcome, quiet) else {
        return Ok(1);
    };
    let followed = recorded.report_and_audit(status)?;
    for said in &followed.said {
        match said {
            record::Said::Line(l) => agentsight::sayln!("{l}"),
            record::Said::Findings(text) => agentsight::say!("{text}"),
        }
    }
    Ok(followed.status)
}

/// Says how storing went; the status to go on with is the outcome's.
fn recorded_status(outcome: &record::RecordOutcome, quiet: bool) -> Option<i32> {
    if !quiet {
        agentsight::say!("{}", record::summary_text(outcome));
    } else if let Some(e) = &outcome.store_error {
        // Quiet silences the summary, never a failure to store.
        agentsight::sayln!(
            "agentsight: storing stopped early: {e} (what was written before stays readable)"
        );
    }
    let status = outcome.exit_status();
    if quiet
        && status.is_some()
        && let Some(full) = &outcome.disk_full
    {
        agentsight::sayln!("agentsight: storing stopped: {}", full.message());
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("5x").is_err());
        assert_eq!(
            parse_duration("99999999999999999999h"),
            Err("duration \"99999999999999999999h\" is too large".into())
        );
        assert!(parse_duration("18446744073709551615s").is_err());
        assert!(parse_duration("1e400").is_err());
        assert!(parse_duration("-1s").is_err());
        // humantime's own units are not ours: 5M is not five months.
        assert_eq!(
            parse_duration("5M"),
            Err("bad duration \"5M\": unit \"M\" is not one of ms, s, m, h, d, w; use e.g. 30s, 5m, 1h".into())
        );
        assert!(parse_duration("1y").is_err() && parse_duration("5min").is_err());
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
    }

    #[test]
    fn durations_accepted_before_humantime_keep_their_value() {
        // A bare number is seconds; fractions, days and weeks; blanks around.
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration(" 10m "), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("1w"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1.2.3s").is_err());
    }
}
