//! What the capture says about the run when it starts.

use crate::store::meta::key;
use crate::{
    capture::container::ContainerInfo,
    clock::{Anchor, rfc3339_ns},
    privileges::TargetUser,
};

use super::RecordOptions;

/// Host facts for the metadata table.
pub(super) fn host_meta() -> Vec<(String, String)> {
    let uname = nix::sys::utsname::uname().ok();
    let host = uname
        .as_ref()
        .map(|u| u.nodename().to_string_lossy().into_owned())
        .unwrap_or_default();
    let kernel = uname
        .as_ref()
        .map(|u| {
            format!(
                "{} {}",
                u.release().to_string_lossy(),
                u.machine().to_string_lossy()
            )
        })
        .unwrap_or_default();
    vec![
        (
            key::TOOL_VERSION.to_owned(),
            env!("CARGO_PKG_VERSION").into(),
        ),
        (key::HOST.to_owned(), host),
        (key::KERNEL.to_owned(), kernel),
    ]
}

/// What the capture says about the run before anything is recorded.
pub(super) fn start_meta(
    opts: &RecordOptions,
    user: Option<&TargetUser>,
    start: Anchor,
) -> Vec<(String, String)> {
    let mut v = host_meta();
    let mut meta = |k: &str, val: String| v.push((k.to_owned(), val));
    meta(key::STARTED_AT, rfc3339_ns(start.wall_ns));
    meta(key::COMPLETE, "false".into());
    meta(key::RECORDER_PID, std::process::id().to_string());
    meta(key::RING_BUFFER_BYTES, opts.ring_bytes.to_string());
    meta(key::ALL_USERS, opts.all_users.to_string());
    for (k, val) in &opts.start_meta {
        meta(k, val.clone());
    }
    let command: Vec<String> = opts
        .command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    meta(
        key::COMMAND,
        serde_json::to_string(&command).unwrap_or_default(),
    );
    meta(
        key::TARGET_PIDS,
        serde_json::to_string(&opts.pids).unwrap_or_default(),
    );
    meta(
        key::TARGET_AGENT,
        opts.agent
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default(),
    );
    if let Some(u) = user {
        meta(
            key::RUN_AS,
            format!("{} (uid {}, gid {})", u.name, u.uid, u.gid),
        );
    }
    v
}

/// The recorded containers, as meta `containers` (a JSON array).
pub(super) fn containers_json(containers: &[ContainerInfo]) -> String {
    let items: Vec<serde_json::Value> = containers
        .iter()
        .map(|c| {
            serde_json::json!({
                "id": c.id,
                "name": c.name,
                "image": c.image,
                "init_pid": c.init_pid,
                "cgroup_id": c.cgroup_id,
                "cgroup": c.cgroup_dir.to_string_lossy(),
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}
