//! Where Qwen Code keeps chats and how they are named:
//! `<runtime dir>/projects/<project id>/chats/<sessionId>.jsonl`, archived
//! ones in `chats/archive/`. The runtime dir is `QWEN_RUNTIME_DIR`, else
//! `QWEN_HOME`, else `~/.qwen` (0.24.4's `Storage.getRuntimeBaseDir`). The
//! project id is the cwd with every character outside `[A-Za-z0-9]`
//! replaced by `-` (not reversible: the cwd is read from the records). The
//! legacy Gemini-layout `~/.qwen/tmp/<hash>/chats/` (≤ 0.3) is not read;
//! `chats/<id>.runtime.json` sidecars are not transcripts.

use std::path::{Path, PathBuf};

use crate::discovery::Scanner;
use crate::provider::WatchLayout;
use crate::util::env_abs;

/// `$QWEN_RUNTIME_DIR/projects`, `$QWEN_HOME/projects` (absolute values
/// only, with `use_env`), then `~/.qwen/projects`.
pub(crate) fn roots(home: &Path, use_env: bool) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if use_env {
        for var in ["QWEN_RUNTIME_DIR", "QWEN_HOME"] {
            if let Some(d) = env_abs(var) {
                v.push(d.join("projects"));
            }
        }
    }
    v.push(home.join(".qwen/projects"));
    v
}

fn is_chat_name(n: &str) -> bool {
    n.len() > ".jsonl".len() && n.ends_with(".jsonl")
}

/// `<root>/<project>/chats/*.jsonl` and `<root>/<project>/chats/archive/*.jsonl`.
pub(crate) fn scan_root(root: &Path, scan: &mut Scanner) {
    for proj in scan.read_dir(root) {
        if !scan.is_dir(&proj) {
            continue;
        }
        let chats = proj.path().join("chats");
        for dir in [chats.clone(), chats.join("archive")] {
            for f in scan.read_dir(&dir) {
                if is_chat_name(&f.file_name().to_string_lossy()) {
                    scan.push_file(&f, false);
                }
            }
        }
    }
}

/// `…/projects/<project>/chats/[archive/]<id>.jsonl`: the stem is the id.
pub(crate) fn id_for_path(path: &Path, comps: &[&str]) -> Option<Option<String>> {
    let name = path.file_name()?.to_str()?;
    if !is_chat_name(name) {
        return None;
    }
    let i = comps.iter().rposition(|c| *c == "projects")?;
    match &comps[i + 1..] {
        [_, "chats", _] | [_, "chats", "archive", _] => Some(crate::provider::stem_id(path)),
        _ => None,
    }
}

/// `<project>/chats/<id>.jsonl` or `<project>/chats/archive/<id>.jsonl`.
pub(crate) fn is_transcript(rel: &[&str]) -> bool {
    matches!(rel, [_, "chats", name] | [_, "chats", "archive", name] if is_chat_name(name))
}

/// `<project>/chats[/archive]`.
pub(crate) fn watch(_root: &Path) -> WatchLayout {
    WatchLayout {
        depth: 3,
        project_subdir: Some("chats"),
    }
}
