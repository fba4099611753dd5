//! Shared helpers of the sessions integration tests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use agentsight_sessions::{self as sessions, AgentSession, Provider};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sessions/home")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for e in fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let t = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            fs::copy(e.path(), &t).expect("copy");
        }
    }
}

/// A private copy of the fixture home (tests add databases and change
/// mtimes without touching the repository).
pub fn home() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixtures(), d.path());
    d
}

pub fn set_mtime(path: &Path, secs_ago: u64) {
    let t = SystemTime::now() - Duration::from_secs(secs_ago);
    let f = fs::File::options()
        .write(true)
        .open(path)
        .expect("open for mtime");
    f.set_modified(t).expect("set mtime");
}

pub fn parse(provider: Provider, rel: &str) -> AgentSession {
    sessions::parse_file(provider, &fixtures().join(rel)).expect("parse fixture")
}

pub fn ts(s: &str) -> Option<i64> {
    sessions::parse_ts(s)
}
