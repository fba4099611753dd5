//! Installs the pinned agent CLIs the end-to-end tests drive (issue 6).
//!
//! The pins live in `tests/e2e/clis.txt`, shared with the tests, which find the
//! same directory by the same hash. The install goes to
//! `/var/cache/agentsight-e2e/<hash of the pins>/node_modules` so it survives
//! between runs on one machine and a pin change never reuses a stale tree.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

/// One npm spec (`name@version`) per line.
const PINS: &str = include_str!("../../tests/e2e/clis.txt");
const CACHE_ROOT: &str = "/var/cache/agentsight-e2e";
/// Executables each pinned package must provide once installed.
const BINARIES: &[&str] = &["claude", "codex", "gemini"];

/// FNV-1a 64 of the pin file's text: small, dependency-free, and identical to
/// `agentsight_tests::e2e::clis_dir`.
fn pins_hash() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in PINS.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn specs() -> Vec<&'static str> {
    PINS.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Complete means every pinned package is installed at its pinned version and
/// every binary resolves to a file (Claude Code's postinstall swaps its stub
/// for the native binary; a failed postinstall leaves a small stub).
fn complete(modules: &Path) -> bool {
    let versions_ok = specs().iter().all(|spec| {
        let Some((name, version)) = spec.rsplit_once('@') else {
            return false;
        };
        std::fs::read_to_string(modules.join(name).join("package.json"))
            .ok()
            .is_some_and(|pj| pj.contains(&format!("\"version\": \"{version}\"")))
    });
    versions_ok
        && BINARIES
            .iter()
            .all(|b| std::fs::metadata(modules.join(".bin").join(b)).is_ok_and(|m| m.is_file()))
        && std::fs::metadata(modules.join(".bin/claude")).is_ok_and(|m| m.len() > 1_000_000)
}

/// The pinned CLIs' `node_modules` when they are completely installed.
pub fn installed() -> Option<PathBuf> {
    let modules = Path::new(CACHE_ROOT).join(pins_hash()).join("node_modules");
    complete(&modules).then_some(modules)
}

/// Installs (once) the pinned CLIs and returns their `node_modules` directory;
/// the executables are in its `.bin`.
pub fn install_agent_clis() -> Result<PathBuf> {
    let dir = Path::new(CACHE_ROOT).join(pins_hash());
    let modules = dir.join("node_modules");
    if complete(&modules) {
        eprintln!("xtask: agent CLIs present in {}", modules.display());
        return Ok(modules);
    }
    // Install into a fresh sibling and rename, so an interrupted install never
    // looks complete and concurrent setups do not share a half-written tree.
    let staging = Path::new(CACHE_ROOT).join(format!("{}.tmp-{}", pins_hash(), std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    std::fs::write(
        staging.join("package.json"),
        "{\"name\":\"agentsight-e2e-clis\",\"private\":true}\n",
    )?;
    let status = Command::new("npm")
        .current_dir(&staging)
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--save-exact",
        ])
        .args(specs())
        .status()
        .context("cannot run npm (Node.js and npm are needed for the e2e tests)")?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        bail!("npm install of the agent CLIs failed with {status}");
    }
    if !complete(&staging.join("node_modules")) {
        bail!(
            "npm installed the agent CLIs into {} but they are incomplete (missing binary or \
             Claude Code's native binary)",
            staging.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&staging, &dir)
        .with_context(|| format!("moving {} to {}", staging.display(), dir.display()))?;
    eprintln!("xtask: agent CLIs installed in {}", modules.display());
    Ok(modules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_name_at_version() {
        let s = specs();
        assert_eq!(s.len(), 3);
        assert!(s.iter().all(|p| {
            p.rsplit_once('@')
                .is_some_and(|(n, v)| !n.is_empty() && !v.is_empty())
        }));
    }
}
