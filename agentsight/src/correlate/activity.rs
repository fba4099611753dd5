//! Phase 3, activity loading: the events of the bound trees inside their
//! bindings' spans that correlate attributes (execs, file changes, claimed
//! reads, connections), as [`Activity`] rows in time order.

use std::collections::{HashMap, HashSet};

use super::{
    CorrelateError,
    report::{Activity, Blocked, Op},
    view::{BoundTree, CaptureView},
};
use crate::enforce::DenialKind;
use crate::store::enforcement::DenialRow;
use crate::{
    clock::rfc3339_ns,
    matching::ProcTable,
    store::{
        events::{Access, EventKind},
        read::{EventFilter, EventRecord},
    },
};

/// Event kinds correlate looks at; everything else (io, close, dup…) is
/// detail that `export` still shows.
const KINDS: [EventKind; 23] = [
    EventKind::Exec,
    // Only the execs `record --enforce` refused (see `Denials`).
    EventKind::ExecFailed,
    EventKind::Open,
    EventKind::Openat,
    EventKind::Openat2,
    EventKind::Creat,
    EventKind::Unlink,
    EventKind::Unlinkat,
    EventKind::Rmdir,
    EventKind::Mkdir,
    EventKind::Mkdirat,
    EventKind::Rename,
    EventKind::Renameat,
    EventKind::Renameat2,
    EventKind::Link,
    EventKind::Linkat,
    EventKind::Symlink,
    EventKind::Symlinkat,
    EventKind::Truncate,
    EventKind::Ftruncate,
    EventKind::Connect,
    EventKind::Bind,
    EventKind::Listen,
];

/// Where system libraries and pseudo-files live.
const SYSTEM_PREFIXES: [&str; 7] = [
    "/usr/", "/lib", "/etc/", "/proc/", "/sys/", "/dev/", "/opt/",
];

/// Members of the bound trees (by process index), each limited to its
/// bindings' span `[from, to]` on the monotonic clock.
pub(super) struct Spans(pub HashMap<usize, (u64, u64)>);

impl Spans {
    pub fn of(bound: &[BoundTree], procs: &ProcTable) -> Self {
        let mut span_of: HashMap<usize, (u64, u64)> = HashMap::new();
        for b in bound {
            for m in procs.subtree(b.root) {
                let e = span_of
                    .entry(m)
                    .or_insert((b.from_mono_ns, b.to_mono_ns.unwrap_or(u64::MAX)));
                e.0 = e.0.min(b.from_mono_ns);
                e.1 = e.1.max(b.to_mono_ns.unwrap_or(u64::MAX));
            }
        }
        Spans(span_of)
    }
}

/// The op of an event of one of [`KINDS`], by the store's access class
/// (an open without flags is a write: it cannot be shown to be a read).
/// A failed exec ran nothing: it is no op unless a denial names it.
fn op_of(kind: &str, flags: Option<&str>) -> Option<Op> {
    let kind = EventKind::from_word(kind);
    if !KINDS.contains(&kind) || kind == EventKind::ExecFailed {
        return None;
    }
    Some(match kind.access(flags)? {
        Access::Read => Op::Read,
        Access::Write => Op::Write,
        Access::Delete => Op::Delete,
        Access::Rename => Op::Rename,
        Access::Mkdir => Op::Mkdir,
        Access::Link => Op::Link,
        Access::Exec => Op::Exec,
        Access::Connect => Op::Connect,
        Access::Bind => Op::Bind,
        Access::Listen => Op::Listen,
        Access::Send | Access::Dns => return None,
    })
}

/// Pseudo-files and devices are never activity worth listing.
fn noise_path(p: &str) -> bool {
    p.starts_with("/proc/") || p.starts_with("/sys/") || p.starts_with("/dev/") || p == "/dev"
}

