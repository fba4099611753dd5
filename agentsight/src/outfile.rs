//! The one way an output file is written on the user's behalf (`export
//! -o`, `report -o`, `audit -o`, `record --report`, `record
//! --audit-output`): everything goes into a new 0600 file created `O_EXCL`
//! next to the target, as the invoking user, and is renamed over the target
//! only once it is complete. So an old file's mode never carries over (a
//! 0644 report does not stay world-readable), nothing is ever written
//! through a link, and a failed or interrupted write leaves the old target
//! as it was and no temporary file behind.

use std::{
    ffi::{OsStr, OsString},
    fs::File,
    io::Write,
    os::fd::{AsRawFd, OwnedFd},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use nix::{
    fcntl::{OFlag, open, openat, renameat},
    sys::stat::Mode,
    unistd::{UnlinkatFlags, unlinkat},
};

use crate::privileges::{AsUser, CredsError, FileCreds};

/// Why an output file cannot be written; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum OutFileError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Credentials(#[from] CredsError),
}

type Result<T> = std::result::Result<T, OutFileError>;

macro_rules! refused {
    ($($arg:tt)*) => {
        OutFileError::Refused(format!($($arg)*))
    };
}

macro_rules! bail {
    ($($arg:tt)*) => {
        return Err(refused!($($arg)*))
    };
}

/// An output file being written: the temporary file in the target's
/// directory until [`UserFile::commit`] renames it over the target. Dropped
/// without a commit, it removes the temporary file.
pub struct UserFile {
    /// The target's directory, held open: the temporary file is created,
    /// and renamed, in this very directory even if its path changes.
    dir: OwnedFd,
    name: OsString,
    /// The temporary file's name and the open file (None once committed).
    tmp: Option<(OsString, File)>,
    path: PathBuf,
    /// Under sudo, the invoking user's: every file operation here is made
    /// with them (see `AsUser`). None when the CLI already is that user.
    creds: Option<FileCreds>,
}

/// Where a path resolves to: its directory's (dev, ino) and its name.
#[derive(PartialEq, Eq)]
struct Resolved {
    dir: (u64, u64),
    name: OsString,
    /// The existing file's (dev, ino), if there is one.
    file: Option<(u64, u64)>,
}

fn split(path: &Path) -> Result<(&Path, &OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| refused!("{}: not a file name", path.display()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

/// The entry `name` of the directory `dir` (not followed, if a link).
fn entry_metadata(dir: &OwnedFd, name: &OsStr) -> std::io::Result<std::fs::Metadata> {
    let mut p = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    p.push(name);
    std::fs::symlink_metadata(p)
}

/// Whether the existing entry may be replaced: only a regular file with
/// no other name (replacing one of several hard links would leave the
/// others with the old content while this one changed). Returns its
/// (dev, ino), None if there is none.
fn replaceable(dir: &OwnedFd, name: &OsStr, path: &Path) -> Result<Option<(u64, u64)>> {
    let m = match entry_metadata(dir, name) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("{}: {e}", path.display()),
    };
    if m.file_type().is_symlink() {
        bail!("{}: is a symbolic link", path.display());
    }
    if !m.is_file() {
        bail!(
            "{}: is {}, not a regular file",
            path.display(),
            crate::safefs::kind_of(&m.file_type())
        );
    }
    if m.nlink() > 1 {
        bail!(
            "{}: has {} hard links; refusing to replace a file that has other names",
            path.display(),
            m.nlink()
        );
    }
    Ok(Some((m.dev(), m.ino())))
}

impl UserFile {
    /// Checks the target and creates the temporary file next to it, as the
    /// invoking user under sudo: a target that cannot be replaced, or a
    /// directory the user cannot write, fails here, before any work.
    pub fn open(path: &Path) -> Result<Self> {
        let creds = FileCreds::invoking_user();
        let _as_user = AsUser::maybe(creds.as_ref())?;
        let (dir_path, name) = split(path)?;
        let dir = open(
            dir_path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refused!("{}: {}", dir_path.display(), std::io::Error::from(e)))?;
        replaceable(&dir, name, path)?;
        let mut out = Self {
            dir,
            name: name.to_owned(),
            tmp: None,
            path: path.to_owned(),
            creds,
        };
        out.tmp = Some(out.create_tmp()?);
        Ok(out)
    }

    /// A new 0600 file (O_EXCL) in the target's directory; the name is
    /// hidden and never an existing one.
    fn create_tmp(&self) -> Result<(OsString, File)> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        for _ in 0..100 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let tmp = OsString::from(format!(".agentsight-{}-{n}.tmp", std::process::id()));
            match openat(
                &self.dir,
                tmp.as_os_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            ) {
                Ok(fd) => return Ok((tmp, File::from(fd))),
                Err(nix::errno::Errno::EEXIST) => continue,
                Err(e) => bail!("{}: {}", self.path.display(), std::io::Error::from(e)),
            }
        }
        bail!("{}: no free name for a temporary file", self.path.display())
    }

    fn resolved(&self) -> Result<Resolved> {
        let d = entry_metadata(&self.dir, OsStr::new("."))
            .map_err(|e| refused!("{}: {e}", self.path.display()))?;
        let file = entry_metadata(&self.dir, &self.name)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        Ok(Resolved {
            dir: (d.dev(), d.ino()),
            name: self.name.clone(),
            file,
        })
    }

    /// Whether `path` (which need not exist) names this output's target:
    /// the same directory and name, or the same existing file.
    pub fn names(&self, path: &Path) -> Result<bool> {
        let _as_user = AsUser::maybe(self.creds.as_ref())?;
        let mine = self.resolved()?;
        let (dir, name) = split(path)?;
        let Ok(d) = std::fs::metadata(dir) else {
            return Ok(false);
        };
        let file = std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        Ok(((d.dev(), d.ino()) == mine.dir && name == mine.name)
            || (file.is_some() && file == mine.file))
    }

    /// The temporary file, to write the output into.
    pub fn writer(&mut self) -> Result<&mut File> {
        match &mut self.tmp {
            Some((_, f)) => Ok(f),
            None => bail!("{}: already written", self.path.display()),
        }
    }

    /// Writes `bytes` as the whole output and commits it.
    pub fn replace_with(mut self, bytes: &[u8]) -> Result<()> {
        self.writer()?
            .write_all(bytes)
            .map_err(|e| refused!("writing {}: {e}", self.path.display()))?;
        self.commit()
    }

    /// Makes the written file the target: flushed to disk, then renamed
    /// over it (checked again: it may have changed since `open`).
    pub fn commit(mut self) -> Result<()> {
        let _as_user = AsUser::maybe(self.creds.as_ref())?;
        let Some((tmp, file)) = &self.tmp else {
            bail!("{}: already written", self.path.display());
        };
        file.sync_all()
            .map_err(|e| refused!("writing {}: {e}", self.path.display()))?;
        replaceable(&self.dir, &self.name, &self.path)?;
        renameat(&self.dir, tmp.as_os_str(), &self.dir, self.name.as_os_str())
            .map_err(|e| refused!("{}: {}", self.path.display(), std::io::Error::from(e)))?;
        self.tmp = None;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Gives up: the temporary file is removed, the target stays as it was.
    pub fn abandon(self) {}
}

