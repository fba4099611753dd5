//! The pinned toolchains and bpf-linker: what they are, whether they are
//! installed as pinned, and how to install them.
//!
//! The kernel programs' nightly is named in agentsight-ebpf/rust-toolchain.toml
//! (which `agentsight/build.rs` reads too), the user-space toolchain in the
//! workspace Cargo.toml's `[workspace.metadata.agentsight] stable-toolchain`:
//! each in exactly one place. No root rust-toolchain.toml: rustup does not
//! install a missing toolchain on its own, so `cargo xtask` would fail on a
//! fresh machine before setup could install it.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::{output, run, workspace_root};

/// bpf-linker release known to build against LLVM [`LLVM_MAJOR`].
pub const BPF_LINKER_VERSION: &str = "0.13.0";
/// The LLVM major the pinned nightly carries and bpf-linker is built for
/// (`--features llvm-22`). Moving the nightly pin to another LLVM means
/// changing this, and checking that bpf-linker has a feature for it.
pub const LLVM_MAJOR: u32 = 22;

/// The pinned toolchains.
pub struct Pins {
    /// Builds the kernel programs (a dated nightly with rust-src).
    pub nightly: String,
    /// Builds everything else (with rustfmt and clippy).
    pub stable: String,
}

impl Pins {
    pub fn read() -> Result<Pins> {
        let root = workspace_root();
        Ok(Pins {
            nightly: channel(&root.join("agentsight-ebpf/rust-toolchain.toml"))?,
            stable: stable_pin(&root.join("Cargo.toml"))?,
        })
    }
}

fn stable_pin(manifest: &Path) -> Result<String> {
    let text = std::fs::read_to_string(manifest)
        .with_context(|| format!("cannot read {}", manifest.display()))?;
    let doc: toml::Value = toml::from_str(&text).with_context(|| manifest.display().to_string())?;
    ["workspace", "metadata", "agentsight", "stable-toolchain"]
        .iter()
        .try_fold(&doc, |v, k| v.get(k))
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .with_context(|| {
            format!(
                "{}: no [workspace.metadata.agentsight] stable-toolchain",
                manifest.display()
            )
        })
}

fn channel(file: &Path) -> Result<String> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let doc: toml::Table = toml::from_str(&text).with_context(|| file.display().to_string())?;
    doc.get("toolchain")
        .and_then(|t| t.get("channel"))
        .and_then(|c| c.as_str())
        .map(str::to_owned)
        .with_context(|| format!("{}: no [toolchain] channel", file.display()))
}

/// Whether rustup has `toolchain` (a channel such as `nightly-2026-05-19` or
/// `1.95.0`) installed.
pub fn toolchain_installed(toolchain: &str) -> bool {
    let list = output(Command::new("rustup").args(["toolchain", "list"])).unwrap_or_default();
    let prefix = format!("{toolchain}-");
    list.lines().any(|l| {
        l.split_whitespace()
            .next()
            .is_some_and(|n| n.starts_with(&prefix) || n == toolchain)
    })
}

/// The components rustup lists as installed for `toolchain` (names without
/// the host triple).
pub fn installed_components(toolchain: &str) -> Vec<String> {
    output(Command::new("rustup").args([
        "component",
        "list",
        "--toolchain",
        toolchain,
        "--installed",
    ]))
    .unwrap_or_default()
    .lines()
    .map(|l| {
        l.trim()
            .trim_end_matches("-x86_64-unknown-linux-gnu")
            .to_owned()
    })
    .collect()
}

/// `rustc +toolchain -vV`'s LLVM major, or None when it cannot be run.
pub fn rustc_llvm_major(toolchain: &str) -> Option<u32> {
    let vv = output(
        Command::new("rustc")
            .arg(format!("+{toolchain}"))
            .arg("-vV"),
    )?;
    llvm_major_of(&vv)
}

/// The major of `LLVM version: 22.1.4` in `rustc -vV` output.
fn llvm_major_of(vv: &str) -> Option<u32> {
    vv.lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.trim().parse().ok())
}

/// What the installed bpf-linker is: its version line and the LLVM it loads.
pub struct Linker {
    pub version: Option<String>,
    /// The major of the libLLVM it is linked against (None: not found or not
    /// linked dynamically).
    pub llvm_major: Option<u32>,
    /// `ldd` says its libLLVM cannot be found.
    pub llvm_missing: bool,
}

pub fn linker() -> Linker {
    let version = output(Command::new("bpf-linker").arg("--version")).map(|v| v.trim().to_owned());
    let path = output(Command::new("sh").args(["-c", "command -v bpf-linker"]));
    let ldd = path
        .and_then(|p| output(Command::new("ldd").arg(p.trim())))
        .unwrap_or_default();
    let line = ldd.lines().find(|l| l.contains("libLLVM"));
    Linker {
        version,
        llvm_major: line.and_then(libllvm_major),
        llvm_missing: line.is_some_and(|l| l.contains("not found")),
    }
}

