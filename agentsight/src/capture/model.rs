//! The process model: decoded events → the rows a capture stores.
//!
//! Pure (no SQLite): per process it keeps the row id, argv, cwd, exe and the
//! cwd/fd table that path resolution needs, copies them at fork, follows
//! exec and exit, folds repeated failed calls, and says, step by step, which
//! process row to add or change and which event row to add. The store only
//! writes those steps (`store::writer`).

use std::collections::HashMap;

use super::{
    decode::{Detail, Event, EventHeader, IoAggregate, TlsData, WalkStatus, errno_name},
    syscalls::{FdInfo, FsState, PathStatus, SockAddr, SysRecord},
};

crate::vocabulary::vocabulary! {
    /// How a process row came to be (`processes.origin`).
    ProcessOrigin {
        /// The command agentsight started.
        Root => "root",
        /// Found in /proc when recording started (`--pid`, `--agent`).
        Seeded => "seeded",
        /// Seen being forked.
        Fork => "fork",
        /// Events arrived for a pid never seen starting.
        UnseenStart => "unseen_start",
    }
}

/// A process that existed before recording started (the command we launched,
/// or one seeded from /proc).
#[derive(Clone, Debug)]
pub struct ProcessSeed {
    pub pid: u32,
    pub start_mono_ns: u64,
    pub ppid: u32,
    /// `Root` (the command agentsight started) or `Seeded` (found in /proc).
    pub origin: ProcessOrigin,
    pub comm: Option<String>,
    pub argv: Option<Vec<String>>,
    pub cwd: Option<String>,
    pub exe: Option<String>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Open fds and what they point to (from /proc/PID/fd), for resolving
    /// `*at` calls and writes on fds opened before recording.
    pub fds: Vec<(i32, String)>,
}

/// A `processes` row id. The model hands them out in creation order, as
/// SQLite's rowid would, so the model needs no database to link rows.
pub type ProcessId = i64;

/// A new `processes` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewProcess {
    pub id: ProcessId,
    pub pid: u32,
    pub start_mono_ns: u64,
    pub parent_id: Option<ProcessId>,
    pub ppid: u32,
    pub origin: ProcessOrigin,
    pub comm: Option<String>,
    /// JSON array.
    pub argv: Option<String>,
    pub cwd: Option<String>,
    pub exe: Option<String>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

/// A change to the `processes` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessChange {
    /// A new row. A fork whose (pid, start) is already stored adds nothing.
    Insert(NewProcess),
    /// A seed for a process whose events came first: the seed's origin, ppid
    /// and earlier start win; its other fields only fill what is missing.
    CompleteFromSeed {
        id: ProcessId,
        origin: ProcessOrigin,
        ppid: u32,
        start_mono_ns: u64,
        argv: Option<String>,
        cwd: Option<String>,
        exe: Option<String>,
        uid: Option<u32>,
        gid: Option<u32>,
    },
    /// A successful exec (`exec_count` goes up by one).
    Exec {
        id: ProcessId,
        argv: String,
        argv_truncated: bool,
        cwd: String,
        exe: Option<String>,
        comm: String,
        uid: u32,
        gid: u32,
    },
    /// The kernel saw process `pid` (row `id`) in cgroup `cgroup_id` (v2)
    /// at its fork or exec: the store maps it to a recorded container.
    /// Only for a cgroup id the kernel read (never 0).
    InCgroup {
        id: ProcessId,
        pid: u32,
        cgroup_id: u64,
        /// When (the fork's or exec's `mono_ns`).
        at_ns: u64,
        /// At an exec in a recorded container's pid namespace: that
        /// namespace's inode and the pid in it, as the kernel read them.
        ns_pid: Option<(u64, u32)>,
    },
    Exit {
        id: ProcessId,
        end_mono_ns: u64,
        exit_code: Option<i32>,
        signal: Option<i32>,
        core_dumped: bool,
    },
}