/// The prefixes whose plain reads the query skips (library and pseudo-file
/// reads: most of a capture, never activity), unless a call names such a
/// path.
fn skip_system_reads(claimed: &HashSet<&str>) -> &'static [&'static str] {
    let system_claimed = claimed
        .iter()
        .any(|p| SYSTEM_PREFIXES.iter().any(|s| p.starts_with(s)));
    if system_claimed {
        &[]
    } else {
        &SYSTEM_PREFIXES
    }
}

/// How far apart a denial (timed by the decider, after its verdict) and
/// the failed call it refused (timed at the syscall's exit) may be.
const DENIAL_SLACK_NS: u64 = 100_000_000;

/// The accesses `record --enforce` refused, per process row, each matched
/// once to the failed call it stands for (the nearest in time of the same
/// process, an open for a read, a failed exec for an exec, `EPERM`).
struct Denials(HashMap<i64, Vec<DenialRow>>);

impl Denials {
    fn of(rows: Vec<DenialRow>) -> Self {
        let mut by: HashMap<i64, Vec<DenialRow>> = HashMap::new();
        for d in rows {
            if let Some(p) = d.process_id {
                by.entry(p).or_default().push(d);
            }
        }
        Denials(by)
    }

    /// Takes the denial `ev` (a failed call) stands for, if any.
    fn take(&mut self, ev: &EventRecord) -> Option<Blocked> {
        let kind = match (ev.errno.as_deref()?, EventKind::from_word(&ev.kind)) {
            ("EPERM", EventKind::ExecFailed) => DenialKind::Exec,
            ("EPERM", k) if k.is_open() => DenialKind::Read,
            ("EPERM", EventKind::Connect) => DenialKind::Connect,
            ("EPERM", EventKind::Sendto | EventKind::Sendmsg | EventKind::Sendmmsg) => {
                DenialKind::Send
            }
            // Landlock's refusal of a write (EXDEV: a link or rename
            // across the roots).
            ("EACCES" | "EXDEV", k)
                if k.access(ev.flags.as_deref()).is_some_and(|a| {
                    matches!(
                        a,
                        Access::Write
                            | Access::Delete
                            | Access::Rename
                            | Access::Mkdir
                            | Access::Link
                    )
                }) =>
            {
                DenialKind::Write
            }
            _ => return None,
        };
        let list = self.0.get_mut(&ev.process_id?)?;
        let mono = ev.mono_ns.max(0) as u64;
        let (i, _) = list
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == kind && d.mono_ns.abs_diff(mono) <= DENIAL_SLACK_NS)
            .min_by_key(|(_, d)| d.mono_ns.abs_diff(mono))?;
        let d = list.swap_remove(i);
        Some(Blocked {
            denial_id: d.id,
            rule: d.rule,
            mechanism: d.mechanism,
        })
    }
}

/// The activity of the bound trees inside their spans, in time order.
pub(super) fn load(
    view: &CaptureView,
    spans: &Spans,
    claimed: &HashSet<&str>,
) -> Result<Vec<Activity>, CorrelateError> {
    let mut acts: Vec<Activity> = Vec::new();
    if spans.0.is_empty() {
        return Ok(acts);
    }
    let lo = spans.0.values().map(|s| s.0).min().unwrap_or(0);
    let hi = spans.0.values().map(|s| s.1).max().unwrap_or(0);
    let kinds: Vec<&str> = KINDS.iter().map(EventKind::as_str).collect();
    let filter = EventFilter {
        kinds: &kinds,
        skip_reads_under: skip_system_reads(claimed),
    };
    let mut denials = Denials::of(view.cap.enforcement_denials()?);
    view.cap.events_in_window(lo, hi, &filter, |ev| {
        let blocked = denials.take(&ev);
        if let Some(mut a) = activity_of(ev, &view.procs, spans, claimed, blocked) {
            a.container = view.containers.get(&a.process_id).cloned();
            acts.push(a);
        }
        true
    })?;
    Ok(acts)
}

