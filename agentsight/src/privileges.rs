//! Who runs what: `record` needs root for the kernel programs, but the agent
//! it starts runs as the user who invoked sudo, and files it creates belong
//! to that user.

use std::{ffi::CString, path::Path};

use nix::unistd::{Gid, Uid, User, chown, getgrouplist};

#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error(
        "agentsight record must run as root to load its kernel programs: run `sudo agentsight record …`"
    )]
    NotRoot,
    #[error(
        "running as root but missing capabilities: {0} (a container or a reduced bounding set?)"
    )]
    MissingCaps(String),
    #[error(
        "refusing to run the command as root: start agentsight with sudo from your own account, or pass --user NAME"
    )]
    WouldRunAsRoot,
    #[error("unknown user {0}")]
    UnknownUser(String),
    #[error("cannot look up user {0}: {1}")]
    Lookup(String, String),
}

/// The unprivileged user the command runs as and who owns the capture.
#[derive(Clone, Debug)]
pub struct TargetUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub home: String,
    pub shell: String,
}

/// Checks that we are root with the capabilities BPF tracing needs.
pub fn check_root() -> Result<(), PrivilegeError> {
    if !Uid::effective().is_root() {
        return Err(PrivilegeError::NotRoot);
    }
    // CapEff bits: CAP_SYS_ADMIN 21, CAP_PERFMON 38, CAP_BPF 39. Either
    // CAP_SYS_ADMIN or both CAP_BPF and CAP_PERFMON suffice for tracing.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let Some(hex) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(str::trim)
    else {
        return Ok(());
    };
    let Ok(caps) = u64::from_str_radix(hex, 16) else {
        return Ok(());
    };
    let has = |bit: u32| caps & (1u64 << bit) != 0;
    if has(21) || (has(38) && has(39)) {
        return Ok(());
    }
    let mut missing = Vec::new();
    if !has(39) {
        missing.push("CAP_BPF");
    }
    if !has(38) {
        missing.push("CAP_PERFMON");
    }
    missing.push("(or CAP_SYS_ADMIN)");
    Err(PrivilegeError::MissingCaps(missing.join(", ")))
}

/// The invoking user: `--user` if given, else SUDO_UID/SUDO_USER.
pub fn target_user(explicit: Option<&str>) -> Result<TargetUser, PrivilegeError> {
    let user = match explicit {
        Some(name) => User::from_name(name)
            .map_err(|e| PrivilegeError::Lookup(name.into(), e.to_string()))?
            .ok_or_else(|| PrivilegeError::UnknownUser(name.into()))?,
        None => {
            let uid = std::env::var("SUDO_UID")
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
                .ok_or(PrivilegeError::WouldRunAsRoot)?;
            User::from_uid(Uid::from_raw(uid))
                .map_err(|e| PrivilegeError::Lookup(uid.to_string(), e.to_string()))?
                .ok_or_else(|| PrivilegeError::UnknownUser(uid.to_string()))?
        }
    };
    if user.uid.is_root() {
        return Err(PrivilegeError::WouldRunAsRoot);
    }
    // SUDO_GID is the invoking user's primary group as sudo saw it.
    let gid = match (
        explicit,
        std::env::var("SUDO_GID").ok().and_then(|s| s.parse().ok()),
    ) {
        (None, Some(g)) => g,
        _ => user.gid.as_raw(),
    };
    let cname = CString::new(user.name.clone())
        .map_err(|_| PrivilegeError::UnknownUser(user.name.clone()))?;
    let groups = getgrouplist(&cname, Gid::from_raw(gid))
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_else(|_| vec![gid]);
    Ok(TargetUser {
        name: user.name.clone(),
        uid: user.uid.as_raw(),
        gid,
        groups,
        home: user.dir.display().to_string(),
        shell: user.shell.display().to_string(),
    })
}

/// The user who should own files we create: the sudo caller, if any.
pub fn file_owner() -> Option<(u32, u32)> {
    let uid = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    Some((uid, gid))
}

/// Gives a file we created to `owner`.
pub fn give_to(path: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    if let Some((uid, gid)) = owner {
        chown(path, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
            .map_err(std::io::Error::from)?;
    }
    Ok(())
}