/// The kind-specific columns of one event row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFields {
    pub child_pid: Option<u32>,
    pub child_process_id: Option<ProcessId>,
    pub filename: Option<String>,
    /// JSON array.
    pub argv: Option<String>,
    pub argc: Option<u32>,
    pub argv_truncated: Option<bool>,
    pub argv_incomplete: Option<bool>,
    pub cwd: Option<String>,
    pub cwd_status: Option<WalkStatus>,
    pub exe: Option<String>,
    pub exe_status: Option<WalkStatus>,
    pub result: Option<i64>,
    pub errno: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub core_dumped: Option<bool>,
    /// File/socket columns (also an exec's `real_path`, dev, ino).
    pub sys: SysRecord,
    pub io: Option<IoAggregate>,
    pub tcp_state: Option<TcpOutcome>,
}

crate::vocabulary::vocabulary! {
    /// Where a connect's TCP socket went (`tcp_state`).
    TcpOutcome {
        Established => "established",
        Closed => "closed",
    }
}

/// One row of `events`, as the model built it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow<'a> {
    pub header: &'a EventHeader,
    pub kind: &'static str,
    pub process_id: ProcessId,
    /// A failed call repeated back to back this many times (> 1).
    pub repeat: Option<i64>,
    pub fields: EventFields,
}

/// What to store, in order.
// Nearly every step is an event row: boxing it would cost an allocation
// per row on the writer's hot path for no memory saved.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<'a> {
    Process(ProcessChange),
    Event(EventRow<'a>),
    /// A TLS call's plaintext, for the process's row (`tls_records`, not
    /// `events`: the wire layer is kept beside the kernel's, never in it).
    Tls {
        process_id: ProcessId,
        header: &'a EventHeader,
        data: &'a TlsData,
    },
}

/// Live state of one process, to attach events to its row.
struct Live {
    id: ProcessId,
    argv: Option<String>,
    cwd: Option<String>,
    exe: Option<String>,
    /// cwd and fd table for resolving paths of file syscalls.
    fs: FsState,
}

/// Every process of the recording, as far as its events and seeds tell.
#[derive(Default)]
pub struct ProcessModel {
    /// pid → the newest process with that pid.
    live: HashMap<u32, Live>,
    /// pid → a process that already exited, for a seed that arrives after
    /// its process's whole life (a command that exits at once).
    exited: HashMap<u32, ProcessId>,
    last_id: ProcessId,
}

/// Notes the cgroup the kernel saw a process in, when it read one.
fn in_cgroup(
    id: ProcessId,
    pid: u32,
    cgroup_id: u64,
    at_ns: u64,
    ns_pid: Option<(u64, u32)>,
    out: &mut Vec<Step>,
) {
    if cgroup_id != 0 {
        out.push(Step::Process(ProcessChange::InCgroup {
            id,
            pid,
            cgroup_id,
            at_ns,
            ns_pid,
        }));
    }
}

fn json_array(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

fn seed_fs(s: &ProcessSeed) -> FsState {
    FsState {
        cwd: s.cwd.clone(),
        fds: s
            .fds
            .iter()
            .map(|(fd, target)| {
                let is_path = target.starts_with('/');
                (
                    *fd,
                    FdInfo {
                        target: target.clone(),
                        is_path,
                        cloexec: false,
                        sock: None,
                    },
                )
            })
            .collect(),
    }
}

/// A failed syscall held back while the same process keeps repeating it.
struct Repeat<'a> {
    ev: &'a Event,
    count: i64,
}

/// Failed calls a process repeats back to back (same syscall, same
/// arguments as given, same error) become one row with `repeat` = N: a
/// program probing a path in a loop must not cost a row per try. Any other
/// event of that process ends the run.
/// (syscall, first buffer, second buffer, dirfd/fd and flags arguments, result)
type RepeatKey<'a> = (u32, &'a [u8], &'a [u8], [u64; 2], i64);

fn repeat_key(ev: &Event) -> Option<RepeatKey<'_>> {
    match &ev.detail {
        Detail::Sys(raw) if raw.ret < 0 && raw.op != agentsight_common::op::CLOSE => Some((
            raw.op,
            &raw.buf1,
            &raw.buf2,
            [raw.args[0], raw.args[2]],
            raw.ret,
        )),
        _ => None,
    }
}

impl ProcessModel {
    fn next_id(&mut self) -> ProcessId {
        self.last_id += 1;
        self.last_id
    }

