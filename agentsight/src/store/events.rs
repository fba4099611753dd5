//! The vocabulary of `events.kind` ([`EventKind`]) and what each kind does
//! to a file or the network ([`Access`]): one classification that audit and
//! correlate share, so an open cannot be a write to one and a read to the
//! other.
//!
//! The words are those `capture` stores (`capture::syscalls` op names, the
//! decoder's record kinds, `io` and `tcp_state` from the model); see
//! `docs/capture-schema.md`. A word this version does not know is kept as
//! [`EventKind::Other`], never dropped: a capture is input.

use crate::vocabulary::{as_word, vocabulary};

/// Declares [`EventKind`]: one unit variant per stored word, plus `Other`.
macro_rules! event_kinds {
    ($($(#[$vdoc:meta])* $variant:ident => $word:literal),+ $(,)?) => {
        /// An `events.kind` word, parsed.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[$vdoc])* $variant,)+
            /// A word this version does not know, as stored.
            Other(String),
        }

        impl EventKind {
            /// Every known kind, in declaration order.
            pub const KNOWN: &'static [EventKind] = &[$(EventKind::$variant),+];

            /// The stored word.
            pub fn as_str(&self) -> &str {
                match self {
                    $(EventKind::$variant => $word,)+
                    EventKind::Other(word) => word,
                }
            }

            /// The kind a stored word names (never fails: an unknown word
            /// is `Other`).
            pub fn from_word(word: &str) -> EventKind {
                match word {
                    $($word => EventKind::$variant,)+
                    other => EventKind::Other(other.to_string()),
                }
            }
        }
    };
}

event_kinds! {
    Fork => "fork",
    Exec => "exec",
    ExecFailed => "exec_failed",
    Exit => "exit",
    Open => "open",
    Openat => "openat",
    Openat2 => "openat2",
    Creat => "creat",
    Unlink => "unlink",
    Unlinkat => "unlinkat",
    Rmdir => "rmdir",
    Rename => "rename",
    Renameat => "renameat",
    Renameat2 => "renameat2",
    Mkdir => "mkdir",
    Mkdirat => "mkdirat",
    Truncate => "truncate",
    Ftruncate => "ftruncate",
    Chdir => "chdir",
    Fchdir => "fchdir",
    Symlink => "symlink",
    Symlinkat => "symlinkat",
    Link => "link",
    Linkat => "linkat",
    Close => "close",
    Dup => "dup",
    Dup2 => "dup2",
    Dup3 => "dup3",
    FcntlDupfd => "fcntl_dupfd",
    Socket => "socket",
    Connect => "connect",
    Bind => "bind",
    Listen => "listen",
    Accept => "accept",
    Accept4 => "accept4",
    Sendto => "sendto",
    Sendmsg => "sendmsg",
    Sendmmsg => "sendmmsg",
    /// A `write` on a socket connected to port 53.
    DnsWrite => "dns_write",
    /// A syscall record whose op number this build's decoder did not know.
    UnknownSyscall => "unknown_syscall",
    /// Reads and writes on one fd, summed in the kernel.
    Io => "io",
    /// The TCP outcome of a connect.
    TcpState => "tcp_state",
}

as_word!(EventKind);

impl std::str::FromStr for EventKind {
    type Err = std::convert::Infallible;
    fn from_str(word: &str) -> Result<Self, Self::Err> {
        Ok(EventKind::from_word(word))
    }
}

vocabulary! {
    /// What an event does to a file, a process image or the network: its
    /// access class. Creating a file with an open is a `write` (no reader
    /// tells creating from writing); a new directory or a new name for a
    /// file has its own class.
    Access {
        Read => "read",
        /// Opened for writing, created, truncated or appended to.
        Write => "write",
        /// unlink, unlinkat, rmdir.
        Delete => "delete",
        /// A name moved: the old one goes, the new one is written.
        Rename => "rename",
        Mkdir => "mkdir",
        /// A hard or symbolic link created.
        Link => "link",
        /// exec, and an exec that failed (its result says so).
        Exec => "exec",
        Connect => "connect",
        Bind => "bind",
        Listen => "listen",
        /// sendto/sendmsg/sendmmsg to an explicit destination.
        Send => "send",
        /// A write on a DNS socket.
        Dns => "dns",
    }
}

impl Access {
    /// Whether the access changes the file system (anything but a read).
    pub fn changes_files(self) -> bool {
        matches!(
            self,
            Access::Write | Access::Delete | Access::Rename | Access::Mkdir | Access::Link
        )
    }
}

/// The open flag words (`capture::syscalls::open_flags`) that make an open
/// a write: the file may be changed or created through it.
const WRITING_OPEN_FLAGS: [&str; 4] = ["write", "create", "truncate", "append"];

impl EventKind {
    /// The access class of an event of this kind with these `flags`; None
    /// for kinds that access nothing (fork, exit, close, dup, chdir, io,
    /// tcp_state, accept, socket, unknown ones).
    ///
    /// An open is a read only when its flags show it: flags are parsed as
    /// words (split on `,`) and any of `write`, `create`, `truncate`,
    /// `append` makes it a write. Missing flags (an old or damaged capture;
    /// the kernel always stores them) make it a write too: an access that
    /// cannot be shown to be a read is judged as the stronger one. An
    /// `O_PATH` open (word `path`) accesses nothing: like a `stat`, it only
    /// resolves the name (a later open of the descriptor through
    /// `/proc/self/fd` is its own event).
    pub fn access(&self, flags: Option<&str>) -> Option<Access> {
        use EventKind as K;
        Some(match self {
            K::Open | K::Openat | K::Openat2
                if flags.is_some_and(|f| f.split(',').any(|w| w == "path")) =>
            {
                return None;
            }
            K::Open | K::Openat | K::Openat2 => match flags {
                Some(f) if !f.split(',').any(|w| WRITING_OPEN_FLAGS.contains(&w)) => Access::Read,
                _ => Access::Write,
            },
            K::Creat | K::Truncate | K::Ftruncate => Access::Write,
            K::Unlink | K::Unlinkat | K::Rmdir => Access::Delete,
            K::Rename | K::Renameat | K::Renameat2 => Access::Rename,
            K::Mkdir | K::Mkdirat => Access::Mkdir,
            K::Link | K::Linkat | K::Symlink | K::Symlinkat => Access::Link,
            K::Exec | K::ExecFailed => Access::Exec,
            K::Connect => Access::Connect,
            K::Bind => Access::Bind,
            K::Listen => Access::Listen,
            K::Sendto | K::Sendmsg | K::Sendmmsg => Access::Send,
            K::DnsWrite => Access::Dns,
            K::Fork
            | K::Exit
            | K::Chdir
            | K::Fchdir
            | K::Close
            | K::Dup
            | K::Dup2
            | K::Dup3
            | K::FcntlDupfd
            | K::Socket
            | K::Accept
            | K::Accept4
            | K::UnknownSyscall
            | K::Io
            | K::TcpState
            | K::Other(_) => return None,
        })
    }

    /// Whether this is an open (`open`, `openat`, `openat2`, `creat`): the
    /// kinds that carry `real_path`, `dev` and `ino` when they succeed.
    pub fn is_open(&self) -> bool {
        matches!(
            self,
            EventKind::Open | EventKind::Openat | EventKind::Openat2 | EventKind::Creat
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_word_round_trips_and_unknown_words_are_kept() {
        for k in EventKind::KNOWN {
            assert_eq!(&EventKind::from_word(k.as_str()), k);
        }
        let other = EventKind::from_word("futex");
        assert_eq!(other, EventKind::Other("futex".into()));
        assert_eq!(other.as_str(), "futex");
        assert_eq!(other.access(None), None);
        assert_eq!(
            serde_json::to_string(&EventKind::DnsWrite).unwrap(),
            "\"dns_write\""
        );
    }

    #[test]
    fn the_capture_op_names_are_all_known() {
        // Every op name the decoder can store has its own variant.
        for op in 0..=u32::from(u8::MAX) {
            let name = crate::capture::syscalls::op_name(op);
            assert!(
                !matches!(EventKind::from_word(name), EventKind::Other(_)),
                "{name}"
            );
        }
    }

    #[test]
    fn an_open_is_a_read_only_when_its_flags_show_it() {
        let open = EventKind::Openat;
        assert_eq!(open.access(Some("read")), Some(Access::Read));
        assert_eq!(
            open.access(Some("read,cloexec,directory")),
            Some(Access::Read)
        );
        for f in [
            "write",
            "read,write",
            "read,create",
            "write,create,truncate",
            "read,truncate",
            "write,append",
            "read,append",
        ] {
            assert_eq!(open.access(Some(f)), Some(Access::Write), "{f}");
        }
        // Words, not substrings: no flag word merely containing `write`.
        assert_eq!(open.access(Some("read,nowrite")), Some(Access::Read));
        assert_eq!(open.access(Some("path,cloexec")), None);
        assert_eq!(open.access(Some("read,pathname")), Some(Access::Read));
        // The named fix: an open without flags (an old or damaged capture)
        // cannot be shown to be a read, so it is a write for every reader.
        assert_eq!(EventKind::Open.access(None), Some(Access::Write));
        assert_eq!(EventKind::Openat2.access(None), Some(Access::Write));
        // creat always creates or truncates, whatever its flags say.
        assert_eq!(EventKind::Creat.access(Some("read")), Some(Access::Write));
    }

    #[test]
    fn access_classes_of_the_other_kinds() {
        let cases = [
            ("unlinkat", Some(Access::Delete)),
            ("rmdir", Some(Access::Delete)),
            ("renameat2", Some(Access::Rename)),
            ("mkdirat", Some(Access::Mkdir)),
            ("symlink", Some(Access::Link)),
            ("ftruncate", Some(Access::Write)),
            ("exec_failed", Some(Access::Exec)),
            ("connect", Some(Access::Connect)),
            ("listen", Some(Access::Listen)),
            ("sendmmsg", Some(Access::Send)),
            ("dns_write", Some(Access::Dns)),
            ("close", None),
            ("io", None),
            ("tcp_state", None),
        ];
        for (word, access) in cases {
            assert_eq!(EventKind::from_word(word).access(None), access, "{word}");
        }
        assert!(!Access::Read.changes_files());
        assert!(Access::Rename.changes_files() && Access::Link.changes_files());
        assert!(!Access::Exec.changes_files());
    }
}
