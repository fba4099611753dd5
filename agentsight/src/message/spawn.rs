//! Who the provider runs as, and with what: never root, the transcript's
//! owner, a cleared environment rebuilt from a short list (M6 of the
//! messaging design).

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use nix::unistd::{Gid, Uid, User};

use super::MessageError;

/// Variables kept from agentsight's own environment, when set.
const KEPT: &[&str] = &[
    "PATH",
    "LANG",
    "TZ",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// The transcript's owner, as the passwd database names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
    pub name: String,
}

/// The identity decision: whom the provider runs as, and whether we must
/// switch to them (we are root) or already are them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub owner: Owner,
    /// The home holding the transcript (the parent of its `.claude`,
    /// `.codex` or `.gemini` directory): the provider's `HOME`.
    pub home: PathBuf,
    /// Root switches to the owner in the child (setgroups([]), setgid,
    /// setuid); anyone else already is the owner.
    pub switch: bool,
}

/// The parent of the provider directory that holds `transcript`.
pub fn home_of(transcript: &Path) -> Option<PathBuf> {
    let mut dirs: Vec<&Path> = transcript.ancestors().skip(1).collect();
    dirs.retain(|d| {
        matches!(
            d.file_name().and_then(OsStr::to_str),
            Some(".claude" | ".codex" | ".gemini" | ".copilot" | ".qwen")
        ) || is_opencode_data(d)
    });
    // The innermost provider directory: a home inside another home's
    // `.claude` tree is still the inner one's.
    let dir = dirs.first()?;
    let up = if is_opencode_data(dir) { 3 } else { 1 };
    dir.ancestors().nth(up).map(Path::to_path_buf)
}

/// opencode's data directory in its default place, `HOME/.local/share/
/// opencode` (its database `opencode.db` is the session's "transcript"):
/// its home is three levels up. A database elsewhere (`XDG_DATA_HOME`) has
/// no home to run opencode in with a cleared environment.
fn is_opencode_data(d: &Path) -> bool {
    let names: Vec<Option<&str>> = d
        .ancestors()
        .take(3)
        .map(|a| a.file_name().and_then(OsStr::to_str))
        .collect();
    names == [Some("opencode"), Some("share"), Some(".local")]
}

/// Decides whom the provider runs as. `euid` is ours, `sudo_uid` the sudo
/// caller's (`SUDO_UID`), if any.
pub fn decide(
    transcript: &Path,
    euid: u32,
    sudo_uid: Option<u32>,
) -> Result<Identity, MessageError> {
    let meta = std::fs::symlink_metadata(transcript).map_err(|e| {
        MessageError::Identity(format!("cannot stat {}: {e}", transcript.display()))
    })?;
    if !meta.file_type().is_file() {
        return Err(MessageError::Identity(format!(
            "{} is not a regular file",
            transcript.display()
        )));
    }
    let uid = meta.uid();
    if uid == 0 {
        return Err(MessageError::Identity(format!(
            "{} belongs to root; agentsight never runs an agent as root",
            transcript.display()
        )));
    }
    let refuse = |who: String| {
        MessageError::Identity(format!(
            "{} belongs to uid {uid}, not to {who}: a session is continued only as its owner",
            transcript.display()
        ))
    };
    let switch = match (euid, sudo_uid.filter(|&s| s != 0)) {
        (0, Some(caller)) if caller != uid => {
            return Err(refuse(format!("the sudo caller (uid {caller})")));
        }
        (0, _) => true,
        (me, _) if me != uid => return Err(refuse(format!("you (uid {me})"))),
        _ => false,
    };
    let user = User::from_uid(Uid::from_raw(uid))
        .map_err(|e| MessageError::Identity(format!("looking up uid {uid}: {e}")))?
        .ok_or_else(|| MessageError::Identity(format!("uid {uid} has no passwd entry")))?;
    let home = home_of(transcript).ok_or_else(|| {
        MessageError::Identity(format!(
            "{} is not inside a .claude, .codex, .gemini, .copilot or .qwen directory or ~/.local/share/opencode: no home to run the agent in",
            transcript.display()
        ))
    })?;
    // The agent's HOME (and the lock there) must be the owner's own: a
    // transcript of theirs reached through someone else's directory is not
    // a reason to run in that directory.
    match std::fs::metadata(&home) {
        Ok(m) if m.uid() == uid => {}
        Ok(m) => {
            return Err(MessageError::Identity(format!(
                "{} belongs to uid {}, not to the transcript's owner (uid {uid})",
                home.display(),
                m.uid()
            )));
        }
        Err(e) => {
            return Err(MessageError::Identity(format!(
                "cannot stat {}: {e}",
                home.display()
            )));
        }
    }
    Ok(Identity {
        owner: Owner {
            uid,
            gid: user.gid.as_raw(),
            name: user.name,
        },
        home,
        switch,
    })
}

