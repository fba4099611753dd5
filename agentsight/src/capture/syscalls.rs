//! File and socket syscalls: raw kernel records → what they mean, with paths
//! made absolute against each process's tracked cwd and fd table.
//!
//! The kernel reports paths as the program passed them. Resolution happens
//! here, in order, per process: the cwd comes from the kernel at exec and is
//! then followed through chdir/fchdir; fds come from open/socket/accept
//! results and follow dup/close; both are copied at fork. Where a path cannot
//! be resolved (an fd opened before we were watching, a cut path) the row says
//! so in `path_status` instead of guessing.

use std::collections::HashMap;

use agentsight_common::{PATH_WALKED, SYS_BUF, op};

use super::decode::{SysRaw, WalkStatus, errno_name, packed_path};

const AT_FDCWD: i32 = -100;

/// What an fd refers to, as far as we saw it being made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdInfo {
    /// An absolute path, or a socket description such as `tcp 127.0.0.1:80`.
    pub target: String,
    pub is_path: bool,
    pub cloexec: bool,
    /// A socket's peer (from connect or accept) or, before any, its bound
    /// address: a send on a connected socket and a listen report it in the
    /// same family/addr/port fields as a sendto.
    pub sock: Option<SockAddr>,
}

/// The part of a process's state that path resolution needs.
#[derive(Clone, Debug, Default)]
pub struct FsState {
    pub cwd: Option<String>,
    pub fds: HashMap<i32, FdInfo>,
}

impl FsState {
    /// After a successful exec: the kernel's cwd, and close-on-exec fds gone.
    pub fn on_exec(&mut self, cwd: Option<String>) {
        if cwd.is_some() {
            self.cwd = cwd;
        }
        self.fds.retain(|_, f| !f.cloexec);
    }
}

crate::vocabulary::vocabulary! {
    /// Whether a path argument was made absolute, or why not.
    PathStatus {
        Resolved => "resolved",
        /// Relative, and the process's cwd is not known.
        CwdUnknown => "cwd_unknown",
        /// Relative to a dirfd we did not see being made.
        DirfdUnknown => "dirfd_unknown",
        /// Through an fd (`/proc/self/fd/N`, ftruncate…) we did not see being made.
        FdUnknown => "fd_unknown",
        /// The kernel copy filled its buffer: the path may be longer.
        Cut => "cut",
        /// The kernel could not read it.
        Unreadable => "unreadable",
    }
}

/// One syscall as stored: every field optional, filled per kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SysRecord {
    pub kind: &'static str,
    pub result: i64,
    pub errno: Option<String>,
    pub fd: Option<i64>,
    pub path: Option<String>,
    pub path_as_given: Option<String>,
    pub path_status: Option<PathStatus>,
    pub flags: Option<String>,
    pub mode: Option<i64>,
    pub old_path: Option<String>,
    pub old_path_as_given: Option<String>,
    pub new_path: Option<String>,
    pub new_path_as_given: Option<String>,
    pub family: Option<&'static str>,
    pub addr: Option<String>,
    pub port: Option<i64>,
    pub query: Option<String>,
    /// A successful open: the path of the file the kernel opened (its
    /// dentries, mounts crossed; `…`-prefixed when not whole), how that walk
    /// ended (`complete`, `too_deep`, `name_cut`, `detached`,
    /// `read_failed`), and the file's device and inode.
    pub real_path: Option<String>,
    pub real_path_status: Option<WalkStatus>,
    pub dev: Option<i64>,
    pub ino: Option<i64>,
}

