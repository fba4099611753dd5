//! The user's own settings: `~/.config/agentsight/config.toml` of the
//! invoking user (under sudo, the caller's home, read with the caller's
//! rights). Today one key: `messaging = true` enables `session message`.
//! A file someone else owns, or one others may write, enables nothing.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Deserialize;

use agentsight::privileges::{AsUser, FileCreds};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    messaging: bool,
}

/// The largest config file read.
const MAX_CONFIG_BYTES: u64 = 64 * 1024;

/// The config file of the invoking user.
pub fn path() -> Option<PathBuf> {
    agentsight::sessions::util::default_home()
        .ok()
        .map(|h| h.join(".config/agentsight/config.toml"))
}

/// Whether the invoking user's config enables messaging. No file: no. A
/// file that is not theirs alone: no, with a note saying why. A file that
/// does not parse: an error (exit 2).
pub fn messaging_enabled() -> Result<bool> {
    let Some(path) = path() else {
        return Ok(false);
    };
    let creds = FileCreds::invoking_user();
    let _as_user = AsUser::maybe(creds.as_ref())?;
    let me = creds.map_or_else(|| nix::unistd::geteuid().as_raw(), |c| c.uid);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if !meta.file_type().is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        agentsight::sayln!(
            "note: {} is ignored: it must be a regular file of yours (uid {me}) that no one else may write",
            path.display()
        );
        return Ok(false);
    }
    let bytes = agentsight::safefs::read_small(&path, MAX_CONFIG_BYTES + 1)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        anyhow::bail!(
            "{}: larger than {} KiB, the most a config file may be",
            path.display(),
            MAX_CONFIG_BYTES / 1024
        );
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{}: not valid UTF-8", path.display()))?;
    let cfg: Config = toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            // The line the error starts on: newlines before it, plus one
            // (`lines()` would put an error at a line's start on the line
            // before).
            .map(|s| {
                text.as_bytes()[..s.start.min(text.len())]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1
            })
            .unwrap_or(1);
        anyhow::anyhow!(
            "{}:{line}: {}",
            path.display(),
            e.message().lines().next().unwrap_or("invalid")
        )
    })?;
    Ok(cfg.messaging)
}