/// Builds provider commands for one identity and working directory.
#[derive(Debug, Clone)]
pub struct Spawner {
    pub identity: Identity,
    pub cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
}

impl Spawner {
    /// `inherited`: agentsight's own environment, of which only the kept
    /// list survives.
    pub fn new(
        identity: Identity,
        cwd: PathBuf,
        inherited: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Self {
        let mut env: Vec<(OsString, OsString)> = inherited
            .into_iter()
            .filter(|(k, _)| {
                let k = k.to_string_lossy();
                KEPT.contains(&k.as_ref()) || k.starts_with("LC_")
            })
            .collect();
        env.sort();
        env.push(("HOME".into(), identity.home.clone().into_os_string()));
        env.push(("USER".into(), identity.owner.name.clone().into()));
        env.push(("LOGNAME".into(), identity.owner.name.clone().into()));
        Spawner { identity, cwd, env }
    }

    /// Adds the variables of agentsight's own environment whose name is
    /// one of `names` or, for a name ending in `_`, starts with it: a
    /// provider whose model settings exist only as environment variables
    /// (Copilot CLI's bring-your-own-model) gets those, and nothing else.
    pub fn with_own_env(self, names: &[&str]) -> Self {
        self.with_env_from(std::env::vars_os(), names)
    }

    pub(super) fn with_env_from(
        mut self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
        names: &[&str],
    ) -> Self {
        let wanted = |k: &str| {
            names.iter().any(|n| {
                if n.ends_with('_') {
                    k.starts_with(n)
                } else {
                    k == *n
                }
            })
        };
        for (k, v) in vars {
            if k.to_str().is_some_and(wanted) {
                self = self.with_var(k, v);
            }
        }
        self
    }

    /// Sets one variable of the provider's environment (replacing it).
    pub fn with_var(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        let key = key.into();
        self.env.retain(|(k, _)| *k != key);
        self.env.push((key, value.into()));
        self
    }

    /// The provider's whole environment.
    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    fn env_value(&self, key: &str) -> Option<&OsStr> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_os_str())
    }

    /// The provider's executable: `$override_var` from agentsight's own
    /// environment, else `name` on the provider's `PATH`.
    pub fn program(&self, override_var: &str, name: &str) -> Result<PathBuf, MessageError> {
        if let Some(p) = std::env::var_os(override_var).filter(|p| !p.is_empty()) {
            return Ok(PathBuf::from(p));
        }
        let path = self
            .env_value("PATH")
            .unwrap_or(OsStr::new("/usr/bin:/bin"));
        std::env::split_paths(path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
            .ok_or_else(|| {
                MessageError::Failed(format!(
                    "`{name}` is not on PATH ({}); set {override_var} to its path",
                    path.to_string_lossy()
                ))
            })
    }

    /// `program args…` in the session's cwd, with the rebuilt environment,
    /// stdin and stdout piped, stderr discarded. In the child, before exec:
    /// a session of its own (no controlling terminal: it cannot push input
    /// into ours; its process group is its pid), as root the owner's
    /// identity, every signal unblocked and at its default action (our
    /// signal thread's mask and anything ignored by whoever started us are
    /// not the agent's), then death with us (`PR_SET_PDEATHSIG`, set after
    /// the identity change, which would clear it).
    pub fn command(&self, program: &Path, args: &[OsString]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let switch = self
            .identity
            .switch
            .then_some((self.identity.owner.uid, self.identity.owner.gid));
        let parent = std::process::id();
        // Safety: only async-signal-safe syscalls between fork and exec.
        unsafe {
            cmd.pre_exec(move || in_child(switch, parent));
        }
        cmd
    }
}