pub fn op_name(op: u32) -> &'static str {
    match op {
        op::OPEN => "open",
        op::OPENAT => "openat",
        op::OPENAT2 => "openat2",
        op::CREAT => "creat",
        op::UNLINK => "unlink",
        op::UNLINKAT => "unlinkat",
        op::RMDIR => "rmdir",
        op::RENAME => "rename",
        op::RENAMEAT => "renameat",
        op::RENAMEAT2 => "renameat2",
        op::MKDIR => "mkdir",
        op::MKDIRAT => "mkdirat",
        op::TRUNCATE => "truncate",
        op::FTRUNCATE => "ftruncate",
        op::CHDIR => "chdir",
        op::FCHDIR => "fchdir",
        op::SYMLINK => "symlink",
        op::SYMLINKAT => "symlinkat",
        op::LINK => "link",
        op::LINKAT => "linkat",
        op::CLOSE => "close",
        op::DUP => "dup",
        op::DUP2 => "dup2",
        op::DUP3 => "dup3",
        op::FCNTL => "fcntl_dupfd",
        op::SOCKET => "socket",
        op::CONNECT => "connect",
        op::BIND => "bind",
        op::LISTEN => "listen",
        op::ACCEPT => "accept",
        op::ACCEPT4 => "accept4",
        op::SENDTO => "sendto",
        op::SENDMSG => "sendmsg",
        op::SENDMMSG => "sendmmsg",
        op::DNS_WRITE => "dns_write",
        _ => "unknown_syscall",
    }
}

/// `O_*` open flags → `read,write,create,truncate,append,directory,…`.
/// An `O_PATH` open is `path`, without `read` or `write`: the kernel ignores
/// the access mode then, and the descriptor gives no access to the content
/// (Bun's and Zig's realpath open every component this way; fanotify
/// raises no open event for it).
pub fn open_flags(flags: u64) -> String {
    const O_PATH: u64 = 0o10000000;
    let mut parts: Vec<&str> = match flags & 3 {
        _ if flags & O_PATH != 0 => vec!["path"],
        0 => vec!["read"],
        1 => vec!["write"],
        _ => vec!["read", "write"],
    };
    for (bit, name) in [
        (0o100, "create"),
        (0o200, "excl"),
        (0o1000, "truncate"),
        (0o2000, "append"),
        (0o200000, "directory"),
        (0o400000, "nofollow"),
        (0o2000000, "cloexec"),
    ] {
        if flags & bit != 0 {
            parts.push(name);
        }
    }
    if flags & 0o20000000 != 0 {
        parts.push("tmpfile");
    }
    parts.join(",")
}

/// Joins and normalises `.`/`..` lexically (symlinks are not followed: the
/// file system may have changed since).
pub fn normalize(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            p => out.push(p),
        }
    }
    format!("/{}", out.join("/"))
}

fn text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    crate::rawtext::exact_text(&buf[..end])
}

/// A path argument as given, and whether the kernel copy was complete.
fn given(buf: &[u8], len: i32) -> (Option<String>, bool) {
    if len < 0 {
        return (None, false);
    }
    // A string that filled the buffer (SYS_BUF incl. NUL) may be cut.
    let cut = len as usize >= SYS_BUF;
    (Some(text(buf)), cut)
}

impl FsState {
    /// Resolves `path` (as given) relative to `dirfd`.
    fn resolve(&self, dirfd: i32, path: &str) -> (Option<String>, PathStatus) {
        // `/proc/self/fd/N/name` names `name` inside whatever fd N is (Claude
        // Code writes files this way through a directory fd): resolve it
        // through the fd table, or say the fd is unknown.
        if let Some(rest) = path
            .strip_prefix("/proc/self/fd/")
            .or_else(|| path.strip_prefix("/proc/thread-self/fd/"))
        {
            let (num, tail) = rest.split_once('/').unwrap_or((rest, ""));
            if let Ok(fd) = num.parse::<i32>() {
                return match self.fds.get(&fd) {
                    Some(f) if f.is_path => (
                        Some(normalize(&format!("{}/{tail}", f.target))),
                        PathStatus::Resolved,
                    ),
                    _ => (None, PathStatus::FdUnknown),
                };
            }
        }
        if path.starts_with('/') {
            return (Some(normalize(path)), PathStatus::Resolved);
        }
        let base = if dirfd == AT_FDCWD {
            match &self.cwd {
                Some(c) => c.clone(),
                None => return (None, PathStatus::CwdUnknown),
            }
        } else {
            match self.fds.get(&dirfd) {
                Some(f) if f.is_path => f.target.clone(),
                _ => return (None, PathStatus::DirfdUnknown),
            }
        };
        if path.is_empty() {
            // AT_EMPTY_PATH style: the dirfd itself.
            return (Some(base), PathStatus::Resolved);
        }
        (
            Some(normalize(&format!("{base}/{path}"))),
            PathStatus::Resolved,
        )
    }

