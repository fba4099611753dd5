//! The pinned Python decoders `cargo xtask setup` installs (xtask
//! `python_setup`): the PyPI `opentelemetry-proto` and `perfetto` packages,
//! independent of our encoder, so an export test proves what a real consumer reads.

use std::path::PathBuf;

/// The venv xtask's `python_setup::VENV` creates.
pub const VENV: &str = "/var/cache/agentsight-e2e/python";

/// The venv's interpreter; panics with the fix when setup has not run.
pub fn interpreter() -> PathBuf {
    let python = PathBuf::from(VENV).join("bin/python3");
    assert!(
        python.exists(),
        "{} is missing: run `cargo xtask setup` (it installs the export decoders)",
        python.display()
    );
    python
}
