//! Phase 3, activity loading: the events of the bound trees inside their
//! bindings' spans that correlate attributes (execs, file changes, claimed
//! reads, connections), as [`Activity`] rows in time order.

use std::collections::{HashMap, HashSet};

use super::{
    CorrelateError,
    report::{Activity, Op},
    view::{BoundTree, CaptureView},
};
use crate::{clock::rfc3339_ns, matching::ProcTable};

/// Event kinds correlate looks at; everything else (io, close, dup…) is
/// detail that `export` still shows.
const KINDS: &str = "'exec','open','openat','openat2','creat','unlink','unlinkat','rmdir','mkdir','mkdirat',\
'rename','renameat','renameat2','link','linkat','symlink','symlinkat','truncate','ftruncate','connect','bind','listen'";

/// Where system libraries and pseudo-files live.
const SYSTEM_PREFIXES: [&str; 7] = [
    "/usr/", "/lib", "/etc/", "/proc/", "/sys/", "/dev/", "/opt/",
];

/// The columns [`activity_of_row`] reads, in its order.
const COLUMNS: &str = "id, mono_ns, wall_ns, kind, pid, process_id, comm, argv, path, old_path, \
flags, result, errno, family, addr, port, real_path";

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

fn op_of(kind: &str, flags: Option<&str>) -> Option<Op> {
    Some(match kind {
        "exec" => Op::Exec,
        "open" | "openat" | "openat2" => {
            let f = flags.unwrap_or("");
            if f.contains("write") || f.contains("create") || f.contains("trunc") {
                Op::Write
            } else {
                Op::Read
            }
        }
        "creat" | "truncate" | "ftruncate" => Op::Write,
        "unlink" | "unlinkat" | "rmdir" => Op::Delete,
        "mkdir" | "mkdirat" => Op::Mkdir,
        "rename" | "renameat" | "renameat2" => Op::Rename,
        "link" | "linkat" | "symlink" | "symlinkat" => Op::Link,
        "connect" => Op::Connect,
        "bind" => Op::Bind,
        "listen" => Op::Listen,
        _ => return None,
    })
}

/// Pseudo-files and devices are never activity worth listing.
fn noise_path(p: &str) -> bool {
    p.starts_with("/proc/") || p.starts_with("/sys/") || p.starts_with("/dev/") || p == "/dev"
}

/// The SQL condition that skips library and pseudo-file reads (most of a
/// capture, never activity) unless a call names such a path.
fn skip_system_reads(claimed: &HashSet<&str>) -> String {
    let system_claimed = claimed
        .iter()
        .any(|p| SYSTEM_PREFIXES.iter().any(|s| p.starts_with(s)));
    if system_claimed {
        return String::new();
    }
    let prefixes: Vec<String> = SYSTEM_PREFIXES
        .iter()
        .map(|s| format!("path LIKE '{s}%'"))
        .collect();
    format!(
        "AND NOT (kind IN ('open','openat','openat2') AND flags NOT LIKE '%write%' \
         AND flags NOT LIKE '%create%' AND flags NOT LIKE '%trunc%' AND ({}))",
        prefixes.join(" OR ")
    )
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
    let sql = format!(
        "SELECT {COLUMNS}
             FROM events WHERE mono_ns BETWEEN ?1 AND ?2 AND kind IN ({KINDS}) {} ORDER BY mono_ns, id",
        skip_system_reads(claimed)
    );
    let mut st = view.conn.prepare(&sql).map_err(|e| view.qe(e))?;
    let mut rows = st
        .query([
            lo.min(i64::MAX as u64) as i64,
            hi.min(i64::MAX as u64) as i64,
        ])
        .map_err(|e| view.qe(e))?;
    while let Some(r) = rows.next().map_err(|e| view.qe(e))? {
        if let Some(a) = activity_of_row(r, &view.procs, spans, claimed).map_err(|e| view.qe(e))? {
            acts.push(a);
        }
    }
    Ok(acts)
}