    fn path_arg(
        &self,
        dirfd: i32,
        buf: &[u8],
        len: i32,
    ) -> (Option<String>, Option<String>, PathStatus) {
        let (as_given, cut) = given(buf, len);
        let Some(g) = as_given else {
            return (None, None, PathStatus::Unreadable);
        };
        if cut {
            return (None, Some(g), PathStatus::Cut);
        }
        let (abs, status) = self.resolve(dirfd, &g);
        (abs, Some(g), status)
    }

    fn set_fd(&mut self, fd: i64, target: String, is_path: bool, cloexec: bool) {
        if fd >= 0 {
            self.fds.insert(
                fd as i32,
                FdInfo {
                    target,
                    is_path,
                    cloexec,
                    sock: None,
                },
            );
        }
    }

    /// An open: the path as asked for (resolved), flags and mode, the new
    /// fd in the table, and what the kernel opened (its walk, dev, ino).
    fn apply_open(&mut self, raw: &SysRaw, r: &mut SysRecord) {
        let a = raw.args;
        let ok = raw.ret >= 0;
        let (dirfd, flags, mode) = match raw.op {
            op::OPEN => (AT_FDCWD, a[1], a[2]),
            op::OPENAT => (a[0] as i32, a[2], a[3]),
            op::OPENAT2 => (a[0] as i32, raw.how_flags, 0),
            _ => (AT_FDCWD, 0o1101, a[1]), // creat: O_CREAT|O_WRONLY|O_TRUNC
        };
        let (abs, as_given, status) = self.path_arg(dirfd, &raw.buf1, raw.len1);
        r.flags = Some(open_flags(flags));
        if flags & 0o100 != 0 {
            r.mode = Some((mode & 0o7777) as i64);
        }
        if ok {
            r.fd = Some(raw.ret);
            let target = abs.clone().or(as_given.clone()).unwrap_or_default();
            self.set_fd(raw.ret, target, abs.is_some(), flags & 0o2000000 != 0);
        }
        if ok && raw.path_flags & PATH_WALKED != 0 {
            let real = packed_path(&raw.buf2, raw.path_flags);
            r.real_path = Some(real.path);
            r.real_path_status = Some(real.status);
            r.dev = Some(i64::from(raw.dev));
            r.ino = Some(raw.ino as i64);
        }
        (r.path, r.path_as_given, r.path_status) = (abs, as_given, Some(status));
    }

    /// Interprets one syscall and updates the state it changes.
    pub fn apply(&mut self, raw: &SysRaw) -> SysRecord {
        let ok = raw.ret >= 0;
        let mut r = SysRecord {
            kind: op_name(raw.op),
            result: raw.ret,
            errno: (!ok).then(|| errno_name((-raw.ret) as i32)),
            ..Default::default()
        };
        match raw.op {
            op::OPEN | op::OPENAT | op::OPENAT2 | op::CREAT => self.apply_open(raw, &mut r),
            op::UNLINK
            | op::RMDIR
            | op::MKDIR
            | op::TRUNCATE
            | op::CHDIR
            | op::UNLINKAT
            | op::MKDIRAT => self.apply_one_path(raw, &mut r),
            op::RENAME | op::RENAMEAT | op::RENAMEAT2 | op::LINK | op::LINKAT => {
                self.apply_two_paths(raw, &mut r)
            }
            op::SYMLINK | op::SYMLINKAT => self.apply_symlink(raw, &mut r),
            op::FTRUNCATE | op::FCHDIR | op::CLOSE | op::DUP | op::DUP2 | op::DUP3 | op::FCNTL => {
                self.apply_fd(raw, &mut r)
            }
            op::SOCKET => self.apply_socket(raw, &mut r),
            op::CONNECT
            | op::BIND
            | op::ACCEPT
            | op::ACCEPT4
            | op::SENDTO
            | op::SENDMSG
            | op::SENDMMSG
            | op::LISTEN
            | op::DNS_WRITE => self.apply_net(raw, &mut r),
            _ => {}
        }
        r
    }

