//! Opening files that come from the user or from the file system without
//! trusting them: only regular files, never blocking on a FIFO or a device,
//! optionally never through a symbolic link.

use std::{
    fs::File,
    io,
    os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt},
    path::Path,
};

/// What a path turned out to be when a regular file was expected.
pub fn kind_of(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Opens `path` read-only if it is a regular file. The open itself never
/// blocks (`O_NONBLOCK`: a FIFO with no writer would otherwise hang it) and
/// the type is checked on the opened file (`fstat`), so a file swapped in
/// between a check and the open cannot slip through. With `nofollow`, a
/// symbolic link as the last component is refused (`ELOOP`).
pub fn open_regular(path: &Path, nofollow: bool) -> io::Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) if nofollow => {
                io::Error::new(io::ErrorKind::InvalidInput, "is a symbolic link")
            }
            _ => e,
        })?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {}, not a regular file", kind_of(&meta.file_type())),
        ));
    }
    Ok(f)
}

/// [`open_regular`] without following a link, and only if the file belongs
/// to `owner` (a transcript in a user's home must be that user's file).
pub fn open_owned(path: &Path, owner: u32) -> io::Result<File> {
    let f = open_regular(path, true)?;
    let uid = f.metadata()?.uid();
    if uid != owner {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("belongs to uid {uid}, not to uid {owner} whose home is read"),
        ));
    }
    Ok(f)
}

/// The whole of a small side file (a provider's metadata or registry):
/// [`open_regular`] without following a link, at most `max` bytes.
pub fn read_small(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let f = open_regular(path, true)?;
    let mut out = Vec::new();
    f.take(max).read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x.db");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let t = std::time::Instant::now();
        let e = open_regular(&fifo, false).unwrap_err();
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(e.to_string(), "is a FIFO, not a regular file");
        let e = open_regular(dir.path(), false).unwrap_err();
        assert_eq!(e.to_string(), "is a directory, not a regular file");
    }

    #[test]
    fn a_link_is_refused_only_with_nofollow() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(open_regular(&link, false).is_ok());
        let e = open_regular(&link, true).unwrap_err();
        assert_eq!(e.to_string(), "is a symbolic link");
        let me = nix::unistd::Uid::effective().as_raw();
        assert!(open_owned(&target, me).is_ok());
        let e = open_owned(&target, me + 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    }
}
