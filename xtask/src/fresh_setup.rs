//! `cargo xtask fresh-setup`: proves that `cargo xtask setup` works on a
//! machine with no Rust toolchain state. It bootstraps rustup into an empty
//! RUSTUP_HOME/CARGO_HOME, runs setup there, and builds the release binary
//! (kernel programs included) with only what setup installed. Slow (it builds
//! bpf-linker and every dependency from scratch), so it is not part of `test`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::{output, run, toolchain, workspace_root};

pub fn check() -> Result<()> {
    let scratch =
        std::env::temp_dir().join(format!("agentsight-fresh-setup-{}", std::process::id()));
    let result = run_in(&scratch);
    match &result {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&scratch);
        }
        Err(_) => eprintln!(
            "xtask: fresh-setup failed; its homes are kept in {}",
            scratch.display()
        ),
    }
    result
}

fn run_in(scratch: &Path) -> Result<()> {
    let rustup_home = scratch.join("rustup");
    let cargo_home = scratch.join("cargo");
    let target = scratch.join("target");
    std::fs::create_dir_all(&rustup_home)?;
    std::fs::create_dir_all(&cargo_home)?;
    // rustup's own binary installs itself when it runs under the name rustup-init.
    let rustup = output(Command::new("sh").args(["-c", "command -v rustup"]))
        .context("rustup is needed to bootstrap an empty home")?;
    let rustup = std::fs::canonicalize(rustup.trim())?;
    let init = scratch.join("rustup-init");
    std::fs::copy(&rustup, &init).with_context(|| format!("copying {}", rustup.display()))?;
    let path = format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        cargo_home.join("bin").display()
    );
    let homes = Homes {
        rustup: rustup_home.clone(),
        cargo: cargo_home.clone(),
        target: target.clone(),
        path,
    };
    run(homes.apply(Command::new(&init).args([
        "-y",
        "--no-modify-path",
        // A user's usual default, not the pin: setup must install the pin.
        "--default-toolchain",
        "stable",
        "--profile",
        "minimal",
    ])))?;
    let cargo = cargo_home.join("bin/cargo");
    run(homes.apply(Command::new(&cargo).args(["xtask", "setup"])))?;

    let pins = toolchain::Pins::read()?;
    let list = output(
        homes.apply(Command::new(cargo_home.join("bin/rustup")).args(["toolchain", "list"])),
    )
    .unwrap_or_default();
    for pin in [&pins.nightly, &pins.stable] {
        if !list.lines().any(|l| l.starts_with(pin.as_str())) {
            bail!("setup did not install {pin} (rustup lists: {list})");
        }
    }
    let linker = cargo_home.join("bin/bpf-linker");
    let ldd = output(Command::new("ldd").arg(&linker)).unwrap_or_default();
    let llvm = ldd.lines().find(|l| l.contains("libLLVM")).unwrap_or("");
    if !llvm.contains(&cargo_home.display().to_string()) || llvm.contains("not found") {
        bail!("bpf-linker is not linked against the pinned nightly's libLLVM: {llvm}");
    }
    eprintln!("xtask: bpf-linker links {}", llvm.trim());
    run(homes.apply(Command::new(&cargo).args(["build", "--release", "-p", "agentsight"])))?;
    let object = kernel_object(&target)?;
    eprintln!(
        "xtask: fresh-setup built the kernel programs ({} bytes, {}) with {} and bpf-linker {}",
        std::fs::metadata(&object)?.len(),
        object.display(),
        pins.nightly,
        toolchain::BPF_LINKER_VERSION
    );
    Ok(())
}

/// The empty homes every command of the check runs in.
struct Homes {
    rustup: PathBuf,
    cargo: PathBuf,
    target: PathBuf,
    path: String,
}

impl Homes {
    fn apply<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.env("RUSTUP_HOME", &self.rustup)
            .env("CARGO_HOME", &self.cargo)
            .env("CARGO_TARGET_DIR", &self.target)
            .env("PATH", &self.path)
            .env_remove("RUSTUP_TOOLCHAIN")
            .env_remove("RUSTC")
            .env_remove("CARGO")
            .env_remove("RUSTC_WRAPPER")
            .current_dir(workspace_root())
    }
}

/// The eBPF object build.rs embedded: a non-empty ELF file.
fn kernel_object(target: &Path) -> Result<PathBuf> {
    let build = target.join("release/build");
    for entry in
        std::fs::read_dir(&build).with_context(|| format!("reading {}", build.display()))?
    {
        let object = entry?.path().join("out/agentsight");
        if let Ok(bytes) = std::fs::read(&object)
            && bytes.starts_with(b"\x7fELF")
        {
            return Ok(object);
        }
    }
    bail!("no kernel object (ELF) under {}", build.display())
}
