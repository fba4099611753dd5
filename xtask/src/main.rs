//! Project tasks: `cargo xtask setup | build | demo | test`.
//!
//! `setup` installs, idempotently and only what is missing, everything a bare
//! machine of the project's kind lacks to build and test agentsight.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};

mod bench_capture;
mod bench_correlate;
mod bench_sessions;
mod e2e_setup;

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
    /// Set up, then build the release binary (kernel programs embedded).
    Build,
    /// Set up, build, record a small scripted workload, and summarise it.
    Demo,
    /// Set up, check formatting and lints, and run the whole test suite (as root).
    Test,
    /// Build the release binary and print benchmark figures.
    Bench {
        #[arg(value_enum)]
        what: BenchWhat,
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
}

/// bpf-linker release known to build against the nightly's LLVM 22 here.
const BPF_LINKER_VERSION: &str = "0.13.0";
/// Debian packages the tests use: (a program it provides, package).
const DEBIAN_PACKAGES: &[(&str, &str)] = &[
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
    ("npm", "npm"),
];

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.task {
        Task::Setup => setup(),
        Task::Build => {
            setup()?;
            build_release()
        }
        Task::Demo => {
            setup()?;
            build_release()?;
            demo()
        }
        Task::Test => {
            setup()?;
            test()
        }
        Task::Bench { what } => {
            setup()?;
            build_release()?;
            let bin = workspace_root().join("target/release/agentsight");
            match what {
                BenchWhat::Capture => bench_capture::run(&bin),
                BenchWhat::Sessions => bench_sessions::run(&bin),
                BenchWhat::Correlate => bench_correlate::run(&bin),
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

fn setup() -> Result<()> {
    // 1. Nightly with rust-src: the kernel programs build with -Z build-std=core.
    let installed = output(Command::new("rustup").args(["toolchain", "list"])).unwrap_or_default();
    if !installed.lines().any(|l| l.starts_with("nightly")) {
        run(Command::new("rustup").args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ]))?;
    }
    let comps = output(Command::new("rustup").args([
        "component",
        "list",
        "--toolchain",
        "nightly",
        "--installed",
    ]))
    .unwrap_or_default();
    if !comps.lines().any(|l| l.starts_with("rust-src")) {
        run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }

    // 2. bpf-linker built against the nightly's own LLVM (same major version).
    let linker = output(Command::new("bpf-linker").arg("--version")).unwrap_or_default();
    if !linker.contains(BPF_LINKER_VERSION) {
        install_bpf_linker()?;
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
    // The real agent CLIs (pinned, from npm) for the end-to-end tests.
    e2e_setup::install_agent_clis()?;
    eprintln!("xtask: setup complete");
    Ok(())
}

/// Builds bpf-linker with LLVM_PREFIX pointing at a folder that exposes the
/// nightly's libLLVM as `libLLVM.so`, so no system LLVM 22 is needed.
fn install_bpf_linker() -> Result<()> {
    let sysroot = output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))
        .context("cannot find the nightly sysroot")?;
    let lib = PathBuf::from(sysroot.trim()).join("lib");
    let llvm = std::fs::read_dir(&lib)
        .with_context(|| format!("reading {}", lib.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libLLVM.so.22") || n.starts_with("libLLVM-22"))
        })
        .with_context(|| format!("no libLLVM 22 in {}", lib.display()))?;
    let prefix = std::env::temp_dir().join("agentsight-llvm-prefix");
    let plib = prefix.join("lib");
    std::fs::create_dir_all(&plib)?;
    for name in [
        "libLLVM.so".to_owned(),
        llvm.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("libLLVM.so.22")
            .to_owned(),
    ] {
        let link = plib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&llvm, &link)?;
    }
    run(Command::new("cargo")
        .args([
            "install",
            "bpf-linker",
            "--locked",
            "--version",
            BPF_LINKER_VERSION,
            "--no-default-features",
            "--features",
            "llvm-22",
        ])
        .env("LLVM_PREFIX", &prefix))
}

fn build_release() -> Result<()> {
    run(Command::new("cargo").current_dir(workspace_root()).args([
        "build",
        "--release",
        "-p",
        "agentsight",
    ]))
}

/// The demo workload: a small scripted "agent" that inspects and edits files
/// in a scratch workspace and runs commands, one of which fails.
const DEMO_SCRIPT: &str = r#"set -u
cd "$1"
echo "fn main() { println!(\"hi\"); }" > main.rs
ls -la > listing.txt
grep -c main main.rs
sh -c 'cd /tmp && pwd'
( exit 3 ) || echo "a subshell exited with $?"
/bin/false || echo "false failed as expected"
sh -c 'sleep 0.2 & wait'
cat main.rs | wc -c
"#;

fn demo() -> Result<()> {
    let root = workspace_root();
    let bin = root.join("target/release/agentsight");
    let user = std::env::var("SUDO_USER").unwrap_or_else(|_| "nobody".into());
    let scratch = std::env::temp_dir().join(format!("agentsight-demo-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    // The workload runs as `user`: give it the scratch directory.
    run(Command::new("chown").arg(&user).arg(&scratch))?;
    let work = scratch.join("work");
    run(Command::new("install").args(["-d", "-o", &user]).arg(&work))?;
    let script = scratch.join("agent.sh");
    std::fs::write(&script, DEMO_SCRIPT)?;
    let db = root.join("agentsight-demo.db");
    let _ = std::fs::remove_file(&db);
    let mut rec = Command::new(&bin);
    rec.arg("record");
    if std::env::var_os("SUDO_USER").is_none() {
        rec.args(["--user", &user]);
    }
    rec.arg("-o")
        .arg(&db)
        .arg("--")
        .arg("/bin/sh")
        .arg(&script)
        .arg(&work);
    run(&mut rec)?;
    run(Command::new(&bin).arg("show").arg("--db").arg(&db))?;
    eprintln!(
        "xtask: demo capture at {} (try: {} export --db {} --format jsonl)",
        db.display(),
        bin.display(),
        db.display()
    );
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

fn test() -> Result<()> {
    let root = workspace_root();
    run(Command::new("cargo")
        .current_dir(&root)
        .args(["fmt", "--all", "--", "--check"]))?;
    run(Command::new("cargo").current_dir(&root).args([
        "clippy",
        "--workspace",
        "--exclude",
        "agentsight-ebpf",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    // The capture tests drive the release binary as a user would.
    build_release()?;
    run(Command::new("cargo")
        .current_dir(&root)
        .args([
            "test",
            "--release",
            "--no-fail-fast",
            "--workspace",
            "--exclude",
            "xtask",
            "--exclude",
            "agentsight-ebpf",
        ])
        .env("AGENTSIGHT_BIN", root.join("target/release/agentsight")))
}
