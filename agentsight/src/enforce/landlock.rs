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

use super::EnforceError;

/// The mechanism a write denial names.
pub const MECHANISM: &str = "landlock";
/// The write rights handled (ABI 3: `REFER` and `TRUNCATE` included, so a
/// rename or a link across the roots and a truncate are judged too).
fn handled() -> BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V3)
}

/// The rights a file (not a directory) can be granted.
fn file_rights() -> BitFlags<AccessFs> {
    AccessFs::WriteFile | AccessFs::Truncate
}

/// What `record --enforce` lets the tree write (Landlock allows only
/// beneath directories and on files that exist when the rules are made):
/// the policy's `[writes] allow` globs, placed, as the kernel can hold them
/// (made by `audit::inodes::write_roots`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteRoots {
    /// Directories every write beneath is allowed in: `D` of `D/**`, or the
    /// literal directory of a glob such as `/dev/pts/*` (wider than the
    /// glob: said in `widened`).
    pub dirs: Vec<String>,
    /// Allowed roots `D/**` that do not exist yet, in the home: created
    /// (empty, the user's) before the rules are made, or they could never
    /// be written.
    pub missing: Vec<String>,
    /// Existing files named literally (`/dev/null`, `~/.claude.json`): written
    /// or truncated, not created or removed.
    pub files: Vec<String>,
    /// Globs granted wider than written: "`/dev/pts/*` as `/dev/pts/**`".
    pub widened: Vec<String>,
    /// Globs the kernel cannot grant (their directory is `/` or the home
    /// itself, or a literal path that does not exist): writes only they
    /// allow are refused.
    pub not_granted: Vec<String>,
    /// The `[denied_paths] write` globs, placed: a refused write they match
    /// is a `denied-path` denial, any other a `write-outside-allowed` one.
    pub denied: Vec<String>,
    /// The `[writes] allow` globs, placed: a refused write one of them
    /// matches is one the policy allows but the kernel could not grant
    /// (`not_granted`), counted apart from the denials.
    pub allowed: Vec<String>,
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
    /// The directories created for it, outermost first (those left empty
    /// are removed at the end).
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
            created.extend(
                create_missing(Path::new(dir)).map_err(|e| unavailable(format!("{dir}: {e}")))?,
            );
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

/// Creates `dir` and its missing parents (0700) when it does not exist;
/// the directories it made, outermost first.
fn create_missing(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut made: Vec<String> = dir
        .ancestors()
        .take_while(|d| !d.exists())
        .filter_map(|d| d.to_str().map(str::to_owned))
        .collect();
    made.reverse();
    if !made.is_empty() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    Ok(made)
}

/// Removes the directories created for the run (`created`, outermost
/// first, as [`create_missing`] lists them) that the tree left empty,
/// innermost first.
pub fn remove_empty(created: &[String]) {
    for dir in created.iter().rev() {
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
/// Whether two names' directories are on one filesystem (their devices,
/// as they are now).
pub fn same_filesystem(a: &str, b: &str) -> bool {
    let dev = |p: &str| {
        let parent = Path::new(p).parent()?;
        std::fs::metadata(parent).ok().map(|m| m.dev())
    };
    let (a, b) = (dev(a), dev(b));
    a.is_some() && a == b
}

/// `path` with its symlinks followed as far as they lead (a link to a file
/// not there yet names that file); None when nothing needs following.
pub fn resolved(path: &Path) -> Option<String> {
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
pub fn granted(roots: &WriteRoots, path: &str) -> bool {
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
pub fn permitted(on_file: bool, path: &Path, user: &User) -> bool {
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

    #[test]
    fn missing_roots_and_their_parents_are_made_and_removed_when_left_empty() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let made = create_missing(&dir.path().join("a/b/c")).unwrap();
        assert_eq!(
            made,
            [format!("{d}/a"), format!("{d}/a/b"), format!("{d}/a/b/c")]
        );
        assert!(create_missing(&dir.path().join("a/b")).unwrap().is_empty());
        let kept = create_missing(&dir.path().join("x/y")).unwrap();
        std::fs::write(dir.path().join("x/y/state"), "s").unwrap();
        remove_empty(&made);
        remove_empty(&kept);
        assert!(!dir.path().join("a").exists());
        assert!(dir.path().join("x/y/state").exists());
    }
}
