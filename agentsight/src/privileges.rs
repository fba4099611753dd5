//! Who runs what: `record` needs root for the kernel programs, but the agent
//! it starts runs as the user who invoked sudo, and files it creates belong
//! to that user.

use std::ffi::CString;

use nix::unistd::{Gid, Uid, User, getgrouplist};

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
    #[error(
        "--user {0}: under sudo the command runs only as you (uid {1}); recording another user's command needs root itself, not sudo"
    )]
    OtherUserUnderSudo(String, u32),
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
    // Under sudo, --user must not let the caller run code as someone else.
    if let Some((caller, _)) = file_owner()
        && caller != 0
        && caller != user.uid.as_raw()
    {
        return Err(PrivilegeError::OtherUserUnderSudo(
            user.name.clone(),
            caller,
        ));
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

/// The credentials files handed to the invoking user are created and read
/// with: under sudo, the sudo caller's uid, primary group and groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCreds {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

impl FileCreds {
    /// The sudo caller's, when we run as root under sudo for a non-root user;
    /// `None` otherwise (root acting for itself, or an unprivileged run).
    pub fn invoking_user() -> Option<Self> {
        if !Uid::effective().is_root() {
            return None;
        }
        let (uid, gid) = file_owner()?;
        if uid == 0 {
            return None;
        }
        let groups = User::from_uid(Uid::from_raw(uid))
            .ok()
            .flatten()
            .and_then(|u| CString::new(u.name).ok())
            .and_then(|n| getgrouplist(&n, Gid::from_raw(gid)).ok())
            .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
            .unwrap_or_else(|| vec![gid]);
        Some(Self { uid, gid, groups })
    }
}

/// While alive, the calling thread's file-system identity (fsuid, fsgid,
/// supplementary groups) is the user's: files it creates belong to the user
/// and every permission check is the user's (the file-system capabilities
/// such as CAP_DAC_OVERRIDE are dropped with a non-zero fsuid). Only this
/// thread changes (raw syscalls; glibc would change every thread), and the
/// previous identity comes back on drop.
pub struct AsUser {
    prev_uid: u32,
    prev_gid: u32,
    prev_groups: Vec<libc::gid_t>,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot take the invoking user's file credentials (uid {uid}): {reason}")]
pub struct CredsError {
    pub uid: u32,
    pub reason: String,
}

fn thread_groups() -> std::io::Result<Vec<libc::gid_t>> {
    // Safety: getgroups with a null list returns the count; then fills ours.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut v = vec![0 as libc::gid_t; n as usize];
    let n = unsafe { libc::getgroups(n, v.as_mut_ptr()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    v.truncate(n as usize);
    Ok(v)
}

fn raw_setgroups(groups: &[libc::gid_t]) -> std::io::Result<()> {
    // Safety: the raw syscall changes only this thread's groups.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// setfsuid/setfsgid return the previous id and never fail visibly: a call
/// with -1 reads the current one, so a change is verified by reading back.
fn set_fs_ids(uid: u32, gid: u32) -> (u32, u32, bool) {
    // Safety: plain syscalls on this thread's credentials.
    unsafe {
        let prev_gid = libc::syscall(libc::SYS_setfsgid, gid) as u32;
        let prev_uid = libc::syscall(libc::SYS_setfsuid, uid) as u32;
        let now_uid = libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32;
        let now_gid = libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32;
        (prev_uid, prev_gid, now_uid == uid && now_gid == gid)
    }
}

impl AsUser {
    pub fn enter(c: &FileCreds) -> Result<Self, CredsError> {
        let err = |reason: String| CredsError { uid: c.uid, reason };
        let prev_groups = thread_groups().map_err(|e| err(e.to_string()))?;
        raw_setgroups(&c.groups).map_err(|e| err(format!("setgroups: {e}")))?;
        let (prev_uid, prev_gid, ok) = set_fs_ids(c.uid, c.gid);
        let guard = Self {
            prev_uid,
            prev_gid,
            prev_groups,
        };
        if !ok {
            drop(guard);
            return Err(err("setfsuid/setfsgid did not take effect".into()));
        }
        Ok(guard)
    }

    /// Enters `c` if there is one: `None` means "act as we are".
    pub fn maybe(c: Option<&FileCreds>) -> Result<Option<Self>, CredsError> {
        c.map(Self::enter).transpose()
    }
}

impl Drop for AsUser {
    fn drop(&mut self) {
        // uid first: back to fsuid 0 restores the file-system capabilities
        // needed to change the groups back.
        let _ = set_fs_ids(self.prev_uid, self.prev_gid);
        let _ = raw_setgroups(&self.prev_groups);
    }
}

/// The calling thread's fsuid.
pub fn current_fsuid() -> u32 {
    // Safety: setfsuid(-1) changes nothing and returns the current fsuid.
    unsafe { libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32 }
}

/// Under sudo, a read-only command (show, export, sessions, correlate, pid,
/// audit) needs no root at all: become the invoking user for good, so every
/// file it reads or writes is read or written with the user's rights.
pub fn drop_to_invoking_user() -> Result<(), CredsError> {
    let Some(c) = FileCreds::invoking_user() else {
        return Ok(());
    };
    let err = |reason: String| CredsError { uid: c.uid, reason };
    let groups: Vec<Gid> = c.groups.iter().map(|&g| Gid::from_raw(g)).collect();
    nix::unistd::setgroups(&groups).map_err(|e| err(format!("setgroups: {e}")))?;
    let gid = Gid::from_raw(c.gid);
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| err(format!("setresgid: {e}")))?;
    let uid = Uid::from_raw(c.uid);
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| err(format!("setresuid: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_user_changes_this_thread_only_and_comes_back() {
        if !Uid::effective().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // A root-only directory: the user cannot create in it.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let c = FileCreds {
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
        };
        // A thread that exists already keeps its own identity (a thread
        // started later inherits its creator's, by design).
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            go_rx.recv().unwrap();
            current_fsuid()
        });
        {
            let _g = AsUser::enter(&c).unwrap();
            assert_eq!(current_fsuid(), 65534);
            let e = std::fs::File::create(dir.path().join("x")).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
            go_tx.send(()).unwrap();
            assert_eq!(other.join().unwrap(), 0);
        }
        assert_eq!(current_fsuid(), 0);
        std::fs::File::create(dir.path().join("x")).unwrap();
    }
}
