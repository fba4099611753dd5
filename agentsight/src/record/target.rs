//! Who and what may be recorded: checked before anything is created or loaded.

use crate::{
    capture::container::{self, ContainerInfo},
    privileges::{self, TargetUser},
    procinfo::{self},
};

use super::{RecordError, RecordOptions};

/// Who the recording is for: the command's user, the caller's file
/// credentials, and (under sudo) the only uid whose processes are recorded.
pub(super) struct Target {
    pub(super) user: Option<TargetUser>,
    pub(super) creds: Option<privileges::FileCreds>,
    pub(super) only_uid: Option<u32>,
    /// The `--container`s, resolved.
    pub(super) containers: Vec<ContainerInfo>,
}

/// Checks what can be checked before anything is created or loaded.
pub(super) fn check_target(opts: &RecordOptions) -> Result<Target, RecordError> {
    check_something_to_record(opts)?;
    // Names are data: every one is checked before any docker call.
    for name in &opts.containers {
        container::validate_name(name)?;
    }
    privileges::check_root()?;
    let user = if opts.command.is_empty() {
        None
    } else {
        Some(privileges::target_user(opts.user.as_deref())?)
    };
    let creds = privileges::FileCreds::invoking_user();
    // Under sudo, only the caller's own processes are recorded. A container
    // is tracked by its cgroup in the kernel, whoever's processes run in it
    // (a root `docker exec` too), so it cannot honour that: it needs the
    // explicit --all-users, which the capture records.
    if creds.is_some() && !opts.all_users && !opts.containers.is_empty() {
        return Err(RecordError::ContainerNeedsAllUsers);
    }
    let only_uid = match (&creds, opts.all_users) {
        (Some(c), false) => Some(c.uid),
        _ => None,
    };
    check_pids(&opts.pids, only_uid)?;
    let mut containers: Vec<ContainerInfo> = Vec::new();
    for name in &opts.containers {
        let c = container::resolve(name)?;
        // The same container named twice (name and id) is recorded once.
        if !containers.iter().any(|k| k.id == c.id) {
            containers.push(c);
        }
    }
    Ok(Target {
        user,
        creds,
        only_uid,
        containers,
    })
}

/// Every `--pid` exists and, when `only_uid` is set (under sudo), is that
/// user's own process: checked before anything is created or loaded.
pub(super) fn check_pids(pids: &[u32], only_uid: Option<u32>) -> Result<(), RecordError> {
    for &pid in pids {
        let Some(info) = procinfo::ProcInfo::read(pid) else {
            return Err(RecordError::NoSuchPid(pid));
        };
        if let Some(you) = only_uid
            && !info.owned_by(you)
        {
            let uids = info
                .uids
                .map(|u| format!("{}/{}/{}", u[0], u[1], u[2]))
                .unwrap_or_else(|| "unknown".into());
            return Err(RecordError::NotYourProcess { pid, uids, you });
        }
    }
    Ok(())
}

/// A command, `--pid`, `--agent` or `--container`: something to record.
pub(super) fn check_something_to_record(opts: &RecordOptions) -> Result<(), RecordError> {
    if opts.command.is_empty()
        && opts.pids.is_empty()
        && opts.agent.is_none()
        && opts.containers.is_empty()
    {
        return Err(RecordError::NoTarget);
    }
    Ok(())
}

/// `--docker-container` reads the containers' sessions with root's docker:
/// under sudo that is more than the caller may have (no docker group), so,
/// like `--container`, it needs `--all-users` (stored in the capture).
pub(super) fn check_docker_containers(
    names: &[String],
    all_users: bool,
) -> Result<(), RecordError> {
    if names.is_empty() {
        return Ok(());
    }
    privileges::check_root()?;
    if privileges::FileCreds::invoking_user().is_some() && !all_users {
        return Err(RecordError::DockerContainerNeedsAllUsers);
    }
    Ok(())
}