    /// A process that existed before its events: a new row, or the row its
    /// events already made (the command can exec, or even exit, before we
    /// learn its pid), completed.
    pub fn seed(&mut self, s: &ProcessSeed) -> ProcessChange {
        let argv = s.argv.as_ref().map(|a| json_array(a));
        let known = self
            .live
            .get(&s.pid)
            .map(|l| l.id)
            .or_else(|| self.exited.get(&s.pid).copied());
        if let Some(id) = known {
            // Fields set by its own events win over what we knew.
            if let Some(l) = self.live.get_mut(&s.pid) {
                l.argv = l.argv.take().or(argv.clone());
                l.cwd = l.cwd.take().or_else(|| s.cwd.clone());
                l.exe = l.exe.take().or_else(|| s.exe.clone());
                let seeded = seed_fs(s);
                l.fs.cwd = l.fs.cwd.take().or(seeded.cwd);
                for (fd, info) in seeded.fds {
                    l.fs.fds.entry(fd).or_insert(info);
                }
            }
            return ProcessChange::CompleteFromSeed {
                id,
                origin: s.origin,
                ppid: s.ppid,
                start_mono_ns: s.start_mono_ns,
                argv,
                cwd: s.cwd.clone(),
                exe: s.exe.clone(),
                uid: s.uid,
                gid: s.gid,
            };
        }
        let id = self.next_id();
        let row = NewProcess {
            id,
            pid: s.pid,
            start_mono_ns: s.start_mono_ns,
            parent_id: self.live.get(&s.ppid).map(|l| l.id),
            ppid: s.ppid,
            origin: s.origin,
            comm: s.comm.clone(),
            argv: argv.clone(),
            cwd: s.cwd.clone(),
            exe: s.exe.clone(),
            uid: s.uid,
            gid: s.gid,
        };
        self.live.insert(
            s.pid,
            Live {
                id,
                argv,
                cwd: s.cwd.clone(),
                exe: s.exe.clone(),
                fs: seed_fs(s),
            },
        );
        ProcessChange::Insert(row)
    }

