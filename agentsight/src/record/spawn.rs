//! The recorded command, started as its user and tracked by the kernel
//! before its first instruction.

use std::{ffi::OsString, os::unix::process::CommandExt, process::Command};

use crate::privileges::TargetUser;

/// The command as `user`: sudo's env_reset environment plus `--env`, its
/// identity taken and itself added to the kernel's tracked map (`map_fd`)
/// between fork and exec, with `--enforce`'s write rules (`landlock_fd`)
/// taken on while still root. Also its TMPDIR, when that environment has
/// one.
pub(super) fn command_as(
    user: &TargetUser,
    command: &[OsString],
    env: &[crate::envreset::EnvArg],
    map_fd: i32,
    landlock_fd: Option<i32>,
) -> (Command, Option<String>) {
    let (uid, gid, groups) = (user.uid, user.gid, user.groups.clone());
    let id = crate::envreset::Identity {
        name: &user.name,
        home: &user.home,
        shell: &user.shell,
    };
    // Like sudo's env_reset: none of root's environment beyond the terminal
    // and locale; the program is looked up in the command's PATH.
    let envs = crate::envreset::build(&id, std::env::vars_os(), env);
    // Its TMPDIR, when its environment has one (`--env TMPDIR…`); a wrapper
    // such as `env TMPDIR=… agent` is read from /proc/PID/environ later.
    let tmpdir = envs
        .iter()
        .find(|(k, _)| k == "TMPDIR")
        .map(|(_, t)| t.to_string_lossy().into_owned());
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]).env_clear().envs(envs);
    // Safety: the closure runs in the forked child before exec and only makes
    // raw syscalls (bpf, landlock, setgroups, setgid, setuid), which are
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            track_self(map_fd)?;
            if let Some(fd) = landlock_fd {
                crate::enforce::landlock::restrict_child(fd)?;
            }
            let gids: Vec<libc::gid_t> = groups.clone();
            if libc::setgroups(gids.len(), gids.as_ptr()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    (cmd, tmpdir)
}

/// Inserts the calling process into the tracked map: it runs between fork
/// and exec, where only async-signal-safe calls are allowed.
pub(super) fn track_self(map_fd: i32) -> std::io::Result<()> {
    crate::capture::tracked::insert(map_fd, std::process::id())
}
