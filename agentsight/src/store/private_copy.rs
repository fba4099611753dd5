//! The private copy through which a capture that was not closed cleanly
//! (still recording, recorder killed, hot rollback journal) is read.
//!
//! SQLite must write to read such a file (replay the `-wal`, roll the journal
//! back), and reading never writes next to the capture, so the capture and its
//! sidecar are copied and replayed elsewhere. The copy holds everything the
//! capture holds, so it is as private as we can make it and it lives by name
//! only while SQLite needs names:
//! - a directory of our own, `0700`, made with `mkdtemp` semantics (a fresh
//!   random name, refused if it exists), in the user's runtime dir when that
//!   is theirs and private (`$XDG_RUNTIME_DIR`), else in `$TMPDIR` / `/tmp`;
//! - files created `O_EXCL`, `0600`;
//! - once replayed, the copy is opened by SQLite through its descriptor
//!   and every name is removed before a single row is read: the reader
//!   works on an unlinked file that no other user can reach;
//! - the terminating signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) are held on
//!   this thread while names exist and checked between chunks: one that
//!   arrives stops the copy, the directory is removed, and then the signal
//!   takes its course;
//! - SIGKILL cannot be caught: a directory a killed reader left is removed by
//!   the next read of that user (its name carries the reader's pid).

use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use rusqlite::{Connection, OpenFlags};

/// Names of the private copies' directories start with this, then the pid
/// of the reader that made them.
pub const PREFIX: &str = "agentsight-read-";

/// Bytes copied between two looks at pending signals.
const CHUNK: usize = 4 << 20;

/// Why a private copy could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("cannot make a private copy to read: {0}")]
    Io(#[from] io::Error),
    /// SQLite refused the copy: the file (or its sidecar) is not a capture.
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("interrupted by {0} while making a private copy to read")]
    Interrupted(Signal),
}

const HELD: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// The terminating signals held on this thread while it lives; the previous
/// mask comes back on drop, and with it any signal that arrived meanwhile.
struct SignalsHeld {
    previous: SigSet,
}

impl SignalsHeld {
    fn hold() -> io::Result<Self> {
        let mut set = SigSet::empty();
        for s in HELD {
            set.add(s);
        }
        let mut previous = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut previous))
            .map_err(io::Error::from)?;
        Ok(Self { previous })
    }

    /// A held signal that arrived (and was not already held by the caller,
    /// who then deals with it).
    fn arrived(&self) -> Option<Signal> {
        // Safety: sigpending fills the zeroed set it is given.
        let pending = unsafe {
            let mut raw: libc::sigset_t = std::mem::zeroed();
            if libc::sigpending(&mut raw) != 0 {
                return None;
            }
            SigSet::from_sigset_t_unchecked(raw)
        };
        HELD.into_iter()
            .find(|&s| pending.contains(s) && !self.previous.contains(s))
    }

    fn check(&self) -> Result<(), CopyError> {
        match self.arrived() {
            Some(s) => Err(CopyError::Interrupted(s)),
            None => Ok(()),
        }
    }
}

impl Drop for SignalsHeld {
    fn drop(&mut self) {
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.previous), None);
    }
}

/// The invoking user's runtime directory, when it is a directory of theirs
/// that nobody else may enter.
fn runtime_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("XDG_RUNTIME_DIR")?);
    let m = std::fs::metadata(&dir).ok()?;
    let private = m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o077 == 0;
    (dir.is_absolute() && private).then_some(dir)
}

/// Where copies are tried, in order (the runtime dir is often a small
/// tmpfs: a copy that does not fit there is made in the temp dir).
fn bases() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = runtime_dir().into_iter().collect();
    let tmp = std::env::temp_dir();
    if !v.contains(&tmp) {
        v.push(tmp);
    }
    v
}

/// Removes the copies that readers of ours which no longer run left in
/// `base` (killed with SIGKILL before they could remove them).
fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let ours = e
            .path()
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == me);
        if ours && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Copies `from` (from its start) into a new `0600` file, looking at the
/// held signals between chunks.
fn copy_to_new(mut from: &File, to: &Path, held: &SignalsHeld) -> Result<(), CopyError> {
    from.seek(SeekFrom::Start(0))?;
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(to)?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        held.check()?;
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        out.write_all(&buf[..n])?;
    }
}

