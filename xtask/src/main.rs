//! Project tasks: `cargo xtask setup | build | demo | test | bench`.
//!
//! `setup` installs, idempotently and only what is missing, everything a bare
//! machine of the project's kind lacks to build and test agentsight.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};

mod bench_audit;
mod bench_capture;
mod bench_correlate;
mod bench_enforce;
mod bench_export;
mod bench_flood;
mod bench_sessions;
mod bench_top;
mod demo;
mod doctor;
mod e2e_setup;
mod fresh_setup;
mod imports;
mod python_setup;
mod toolchain;

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install the toolchain pieces and packages a fresh machine lacks.
    Setup,
    /// Print every prerequisite as present / missing / wrong, with its fix.
    Doctor,
    /// Slow (10–15 min): run `setup` in an empty RUSTUP_HOME/CARGO_HOME and
    /// build the kernel programs with what it installed.
    FreshSetup,
    /// Set up, then build the release binary (kernel programs embedded).
    Build,
    /// Set up, build, record a built-in scripted agent, print `correlate` for
    /// its session and write the HTML report.
    Demo,
    /// Set up, check formatting and lints, and run the whole test suite (as root).
    Test,
    /// Print the import graph of the library's modules and check it against
    /// the layers (no circle, no upward import).
    Imports,
    /// Build the release binary and print benchmark figures.
    Bench {
        #[arg(value_enum)]
        what: BenchWhat,
        /// Benchmark this agentsight binary instead of the one built here
        /// (e.g. a copy of an earlier build, for before/after figures from
        /// the same session).
        #[arg(long)]
        bin: Option<std::path::PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum BenchWhat {
    /// Recording overhead vs untraced, strace and bpftrace; loss under a flood (root).
    Capture,
    /// Session discovery and parsing on a synthetic 10,000-transcript home.
    Sessions,
    /// `correlate` on a synthetic 1,000,000-event capture vs a naive scan.
    Correlate,
    /// A flood of distinct file events, rate-limited steps and flat out (root).
    Flood,
    /// `audit` of a synthetic 1,000,000-event capture with up to 100,000 findings vs the approach before.
    Audit,
    /// `report` and every `export` format on a synthetic 1,000,000-event
    /// capture: time, peak RSS, output size, beside `export --format jsonl`.
    Export,
    /// `top`: append-to-screen latency, start-up, idle CPU and RSS over the
    /// 10,001-transcript home, inotify beside polling.
    Top,
    /// `record --enforce`: the time an open takes with the marks (refused in
    /// the tree, allowed outside it) beside an unmarked file (root).
    Enforce,
    /// The wire relay: per-chunk SSE latency and body throughput through it
    /// vs direct, its peak RSS (`agentsight-wire`'s `relay_bench` example).
    Relay,
}

/// Debian packages the tests use: (a program it provides, package).
pub(crate) const DEBIAN_PACKAGES: &[(&str, &str)] = &[
    ("strace", "strace"),
    ("useradd", "passwd"),
    ("gcc", "gcc"),
    // Static libc for the flood test's static binary.
    ("/usr/lib/x86_64-linux-gnu/libc.a", "libc6-dev"),
    ("curl", "curl"),
    ("git", "git"),
    ("ip", "iproute2"),
    ("setpriv", "util-linux"),
    // The privilege-boundary tests run agentsight through real sudo.
    ("sudo", "sudo"),
    ("python3", "python3"),
    // `top`'s terminal tests drive the full-screen UI in a real terminal.
    ("tmux", "tmux"),
    ("npm", "npm"),
    // The container tests: a real Docker engine (the tests start `dockerd`
    // when none answers) and an offline-built base image.
    ("dockerd", "docker.io"),
    ("debootstrap", "debootstrap"),
    // The export tests' decoders live in a venv (`python_setup`).
    ("/usr/lib/python3.11/ensurepip/__init__.py", "python3-venv"),
    // The HTML report is checked in a real headless browser.
    ("chromium", "chromium"),
];

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.task {
        Task::Setup => setup(),
        Task::Doctor => {
            if doctor::report(&doctor::checks()) {
                Ok(())
            } else {
                bail!("some prerequisites are missing or wrong (see above)")
            }
        }
        Task::FreshSetup => fresh_setup::check(),
        Task::Imports => imports::check(&workspace_root()),
        Task::Build => {
            setup()?;
            build_release()
        }
        Task::Demo => {
            setup()?;
            build_release()?;
            demo::run(&workspace_root())
        }
        Task::Test => {
            setup()?;
            test()
        }
        Task::Bench { what, bin } => {
            setup()?;
            build_release()?;
            let bin = bin.unwrap_or_else(|| workspace_root().join("target/release/agentsight"));
            match what {
                BenchWhat::Capture => bench_capture::run(&bin),
                BenchWhat::Sessions => bench_sessions::run(&bin),
                BenchWhat::Correlate => bench_correlate::run(&bin),
                BenchWhat::Flood => bench_flood::run(&bin),
                BenchWhat::Audit => bench_audit::run(&bin),
                BenchWhat::Export => bench_export::run(&bin),
                BenchWhat::Top => bench_top::run(&bin),
                BenchWhat::Enforce => bench_enforce::run(&bin),
                BenchWhat::Relay => run(cargo().current_dir(workspace_root()).args([
                    "run",
                    "--release",
                    "-p",
                    "agentsight-wire",
                    "--example",
                    "relay_bench",
                ])),
            }
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// `cargo` on the pinned user-space toolchain (setup installs it), whatever
/// toolchain ran xtask itself.
fn cargo() -> Command {
    let mut cmd = Command::new("cargo");
    match toolchain::Pins::read() {
        Ok(pins) => {
            cmd.env("RUSTUP_TOOLCHAIN", pins.stable);
        }
        Err(e) => eprintln!("xtask: {e:#}; using the default toolchain"),
    }
    cmd
}

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn have(program: &str) -> bool {
    if program.starts_with('/') {
        return Path::new(program).exists();
    }
    Command::new("sh")
        .args(["-c", &format!("command -v {program} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs the doctor, installs what setup can install, and stops with the
/// doctor's report when anything required is still missing or wrong.
fn setup() -> Result<()> {
    let before = doctor::checks();
    if doctor::machine_failures(&before) > 0 {
        eprintln!("xtask: this machine lacks what setup cannot install:");
        doctor::report(&before);
        bail!("setup stopped: see the report above");
    }
    let pins = toolchain::Pins::read()?;
    // 1. The pinned toolchains (the kernel programs build with -Z build-std=core).
    toolchain::install_stable(&pins)?;
    toolchain::install_nightly(&pins)?;
    // 2. bpf-linker built against the pinned nightly's own LLVM (same major).
    if !toolchain::linker_ok(&toolchain::linker()) {
        toolchain::install_bpf_linker(&pins)?;
    }
    // 3. Debian packages the tests need.
    let missing: Vec<&str> = DEBIAN_PACKAGES
        .iter()
        .filter(|(bin, _)| !have(bin))
        .map(|(_, pkg)| *pkg)
        .collect();
    if !missing.is_empty() {
        run(Command::new("apt-get").arg("update").arg("-q"))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    // 4. The real agent CLIs (pinned, from npm) for the end-to-end tests.
    e2e_setup::install_agent_clis()?;
    e2e_setup::install_mcp_servers()?;
    // 5. The independent decoders of the export tests (PyPI, pinned, in a venv).
    python_setup::install()?;
    let after = doctor::checks();
    if !doctor::report(&after) {
        bail!("setup finished, but the report above still shows what is missing");
    }
    eprintln!("xtask: setup complete");
    Ok(())
}

fn build_release() -> Result<()> {
    run(cargo()
        .current_dir(workspace_root())
        .args(["build", "--release", "-p", "agentsight"]))
}

fn test() -> Result<()> {
    let root = workspace_root();
    run(cargo()
        .current_dir(&root)
        .args(["fmt", "--all", "--", "--check"]))?;
    // The layering ARCHITECTURE.md states: no circle, no upward import.
    imports::check(&root)?;
    run(cargo().current_dir(&root).args([
        "clippy",
        "--workspace",
        "--exclude",
        "agentsight-ebpf",
        "--all-targets",
        "--",
        // Functions stay under the threshold in clippy.toml (150 lines).
        "-W",
        "clippy::too_many_lines",
        "-D",
        "warnings",
    ]))?;
    // The capture tests drive the release binary as a user would.
    build_release()?;
    run(cargo()
        .current_dir(&root)
        .args([
            "test",
            "--release",
            "--no-fail-fast",
            "--workspace",
            "--exclude",
            "agentsight-ebpf",
        ])
        .env("AGENTSIGHT_BIN", root.join("target/release/agentsight")))
}