    /// A call on one path (its dirfd, if any, is the first argument).
    fn apply_one_path(&mut self, raw: &SysRaw, r: &mut SysRecord) {
        let a = raw.args;
        let ok = raw.ret >= 0;
        let dirfd = match raw.op {
            op::UNLINKAT | op::MKDIRAT => a[0] as i32,
            _ => AT_FDCWD,
        };
        let (abs, as_given, status) = self.path_arg(dirfd, &raw.buf1, raw.len1);
        match raw.op {
            op::MKDIR => r.mode = Some((a[1] & 0o7777) as i64),
            op::MKDIRAT => r.mode = Some((a[2] & 0o7777) as i64),
            op::UNLINKAT if a[2] & 0x200 != 0 => r.flags = Some("removedir".into()),
            op::CHDIR if ok && abs.is_some() => self.cwd = abs.clone(),
            _ => {}
        }
        (r.path, r.path_as_given, r.path_status) = (abs, as_given, Some(status));
    }

    /// rename/link: the old and the new path; `path` is the new one.
    fn apply_two_paths(&mut self, raw: &SysRaw, r: &mut SysRecord) {
        let a = raw.args;
        let (d1, d2) = match raw.op {
            op::RENAME | op::LINK => (AT_FDCWD, AT_FDCWD),
            _ => (a[0] as i32, a[2] as i32),
        };
        let (o, og, s1) = self.path_arg(d1, &raw.buf1, raw.len1);
        let (n, ng, s2) = self.path_arg(d2, &raw.buf2, raw.len2);
        r.path_status = Some(if s1 != PathStatus::Resolved { s1 } else { s2 });
        (r.old_path, r.old_path_as_given) = (o, og);
        (r.new_path, r.new_path_as_given) = (n, ng);
        r.path = r.new_path.clone();
        r.path_as_given = r.new_path_as_given.clone();
    }

    fn apply_symlink(&mut self, raw: &SysRaw, r: &mut SysRecord) {
        // The target is stored as text in the link: never resolved.
        let d = if raw.op == op::SYMLINK {
            AT_FDCWD
        } else {
            raw.args[1] as i32
        };
        let (target, _) = given(&raw.buf1, raw.len1);
        let (n, ng, status) = self.path_arg(d, &raw.buf2, raw.len2);
        r.old_path_as_given = target;
        (r.new_path, r.new_path_as_given) = (n.clone(), ng.clone());
        (r.path, r.path_as_given, r.path_status) = (n, ng, Some(status));
    }

    /// Calls on an fd: ftruncate/fchdir (its path), close and dup (the fd
    /// table follows).
    fn apply_fd(&mut self, raw: &SysRaw, r: &mut SysRecord) {
        let a = raw.args;
        let ok = raw.ret >= 0;
        let fd = a[0] as i32;
        match raw.op {
            op::FTRUNCATE | op::FCHDIR => {
                r.fd = Some(fd as i64);
                match self.fds.get(&fd) {
                    Some(f) if f.is_path => {
                        r.path = Some(f.target.clone());
                        r.path_status = Some(PathStatus::Resolved);
                    }
                    _ => r.path_status = Some(PathStatus::FdUnknown),
                }
                if raw.op == op::FCHDIR && ok && r.path.is_some() {
                    self.cwd = r.path.clone();
                }
            }
            op::CLOSE => {
                r.fd = Some(fd as i64);
                let gone = if ok {
                    self.fds.remove(&fd)
                } else {
                    self.fds.get(&fd).cloned()
                };
                if let Some(f) = gone.filter(|f| f.is_path) {
                    r.path = Some(f.target);
                }
            }
            _ => {
                r.fd = Some(raw.ret);
                if ok && let Some(f) = self.fds.get(&fd).cloned() {
                    let cloexec = match raw.op {
                        op::DUP3 => a[2] & 0o2000000 != 0,
                        op::FCNTL => a[1] == 1030,
                        _ => false,
                    };
                    r.path = f.is_path.then(|| f.target.clone());
                    if raw.ret >= 0 {
                        self.fds.insert(raw.ret as i32, FdInfo { cloexec, ..f });
                    }
                }
            }
        }
    }

