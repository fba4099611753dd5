//! Ring-buffer bytes → typed events. Kernel records are `#[repr(C)]` structs
//! from `agentsight-common`; nothing here trusts a length it did not check.

use agentsight_common::{
    ARGV_READ_FAILED, ARGV_TRUNCATED, EventKind, ExecEvent, ExitEvent, ForkEvent, Header, IoAgg,
    IoEvent, PATH_COMPLETE, PATH_DETACHED, PATH_NAME_CUT, PATH_READ_FAILED, PATH_TOO_DEEP,
    PathRecord, SYS_BUF, SYS_EVENT_BARE, SysEvent, TLS_DATA_MAX, TLS_READ_FAILED, TcpStateEvent,
    TlsHead,
};

/// Fields every record carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventHeader {
    pub kind: EventKind,
    pub cpu: u32,
    pub seq: u64,
    pub mono_ns: u64,
    pub tid: u32,
    pub pid: u32,
    pub ppid: u32,
    pub uid: u32,
    pub gid: u32,
    pub comm: String,
}

/// A path rebuilt by the kernel, with how complete it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPath {
    /// The absolute path when complete; otherwise the part that was read,
    /// prefixed with `…` where the top is missing.
    pub path: String,
    pub status: WalkStatus,
}

impl KernelPath {
    pub fn is_complete(&self) -> bool {
        self.status == WalkStatus::Complete
    }
}

