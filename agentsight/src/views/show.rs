//! `agentsight show`: a readable summary of a capture — run facts, loss
//! (always printed, zero included), counts, and the process tree.

use std::{collections::HashMap, fmt::Write as _};

use crate::store::{
    Capture, StoreError,
    read::{ProcessIdentity, ProcessRecord},
};

fn signal_name(sig: i64) -> String {
    nix::sys::signal::Signal::try_from(sig as i32)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// Quotes an argument for display the way a shell user would type it.
fn shell_word(a: &str) -> String {
    if !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        a.to_owned()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

fn fmt_duration(ns: i64) -> String {
    let ms = ns as f64 / 1e6;
    if ms < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

/// What an unfinished capture cannot say: everything after its last stored
/// record is unknown (a SIGKILLed recorder loses what it held).
pub fn unknown_after(cap: &Capture) -> Result<String, StoreError> {
    Ok(match cap.last_event_wall_ns()? {
        Some(w) => format!(
            "UNKNOWN after {} (the last stored record): the recorder did not finish",
            crate::clock::rfc3339_ns(w.max(0) as u64)
        ),
        None => "UNKNOWN: the recorder did not finish and stored no record".to_owned(),
    })
}

pub fn summary(cap: &Capture) -> Result<String, StoreError> {
    let mut s = String::new();
    let complete = run_facts(cap, &mut s)?;
    // Loss first and prominently: an incomplete capture must not look whole.
    let exits_known = loss_line(cap, complete, &mut s)?;
    programs_line(cap, &mut s)?;
    let counts = cap.event_counts()?;
    let total: i64 = counts.iter().map(|(_, n)| n).sum();
    let _ = writeln!(
        s,
        "events    {total} ({})",
        counts
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let procs = cap.processes()?;
    let _ = writeln!(s, "processes {}", procs.len());
    activity(cap, &mut s)?;
    process_tree(&procs, exits_known, &mut s);
    Ok(s)
}

/// Capture, recording times, command and end reason; whether the capture
/// is complete.
fn run_facts(cap: &Capture, s: &mut String) -> Result<bool, StoreError> {
    let m = |k: &str| cap.meta(k).map(|v| v.unwrap_or_default());
    let _ = writeln!(s, "capture   {}", cap.path);
    let complete = m("complete")? == "true";
    let _ = writeln!(
        s,
        "recorded  {} → {}  on {} ({}){}",
        m("started_at")?,
        m("ended_at")?,
        m("host")?,
        m("kernel")?,
        if complete {
            ""
        } else {
            "  [INCOMPLETE: the recorder did not finish]"
        }
    );
    let command: Vec<String> = serde_json::from_str(&m("command")?).unwrap_or_default();
    if !command.is_empty() {
        let status = m("command_exit_status")?;
        let _ = writeln!(
            s,
            "command   {}{}",
            command
                .iter()
                .map(|a| shell_word(a))
                .collect::<Vec<_>>()
                .join(" "),
            if status.is_empty() {
                String::new()
            } else {
                format!("  → exit status {status}")
            }
        );
    }
    let reason = m("end_reason")?;
    if !reason.is_empty() {
        let _ = writeln!(s, "ended     {reason}");
    }
    Ok(complete)
}

/// The LOSS line (always, zero included); whether every exit record is
/// known to be there.
fn loss_line(cap: &Capture, complete: bool, s: &mut String) -> Result<bool, StoreError> {
    let all_loss = cap.loss()?;
    let (loss, not_stored): (Vec<_>, Vec<_>) = all_loss
        .iter()
        .cloned()
        .partition(|(k, _)| !k.starts_with(crate::store::MAX_SIZE_LOSS_PREFIX));
    let lost: u64 = loss.iter().map(|(_, n)| n).sum();
    let not_stored: u64 = not_stored.iter().map(|(_, n)| n).sum();
    let missing = cap.gap_missing()?;
    let detail: Vec<String> = loss
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        s,
        "LOSS      {lost} events lost in the kernel{}; {missing} missing by sequence number{}{}",
        if detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", detail.join(", "))
        },
        if not_stored > 0 {
            format!("; {not_stored} not stored (the capture reached --max-size)")
        } else {
            String::new()
        },
        if complete {
            String::new()
        } else {
            format!("; {}", unknown_after(cap)?)
        }
    );
    // Without every exit record, "no exit seen" does not mean "still running".
    Ok(complete && !loss.iter().any(|(k, n)| k == "exit" && *n > 0) && missing == 0)
}

/// Kernel programs attached and failed.
fn programs_line(cap: &Capture, s: &mut String) -> Result<(), StoreError> {
    let programs: Vec<serde_json::Value> =
        serde_json::from_str(&cap.meta("programs")?.unwrap_or_default()).unwrap_or_default();
    let failed: Vec<String> = programs
        .iter()
        .filter(|p| p["attached"] == false)
        .map(|p| {
            format!(
                "{} ({})",
                p["name"].as_str().unwrap_or("?"),
                p["error"].as_str().unwrap_or("?")
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "programs  {} attached, {} failed{}",
        programs.len() - failed.len(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {}", failed.join("; "))
        }
    );
    Ok(())
}

/// The process tree, one line per process: argv, duration, outcome,
/// origin, and the cwd where it differs from its parent's.
fn process_tree(procs: &[ProcessRecord], exits_known: bool, s: &mut String) {
    let ids: std::collections::HashSet<i64> = procs.iter().map(|p| p.id).collect();
    let by_id: HashMap<i64, &ProcessRecord> = procs.iter().map(|p| (p.id, p)).collect();
    let mut kids: HashMap<Option<i64>, Vec<&ProcessRecord>> = HashMap::new();
    for p in procs {
        let parent = p.parent_id.filter(|id| ids.contains(id));
        kids.entry(parent).or_default().push(p);
    }
    let _ = writeln!(s, "\nprocess tree");
    let mut stack: Vec<(&ProcessRecord, usize)> = kids
        .get(&None)
        .map(|v| v.iter().rev().map(|p| (*p, 0)).collect())
        .unwrap_or_default();
    let mut last_cwd: HashMap<usize, Option<String>> = HashMap::new();
    while let Some((p, depth)) = stack.pop() {
        let cmd = if p.argv.is_empty() {
            format!("[{}]", p.comm.as_deref().unwrap_or_default())
        } else {
            p.argv
                .iter()
                .map(|a| shell_word(a))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let outcome = match (p.exit_code, p.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(sig)) => format!("killed by {}", signal_name(sig)),
            _ if exits_known => "still running at end".to_owned(),
            _ => "no exit seen (the capture may have lost it)".to_owned(),
        };
        let dur = p
            .end_mono_ns
            .map(|e| fmt_duration(e - p.start_mono_ns))
            .unwrap_or_else(|| "—".into());
        let cwd_note = match (&p.cwd, last_cwd.get(&depth.saturating_sub(1))) {
            (Some(c), Some(Some(pc))) if c == pc => String::new(),
            (Some(c), _) => format!("  (in {c})"),
            _ => String::new(),
        };
        last_cwd.insert(depth, p.cwd.clone());
        let origin = match (p.origin.as_str(), p.exec_count) {
            // A fork that never exec'd still shows its parent's argv: say so.
            ("fork", 0) => " [forked, no exec]".to_owned(),
            ("fork", _) => String::new(),
            (other, _) => format!(" [{other}]"),
        };
        // The container, at a tree's root and wherever it changes.
        let parent_container = p
            .parent_id
            .and_then(|id| by_id.get(&id))
            .map(|q| q.identity.container_id.as_deref());
        let container_note =
            if depth == 0 || parent_container != Some(p.identity.container_id.as_deref()) {
                container_note(&p.identity)
            } else {
                String::new()
            };
        // `record --agent`'s label: the process it recognised as the agent.
        let agent_note = p
            .agent
            .as_deref()
            .map(|a| format!(" [agent {a}]"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "{}{} {}  [{dur}, {outcome}]{origin}{agent_note}{cwd_note}{container_note}",
            "  ".repeat(depth + 1),
            p.pid,
            cmd
        );
        if let Some(children) = kids.get(&Some(p.id)) {
            for c in children.iter().rev() {
                stack.push((c, depth + 1));
            }
        }
    }
}

/// `  [container NAME ID12 image IMAGE, pid N in it]`, or nothing for a
/// host process.
fn container_note(id: &ProcessIdentity) -> String {
    let Some(cid) = id.container_id.as_deref() else {
        return String::new();
    };
    let short: String = cid.chars().take(12).collect();
    let mut note = format!(
        "  [container {} {short}",
        id.container_name.as_deref().unwrap_or("?")
    );
    if let Some(image) = &id.container_image {
        let _ = write!(note, " image {image}");
    }
    if let Some(n) = id.ns_pid {
        let _ = write!(note, ", pid {n} in it");
    }
    note.push(']');
    note
}

/// Top files written and read, network destinations and DNS names.
fn activity(cap: &Capture, s: &mut String) -> Result<(), StoreError> {
    let rows = |sql: &str| -> Result<Vec<(String, i64, i64)>, StoreError> {
        let mut st = cap.conn.prepare(sql).map_err(|e| cap.query_err(e))?;
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(|r| r.collect())
            .map_err(|e| cap.query_err(e))
    };
    let sections = [
        (
            "files written (bytes, writes)",
            "SELECT path, SUM(bytes), SUM(count) FROM events
             WHERE kind = 'io' AND path IS NOT NULL AND bytes > 0
             GROUP BY path ORDER BY SUM(bytes) DESC, path LIMIT 10",
        ),
        (
            "files read (bytes, reads)",
            "SELECT path, SUM(read_bytes), SUM(read_count) FROM events
             WHERE kind = 'io' AND path IS NOT NULL AND read_bytes > 0
             GROUP BY path ORDER BY SUM(read_bytes) DESC, path LIMIT 10",
        ),
        (
            "files changed (created/deleted/renamed; operations, failed)",
            "SELECT kind || ' ' || COALESCE(path, path_as_given, '?'), COUNT(*), SUM(result < 0) FROM events
             WHERE kind IN ('unlink','unlinkat','rmdir','rename','renameat','renameat2','mkdir','mkdirat',
                            'truncate','ftruncate','symlink','symlinkat','link','linkat','creat')
                OR (kind IN ('open','openat','openat2') AND flags LIKE '%create%')
             GROUP BY 1 ORDER BY MIN(mono_ns) LIMIT 15",
        ),
        (
            "opened under another name (path as resolved → file the kernel opened; opens, 0)",
            "SELECT path || ' → ' || real_path, COUNT(*), 0 FROM events
             WHERE real_path IS NOT NULL AND path IS NOT NULL AND real_path != path
               AND path NOT LIKE '/proc/self/%' AND path NOT LIKE '/proc/thread-self/%'
             GROUP BY 1 ORDER BY MIN(mono_ns) LIMIT 10",
        ),
        (
            "network destinations (connects, failed)",
            "SELECT family || ' ' || addr || COALESCE(':' || port, ''), COUNT(*),
                    SUM(result < 0 AND errno != 'EINPROGRESS') FROM events
             WHERE kind IN ('connect','sendto','sendmsg','sendmmsg') AND addr IS NOT NULL
             GROUP BY 1 ORDER BY COUNT(*) DESC LIMIT 10",
        ),
        (
            "DNS names queried (queries)",
            "SELECT query, COUNT(*), 0 FROM events WHERE query IS NOT NULL
             GROUP BY query ORDER BY COUNT(*) DESC LIMIT 10",
        ),
    ];
    for (title, sql) in sections {
        let r = rows(sql)?;
        let _ = writeln!(s, "\n{title}");
        if r.is_empty() {
            let _ = writeln!(s, "  (none)");
        }
        for (what, a, b) in r {
            let _ = writeln!(s, "  {what}  ({a}, {b})");
        }
    }
    Ok(())
}