    fn apply_socket(&mut self, raw: &SysRaw, r: &mut SysRecord) {
        let a = raw.args;
        let family = family_name(a[0] as u16);
        r.family = family;
        let kind = match a[1] & 0xf {
            1 => "tcp",
            2 => "udp",
            _ => "socket",
        };
        r.flags = Some(kind.into());
        if raw.ret >= 0 {
            r.fd = Some(raw.ret);
            let desc = format!("{kind}:{}", family.unwrap_or("?"));
            self.set_fd(raw.ret, desc, false, a[1] & 0o2000000 != 0);
        }
    }

    /// connect, bind, listen, accept, sends and DNS: the address (given, or
    /// the socket's known peer), the fd an accept made, DNS names.
    fn apply_net(&mut self, raw: &SysRaw, r: &mut SysRecord) {
        let a = raw.args;
        let ok = raw.ret >= 0;
        let fd = a[0] as i32;
        r.fd = Some(fd as i64);
        if let Some(sa) = SockAddr::parse(&raw.buf1) {
            r.family = Some(sa.family);
            r.addr = Some(sa.addr.clone());
            r.port = sa.port.map(|p| p as i64);
            let connects = raw.op == op::CONNECT;
            if connects || (raw.op == op::BIND && ok) {
                self.note_sock(fd, sa, connects);
            }
        } else if let Some(f) = self.fds.get(&fd).filter(|f| !f.is_path) {
            // listen / a send on a connected socket: its peer (or bound
            // address), in the same fields a sendto fills.
            if let Some(sa) = &f.sock {
                r.family = Some(sa.family);
                r.addr = Some(sa.addr.clone());
                r.port = sa.port.map(|p| p as i64);
            }
        }
        if matches!(raw.op, op::ACCEPT | op::ACCEPT4) && ok {
            r.fd = Some(raw.ret);
            let peer = SockAddr::parse(&raw.buf1);
            let desc = peer.as_ref().map(|s| s.display()).unwrap_or_default();
            self.set_fd(
                raw.ret,
                format!("tcp peer {desc}"),
                false,
                raw.op == op::ACCEPT4 && a[3] & 0o2000000 != 0,
            );
            if let Some(f) = self.fds.get_mut(&(raw.ret as i32)) {
                f.sock = peer;
            }
        }
        if !raw.buf2.is_empty() {
            r.query = dns_query_names(&raw.buf2);
        }
    }
}

impl FsState {
    /// Notes a socket's address: the peer of a connect (always) or the bound
    /// address (until a peer is known); the description keeps the protocol.
    fn note_sock(&mut self, fd: i32, sa: SockAddr, connects: bool) {
        let Some(f) = self.fds.get_mut(&fd) else {
            let desc = format!("socket {}", sa.display());
            self.set_fd(fd as i64, desc, false, false);
            if let Some(f) = self.fds.get_mut(&fd) {
                f.sock = Some(sa);
            }
            return;
        };
        if connects {
            let proto = f.target.split([':', ' ']).next().unwrap_or("socket");
            f.target = format!("{proto} {}", sa.display());
            f.sock = Some(sa);
        } else if f.sock.is_none() {
            f.sock = Some(sa);
        }
    }
}

fn family_name(f: u16) -> Option<&'static str> {
    match f {
        1 => Some("unix"),
        2 => Some("ipv4"),
        10 => Some("ipv6"),
        16 => Some("netlink"),
        _ => None,
    }
}

/// A decoded `struct sockaddr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SockAddr {
    pub family: &'static str,
    pub addr: String,
    pub port: Option<u16>,
}