/// Lets SQLite replay the WAL or roll the journal back, then makes the copy
/// one self-contained file (no `-wal`, `-shm` or journal).
fn replay(db: &Path) -> Result<(), CopyError> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // The first read recovers the WAL or rolls a hot journal back.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })?;
    // Leaving WAL mode checkpoints every committed frame into the file.
    conn.pragma_update(None, "journal_mode", "DELETE")?;
    conn.close().map_err(|(_, e)| e)?;
    Ok(())
}

/// A replayed copy whose names still exist: open it through [`Self::file`]
/// (SQLite resolves `/proc/self/fd/N` to the name, so the name must exist
/// while it opens), then [`Self::unlink`]. Dropped without that, the
/// names are removed all the same.
pub struct ReplayedCopy {
    file: File,
    /// Removed on unlink or drop, before the signals are let through
    /// (fields drop in order).
    dir: tempfile::TempDir,
    held: SignalsHeld,
}

impl ReplayedCopy {
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Removes every name of the copy (the open file stays readable) and
    /// lets held signals through; returns the file.
    pub fn unlink(self) -> Result<File, CopyError> {
        let ReplayedCopy { file, dir, held } = self;
        dir.close()?;
        drop(held);
        Ok(file)
    }
}

fn copy_in(
    base: &Path,
    file: &File,
    suffix: &str,
    sidecar: &File,
    held: &SignalsHeld,
) -> Result<(File, tempfile::TempDir), CopyError> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{}-", std::process::id()))
        .permissions(Permissions::from_mode(0o700))
        .tempdir_in(base)?;
    let db = dir.path().join("capture.db");
    copy_to_new(file, &db, held)?;
    let mut side = db.as_os_str().to_owned();
    side.push(suffix);
    copy_to_new(sidecar, Path::new(&side), held)?;
    held.check()?;
    replay(&db)?;
    let copy = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&db)?;
    held.check()?;
    Ok((copy, dir))
}

/// The capture `file` with its `suffix` sidecar (`-wal` or `-journal`),
/// replayed in a private copy: one self-contained database file, to be
/// opened and then unlinked ([`ReplayedCopy`]).
pub fn replayed_copy(file: &File, suffix: &str, sidecar: &File) -> Result<ReplayedCopy, CopyError> {
    let held = SignalsHeld::hold()?;
    let bases = bases();
    let mut last = None;
    for base in &bases {
        sweep_stale(base);
        match copy_in(base, file, suffix, sidecar, &held) {
            Ok((file, dir)) => {
                return Ok(ReplayedCopy { file, dir, held });
            }
            // Full or over quota there: the next base may have room.
            Err(CopyError::Io(e))
                if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) =>
            {
                last = Some(CopyError::Io(e));
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        CopyError::Io(io::Error::new(
            io::ErrorKind::NotFound,
            "no directory to copy into",
        ))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_copies_of_dead_readers_are_swept_and_live_ones_kept() {
        let base = tempfile::tempdir().unwrap();
        // Pid 0 never names a process in /proc; our own pid does.
        let dead = base.path().join(format!("{PREFIX}0-abc"));
        let live = base
            .path()
            .join(format!("{PREFIX}{}-abc", std::process::id()));
        let other = base.path().join("agentsight-readme");
        for d in [&dead, &live, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("capture.db"), b"x").unwrap();
        }
        sweep_stale(base.path());
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(other.exists());
    }

    #[test]
    fn a_signal_held_during_the_copy_stops_it_and_leaves_nothing() {
        let base = tempfile::tempdir().unwrap();
        let mut src = tempfile::tempfile().unwrap();
        src.write_all(&vec![7u8; CHUNK * 2]).unwrap();
        let held = SignalsHeld::hold().unwrap();
        // SIGHUP to this thread only: held, so pending, not delivered.
        // Safety: a signal to this very thread.
        assert_eq!(
            unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGHUP) },
            0
        );
        let r = copy_in(base.path(), &src, "-wal", &src, &held);
        assert!(
            matches!(r, Err(CopyError::Interrupted(Signal::SIGHUP))),
            "{r:?}"
        );
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
        // Consume the pending SIGHUP before the mask is restored.
        let mut set = SigSet::empty();
        set.add(Signal::SIGHUP);
        set.wait().unwrap();
        drop(held);
    }
}
