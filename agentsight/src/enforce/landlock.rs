//! Writes outside the allowed roots (`write-outside-allowed`, and
//! `[denied_paths] write` outside them): a Landlock ruleset the recorded
//! command takes on between fork and exec, inherited by every descendant
//! and irreversible. Only write rights are handled (write, truncate,
//! create, remove, rename, link): reads and execs stay as they were.
//!
//! Landlock does not report its refusals to the program that set it up
//! (only to the audit subsystem, off on most machines and system-wide), so
//! the denials are read from the capture itself: a write-class call of the
//! tree that failed with `EACCES` on a path outside every granted root, and
//! that the file permissions would have allowed, was refused by Landlock.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;

use landlock::{
    ABI, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr,
};

use super::{Denial, DenialKind, EnforceError};
use crate::audit::inodes::WriteRoots;
use crate::store::events::{Access as FileAccess, EventKind};
use crate::store::read::EventRecord;

/// The mechanism a write denial names.
pub const MECHANISM: &str = "landlock";

/// The calls Landlock judges as writes (an open only with a writing flag).
pub const WRITE_KINDS: &[EventKind] = &[
    EventKind::Open,
    EventKind::Openat,
    EventKind::Openat2,
    EventKind::Creat,
    EventKind::Truncate,
    EventKind::Unlink,
    EventKind::Unlinkat,
    EventKind::Rmdir,
    EventKind::Rename,
    EventKind::Renameat,
    EventKind::Renameat2,
    EventKind::Mkdir,
    EventKind::Mkdirat,
    EventKind::Link,
    EventKind::Linkat,
    EventKind::Symlink,
    EventKind::Symlinkat,
];

/// The write rights handled (ABI 3: `REFER` and `TRUNCATE` included, so a
/// rename or a link across the roots and a truncate are judged too).
fn handled() -> BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V3)
}

/// The rights a file (not a directory) can be granted.
fn file_rights() -> BitFlags<AccessFs> {
    AccessFs::WriteFile | AccessFs::Truncate
}

/// What `--enforce` applies to writes, and how it names refusals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePlan {
    pub roots: WriteRoots,
    /// `write-outside-allowed`'s id.
    pub rule: String,
    /// `denied-path`'s id (a refused write a `write` glob matches).
    pub denied_rule: String,
}

/// The ruleset made, ready for the command to take on.
pub struct WriteRules {
    fd: OwnedFd,
    /// The missing roots created for it (empty ones are removed at the end).
    pub created: Vec<String>,
}