impl SockAddr {
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < 2 {
            return None;
        }
        let family = u16::from_le_bytes([b[0], b[1]]);
        match family {
            1 => {
                let path = &b[2..];
                let addr = if path.first() == Some(&0) {
                    // Abstract socket: shown with a leading '@'.
                    format!("@{}", text(&path[1..]))
                } else {
                    text(path)
                };
                Some(Self {
                    family: "unix",
                    addr,
                    port: None,
                })
            }
            2 if b.len() >= 8 => Some(Self {
                family: "ipv4",
                addr: std::net::Ipv4Addr::new(b[4], b[5], b[6], b[7]).to_string(),
                port: Some(u16::from_be_bytes([b[2], b[3]])),
            }),
            10 if b.len() >= 24 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[8..24]);
                Some(Self {
                    family: "ipv6",
                    addr: std::net::Ipv6Addr::from(a).to_string(),
                    port: Some(u16::from_be_bytes([b[2], b[3]])),
                })
            }
            f => family_name(f).map(|name| Self {
                family: name,
                addr: String::new(),
                port: None,
            }),
        }
    }

    pub fn display(&self) -> String {
        match (self.family, self.port) {
            ("ipv6", Some(p)) => format!("[{}]:{p}", self.addr),
            (_, Some(p)) => format!("{}:{p}", self.addr),
            _ => self.addr.clone(),
        }
    }
}