/// The child's set-up before exec (see [`Spawner::command`]).
fn in_child(switch: Option<(u32, u32)>, parent: u32) -> std::io::Result<()> {
    nix::unistd::setsid().map_err(std::io::Error::from)?;
    if let Some((uid, gid)) = switch {
        switch_user(uid, gid)?;
    }
    default_signals()?;
    // Safety: prctl with plain integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // We may have died before the death signal was set: then never start.
    if nix::unistd::getppid().as_raw() as u32 != parent {
        return Err(std::io::Error::other(
            "agentsight exited while the agent was starting",
        ));
    }
    Ok(())
}

/// No signal blocked and none ignored, as a program started from a plain
/// shell expects: `session message` blocks SIGINT, SIGTERM and SIGHUP (its
/// `sigwait` thread takes them) and a mask is inherited through exec, so
/// without this the agent and every tool that does not reset it (shell
/// scripts, Codex's binary) could not be stopped by `kill`, `timeout` or
/// Ctrl-C. Caught signals are reset by exec; ignored ones would stay.
fn default_signals() -> std::io::Result<()> {
    // The kernel's `struct sigaction` all zero is SIG_DFL, no flags, an
    // empty mask, whatever its layout; the raw call also reaches the two
    // signals the C library keeps for itself (32, 33), which whoever
    // started us may have left ignored.
    let dfl = [0u64; 4];
    // Safety: rt_sigaction, sigemptyset and sigprocmask are
    // async-signal-safe, on zeroed plain structures.
    unsafe {
        for sig in 1..=libc::SIGRTMAX() {
            // SIGKILL and SIGSTOP refuse (EINVAL): they cannot be changed.
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig as libc::c_long,
                dfl.as_ptr(),
                std::ptr::null_mut::<u64>(),
                std::mem::size_of::<u64>() as libc::c_long,
            );
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Groups first (an empty list), then the group, then the user: after
/// setuid nothing else could be changed.
fn switch_user(uid: u32, gid: u32) -> std::io::Result<()> {
    nix::unistd::setgroups(&[]).map_err(std::io::Error::from)?;
    let g = Gid::from_raw(gid);
    nix::unistd::setresgid(g, g, g).map_err(std::io::Error::from)?;
    let u = Uid::from_raw(uid);
    nix::unistd::setresuid(u, u, u).map_err(std::io::Error::from)?;
    Ok(())
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
}

/// A path is usable as the provider's cwd only if it is absolute and plain.
pub fn plain_dir(cwd: &str) -> Option<PathBuf> {
    let p = Path::new(cwd);
    (p.is_absolute() && p.components().all(|c| !matches!(c, Component::ParentDir)))
        .then(|| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Our signal thread's mask (SIGINT, SIGTERM, SIGHUP blocked) and the
    /// runtime's ignored SIGPIPE stay ours: the agent and the tools it
    /// starts get no signal blocked and none ignored.
    #[test]
    fn the_agent_starts_with_no_signal_blocked_or_ignored() {
        use nix::sys::signal::{SigSet, Signal};
        let dir = tempfile::tempdir().expect("tempdir");
        let mut set = SigSet::empty();
        for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
            set.add(s);
        }
        // This test's thread only: the mask `session message` runs with.
        set.thread_block().expect("block");
        // The shell's own lines by builtins (while it waits for a child, the
        // shell blocks every signal), then a tool's, from itself.
        let script = "while read -r l; do case $l in Sig[BI]*) echo \"$l\";; esac; done < /proc/$$/status\ngrep -E '^Sig(Blk|Ign):' /proc/self/status";
        let s = super::super::test_spawner(dir.path(), "/usr/bin:/bin");
        let out = s
            .command(Path::new("/bin/sh"), &["-c".into(), script.into()])
            .output()
            .expect("run");
        set.thread_unblock().expect("unblock");
        let clear = "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n";
        assert_eq!(String::from_utf8_lossy(&out.stdout), clear.repeat(2));
    }

    #[test]
    fn the_home_is_the_parent_of_the_provider_directory() {
        let cases = [
            ("/home/a/.claude/projects/-w/s.jsonl", Some("/home/a")),
            (
                "/home/a/.codex/sessions/2026/12/01/rollout-x.jsonl",
                Some("/home/a"),
            ),
            (
                "/home/a/.gemini/tmp/h/chats/session-x.jsonl",
                Some("/home/a"),
            ),
            (
                "/srv/.claude/x/.codex/sessions/r.jsonl",
                Some("/srv/.claude/x"),
            ),
            (
                "/home/a/.copilot/session-state/4ed0f251-19f2-448c-8ff5-58bc86e5bc36/events.jsonl",
                Some("/home/a"),
            ),
            (
                "/home/a/.qwen/projects/-home-a-w/chats/fc8c42c8-3a59-4033-8105-e81e8d309461.jsonl",
                Some("/home/a"),
            ),
            ("/home/a/.local/share/opencode/opencode.db", Some("/home/a")),
            ("/data/opencode/opencode.db", None),
            ("/home/a/share/opencode/opencode.db", None),
            ("/home/a/notes/s.jsonl", None),
        ];
        for (t, want) in cases {
            assert_eq!(home_of(Path::new(t)), want.map(PathBuf::from), "{t}");
        }
    }

    #[test]
    fn the_environment_is_rebuilt_from_the_kept_list() {
        let id = Identity {
            owner: Owner {
                uid: 1000,
                gid: 1000,
                name: "ada".into(),
            },
            home: "/home/ada".into(),
            switch: false,
        };
        let inherited = [
            ("PATH", "/usr/bin:/bin"),
            ("ANTHROPIC_API_KEY", "sk-secret"),
            ("LC_TIME", "C"),
            ("HOME", "/root"),
            ("TERM", "xterm"),
            ("SUDO_COMMAND", "/usr/bin/agentsight"),
            ("LANG", "C.UTF-8"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let s = Spawner::new(id, "/w".into(), inherited);
        let env: Vec<(String, String)> = s
            .env()
            .iter()
            .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
            .collect();
        let want = [
            ("LANG", "C.UTF-8"),
            ("LC_TIME", "C"),
            ("PATH", "/usr/bin:/bin"),
            ("TERM", "xterm"),
            ("HOME", "/home/ada"),
            ("USER", "ada"),
            ("LOGNAME", "ada"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(env, want);
    }

    #[test]
    fn identity_rules() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = dir.path().join(".claude/projects/p/s.jsonl");
        std::fs::create_dir_all(t.parent().expect("parent")).expect("mkdir");
        std::fs::write(&t, b"{}\n").expect("write");
        let owner = std::fs::metadata(&t).expect("stat").uid();
        if owner == 0 {
            // As root the file is root's: refused whoever asks.
            let e = decide(&t, 0, None).expect_err("root's transcript");
            assert!(e.to_string().contains("belongs to root"), "{e}");
            std::os::unix::fs::chown(&t, Some(65534), Some(65534)).expect("chown");
            // The home is still root's: not the owner's own, refused.
            let e = decide(&t, 0, None).expect_err("someone else's home");
            assert_eq!(
                e.to_string(),
                format!(
                    "refused: {} belongs to uid 0, not to the transcript's owner (uid 65534)",
                    dir.path().display()
                )
            );
            std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).expect("chown");
            let id = decide(&t, 0, None).expect("root acts for the owner");
            assert_eq!((id.owner.uid, id.switch), (65534, true));
            assert_eq!(id.home, dir.path());
            let e = decide(&t, 0, Some(1234)).expect_err("another sudo caller");
            assert_eq!(
                e.to_string(),
                format!(
                    "refused: {} belongs to uid 65534, not to the sudo caller (uid 1234): a session is continued only as its owner",
                    t.display()
                )
            );
            let e = decide(&t, 4321, None).expect_err("another user");
            assert!(e.to_string().contains("not to you (uid 4321)"), "{e}");
        } else {
            let id = decide(&t, owner, None).expect("own transcript");
            assert!(!id.switch);
        }
        let link = dir.path().join(".claude/projects/p/l.jsonl");
        std::os::unix::fs::symlink(&t, &link).expect("symlink");
        let e = decide(&link, 0, None).expect_err("a link");
        assert!(e.to_string().ends_with("is not a regular file"), "{e}");
    }
}