/// The activity an event stands for, if it is one: a process of a bound
/// tree inside its span, an op correlate looks at, and not noise (a unix
/// socket, a failed file call, a pseudo-file, a read no call names) — or
/// an access `record --enforce` refused (`blocked`), always kept.
fn activity_of(
    ev: EventRecord,
    procs: &ProcTable,
    spans: &Spans,
    claimed: &HashSet<&str>,
    blocked: Option<Blocked>,
) -> Option<Activity> {
    let pid_row = ev.process_id?;
    let &pi = procs.by_id.get(&pid_row)?;
    let &(from, to) = spans.0.get(&pi)?;
    let mono = ev.mono_ns.max(0) as u64;
    if mono < from || mono > to {
        return None;
    }
    let op = match &blocked {
        Some(_) if ev.kind == EventKind::ExecFailed.as_str() => Op::Exec,
        Some(_) => Op::Read,
        None => op_of(&ev.kind, ev.flags.as_deref())?,
    };
    if blocked.is_some() {
        // Refused before it happened: shown whatever its path.
    } else if op.is_network() {
        if ev.family.as_deref() == Some("unix") || ev.family.is_none() {
            return None;
        }
    } else if op != Op::Exec {
        // Failed file calls changed nothing.
        if ev.result.is_some_and(|r| r < 0) {
            return None;
        }
        let p = ev.path.as_deref()?;
        if noise_path(p) || (op == Op::Read && !claimed.contains(p)) {
            return None;
        }
    }
    let real_path = ev
        .real_path
        .filter(|rp| ev.path.as_deref() != Some(rp.as_str()));
    Some(Activity {
        event_id: ev.id,
        ts: rfc3339_ns(ev.wall_ns.max(0) as u64),
        mono_ns: mono,
        pid: ev.pid as u32,
        process_id: pid_row,
        comm: ev.comm.unwrap_or_default(),
        op,
        argv: ev.argv.and_then(|a| serde_json::from_str(&a).ok()),
        path: ev.path,
        old_path: ev.old_path,
        real_path,
        addr: ev.addr,
        port: ev.port.map(|p| p as u16),
        result: ev.result,
        errno: ev.errno,
        exit_code: None,
        reason: None,
        late: false,
        by: None,
        container: None,
        blocked,
        wall_ms: ev.wall_ns.div_euclid(1_000_000),
        proc_ix: pi,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_map_to_ops() {
        assert_eq!(op_of("openat", Some("read,cloexec")), Some(Op::Read));
        assert_eq!(op_of("openat", Some("write,create")), Some(Op::Write));
        // Flag words as the capture stores them (`capture::syscalls::
        // open_flags`), parsed as words: a truncating open writes.
        assert_eq!(op_of("open", Some("read,truncate")), Some(Op::Write));
        assert_eq!(op_of("renameat2", None), Some(Op::Rename));
        assert_eq!(op_of("symlink", None), Some(Op::Link));
        assert_eq!(op_of("rmdir", None), Some(Op::Delete));
        assert_eq!(op_of("listen", None), Some(Op::Listen));
        assert_eq!(op_of("close", None), None);
        // Not a kind correlate reads (a failed exec ran nothing).
        assert_eq!(op_of("exec_failed", None), None);
        // The store's classification (the named fix): an open whose flags
        // are missing (an old or damaged capture) is a write, as audit
        // judges it; it was a read here. Flags are words: `append` writes.
        assert_eq!(op_of("openat", None), Some(Op::Write));
        assert_eq!(op_of("openat", Some("read,append")), Some(Op::Write));
        assert_eq!(op_of("openat", Some("")), Some(Op::Read));
        assert!(noise_path("/proc/self/fd/3") && noise_path("/dev"));
        assert!(!noise_path("/devices.txt"));
    }

    #[test]
    fn system_reads_are_skipped_unless_a_call_names_one() {
        let none = HashSet::new();
        assert_eq!(skip_system_reads(&none), SYSTEM_PREFIXES);
        let claimed: HashSet<&str> = ["/etc/hosts"].into_iter().collect();
        assert!(skip_system_reads(&claimed).is_empty());
    }
}