/// Query names in a DNS message (UDP, or TCP with its 2-byte length prefix).
/// Hand-written: we only need the question names from a bounded copy, and a
/// full DNS library would be a large dependency for that.
pub fn dns_query_names(payload: &[u8]) -> Option<String> {
    let parse = |msg: &[u8]| -> Option<String> {
        if msg.len() < 12 {
            return None;
        }
        let qdcount = u16::from_be_bytes([msg[4], msg[5]]) as usize;
        if qdcount == 0 || qdcount > 16 || msg[2] & 0x80 != 0 {
            return None; // not a query
        }
        let mut names = Vec::new();
        let mut i = 12;
        for _ in 0..qdcount {
            let mut labels = Vec::new();
            loop {
                let len = *msg.get(i)? as usize;
                i += 1;
                if len == 0 {
                    break;
                }
                if len > 63 {
                    return None; // compression is not used in questions of a query
                }
                labels.push(String::from_utf8_lossy(msg.get(i..i + len)?).into_owned());
                i += len;
            }
            i += 4; // qtype, qclass
            names.push(labels.join("."));
        }
        Some(names.join(","))
    };
    parse(payload).or_else(|| {
        let n = u16::from_be_bytes([*payload.first()?, *payload.get(1)?]) as usize;
        (n + 2 >= payload.len().min(SYS_BUF))
            .then(|| parse(&payload[2..]))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(op: u32, ret: i64, args: [u64; 6], b1: &str, b2: &str) -> SysRaw {
        let with_nul = |s: &str| {
            let mut v = s.as_bytes().to_vec();
            v.push(0);
            v
        };
        SysRaw {
            op,
            ret,
            args,
            how_flags: 0,
            len1: if b1.is_empty() {
                0
            } else {
                b1.len() as i32 + 1
            },
            len2: if b2.is_empty() {
                0
            } else {
                b2.len() as i32 + 1
            },
            buf1: if b1.is_empty() { vec![] } else { with_nul(b1) },
            buf2: if b2.is_empty() { vec![] } else { with_nul(b2) },
            path_flags: 0,
            ino: 0,
            dev: 0,
        }
    }

    #[test]
    fn an_open_carries_the_path_the_kernel_opened() {
        let mut st = FsState {
            cwd: Some("/home/u".into()),
            ..Default::default()
        };
        // `cat innocent.txt`, a symlink to ~/.ssh/id_rsa: names leaf first.
        let mut r = raw(
            op::OPENAT,
            3,
            [AT_FDCWD as u64, 0, 0, 0, 0, 0],
            "innocent.txt",
            "",
        );
        r.buf2 = b"id_rsa\0.ssh\0u\0home\0".to_vec();
        r.len2 = r.buf2.len() as i32;
        r.path_flags = PATH_WALKED | agentsight_common::PATH_COMPLETE;
        r.ino = 4242;
        r.dev = 0x800001;
        let rec = st.apply(&r);
        assert_eq!(rec.path.as_deref(), Some("/home/u/innocent.txt"));
        assert_eq!(rec.real_path.as_deref(), Some("/home/u/.ssh/id_rsa"));
        assert_eq!(
            rec.real_path_status.map(WalkStatus::as_str),
            Some("complete")
        );
        assert_eq!((rec.dev, rec.ino), (Some(0x800001), Some(4242)));
        // Cut by the byte limit: the partial last name is dropped, and the
        // value says it is not whole.
        r.buf2 = b"leaf\0mid\0par".to_vec();
        r.path_flags = PATH_WALKED | agentsight_common::PATH_TOO_DEEP;
        let rec = st.apply(&r);
        assert_eq!(rec.real_path.as_deref(), Some("…/mid/leaf"));
        assert_eq!(
            rec.real_path_status.map(WalkStatus::as_str),
            Some("too_deep")
        );
        // A failed open has none.
        let failed = st.apply(&raw(
            op::OPENAT,
            -2,
            [AT_FDCWD as u64, 0, 0, 0, 0, 0],
            "x",
            "",
        ));
        assert_eq!((failed.real_path, failed.ino), (None, None));
    }

    #[test]
    fn relative_paths_follow_chdir_and_dirfds() {
        let mut st = FsState {
            cwd: Some("/home/u".into()),
            ..Default::default()
        };
        let r = st.apply(&raw(op::CHDIR, 0, [0; 6], "proj/../proj2", ""));
        assert_eq!(r.path.as_deref(), Some("/home/u/proj2"));
        assert_eq!(st.cwd.as_deref(), Some("/home/u/proj2"));
        // openat(AT_FDCWD, "src", O_DIRECTORY) = 3; then openat(3, "main.rs", O_CREAT|O_WRONLY|O_TRUNC)
        let r = st.apply(&raw(
            op::OPENAT,
            3,
            [(-100i64) as u64, 0, 0o200000, 0, 0, 0],
            "src",
            "",
        ));
        assert_eq!(r.flags.as_deref(), Some("read,directory"));
        let r = st.apply(&raw(
            op::OPENAT,
            4,
            [3, 0, 0o1101, 0o644, 0, 0],
            "main.rs",
            "",
        ));
        assert_eq!(r.path.as_deref(), Some("/home/u/proj2/src/main.rs"));
        assert_eq!(r.path_as_given.as_deref(), Some("main.rs"));
        assert_eq!(r.flags.as_deref(), Some("write,create,truncate"));
        assert_eq!(r.mode, Some(0o644));
        // An unknown dirfd is said, not guessed.
        let r = st.apply(&raw(op::OPENAT, -2, [9, 0, 0, 0, 0, 0], "x", ""));
        assert_eq!(
            (
                r.path,
                r.path_status.map(PathStatus::as_str),
                r.errno.as_deref()
            ),
            (None, Some("dirfd_unknown"), Some("ENOENT"))
        );
        // dup2 then fchdir through the copy.
        st.apply(&raw(op::DUP2, 7, [3, 7, 0, 0, 0, 0], "", ""));
        st.apply(&raw(op::FCHDIR, 0, [7, 0, 0, 0, 0, 0], "", ""));
        assert_eq!(st.cwd.as_deref(), Some("/home/u/proj2/src"));
        let r = st.apply(&raw(
            op::RENAMEAT2,
            0,
            [(-100i64) as u64, 0, 3, 0, 0, 0],
            "a.txt",
            "b.txt",
        ));
        assert_eq!(r.old_path.as_deref(), Some("/home/u/proj2/src/a.txt"));
        assert_eq!(r.new_path.as_deref(), Some("/home/u/proj2/src/b.txt"));
        // Paths through /proc/self/fd/N/ resolve via fd N (fd 3 is src/).
        let r = st.apply(&raw(
            op::RENAME,
            0,
            [0; 6],
            "/proc/self/fd/3/x.tmp",
            "/proc/self/fd/3/x",
        ));
        assert_eq!(r.old_path.as_deref(), Some("/home/u/proj2/src/x.tmp"));
        assert_eq!(r.new_path.as_deref(), Some("/home/u/proj2/src/x"));
        let r = st.apply(&raw(op::UNLINK, 0, [0; 6], "/proc/self/fd/42/y", ""));
        assert_eq!(
            (r.path, r.path_status.map(PathStatus::as_str)),
            (None, Some("fd_unknown"))
        );
    }

    #[test]
    fn sockaddrs_and_dns_names_decode() {
        let mut v4 = vec![2, 0, 0x1f, 0x90, 127, 0, 0, 1];
        v4.extend([0; 8]);
        assert_eq!(SockAddr::parse(&v4).unwrap().display(), "127.0.0.1:8080");
        let mut v6 = vec![10, 0, 0, 53, 0, 0, 0, 0];
        v6.extend(std::net::Ipv6Addr::LOCALHOST.octets());
        assert_eq!(SockAddr::parse(&v6).unwrap().display(), "[::1]:53");
        let mut unix = vec![1, 0];
        unix.extend(b"/run/x.sock\0");
        assert_eq!(SockAddr::parse(&unix).unwrap().addr, "/run/x.sock");
        // A query for example.com, type A.
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend(b"\x07example\x03com\x00\x00\x01\x00\x01");
        assert_eq!(dns_query_names(&q).as_deref(), Some("example.com"));
        let mut tcp = vec![0, q.len() as u8];
        tcp.extend(&q);
        assert_eq!(dns_query_names(&tcp).as_deref(), Some("example.com"));
        assert_eq!(dns_query_names(b"GET / HTTP/1.1"), None);
    }

    #[test]
    fn sends_on_connected_sockets_name_the_peer_in_the_sendto_fields() {
        let mut st = FsState::default();
        let sa = [2u8, 0, 0, 53, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let bytes = |b: &[u8]| {
            let mut r = raw(0, 0, [0; 6], "", "");
            r.buf1 = b.to_vec();
            r.len1 = b.len() as i32;
            r
        };
        st.apply(&SysRaw {
            op: op::SOCKET,
            ret: 5,
            args: [2, 2, 0, 0, 0, 0],
            ..raw(0, 0, [0; 6], "", "")
        });
        st.apply(&SysRaw {
            op: op::CONNECT,
            args: [5, 0, 16, 0, 0, 0],
            ..bytes(&sa)
        });
        let send = st.apply(&SysRaw {
            op: op::SENDTO,
            ret: 29,
            args: [5, 0, 29, 0, 0, 0],
            ..raw(0, 0, [0; 6], "", "")
        });
        assert_eq!(
            (send.family, send.addr.as_deref(), send.port),
            (Some("ipv4"), Some("127.0.0.1"), Some(53))
        );
        // A dup'd socket keeps its peer; a listen reports the bound address.
        st.apply(&SysRaw {
            op: op::DUP,
            ret: 6,
            args: [5, 0, 0, 0, 0, 0],
            ..raw(0, 0, [0; 6], "", "")
        });
        let dup_send = st.apply(&SysRaw {
            op: op::SENDMSG,
            ret: 1,
            args: [6, 0, 0, 0, 0, 0],
            ..raw(0, 0, [0; 6], "", "")
        });
        assert_eq!(dup_send.port, Some(53));
        st.apply(&SysRaw {
            op: op::SOCKET,
            ret: 7,
            args: [10, 1, 0, 0, 0, 0],
            ..raw(0, 0, [0; 6], "", "")
        });
        let mut v6 = vec![10u8, 0, 0x1f, 0x90, 0, 0, 0, 0];
        v6.extend([0; 15]);
        v6.push(1);
        v6.extend([0; 4]);
        st.apply(&SysRaw {
            op: op::BIND,
            args: [7, 0, 28, 0, 0, 0],
            ..bytes(&v6)
        });
        let listen = st.apply(&SysRaw {
            op: op::LISTEN,
            args: [7, 16, 0, 0, 0, 0],
            ..raw(0, 0, [0; 6], "", "")
        });
        assert_eq!(
            (listen.family, listen.addr.as_deref(), listen.port),
            (Some("ipv6"), Some("::1"), Some(8080))
        );
    }

    #[test]
    fn flags_decode() {
        assert_eq!(open_flags(0), "read");
        assert_eq!(open_flags(0o2101), "write,create,append");
        assert_eq!(open_flags(0o2000002), "read,write,cloexec");
        // Zig's realpath: O_PATH|O_NONBLOCK|O_CLOEXEC (the access mode ignored).
        assert_eq!(open_flags(0o12004000), "path,cloexec");
        assert_eq!(open_flags(0o10200002), "path,directory");
    }
}