/// `libLLVM.so.22.1-rust-…` or `libLLVM-22.so` → 22.
fn libllvm_major(ldd_line: &str) -> Option<u32> {
    let name = ldd_line.split_whitespace().next()?;
    let rest = name
        .strip_prefix("libLLVM.so.")
        .or_else(|| name.strip_prefix("libLLVM-"))?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Installs the pinned nightly with rust-src and checks that its LLVM is the
/// one bpf-linker is built for.
pub fn install_nightly(pins: &Pins) -> Result<()> {
    if !toolchain_installed(&pins.nightly) {
        run(Command::new("rustup").args([
            "toolchain",
            "install",
            &pins.nightly,
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ]))?;
    }
    if !installed_components(&pins.nightly)
        .iter()
        .any(|c| c == "rust-src")
    {
        run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            &pins.nightly,
        ]))?;
    }
    match rustc_llvm_major(&pins.nightly) {
        Some(m) if m == LLVM_MAJOR => Ok(()),
        Some(m) => bail!(
            "{} carries LLVM {m}, but bpf-linker {BPF_LINKER_VERSION} is built with \
             --features llvm-{LLVM_MAJOR}: move the pin in agentsight-ebpf/rust-toolchain.toml \
             to a nightly with LLVM {LLVM_MAJOR}, or change LLVM_MAJOR in xtask/src/toolchain.rs \
             (see docs/setup.md \"Toolchains\")",
            pins.nightly
        ),
        None => bail!("cannot run rustc +{} -vV", pins.nightly),
    }
}

/// Installs the pinned stable toolchain with rustfmt and clippy.
pub fn install_stable(pins: &Pins) -> Result<()> {
    let comps = installed_components(&pins.stable);
    if toolchain_installed(&pins.stable)
        && ["rustfmt", "clippy"]
            .iter()
            .all(|c| comps.iter().any(|i| i == c))
    {
        return Ok(());
    }
    run(Command::new("rustup").args([
        "toolchain",
        "install",
        &pins.stable,
        "--profile",
        "minimal",
        "--component",
        "rustfmt",
        "--component",
        "clippy",
    ]))
}

/// Whether the installed bpf-linker is the pinned release, linked against a
/// libLLVM of the pinned major that is still there.
pub fn linker_ok(l: &Linker) -> bool {
    l.version
        .as_deref()
        .is_some_and(|v| v.contains(BPF_LINKER_VERSION))
        && l.llvm_major == Some(LLVM_MAJOR)
        && !l.llvm_missing
}

/// Builds bpf-linker with LLVM_PREFIX pointing at a folder that exposes the
/// pinned nightly's own libLLVM as `libLLVM.so`, so no system LLVM is
/// needed. The folder lives under CARGO_HOME (bpf-linker keeps it as its
/// library path), named after the pin so moving the pin never reuses it.
pub fn install_bpf_linker(pins: &Pins) -> Result<()> {
    let sysroot =
        output(Command::new("rustc").args([&format!("+{}", pins.nightly), "--print", "sysroot"]))
            .with_context(|| format!("cannot find the sysroot of {}", pins.nightly))?;
    let lib = PathBuf::from(sysroot.trim()).join("lib");
    let want = [
        format!("libLLVM.so.{LLVM_MAJOR}"),
        format!("libLLVM-{LLVM_MAJOR}"),
    ];
    let llvm = std::fs::read_dir(&lib)
        .with_context(|| format!("reading {}", lib.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| want.iter().any(|w| n.starts_with(w.as_str())))
        })
        .with_context(|| {
            format!(
                "no libLLVM {LLVM_MAJOR} in {} (the pinned {} should carry it)",
                lib.display(),
                pins.nightly
            )
        })?;
    let prefix = cargo_home().join(format!("agentsight-llvm/{}", pins.nightly));
    let plib = prefix.join("lib");
    std::fs::create_dir_all(&plib).with_context(|| format!("creating {}", plib.display()))?;
    let own_name = llvm
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("libLLVM.so")
        .to_owned();
    for name in ["libLLVM.so".to_owned(), own_name] {
        let link = plib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&llvm, &link)
            .with_context(|| format!("linking {}", link.display()))?;
    }
    run(crate::cargo()
        .args([
            "install",
            "bpf-linker",
            "--locked",
            "--force",
            "--version",
            BPF_LINKER_VERSION,
            "--no-default-features",
            "--features",
            &format!("llvm-{LLVM_MAJOR}"),
        ])
        .env("LLVM_PREFIX", &prefix))
}

pub fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llvm_major_from_rustc_vv() {
        let vv = "rustc 1.97.0-nightly (9eb3be26b 2026-05-18)\nbinary: rustc\n\
                  release: 1.97.0-nightly\nLLVM version: 22.1.4\n";
        assert_eq!(llvm_major_of(vv), Some(22));
        assert_eq!(llvm_major_of("rustc 1.0\n"), None);
    }

    #[test]
    fn llvm_major_from_ldd_line() {
        assert_eq!(
            libllvm_major(
                "\tlibLLVM.so.22.1-rust-1.97.0-nightly => /x/lib/libLLVM.so.22.1-rust-1.97.0-nightly (0x1)"
            ),
            Some(22)
        );
        assert_eq!(libllvm_major("\tlibLLVM-23.so => not found"), Some(23));
        assert_eq!(libllvm_major("\tlibc.so.6 => /lib/libc.so.6"), None);
    }

    #[test]
    fn pins_name_a_dated_nightly_and_the_workspace_rust_version() {
        let pins = Pins::read().expect("both rust-toolchain.toml files parse");
        assert!(pins.nightly.starts_with("nightly-20"), "{}", pins.nightly);
        let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
        let rust_version = manifest
            .lines()
            .find_map(|l| l.strip_prefix("rust-version = "))
            .unwrap()
            .trim_matches('"');
        assert!(
            pins.stable.starts_with(&format!("{rust_version}.")),
            "stable pin {} vs rust-version {rust_version}",
            pins.stable
        );
    }
}
