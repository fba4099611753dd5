//! What the capture says about the run when it starts.

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
        ("tool_version".into(), env!("CARGO_PKG_VERSION").into()),
        ("host".into(), host),
        ("kernel".into(), kernel),
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
    meta("started_at", rfc3339_ns(start.wall_ns));
    meta("complete", "false".into());
    meta("recorder_pid", std::process::id().to_string());
    meta("ring_buffer_bytes", opts.ring_bytes.to_string());
    meta("all_users", opts.all_users.to_string());
    for (k, val) in &opts.start_meta {
        meta(k, val.clone());
    }
    let command: Vec<String> = opts
        .command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    meta(
        "command",
        serde_json::to_string(&command).unwrap_or_default(),
    );
    meta(
        "target_pids",
        serde_json::to_string(&opts.pids).unwrap_or_default(),
    );
    meta(
        "target_agent",
        opts.agent
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default(),
    );
    if let Some(u) = user {
        meta(
            "run_as",
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