impl Drop for UserFile {
    fn drop(&mut self) {
        if let Some((tmp, file)) = self.tmp.take() {
            drop(file);
            let _as_user = AsUser::maybe(self.creds.as_ref()).ok().flatten();
            let _ = unlinkat(&self.dir, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
    }
}

/// Refuses outputs that name one file (the same path after resolution, or
/// the same inode): each would replace the other's content. `others` are
/// further files that must not be replaced by any output (the capture
/// `record` creates). Each entry is (option, file).
pub fn refuse_shared(outputs: &[(&str, &UserFile)], others: &[(&str, &Path)]) -> Result<()> {
    for (i, (flag, f)) in outputs.iter().enumerate() {
        for (other_flag, g) in &outputs[i + 1..] {
            if g.names(&f.path)? {
                bail!(
                    "{flag} and {other_flag} name the same file ({}): give each its own",
                    f.path.display()
                );
            }
        }
        for (other_flag, p) in others {
            if f.names(p)? {
                bail!(
                    "{flag} and {other_flag} name the same file ({}): give each its own",
                    f.path.display()
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn an_existing_0644_target_ends_0600_with_the_new_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.txt");
        std::fs::write(&p, "old, longer content\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        UserFile::open(&p).unwrap().replace_with(b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(names_in(dir.path()), vec!["r.txt"]);
    }

    #[test]
    fn a_failure_mid_write_leaves_the_old_target_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.txt");
        std::fs::write(&p, "old\n").unwrap();
        let mut f = UserFile::open(&p).unwrap();
        f.writer().unwrap().write_all(b"half of it").unwrap();
        assert_eq!(names_in(dir.path()).len(), 2, "the temporary file");
        // The writer fails: the output is dropped without a commit.
        drop(f);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n");
        assert_eq!(names_in(dir.path()), vec!["r.txt"]);
    }

    #[test]
    fn links_and_non_files_are_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, "other\n").unwrap();
        let hard = dir.path().join("hard");
        std::fs::hard_link(&other, &hard).unwrap();
        let e = UserFile::open(&hard).err().unwrap().to_string();
        assert_eq!(
            e,
            format!(
                "{}: has 2 hard links; refusing to replace a file that has other names",
                hard.display()
            )
        );
        let sym = dir.path().join("sym");
        std::os::unix::fs::symlink(&other, &sym).unwrap();
        let e = UserFile::open(&sym).err().unwrap().to_string();
        assert_eq!(e, format!("{}: is a symbolic link", sym.display()));
        let e = UserFile::open(dir.path()).err().unwrap().to_string();
        assert!(e.ends_with(": is a directory, not a regular file"), "{e}");
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "other\n");
        assert_eq!(names_in(dir.path()), vec!["hard", "other", "sym"]);
    }

    #[test]
    fn a_target_that_became_a_hard_link_is_refused_at_commit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.txt");
        std::fs::write(&p, "old\n").unwrap();
        let f = UserFile::open(&p).unwrap();
        std::fs::hard_link(&p, dir.path().join("second")).unwrap();
        assert!(f.replace_with(b"new\n").is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n");
        assert_eq!(names_in(dir.path()), vec!["r.txt", "second"]);
    }

    #[test]
    fn two_outputs_naming_one_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = UserFile::open(&dir.path().join("r.txt")).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let b = UserFile::open(&dir.path().join("sub/../r.txt")).unwrap();
        let c = UserFile::open(&dir.path().join("c.txt")).unwrap();
        let e = refuse_shared(&[("--report", &a), ("--audit-output", &b)], &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "--report and --audit-output name the same file ({}): give each its own",
                dir.path().join("r.txt").display()
            )
        );
        refuse_shared(&[("--report", &a), ("--audit-output", &c)], &[]).unwrap();
        let capture = dir.path().join("./c.txt");
        assert!(
            refuse_shared(
                &[("--report", &a), ("--audit-output", &c)],
                &[("-o", &capture)]
            )
            .is_err()
        );
    }
}