    /// The steps that store a batch of events, repeats folded. A batch
    /// boundary ends every run: rows never wait for a later batch.
    pub fn steps<'a>(&mut self, events: &'a [Event]) -> Vec<Step<'a>> {
        let mut out = Vec::with_capacity(events.len() + events.len() / 8);
        let mut held: HashMap<u32, Repeat> = HashMap::new();
        for ev in events {
            if let Detail::Tls(data) = &ev.detail {
                let process_id = self.process_of(&ev.header, &mut out);
                out.push(Step::Tls {
                    process_id,
                    header: &ev.header,
                    data,
                });
                continue;
            }
            let pid = ev.header.pid;
            let key = repeat_key(ev);
            if let (Some(k), Some(r)) = (&key, held.get_mut(&pid))
                && repeat_key(r.ev).as_ref() == Some(k)
            {
                r.count += 1;
                continue;
            }
            if let Some(r) = held.remove(&pid) {
                self.event(r.ev, (r.count > 1).then_some(r.count), &mut out);
            }
            if key.is_some() {
                held.insert(pid, Repeat { ev, count: 1 });
                continue;
            }
            self.event(ev, None, &mut out);
        }
        let mut rest: Vec<Repeat> = held.into_values().collect();
        rest.sort_by_key(|r| r.ev.header.mono_ns);
        for r in rest {
            self.event(r.ev, (r.count > 1).then_some(r.count), &mut out);
        }
        out
    }

    /// Row of the process an event belongs to, creating one when the process
    /// was never seen starting (it then has no start time of its own: we use
    /// the first event's).
    fn process_of(&mut self, h: &EventHeader, out: &mut Vec<Step>) -> ProcessId {
        if let Some(l) = self.live.get(&h.pid) {
            return l.id;
        }
        let id = self.next_id();
        out.push(Step::Process(ProcessChange::Insert(NewProcess {
            id,
            pid: h.pid,
            start_mono_ns: h.mono_ns,
            parent_id: self.live.get(&h.ppid).map(|l| l.id),
            ppid: h.ppid,
            origin: ProcessOrigin::UnseenStart,
            comm: Some(h.comm.clone()),
            argv: None,
            cwd: None,
            exe: None,
            uid: Some(h.uid),
            gid: Some(h.gid),
        })));
        self.live.insert(
            h.pid,
            Live {
                id,
                argv: None,
                cwd: None,
                exe: None,
                fs: FsState::default(),
            },
        );
        id
    }

    fn event<'a>(&mut self, ev: &'a Event, repeat: Option<i64>, out: &mut Vec<Step<'a>>) {
        let h = &ev.header;
        let before = self.last_id;
        let id = self.process_of(h, out);
        let fields = match &ev.detail {
            Detail::Fork {
                child_pid,
                cgroup_id,
                ..
            } => {
                // A parent first seen by this fork (one that joined in the
                // kernel by its container's cgroup) is in the same cgroup.
                if id > before {
                    in_cgroup(id, h.pid, *cgroup_id, h.mono_ns, None, out);
                }
                let f = self.fork(h, id, *child_pid, out);
                if let Some(child) = f.child_process_id {
                    in_cgroup(child, *child_pid, *cgroup_id, h.mono_ns, None, out);
                }
                f
            }
            Detail::Exec { .. } => self.exec(ev, id, out),
            Detail::Sys(raw) => {
                let sys = match self.live.get_mut(&h.pid) {
                    Some(l) => l.fs.apply(raw),
                    None => FsState::default().apply(raw),
                };
                EventFields {
                    result: Some(sys.result),
                    errno: sys.errno.clone(),
                    sys,
                    ..Default::default()
                }
            }
            Detail::Io { fd, agg } => self.io(h.pid, *fd, *agg),
            // `steps` hands TLS records to their own table before this.
            Detail::Tls(_) => EventFields::default(),
            Detail::TcpState {
                newstate,
                family,
                dport,
                daddr,
                ..
            } => tcp_fields(*newstate, *family, *dport, daddr),
            Detail::Exit {
                exit_code,
                signal,
                core_dumped,
            } => {
                out.push(Step::Process(ProcessChange::Exit {
                    id,
                    end_mono_ns: h.mono_ns,
                    exit_code: *exit_code,
                    signal: *signal,
                    core_dumped: *core_dumped,
                }));
                if let Some(l) = self.live.remove(&h.pid) {
                    self.exited.insert(h.pid, l.id);
                }
                EventFields {
                    exit_code: *exit_code,
                    signal: *signal,
                    core_dumped: Some(*core_dumped),
                    ..Default::default()
                }
            }
        };
        let kind = match &ev.detail {
            Detail::Sys(_) | Detail::Io { .. } | Detail::TcpState { .. } => fields.sys.kind,
            _ => h.kind.name(),
        };
        out.push(Step::Event(EventRow {
            header: h,
            kind,
            process_id: id,
            repeat,
            fields,
        }));
    }

    /// A fork: the child's process row, a copy of its parent's (same argv,
    /// cwd, exe, fd table).
    fn fork(
        &mut self,
        h: &EventHeader,
        parent_id: ProcessId,
        child_pid: u32,
        out: &mut Vec<Step>,
    ) -> EventFields {
        let (argv, cwd, exe, fs) = self
            .live
            .get(&h.pid)
            .map(|l| (l.argv.clone(), l.cwd.clone(), l.exe.clone(), l.fs.clone()))
            .unwrap_or_default();
        let id = self.next_id();
        out.push(Step::Process(ProcessChange::Insert(NewProcess {
            id,
            pid: child_pid,
            start_mono_ns: h.mono_ns,
            parent_id: Some(parent_id),
            ppid: h.pid,
            origin: ProcessOrigin::Fork,
            comm: Some(h.comm.clone()),
            argv: argv.clone(),
            cwd: cwd.clone(),
            exe: exe.clone(),
            uid: Some(h.uid),
            gid: Some(h.gid),
        })));
        self.exited.remove(&child_pid);
        self.live.insert(
            child_pid,
            Live {
                id,
                argv,
                cwd,
                exe,
                fs,
            },
        );
        EventFields {
            child_process_id: Some(id),
            child_pid: Some(child_pid),
            ..Default::default()
        }
    }

    fn exec(&mut self, ev: &Event, id: ProcessId, out: &mut Vec<Step>) -> EventFields {
        let h = &ev.header;
        let Detail::Exec {
            ok,
            errno: e,
            filename,
            argc,
            argv,
            argv_truncated,
            argv_incomplete,
            cwd: c,
            exe: x,
            exe_dev,
            exe_ino,
            cgroup_id,
            ns_pid,
            ..
        } = &ev.detail
        else {
            return EventFields::default();
        };
        let a_json = json_array(argv);
        let exe = x.as_ref().map(|p| p.path.clone());
        let mut f = EventFields {
            filename: Some(filename.clone()),
            argv: Some(a_json.clone()),
            argc: ok.then_some(*argc),
            argv_truncated: Some(*argv_truncated),
            argv_incomplete: Some(*argv_incomplete),
            cwd: Some(c.path.clone()),
            cwd_status: Some(c.status),
            exe: exe.clone(),
            exe_status: x.as_ref().map(|p| p.status),
            ..Default::default()
        };
        if !*ok {
            f.result = Some(-(*e as i64));
            f.errno = Some(errno_name(*e));
            return f;
        }
        f.result = Some(0);
        // The file the kernel ran, in the same columns an open's uses.
        if let Some(p) = x {
            f.sys.real_path = Some(p.path.clone());
            f.sys.real_path_status = Some(p.status);
        }
        if *exe_ino != 0 {
            f.sys.dev = Some(i64::from(*exe_dev));
            f.sys.ino = Some(*exe_ino as i64);
        }
        out.push(Step::Process(ProcessChange::Exec {
            id,
            argv: a_json.clone(),
            argv_truncated: *argv_truncated,
            cwd: c.path.clone(),
            exe: exe.clone(),
            comm: h.comm.clone(),
            uid: h.uid,
            gid: h.gid,
        }));
        in_cgroup(id, h.pid, *cgroup_id, h.mono_ns, *ns_pid, out);
        if let Some(l) = self.live.get_mut(&h.pid) {
            l.argv = Some(a_json);
            l.cwd = Some(c.path.clone());
            l.exe = exe;
            l.fs.on_exec(c.is_complete().then(|| c.path.clone()));
        }
        f
    }

    /// An fd's summed reads and writes, with what the fd refers to.
    fn io(&self, pid: u32, fd: i32, agg: IoAggregate) -> EventFields {
        let target = self.live.get(&pid).and_then(|l| l.fs.fds.get(&fd)).cloned();
        let is_path = target.as_ref().is_some_and(|t| t.is_path);
        EventFields {
            sys: SysRecord {
                kind: "io",
                fd: Some(fd as i64),
                path: target
                    .as_ref()
                    .filter(|t| t.is_path)
                    .map(|t| t.target.clone()),
                path_status: Some(if is_path {
                    PathStatus::Resolved
                } else {
                    PathStatus::FdUnknown
                }),
                addr: target.filter(|t| !t.is_path).map(|t| t.target),
                ..Default::default()
            },
            io: Some(agg),
            ..Default::default()
        }
    }
}