impl WriteRules {
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl WritePlan {
    /// Creates the missing roots (as the caller's credentials allow: the
    /// user's), then the ruleset. Fails when the kernel lacks Landlock ABI 3
    /// or refuses a rule.
    pub fn ruleset(&self) -> Result<WriteRules, EnforceError> {
        let unavailable = |reason: String| EnforceError::Unavailable {
            rule: self.rule.clone(),
            reason,
        };
        let mut created = Vec::new();
        for dir in &self.roots.missing {
            if create_missing(Path::new(dir)).map_err(|e| unavailable(format!("{dir}: {e}")))? {
                created.push(dir.clone());
            }
        }
        let made = (|| -> Result<OwnedFd, String> {
            let mut rs = Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(handled())
                .map_err(|e| format!("Landlock: {e}"))?
                .create()
                .map_err(|e| format!("Landlock: {e}"))?;
            for (path, rights) in self
                .roots
                .dirs
                .iter()
                .chain(&self.roots.missing)
                .map(|d| (d, handled()))
                .chain(self.roots.files.iter().map(|f| (f, file_rights())))
            {
                let fd = PathFd::new(path).map_err(|e| format!("{path}: {e}"))?;
                rs = rs
                    .add_rule(PathBeneath::new(fd, rights))
                    .map_err(|e| format!("{path}: Landlock: {e}"))?;
            }
            Option::<OwnedFd>::from(rs).ok_or_else(|| "Landlock: no ruleset made".to_owned())
        })();
        match made {
            Ok(fd) => Ok(WriteRules { fd, created }),
            Err(why) => {
                remove_empty(&created);
                Err(unavailable(why))
            }
        }
    }
}

/// Creates `dir` (and its missing parents, 0700) when it does not exist;
/// whether it did.
fn create_missing(dir: &Path) -> std::io::Result<bool> {
    if dir.exists() {
        return Ok(false);
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    Ok(true)
}

/// Removes the roots created for the run that the tree left empty.
pub fn remove_empty(created: &[String]) {
    for dir in created {
        // Fails (and keeps it) when anything was written in it.
        let _ = std::fs::remove_dir(dir);
    }
}

/// Takes on the ruleset: called in the forked child before it drops root
/// (`CAP_SYS_ADMIN` stands in for `no_new_privs`, so set-user-ID programs
/// keep working inside), with only a raw syscall (async-signal-safe).
pub fn restrict_child(ruleset_fd: RawFd) -> std::io::Result<()> {
    // Safety: a plain syscall on a descriptor the parent made and keeps.
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset_fd, 0u32) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The user the tree runs as, for judging what the file permissions alone
/// would have allowed.
#[derive(Debug, Clone)]
pub struct User {
    pub uid: u32,
    pub gids: Vec<u32>,
}

impl User {
    /// Whether the mode bits give this user write (and search, for a
    /// directory) on `meta`. ACLs are not read: a file only an ACL lets the
    /// user write is counted as refused by its permissions, not Landlock.
    fn may_write(&self, meta: &std::fs::Metadata) -> bool {
        if self.uid == 0 {
            return true;
        }
        let need = if meta.is_dir() { 0o3 } else { 0o2 };
        let bits = if meta.uid() == self.uid {
            meta.mode() >> 6
        } else if self.gids.contains(&meta.gid()) {
            meta.mode() >> 3
        } else {
            meta.mode()
        };
        bits & need == need
    }
}

/// A write Landlock refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// One the policy denies: a denial row and a finding.
    Denied(Denial),
    /// One the policy allows but the kernel could not grant (a glob such
    /// as `~/.claude.json.*`, see `WriteRoots::not_granted`): counted and
    /// named apart, never a finding.
    Allowed(String),
}

/// What a stored event stands for, if Landlock refused it: a write-class
/// call failed with `EACCES` on a path outside every granted root that the
/// file permissions allow the user to write.
pub fn refused(ev: &EventRecord, plan: &WritePlan, user: &User) -> Option<Refusal> {
    let kind = EventKind::from_word(&ev.kind);
    let class = kind.access(ev.flags.as_deref())?;
    if kind.is_open() && class == FileAccess::Read {
        return None;
    }
    // A symlink's first name is its target text, not a file written.
    let moves = class == FileAccess::Rename || matches!(kind, EventKind::Link | EventKind::Linkat);
    match ev.errno.as_deref() {
        Some("EACCES") => {}
        // A link or rename that would give a file outside the roots a name
        // inside one (and so the rights there): Landlock answers EXDEV,
        // which within one filesystem nothing else does.
        Some("EXDEV") if moves && same_filesystem(ev) => {}
        _ => return None,
    }
    let mut paths: Vec<&str> = Vec::new();
    if moves {
        paths.extend(ev.old_path.as_deref());
    }
    paths.extend(ev.path.as_deref());
    // Landlock judges the file the name leads to: a symlink inside a root
    // that points outside is followed (as it still points now).
    let path = paths
        .into_iter()
        .filter(|p| p.starts_with('/'))
        .map(|p| match kind.is_open() || kind == EventKind::Truncate {
            true => resolved(Path::new(p)).unwrap_or_else(|| p.to_owned()),
            false => p.to_owned(),
        })
        .find(|p| !granted(&plan.roots, p))?;
    if !permitted(kind, Path::new(&path), user) {
        return None;
    }
    let matches = |globs: &[String]| {
        globs.iter().any(|g| {
            globset::GlobBuilder::new(g)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .is_ok_and(|m| m.compile_matcher().is_match(&path))
        })
    };
    let denied = matches(&plan.roots.denied);
    if !denied && matches(&plan.roots.allowed) {
        return Some(Refusal::Allowed(path));
    }
    Some(Refusal::Denied(Denial {
        kind: DenialKind::Write,
        path,
        dev: 0,
        ino: 0,
        pid: ev.pid as u32,
        mono_ns: ev.mono_ns.max(0) as u64,
        rule: if denied {
            plan.denied_rule.clone()
        } else {
            plan.rule.clone()
        },
        mechanism: MECHANISM,
        dest: None,
        repeat: 1,
    }))
}

/// Whether a link's or rename's two names are on one filesystem (their
/// directories' devices, as they are now).
fn same_filesystem(ev: &EventRecord) -> bool {
    let dev = |p: Option<&str>| {
        let parent = Path::new(p?).parent()?;
        std::fs::metadata(parent).ok().map(|m| m.dev())
    };
    let (a, b) = (dev(ev.old_path.as_deref()), dev(ev.path.as_deref()));
    a.is_some() && a == b
}

/// `path` with its symlinks followed as far as they lead (a link to a file
/// not there yet names that file); None when nothing needs following.
fn resolved(path: &Path) -> Option<String> {
    let mut p = path.to_path_buf();
    let mut followed = false;
    // The kernel's own bound on links followed in one lookup.
    for _ in 0..40 {
        let Some(parent) = p.parent().map(Path::to_path_buf) else {
            break;
        };
        let parent = std::fs::canonicalize(&parent).unwrap_or(parent);
        let name = p.file_name()?.to_owned();
        let here = parent.join(&name);
        match std::fs::read_link(&here) {
            Ok(target) => {
                p = parent.join(target);
                followed = true;
            }
            Err(_) => {
                p = here;
                break;
            }
        }
    }
    let s = p.to_str()?.to_owned();
    (followed || s != path.to_str()?).then_some(s)
}

/// Whether Landlock lets the tree write `path`: beneath a granted
/// directory, or a granted file itself.
fn granted(roots: &WriteRoots, path: &str) -> bool {
    let beneath = |dir: &String| {
        let dir = dir.trim_end_matches('/');
        dir.is_empty()
            || path == dir
            || path
                .strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    // The root itself is not beneath it: making or removing `D` is a
    // change to its parent.
    let strictly = |dir: &String| beneath(dir) && path != dir.trim_end_matches('/');
    roots.dirs.iter().chain(&roots.missing).any(strictly) || roots.files.iter().any(|f| f == path)
}

/// Whether the permissions alone let the user make this change: write on
/// the file for an open, truncate or write of an existing file; write and
/// search on the parent directory for a create, remove or rename. A path
/// gone since then is judged by its parent.
fn permitted(kind: EventKind, path: &Path, user: &User) -> bool {
    let on_file = kind.is_open() || matches!(kind, EventKind::Truncate);
    if on_file && let Ok(m) = std::fs::metadata(path) {
        return user.may_write(&m);
    }
    path.parent()
        .and_then(|p| std::fs::metadata(p).ok())
        .is_some_and(|m| user.may_write(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(ws: &str, denied: &str, allowed: &str) -> WritePlan {
        WritePlan {
            roots: WriteRoots {
                dirs: vec![ws.to_owned()],
                files: vec!["/dev/null".to_owned()],
                denied: vec![denied.to_owned()],
                allowed: vec![format!("{ws}/**"), allowed.to_owned()],
                ..WriteRoots::default()
            },
            rule: "write-outside-allowed".into(),
            denied_rule: "denied-path".into(),
        }
    }

    fn failed(kind: &str, path: &str, flags: &str, errno: &str) -> EventRecord {
        EventRecord {
            kind: kind.into(),
            pid: 42,
            mono_ns: 7,
            path: Some(path.into()),
            flags: Some(flags.into()),
            result: Some(-13),
            errno: Some(errno.into()),
            ..EventRecord::default()
        }
    }

    #[test]
    fn a_refused_write_outside_the_roots_is_a_denial_of_the_file_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let ws = format!("{d}/ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(format!("{d}/home/.ssh")).unwrap();
        std::os::unix::fs::symlink("../home/via.txt", format!("{ws}/sym")).unwrap();
        // Root judges the permissions here: they allow everything.
        let root = User {
            uid: 0,
            gids: vec![],
        };
        let p = plan(
            &ws,
            &format!("{d}/home/.ssh/**"),
            &format!("{d}/home/allowed.*"),
        );
        let at = |kind: &str, path: &str, flags: &str, errno: &str| match refused(
            &failed(kind, path, flags, errno),
            &p,
            &root,
        )? {
            Refusal::Denied(d) => Some((d.path, d.rule)),
            Refusal::Allowed(path) => Some((path, "allowed".into())),
        };
        let out = format!("{d}/home/out.txt");
        assert_eq!(
            at("openat", &out, "write,create", "EACCES"),
            Some((out.clone(), "write-outside-allowed".into()))
        );
        // A read, another errno, a path inside: none.
        assert_eq!(at("openat", &out, "read", "EACCES"), None);
        assert_eq!(at("openat", &out, "write,create", "EPERM"), None);
        assert_eq!(
            at("openat", &format!("{ws}/in.txt"), "write", "EACCES"),
            None
        );
        assert_eq!(at("openat", "/dev/null", "write", "EACCES"), None);
        // Making or removing the root itself changes its parent.
        assert_eq!(
            at("mkdir", &ws, "", "EACCES"),
            Some((ws.clone(), "write-outside-allowed".into()))
        );
        // Through a symlink inside: the file it leads to.
        assert_eq!(
            at("openat", &format!("{ws}/sym"), "write,create", "EACCES"),
            Some((format!("{d}/home/via.txt"), "write-outside-allowed".into()))
        );
        // A denied path outside: its own rule.
        let key = format!("{d}/home/.ssh/authorized_keys");
        assert_eq!(
            at("openat", &key, "write,create", "EACCES"),
            Some((key.clone(), "denied-path".into()))
        );
        // A hard link giving an outside file a name inside: EXDEV.
        let outside_file = format!("{d}/home/bashrc");
        let link = EventRecord {
            old_path: Some(outside_file.clone()),
            ..failed("linkat", &format!("{ws}/hl"), "", "EXDEV")
        };
        assert_eq!(
            refused(&link, &p, &root),
            Some(Refusal::Denied(Denial {
                kind: DenialKind::Write,
                path: outside_file,
                dev: 0,
                ino: 0,
                pid: 42,
                mono_ns: 7,
                rule: "write-outside-allowed".into(),
                mechanism: MECHANISM,
                dest: None,
                repeat: 1,
            }))
        );
        // One the policy allows that Landlock could not grant.
        let allowed = format!("{d}/home/allowed.tmp");
        assert_eq!(
            at("openat", &allowed, "write,create", "EACCES"),
            Some((allowed.clone(), "allowed".into()))
        );
        // A user the permissions refuse already: not Landlock's refusal.
        let other = User {
            uid: 4242,
            gids: vec![4242],
        };
        std::fs::set_permissions(
            format!("{d}/home"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        assert_eq!(
            refused(
                &failed("openat", &out, "write,create", "EACCES"),
                &p,
                &other
            ),
            None
        );
    }
}