/// The activity an event row (of [`COLUMNS`]) stands for, if it is one: a
/// process of a bound tree inside its span, an op correlate looks at, and
/// not noise (a unix socket, a failed file call, a pseudo-file, a read no
/// call names).
fn activity_of_row(
    r: &rusqlite::Row,
    procs: &ProcTable,
    spans: &Spans,
    claimed: &HashSet<&str>,
) -> rusqlite::Result<Option<Activity>> {
    let Some(pid_row) = r.get::<_, Option<i64>>(5)? else {
        return Ok(None);
    };
    let Some(&pi) = procs.by_id.get(&pid_row) else {
        return Ok(None);
    };
    let Some(&(from, to)) = spans.0.get(&pi) else {
        return Ok(None);
    };
    let mono = r.get::<_, i64>(1)?.max(0) as u64;
    if mono < from || mono > to {
        return Ok(None);
    }
    let kind: String = r.get(3)?;
    let flags: Option<String> = r.get(10)?;
    let Some(op) = op_of(&kind, flags.as_deref()) else {
        return Ok(None);
    };
    let result: Option<i64> = r.get(11)?;
    let family: Option<String> = r.get(13)?;
    let path: Option<String> = r.get(8)?;
    if op.is_network() {
        if family.as_deref() == Some("unix") || family.is_none() {
            return Ok(None);
        }
    } else if op != Op::Exec {
        // Failed file calls changed nothing.
        if result.is_some_and(|r| r < 0) {
            return Ok(None);
        }
        let Some(p) = path.as_deref() else {
            return Ok(None);
        };
        if noise_path(p) || (op == Op::Read && !claimed.contains(p)) {
            return Ok(None);
        }
    }
    let wall_ns: i64 = r.get(2)?;
    let argv: Option<String> = r.get(7)?;
    let real_path: Option<String> = r.get(16)?;
    let real_path = real_path.filter(|rp| path.as_deref() != Some(rp.as_str()));
    Ok(Some(Activity {
        event_id: r.get(0)?,
        ts: rfc3339_ns(wall_ns.max(0) as u64),
        mono_ns: mono,
        pid: r.get::<_, i64>(4)? as u32,
        process_id: pid_row,
        comm: r.get(6)?,
        op,
        argv: argv.and_then(|a| serde_json::from_str(&a).ok()),
        path,
        old_path: r.get(9)?,
        real_path,
        addr: r.get(14)?,
        port: r.get::<_, Option<i64>>(15)?.map(|p| p as u16),
        result,
        errno: r.get(12)?,
        exit_code: None,
        reason: None,
        late: false,
        by: None,
        wall_ms: wall_ns.div_euclid(1_000_000),
        proc_ix: pi,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_map_to_ops() {
        assert_eq!(op_of("openat", Some("read,cloexec")), Some(Op::Read));
        assert_eq!(op_of("openat", Some("write,create")), Some(Op::Write));
        assert_eq!(op_of("open", Some("rdwr,trunc")), Some(Op::Write));
        assert_eq!(op_of("renameat2", None), Some(Op::Rename));
        assert_eq!(op_of("symlink", None), Some(Op::Link));
        assert_eq!(op_of("rmdir", None), Some(Op::Delete));
        assert_eq!(op_of("listen", None), Some(Op::Listen));
        assert_eq!(op_of("close", None), None);
        assert!(noise_path("/proc/self/fd/3") && noise_path("/dev"));
        assert!(!noise_path("/devices.txt"));
    }

    #[test]
    fn system_reads_are_skipped_unless_a_call_names_one() {
        let none = HashSet::new();
        assert!(skip_system_reads(&none).contains("path LIKE '/usr/%'"));
        let claimed: HashSet<&str> = ["/etc/hosts"].into_iter().collect();
        assert_eq!(skip_system_reads(&claimed), "");
    }
}