/// The TCP outcome of a connect.
fn tcp_fields(newstate: i32, family: u16, dport: u16, daddr: &[u8; 16]) -> EventFields {
    let mut b = vec![0u8; 24];
    b[..2].copy_from_slice(&family.to_le_bytes());
    b[2..4].copy_from_slice(&dport.to_be_bytes());
    if family == 10 {
        b[8..24].copy_from_slice(daddr);
    } else {
        b[4..8].copy_from_slice(&daddr[..4]);
    }
    let sa = SockAddr::parse(&b);
    EventFields {
        sys: SysRecord {
            kind: "tcp_state",
            family: sa.as_ref().map(|s| s.family),
            addr: sa.as_ref().map(|s| s.addr.clone()),
            port: Some(dport as i64),
            ..Default::default()
        },
        tcp_state: Some(if newstate == 1 {
            TcpOutcome::Established
        } else {
            TcpOutcome::Closed
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use agentsight_common::{EventKind, op};

    use super::*;
    use crate::capture::decode::{KernelPath, SysRaw};

    const AT_FDCWD: u64 = -100i64 as u64;

    fn header(pid: u32, mono_ns: u64, kind: EventKind) -> EventHeader {
        EventHeader {
            kind,
            cpu: 0,
            seq: mono_ns,
            mono_ns,
            tid: pid,
            pid,
            ppid: 1,
            uid: 1000,
            gid: 1000,
            comm: "sh".into(),
        }
    }

    fn sys(pid: u32, mono_ns: u64, op: u32, ret: i64, args: [u64; 6], path: &str) -> Event {
        let buf1 = if path.is_empty() {
            vec![]
        } else {
            format!("{path}\0").into_bytes()
        };
        Event {
            header: header(pid, mono_ns, EventKind::Sys),
            detail: Detail::Sys(SysRaw {
                op,
                ret,
                args,
                how_flags: 0,
                len1: buf1.len() as i32,
                len2: 0,
                buf1,
                buf2: vec![],
                path_flags: 0,
                ino: 0,
                dev: 0,
            }),
        }
    }

    fn complete(path: &str) -> KernelPath {
        KernelPath {
            path: path.into(),
            status: WalkStatus::Complete,
        }
    }

    fn seed() -> ProcessSeed {
        ProcessSeed {
            pid: 10,
            start_mono_ns: 1,
            ppid: 1,
            origin: ProcessOrigin::Root,
            comm: Some("sh".into()),
            argv: Some(vec!["sh".into()]),
            cwd: Some("/w".into()),
            exe: Some("/bin/sh".into()),
            uid: Some(1000),
            gid: Some(1000),
            fds: vec![(0, "/dev/null".into())],
        }
    }

    /// The event rows of `steps`, as (process id, fields).
    fn rows(steps: &[Step]) -> Vec<(ProcessId, EventFields)> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Event(r) => Some((r.process_id, r.fields.clone())),
                Step::Process(_) | Step::Tls { .. } => None,
            })
            .collect()
    }

    fn changes(steps: &[Step]) -> Vec<ProcessChange> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Process(c) => Some(c.clone()),
                Step::Event(_) | Step::Tls { .. } => None,
            })
            .collect()
    }

    fn file(kind: &'static str, result: i64, fd: Option<i64>, path: &str) -> EventFields {
        EventFields {
            result: Some(result),
            sys: SysRecord {
                kind,
                result,
                fd,
                path: Some(path.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn resolved(mut f: EventFields, as_given: &str) -> EventFields {
        f.sys.path_as_given = Some(as_given.into());
        f.sys.path_status = Some(PathStatus::Resolved);
        f
    }

    #[test]
    fn a_seed_is_a_new_row_and_completes_the_row_its_events_made_first() {
        let mut m = ProcessModel::default();
        let early = [sys(10, 5, op::CHDIR, 0, [0; 6], "/tmp")];
        let steps = m.steps(&early);
        let ProcessChange::Insert(unseen) = &changes(&steps)[0] else {
            panic!("{steps:?}")
        };
        assert_eq!((unseen.id, unseen.origin), (1, ProcessOrigin::UnseenStart));
        assert_eq!(
            m.seed(&seed()),
            ProcessChange::CompleteFromSeed {
                id: 1,
                origin: ProcessOrigin::Root,
                ppid: 1,
                start_mono_ns: 1,
                argv: Some(r#"["sh"]"#.into()),
                cwd: Some("/w".into()),
                exe: Some("/bin/sh".into()),
                uid: Some(1000),
                gid: Some(1000),
            }
        );
        let mut other = seed();
        other.pid = 20;
        other.ppid = 10;
        other.origin = ProcessOrigin::Seeded;
        assert_eq!(
            m.seed(&other),
            ProcessChange::Insert(NewProcess {
                id: 2,
                pid: 20,
                start_mono_ns: 1,
                parent_id: Some(1),
                ppid: 10,
                origin: ProcessOrigin::Seeded,
                comm: Some("sh".into()),
                argv: Some(r#"["sh"]"#.into()),
                cwd: Some("/w".into()),
                exe: Some("/bin/sh".into()),
                uid: Some(1000),
                gid: Some(1000),
            })
        );
    }

    /// A seeded `sh` in /w: cd sub, write a.txt, fork; the child dups the
    /// fd, closes it, opens b, execs ls, truncates through the dup, exits.
    fn fork_scenario() -> Vec<Event> {
        let o_wronly_creat = 0o101;
        vec![
            sys(10, 10, op::CHDIR, 0, [0; 6], "sub"),
            sys(
                10,
                11,
                op::OPENAT,
                3,
                [AT_FDCWD, 0, o_wronly_creat, 0o644, 0, 0],
                "a.txt",
            ),
            Event {
                header: header(10, 12, EventKind::Fork),
                detail: Detail::Fork {
                    child_pid: 11,
                    child_tid: 11,
                    cgroup_id: 0,
                },
            },
            sys(11, 13, op::DUP2, 5, [3, 5, 0, 0, 0, 0], ""),
            sys(11, 14, op::CLOSE, 0, [3, 0, 0, 0, 0, 0], ""),
            sys(11, 15, op::OPENAT, 3, [AT_FDCWD, 0, 0, 0, 0, 0], "b"),
            Event {
                header: header(11, 16, EventKind::Exec),
                detail: Detail::Exec {
                    ok: true,
                    errno: 0,
                    old_tid: 11,
                    filename: "/bin/ls".into(),
                    argc: 1,
                    argv: vec!["ls".into()],
                    argv_truncated: false,
                    argv_incomplete: false,
                    cwd: complete("/w/sub"),
                    exe: Some(complete("/usr/bin/ls")),
                    exe_dev: 8,
                    exe_ino: 99,
                    cgroup_id: 0,
                    ns_pid: None,
                },
            },
            sys(11, 17, op::FTRUNCATE, 0, [5, 0, 0, 0, 0, 0], ""),
            Event {
                header: header(11, 18, EventKind::Exit),
                detail: Detail::Exit {
                    exit_code: Some(0),
                    signal: None,
                    core_dumped: false,
                },
            },
        ]
    }

    fn fork_scenario_steps(events: &[Event]) -> Vec<Step<'_>> {
        let mut m = ProcessModel::default();
        assert!(matches!(
            m.seed(&seed()),
            ProcessChange::Insert(NewProcess { id: 1, .. })
        ));
        m.steps(events)
    }

    #[test]
    fn cgroups_the_kernel_read_are_noted_for_the_child_the_exec_and_an_unseen_parent() {
        // From the fork on, without a seed: pid 10 is first seen by its
        // fork (as a process that joined by its container's cgroup is), so
        // the fork says its cgroup too.
        let mut events = fork_scenario().split_off(2);
        let Detail::Fork { cgroup_id, .. } = &mut events[0].detail else {
            panic!("a fork")
        };
        *cgroup_id = 77;
        let Detail::Exec {
            cgroup_id, ns_pid, ..
        } = &mut events[4].detail
        else {
            panic!("an exec")
        };
        *cgroup_id = 78;
        *ns_pid = Some((4026532180, 7));
        let mut m = ProcessModel::default();
        let noted: Vec<ProcessChange> = m
            .steps(&events)
            .into_iter()
            .filter_map(|s| match s {
                Step::Process(c @ ProcessChange::InCgroup { .. }) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(
            noted,
            vec![
                ProcessChange::InCgroup {
                    id: 1,
                    pid: 10,
                    cgroup_id: 77,
                    at_ns: 12,
                    ns_pid: None,
                },
                ProcessChange::InCgroup {
                    id: 2,
                    pid: 11,
                    cgroup_id: 77,
                    at_ns: 12,
                    ns_pid: None,
                },
                ProcessChange::InCgroup {
                    id: 2,
                    pid: 11,
                    cgroup_id: 78,
                    at_ns: 16,
                    ns_pid: Some((4026532180, 7)),
                },
            ]
        );
        // A cgroup the kernel did not read (0) notes nothing.
        let plain = fork_scenario();
        let mut m = ProcessModel::default();
        assert!(
            !m.steps(&plain)
                .iter()
                .any(|s| matches!(s, Step::Process(ProcessChange::InCgroup { .. })))
        );
    }

    #[test]
    fn fork_copies_the_parent_s_row_and_exec_and_exit_change_the_child_s() {
        let events = fork_scenario();
        let steps = fork_scenario_steps(&events);
        let ls = r#"["ls"]"#.to_string();
        assert_eq!(
            changes(&steps),
            vec![
                ProcessChange::Insert(NewProcess {
                    id: 2,
                    pid: 11,
                    start_mono_ns: 12,
                    parent_id: Some(1),
                    ppid: 10,
                    origin: ProcessOrigin::Fork,
                    comm: Some("sh".into()),
                    argv: Some(r#"["sh"]"#.into()),
                    cwd: Some("/w".into()),
                    exe: Some("/bin/sh".into()),
                    uid: Some(1000),
                    gid: Some(1000),
                }),
                ProcessChange::Exec {
                    id: 2,
                    argv: ls.clone(),
                    argv_truncated: false,
                    cwd: "/w/sub".into(),
                    exe: Some("/usr/bin/ls".into()),
                    comm: "sh".into(),
                    uid: 1000,
                    gid: 1000,
                },
                ProcessChange::Exit {
                    id: 2,
                    end_mono_ns: 18,
                    exit_code: Some(0),
                    signal: None,
                    core_dumped: false,
                },
            ]
        );
    }

    #[test]
    fn fork_copies_cwd_and_fds_chdir_dup_close_and_exec_follow() {
        let events = fork_scenario();
        let steps = fork_scenario_steps(&events);
        let ls = r#"["ls"]"#.to_string();
        let mut open_a = resolved(file("openat", 3, Some(3), "/w/sub/a.txt"), "a.txt");
        open_a.sys.flags = Some("write,create".into());
        open_a.sys.mode = Some(0o644);
        let mut open_b = resolved(file("openat", 3, Some(3), "/w/sub/b"), "b");
        open_b.sys.flags = Some("read".into());
        let mut truncate = file("ftruncate", 0, Some(5), "/w/sub/a.txt");
        truncate.sys.path_status = Some(PathStatus::Resolved);
        let exec = EventFields {
            filename: Some("/bin/ls".into()),
            argv: Some(ls),
            argc: Some(1),
            argv_truncated: Some(false),
            argv_incomplete: Some(false),
            cwd: Some("/w/sub".into()),
            cwd_status: Some(WalkStatus::Complete),
            exe: Some("/usr/bin/ls".into()),
            exe_status: Some(WalkStatus::Complete),
            result: Some(0),
            sys: SysRecord {
                real_path: Some("/usr/bin/ls".into()),
                real_path_status: Some(WalkStatus::Complete),
                dev: Some(8),
                ino: Some(99),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            rows(&steps),
            vec![
                (1, resolved(file("chdir", 0, None, "/w/sub"), "sub")),
                (1, open_a),
                (
                    1,
                    EventFields {
                        child_pid: Some(11),
                        child_process_id: Some(2),
                        ..Default::default()
                    }
                ),
                // The child's fd 3 is the parent's, copied at fork.
                (2, file("dup2", 5, Some(5), "/w/sub/a.txt")),
                (2, file("close", 0, Some(3), "/w/sub/a.txt")),
                // Relative to the cwd the parent had changed to before the fork.
                (2, open_b),
                (2, exec),
                // fd 5 (dup2: no close-on-exec) survives the exec.
                (2, truncate),
                (
                    2,
                    EventFields {
                        exit_code: Some(0),
                        core_dumped: Some(false),
                        ..Default::default()
                    }
                ),
            ]
        );
        let kinds: Vec<&str> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Event(r) => Some(r.kind),
                Step::Process(_) | Step::Tls { .. } => None,
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "chdir",
                "openat",
                "fork",
                "dup2",
                "close",
                "openat",
                "exec",
                "ftruncate",
                "exit"
            ]
        );
    }

    #[test]
    fn a_failed_call_repeated_back_to_back_is_one_row() {
        let mut m = ProcessModel::default();
        m.seed(&seed());
        let probe = |t| sys(10, t, op::OPENAT, -2, [AT_FDCWD, 0, 0, 0, 0, 0], "missing");
        let events = vec![
            probe(1),
            probe(2),
            probe(3),
            sys(10, 4, op::CHDIR, 0, [0; 6], "/"),
        ];
        let steps = m.steps(&events);
        let repeats: Vec<(u64, Option<i64>)> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Event(r) => Some((r.header.mono_ns, r.repeat)),
                Step::Process(_) | Step::Tls { .. } => None,
            })
            .collect();
        assert_eq!(repeats, vec![(1, Some(3)), (4, None)]);
    }
}
