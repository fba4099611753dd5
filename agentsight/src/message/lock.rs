//! One message at a time per session, across processes: an exclusive,
//! non-blocking `flock` on a file in the owner's state directory. The lock
//! lives as long as the guard (the kernel drops it if we die).

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::MessageError;

/// `<home>/.local/state/agentsight`: the messaging log and the locks.
pub fn state_dir(home: &Path) -> PathBuf {
    home.join(".local/state/agentsight")
}

/// Held while a message is being handled.
#[derive(Debug)]
pub struct SessionLock {
    _lock: Flock<File>,
    pub path: PathBuf,
}

/// A file name for any session id: ids are data, so anything but a plain
/// `[A-Za-z0-9._-]` name is hex-encoded.
fn file_name(provider: &str, id: &str) -> String {
    let plain = !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if plain && id.len() <= 200 {
        format!("{provider}-{id}.lock")
    } else {
        let hex: String = id.bytes().take(100).map(|b| format!("{b:02x}")).collect();
        format!("{provider}-x{hex}.lock")
    }
}

/// Takes the session's lock, or says it is busy.
pub fn acquire(home: &Path, provider: &str, id: &str) -> Result<SessionLock, MessageError> {
    let dir = state_dir(home).join("locks");
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| MessageError::Failed(format!("creating {}: {e}", dir.display())))?;
    let path = dir.join(file_name(provider, id));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| MessageError::Failed(format!("opening {}: {e}", path.display())))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(SessionLock { _lock: lock, path }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(MessageError::Busy),
        Err((_, e)) => Err(MessageError::Failed(format!(
            "locking {}: {e}",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let home = tempfile::tempdir().expect("tempdir");
        let first = acquire(home.path(), "claude", "s-1").expect("first");
        assert!(matches!(
            acquire(home.path(), "claude", "s-1"),
            Err(MessageError::Busy)
        ));
        // Another session is independent.
        let other = acquire(home.path(), "claude", "s-2").expect("other session");
        drop(first);
        let again = acquire(home.path(), "claude", "s-1").expect("released");
        assert_eq!(
            again.path,
            home.path()
                .join(".local/state/agentsight/locks/claude-s-1.lock")
        );
        drop(other);
    }

    #[test]
    fn odd_ids_are_encoded() {
        assert_eq!(file_name("codex", "0b9a-ff"), "codex-0b9a-ff.lock");
        assert_eq!(file_name("codex", "../x"), "codex-x2e2e2f78.lock");
        assert_eq!(file_name("codex", ".hidden"), "codex-x2e68696464656e.lock");
    }
}
