//! Shared by the fuzz targets: the parsers read files (they stream and look
//! for sibling subagent files), so each input is written to a per-process
//! file on tmpfs and parsed from there.

use std::path::PathBuf;

use agentsight_sessions::{Provider, parse_file};

pub fn run(provider: Provider, file_name: &str, data: &[u8]) {
    let dir = std::env::temp_dir().join(format!("agentsight-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path: PathBuf = dir.join(file_name);
    if std::fs::write(&path, data).is_err() {
        return;
    }
    // Any Ok or Err is acceptable; only panics, hangs and OOMs are bugs.
    if let Ok(s) = parse_file(provider, &path) {
        // The model must always serialize (it is stored and exchanged).
        let _ = serde_json::to_vec(&s);
    }
}