crate::vocabulary::vocabulary! {
    /// How the kernel's walk of a path ended (`*_status` columns of a walked
    /// path: `cwd_status`, `exe_status`, `real_path_status`).
    WalkStatus {
        Complete => "complete",
        TooDeep => "too_deep",
        NameCut => "name_cut",
        Detached => "detached",
        ReadFailed => "read_failed",
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detail {
    Fork {
        child_pid: u32,
        child_tid: u32,
        /// The cgroup v2 id the child starts in (0: not read).
        cgroup_id: u64,
    },
    Exec {
        /// True for a successful exec, false for a failed one (see `errno`).
        ok: bool,
        errno: i32,
        old_tid: u32,
        filename: String,
        /// Number of arguments the program was started with (0 when unknown: failed exec).
        argc: u32,
        argv: Vec<String>,
        /// Some arguments (or the end of one) were not kept.
        argv_truncated: bool,
        /// Reading argv from user memory failed: `argv` holds what was read.
        argv_incomplete: bool,
        cwd: KernelPath,
        exe: Option<KernelPath>,
        /// A successful exec: the binary's device and inode (0 when unknown).
        exe_dev: u32,
        exe_ino: u64,
        /// The cgroup v2 id at a successful exec (0: not read, a failed exec).
        cgroup_id: u64,
        /// In a recorded container's pid namespace: (its inode, the pid in it).
        ns_pid: Option<(u64, u32)>,
    },
    Exit {
        exit_code: Option<i32>,
        signal: Option<i32>,
        core_dumped: bool,
    },
    /// A file or socket syscall, still raw: `capture::syscalls` interprets it.
    Sys(SysRaw),
    /// Reads and writes on one fd, summed in the kernel.
    Io { fd: i32, agg: IoAggregate },
    /// TCP outcome of a connect.
    TcpState {
        oldstate: i32,
        newstate: i32,
        family: u16,
        sport: u16,
        dport: u16,
        saddr: [u8; 16],
        daddr: [u8; 16],
    },
    /// Plaintext of one TLS library call.
    Tls(TlsData),
}

/// One TLS call's plaintext as the return uprobe copied it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsData {
    /// The library's connection object (`SSL *`, `gnutls_session_t`): tells
    /// connections apart within a process.
    pub conn: u64,
    /// When the call was entered (the header's time is its return).
    pub entry_ns: u64,
    /// `agentsight_common::tls_fn` number.
    pub func: u32,
    /// The socket fd of the syscall the thread made inside the call; None
    /// when it made none (data already buffered, or a memory BIO as in node).
    pub fd: Option<i32>,
    /// Bytes the call moved; `data` holds the first of them (at most
    /// `TLS_DATA_MAX`), so `len - data.len()` were cut.
    pub len: u64,
    pub data: Vec<u8>,
    /// Reading the caller's buffer failed: `data` is empty.
    pub read_failed: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoAggregate {
    pub write_bytes: u64,
    pub write_calls: u64,
    pub read_bytes: u64,
    pub read_calls: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

impl From<IoAgg> for IoAggregate {
    fn from(a: IoAgg) -> Self {
        Self {
            write_bytes: a.write_bytes,
            write_calls: a.write_calls,
            read_bytes: a.read_bytes,
            read_calls: a.read_calls,
            first_ns: a.first_ns,
            last_ns: a.last_ns,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysRaw {
    pub op: u32,
    pub ret: i64,
    pub args: [u64; 6],
    pub how_flags: u64,
    /// Result of reading buf1/buf2 (bytes, or -errno), and the bytes read.
    pub len1: i32,
    pub len2: i32,
    pub buf1: Vec<u8>,
    pub buf2: Vec<u8>,
    /// A successful open: the walk of the opened file (`PATH_*`, with
    /// `PATH_WALKED`; its names are in `buf2`), its inode and device.
    pub path_flags: u32,
    pub ino: u64,
    pub dev: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub header: EventHeader,
    pub detail: Detail,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record of {len} bytes is shorter than its {kind} layout ({need} bytes)")]
    Short {
        kind: &'static str,
        len: usize,
        need: usize,
    },
    #[error("record has unknown kind {0}")]
    UnknownKind(u32),
}

fn read_record<T: Copy>(bytes: &[u8], kind: &'static str) -> Result<T, DecodeError> {
    let need = std::mem::size_of::<T>();
    if bytes.len() < need {
        return Err(DecodeError::Short {
            kind,
            len: bytes.len(),
            need,
        });
    }
    // Safety: length checked; T is a repr(C) POD record valid for any bytes;
    // read_unaligned copes with the ring buffer's 8-byte alignment.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) })
}

/// Text up to the first NUL; bytes that are not UTF-8 are kept exactly
/// (see [`crate::rawtext`]), never replaced or dropped.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    crate::rawtext::exact_text(&bytes[..end])
}

/// The fixed header of a ring record, without decoding the rest.
pub fn raw_header(bytes: &[u8]) -> Result<Header, DecodeError> {
    read_record(bytes, "header")
}

/// How much of a ring record carries information: a syscall record's path
/// buffers are fixed-size and mostly empty (a 40-byte path in a 512-byte
/// buffer), so everything after the last buffer's used bytes is dropped
/// (`decode` zero-fills a short syscall record). Other records, and records
/// too short to tell, keep their length.
pub fn used_len(bytes: &[u8]) -> usize {
    use std::mem::offset_of;
    let Ok(h) = raw_header(bytes) else {
        return bytes.len();
    };
    if h.kind == EventKind::Tls as u32 {
        // Only the plaintext the record says it holds.
        return read_record::<TlsHead>(bytes, "tls").map_or(bytes.len(), |t| {
            (std::mem::size_of::<TlsHead>() + (t.data_len as usize).min(TLS_DATA_MAX))
                .min(bytes.len())
        });
    }
    if h.kind != EventKind::Sys as u32 || bytes.len() < SYS_EVENT_BARE {
        return bytes.len();
    }
    let len_at = |off: usize| -> usize {
        let b: [u8; 4] = bytes[off..off + 4].try_into().unwrap_or_default();
        (i32::from_ne_bytes(b).max(0) as usize).min(SYS_BUF)
    };
    let (len1, len2) = (
        len_at(offset_of!(SysEvent, len1)),
        len_at(offset_of!(SysEvent, len2)),
    );
    let used = if len2 > 0 {
        offset_of!(SysEvent, buf2) + len2
    } else {
        offset_of!(SysEvent, buf1) + len1
    };
    used.clamp(SYS_EVENT_BARE, bytes.len())
}

/// The `EXIT_*` flags of an exit record (0 when it is too short).
pub fn exit_flags(bytes: &[u8]) -> u32 {
    read_record::<ExitEvent>(bytes, "exit").map_or(0, |e| e.flags)
}

pub fn header(h: &Header) -> Result<EventHeader, DecodeError> {
    let kind = EventKind::from_u32(h.kind).ok_or(DecodeError::UnknownKind(h.kind))?;
    Ok(EventHeader {
        kind,
        cpu: h.cpu,
        seq: h.seq,
        mono_ns: h.mono_ns,
        tid: h.tid,
        pid: h.pid,
        ppid: h.ppid,
        uid: h.uid,
        gid: h.gid,
        comm: c_string(&h.comm),
    })
}

pub fn kernel_path(rec: &PathRecord) -> KernelPath {
    let depth = (rec.depth as usize).min(rec.names.len());
    let names: Vec<String> = rec.names[..depth].iter().map(|n| c_string(n)).collect();
    path_from_names(&names, rec.flags)
}

/// A packed walk (names leaf first, each NUL-terminated; a last name
/// without its NUL was cut by the byte limit and is dropped, the flags
/// already say the path is not whole) as a path.
pub fn packed_path(buf: &[u8], flags: u32) -> KernelPath {
    let names: Vec<String> = buf
        .split_inclusive(|&b| b == 0)
        .filter(|n| n.last() == Some(&0))
        .map(c_string)
        .collect();
    path_from_names(&names, flags)
}

/// Leaf-first names and walk flags → the path, marked with a leading `…`
/// when it is not whole.
fn path_from_names(names: &[String], flags: u32) -> KernelPath {
    let mut path = String::new();
    for name in names.iter().rev() {
        path.push('/');
        path.push_str(name);
    }
    let status = if flags & PATH_READ_FAILED != 0 {
        WalkStatus::ReadFailed
    } else if flags & PATH_DETACHED != 0 {
        WalkStatus::Detached
    } else if flags & PATH_TOO_DEEP != 0 {
        WalkStatus::TooDeep
    } else if flags & PATH_NAME_CUT != 0 {
        WalkStatus::NameCut
    } else if flags & PATH_COMPLETE != 0 {
        WalkStatus::Complete
    } else {
        WalkStatus::ReadFailed
    };
    if status == WalkStatus::Complete {
        if path.is_empty() {
            path.push('/');
        }
    } else {
        // Say so in the value itself: never present a partial path as whole.
        path.insert(0, '…');
    }
    KernelPath { path, status }
}

/// Splits the argv buffer (arguments back to back, each NUL-terminated; the
/// last one unterminated when the buffer cut it) into at most `kept` arguments.
fn split_argv(buf: &[u8], len: u32, kept: u32) -> Vec<String> {
    let bytes = &buf[..(len as usize).min(buf.len())];
    if bytes.is_empty() {
        return Vec::new();
    }
    // The last terminator ends an argument; it does not start an empty one.
    let body = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    let mut out: Vec<String> = body
        .split(|&b| b == 0)
        .map(crate::rawtext::exact_text)
        .collect();
    out.truncate(kept as usize);
    out
}

pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    let h: Header = read_record(bytes, "header")?;
    let header = header(&h)?;
    let detail = match header.kind {
        EventKind::Fork => {
            let ev: ForkEvent = read_record(bytes, "fork")?;
            Detail::Fork {
                child_pid: ev.child_pid,
                child_tid: ev.child_tid,
                cgroup_id: ev.cgroup_id,
            }
        }
        EventKind::Exec | EventKind::ExecFailed => {
            let ev: Box<ExecEvent> = Box::new(read_record(bytes, "exec")?);
            let ok = header.kind == EventKind::Exec;
            let argv = split_argv(&ev.argv, ev.argv_len, ev.argv_kept);
            let argv_truncated = ev.argv_flags & ARGV_TRUNCATED != 0;
            Detail::Exec {
                ok,
                errno: ev.errno,
                old_tid: ev.old_tid,
                filename: c_string(&ev.filename),
                argc: ev.argc,
                argv,
                argv_truncated,
                argv_incomplete: ev.argv_flags & ARGV_READ_FAILED != 0,
                cwd: kernel_path(&ev.cwd),
                exe: ok.then(|| kernel_path(&ev.exe)),
                exe_dev: ev.exe_dev,
                exe_ino: ev.exe_ino,
                cgroup_id: ev.cgroup_id,
                ns_pid: (ev.pidns_ino != 0).then_some((ev.pidns_ino, ev.ns_pid)),
            }
        }
        EventKind::Sys => {
            // Records carry 0, 1 or 2 buffers; read what arrived, zero the rest.
            let need = SYS_EVENT_BARE;
            if bytes.len() < need {
                return Err(DecodeError::Short {
                    kind: "syscall",
                    len: bytes.len(),
                    need,
                });
            }
            // On the stack, not the heap: two allocations and frees per
            // syscall record, for a value read once.
            let mut full = [0u8; std::mem::size_of::<SysEvent>()];
            let n = bytes.len().min(full.len());
            full[..n].copy_from_slice(&bytes[..n]);
            let ev: SysEvent = read_record(&full, "syscall")?;
            let take = |buf: &[u8; SYS_BUF], len: i32| -> Vec<u8> {
                buf[..(len.max(0) as usize).min(SYS_BUF)].to_vec()
            };
            Detail::Sys(SysRaw {
                op: ev.op,
                ret: ev.ret,
                args: ev.args,
                how_flags: ev.how_flags,
                len1: ev.len1,
                len2: ev.len2,
                buf1: take(&ev.buf1, ev.len1),
                buf2: take(&ev.buf2, ev.len2),
                path_flags: ev.path_flags,
                ino: ev.ino,
                dev: ev.dev,
            })
        }
        EventKind::Io => {
            let ev: IoEvent = read_record(bytes, "io")?;
            Detail::Io {
                fd: ev.fd,
                agg: ev.agg.into(),
            }
        }
        EventKind::TcpState => {
            let ev: TcpStateEvent = read_record(bytes, "tcp_state")?;
            Detail::TcpState {
                oldstate: ev.oldstate,
                newstate: ev.newstate,
                family: ev.family,
                sport: ev.sport,
                dport: ev.dport,
                saddr: ev.saddr,
                daddr: ev.daddr,
            }
        }
        EventKind::Tls => Detail::Tls(tls_data(bytes)?),
        EventKind::Exit => {
            let ev: ExitEvent = read_record(bytes, "exit")?;
            let code = ev.exit_code;
            let sig = (code & 0x7f) as i32;
            if sig == 0 {
                Detail::Exit {
                    exit_code: Some(((code >> 8) & 0xff) as i32),
                    signal: None,
                    core_dumped: false,
                }
            } else {
                Detail::Exit {
                    exit_code: None,
                    signal: Some(sig),
                    core_dumped: code & 0x80 != 0,
                }
            }
        }
    };
    Ok(Event { header, detail })
}

/// A TLS record: its fixed part, then `data_len` bytes of plaintext (a
/// record shorter than it says is an error, never read past).
fn tls_data(bytes: &[u8]) -> Result<TlsData, DecodeError> {
    let t: TlsHead = read_record(bytes, "tls")?;
    let start = std::mem::size_of::<TlsHead>();
    let need = start + (t.data_len as usize).min(TLS_DATA_MAX);
    let data = bytes.get(start..need).ok_or(DecodeError::Short {
        kind: "tls data",
        len: bytes.len(),
        need,
    })?;
    Ok(TlsData {
        conn: t.conn,
        entry_ns: t.entry_ns,
        func: t.func,
        fd: (t.fd >= 0).then_some(t.fd),
        len: t.len,
        data: data.to_vec(),
        read_failed: t.flags & TLS_READ_FAILED != 0,
    })
}

/// Errno number → symbolic name (`ENOENT`), via nix's table of names.
pub fn errno_name(errno: i32) -> String {
    // The common ones without formatting: failed opens can come by the million.
    match errno {
        2 => return "ENOENT".into(),
        13 => return "EACCES".into(),
        20 => return "ENOTDIR".into(),
        115 => return "EINPROGRESS".into(),
        111 => return "ECONNREFUSED".into(),
        _ => {}
    }
    nix::errno::Errno::from_raw(errno)
        .to_string()
        .split(':')
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentsight_common::{PATH_DEPTH, PATH_NAME_MAX};

    /// A TLS record of the small class carrying `data` (of a call that
    /// moved `len` bytes), as the ring holds it.
    fn tls_record(data: &[u8], len: u64, fd: i32) -> Vec<u8> {
        use agentsight_common::{TLS_DATA_SMALL, TlsRecord};
        // Safety: TlsRecord is a repr(C) POD record; all zeroes is valid.
        let mut ev: TlsRecord<TLS_DATA_SMALL> = unsafe { std::mem::zeroed() };
        ev.head.header.kind = EventKind::Tls as u32;
        ev.head.conn = 0xdead_beef;
        ev.head.entry_ns = 5;
        ev.head.len = len;
        ev.head.func = agentsight_common::tls_fn::SSL_WRITE_EX;
        ev.head.fd = fd;
        ev.head.data_len = data.len() as u32;
        ev.data[..data.len()].copy_from_slice(data);
        // Safety: a repr(C) record viewed as its bytes.
        unsafe {
            std::slice::from_raw_parts(
                &ev as *const TlsRecord<TLS_DATA_SMALL> as *const u8,
                std::mem::size_of::<TlsRecord<TLS_DATA_SMALL>>(),
            )
        }
        .to_vec()
    }

    #[test]
    fn tls_records_keep_only_their_data_and_say_what_is_unknown() {
        let rec = tls_record(b"POST / HTTP/1.1\r\n", 17, 7);
        let used = used_len(&rec);
        assert_eq!(used, std::mem::size_of::<TlsHead>() + 17);
        let ev = decode(&rec[..used]).unwrap();
        assert_eq!(
            ev.detail,
            Detail::Tls(TlsData {
                conn: 0xdead_beef,
                entry_ns: 5,
                func: agentsight_common::tls_fn::SSL_WRITE_EX,
                fd: Some(7),
                len: 17,
                data: b"POST / HTTP/1.1\r\n".to_vec(),
                read_failed: false,
            })
        );
        // No syscall inside the call (a memory BIO): the fd is unknown.
        let rec = tls_record(b"x", 1, -1);
        let Detail::Tls(d) = decode(&rec).unwrap().detail else {
            panic!("not a TLS record");
        };
        assert_eq!(d.fd, None);
        // A record shorter than the data it announces is an error.
        let rec = tls_record(b"abcdef", 6, 3);
        let short = std::mem::size_of::<TlsHead>() + 3;
        assert_eq!(
            decode(&rec[..short]),
            Err(DecodeError::Short {
                kind: "tls data",
                len: short,
                need: std::mem::size_of::<TlsHead>() + 6
            })
        );
    }

    /// A syscall record with `p1` in buf1 and `p2` in buf2, as bytes.
    fn sys_record(p1: &[u8], p2: &[u8]) -> Vec<u8> {
        // Safety: SysEvent is a repr(C) POD record; all zeroes is valid.
        let mut ev: SysEvent = unsafe { std::mem::zeroed() };
        ev.header.kind = EventKind::Sys as u32;
        ev.op = agentsight_common::op::OPENAT;
        ev.ret = 3;
        ev.ino = 99;
        ev.len1 = p1.len() as i32;
        ev.len2 = p2.len() as i32;
        ev.buf1[..p1.len()].copy_from_slice(p1);
        ev.buf2[..p2.len()].copy_from_slice(p2);
        let size = std::mem::size_of::<SysEvent>();
        // Safety: reading the bytes of a POD value.
        unsafe { std::slice::from_raw_parts(&ev as *const SysEvent as *const u8, size) }.to_vec()
    }

    fn sys_of(bytes: &[u8]) -> SysRaw {
        match decode(bytes).unwrap().detail {
            Detail::Sys(raw) => raw,
            _ => panic!("not a syscall"),
        }
    }

    #[test]
    fn a_record_cut_to_its_used_bytes_decodes_the_same() {
        for (p1, p2) in [
            (&b"/w/a.txt"[..], &b"a.txt\0w\0"[..]),
            (b"/w/a.txt", b""),
            (b"", b""),
        ] {
            let full = sys_record(p1, p2);
            let used = used_len(&full);
            assert!(used + 400 < full.len(), "{used}");
            let (a, b) = (sys_of(&full), sys_of(&full[..used]));
            assert_eq!(a, b);
            assert_eq!((b.buf1.as_slice(), b.buf2.as_slice(), b.ino), (p1, p2, 99));
        }
        // Lengths a short record cannot hold keep it whole.
        let mut rec = sys_record(b"/x", b"abc");
        rec.truncate(std::mem::size_of::<SysEvent>() - SYS_BUF);
        assert_eq!(used_len(&rec), rec.len());
    }

    fn path_rec(names: &[&str], flags: u32) -> PathRecord {
        let mut rec = PathRecord {
            depth: names.len() as u32,
            flags,
            names: [[0; PATH_NAME_MAX]; PATH_DEPTH],
        };
        for (i, n) in names.iter().enumerate() {
            rec.names[i][..n.len()].copy_from_slice(n.as_bytes());
        }
        rec
    }

    #[test]
    fn path_is_rebuilt_leaf_first() {
        let p = kernel_path(&path_rec(&["c", "b", "a"], PATH_COMPLETE));
        assert_eq!(p.path, "/a/b/c");
        assert_eq!(p.status.as_str(), "complete");
        let root = kernel_path(&path_rec(&[], PATH_COMPLETE));
        assert_eq!(root.path, "/");
    }

    #[test]
    fn partial_path_is_marked() {
        let p = kernel_path(&path_rec(&["c", "b"], PATH_TOO_DEEP));
        assert_eq!(p.path, "…/b/c");
        assert_eq!(p.status.as_str(), "too_deep");
    }

    #[test]
    fn argv_keeps_empty_arguments() {
        let buf = b"echo\0\0x\0";
        assert_eq!(split_argv(buf, 8, 3), vec!["echo", "", "x"]);
        assert_eq!(split_argv(b"a\0\0", 3, 2), vec!["a", ""]);
    }

    #[test]
    fn cut_argv_keeps_the_partial_argument() {
        // Cut inside the second argument: no terminator at the end.
        assert_eq!(split_argv(b"cc\0-Wal", 7, 5), vec!["cc", "-Wal"]);
        // Cut right after a terminator: no empty argument is made up.
        assert_eq!(split_argv(b"cc\0-c\0", 6, 5), vec!["cc", "-c"]);
        // Nothing read.
        assert_eq!(split_argv(b"", 0, 3), Vec::<String>::new());
    }

    #[test]
    fn short_record_is_an_error() {
        assert!(matches!(decode(&[0u8; 4]), Err(DecodeError::Short { .. })));
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(2), "ENOENT");
        assert_eq!(errno_name(13), "EACCES");
    }
}
