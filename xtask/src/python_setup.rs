//! Installs the independent decoders the export tests use (issue 16): the
//! PyPI `opentelemetry-proto` package (OTLP protobuf and JSON) and the PyPI
//! `perfetto` package (the trace protobuf definitions), pinned, into one venv.
//!
//! The venv lives at `/var/cache/agentsight-e2e/python` so it survives between
//! runs on one machine; tests find it through `agentsight_tests::python`.
//! A pin change reinstalls: `complete` compares every pinned version.

use std::{path::Path, process::Command};

use anyhow::{Context, Result, bail};

/// The venv the tests run their decoders with.
pub const VENV: &str = "/var/cache/agentsight-e2e/python";

/// `(distribution, pinned version)`; the tests import from these only.
pub const PYTHON_PACKAGES: &[(&str, &str)] =
    &[("opentelemetry-proto", "1.45.2"), ("perfetto", "0.59.1")];

fn python() -> std::path::PathBuf {
    Path::new(VENV).join("bin/python3")
}

/// Every pinned distribution is installed at its pinned version.
pub fn complete() -> bool {
    let Ok(out) = Command::new(python())
        .args([
            "-m",
            "pip",
            "list",
            "--format=freeze",
            "--disable-pip-version-check",
        ])
        .output()
    else {
        return false;
    };
    let list = String::from_utf8_lossy(&out.stdout).to_lowercase();
    PYTHON_PACKAGES.iter().all(|(name, version)| {
        list.lines()
            .any(|l| l == format!("{name}=={version}").to_lowercase())
    })
}

/// Creates the venv (if needed) and installs the pins (if any is missing).
pub fn install() -> Result<()> {
    if complete() {
        return Ok(());
    }
    if !python().exists() {
        let status = Command::new("python3")
            .args(["-m", "venv", VENV])
            .status()
            .context("running python3 -m venv")?;
        if !status.success() {
            bail!("python3 -m venv {VENV} failed ({status}); is python3-venv installed?");
        }
    }
    let specs: Vec<String> = PYTHON_PACKAGES
        .iter()
        .map(|(n, v)| format!("{n}=={v}"))
        .collect();
    let status = Command::new(python())
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(&specs)
        .status()
        .context("running pip install")?;
    if !status.success() || !complete() {
        bail!("pip install {} into {VENV} failed", specs.join(" "));
    }
    Ok(())
}
