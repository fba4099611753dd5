//! `agentsight show`: a readable summary of a capture — run facts, loss
//! (always printed, zero included), counts, and the process tree.

use std::{collections::HashMap, fmt::Write as _};

// Every recorded string is shown through `v` (control, bidi and format
// characters escaped): a file name must not be able to start a line of ours.
use crate::rawtext::visible as v;
pub use crate::store::run::{ActivitySection, CountRow};
use crate::{
    store::{
        Capture, StoreError,
        meta::{Loss, RunMeta},
        read::{ProcessIdentity, ProcessRecord, SessionMessage, ms_to_ns},
    },
    views::run::RunModel,
};

fn signal_name(sig: i64) -> String {
    nix::sys::signal::Signal::try_from(sig as i32)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// Quotes an argument for display the way a shell user would type it;
/// what would act on a terminal is shown escaped ([`v`]).
fn shell_word(a: &str) -> String {
    if !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        a.to_owned()
    } else {
        format!("'{}'", v(&a.replace('\'', "'\\''")))
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
    let run = RunModel::load(cap)?;
    run_facts(cap, &run.meta, &mut s);
    // Loss first and prominently: an incomplete capture must not look whole.
    let loss = LossStatement::of(&run)?;
    let _ = writeln!(s, "LOSS      {}", loss.line());
    programs_line(&run.meta, &mut s);
    let counts = cap.event_counts()?;
    let total: i64 = counts.iter().map(|(_, n)| n).sum();
    let _ = writeln!(
        s,
        "events    {total} ({})",
        counts
            .iter()
            .map(|(k, n)| format!("{} {n}", v(k)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let procs = cap.processes()?;
    let _ = writeln!(s, "processes {}", procs.len());
    activity(cap, &mut s)?;
    session_messages(cap, &run.meta, &procs, &mut s)?;
    wire(cap, &mut s)?;
    enforcement(cap, &procs, &mut s)?;
    // Without every exit record, "no exit seen" does not mean "still running".
    process_tree(&procs, loss.exits_known, &mut s);
    Ok(s)
}

/// The command as a shell user would type it.
pub fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_word(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Capture, recording times, command and end reason.
fn run_facts(cap: &Capture, f: &RunMeta, s: &mut String) {
    let _ = writeln!(s, "capture   {}", v(&cap.path));
    let _ = writeln!(
        s,
        "recorded  {} → {}  on {} ({}){}",
        v(f.started_at.as_deref().unwrap_or_default()),
        v(f.ended_at.as_deref().unwrap_or_default()),
        v(f.host.as_deref().unwrap_or_default()),
        v(f.kernel.as_deref().unwrap_or_default()),
        if f.recorder_finished {
            ""
        } else {
            "  [INCOMPLETE: the recorder did not finish]"
        }
    );
    if !f.command.is_empty() {
        let _ = writeln!(
            s,
            "command   {}{}",
            command_line(&f.command),
            match f.command_exit_status {
                None => String::new(),
                Some(status) => format!("  → exit status {status}"),
            }
        );
    }
    if let Some(reason) = &f.end_reason {
        let _ = writeln!(s, "ended     {}", v(reason));
    }
}

/// The LOSS account as `show` and the report state it: the store's loss
/// counters and gaps, why storing stopped, and the unknown tail of an
/// unfinished capture. Zero is a fact too.
#[derive(Debug, Clone, Default)]
pub struct LossStatement {
    pub loss: Loss,
    /// Meta `storing_stopped`: "disk full at T, N events not stored".
    pub storing_stopped: Option<String>,
    /// For an unfinished capture: what cannot be known (see [`unknown_after`]).
    pub unknown: Option<String>,
    /// Every exit record is known to be there ("no exit seen" then means
    /// "still running at the end").
    pub exits_known: bool,
}

impl LossStatement {
    pub fn of(run: &RunModel) -> Result<Self, StoreError> {
        Ok(Self {
            loss: run.loss.clone(),
            storing_stopped: run.meta.storing_stopped.clone(),
            unknown: if run.meta.recorder_finished {
                None
            } else {
                Some(unknown_after(run.cap)?)
            },
            exits_known: run.exits_known(),
        })
    }

    /// Nothing lost, nothing missing, and the capture finished.
    pub fn is_zero(&self) -> bool {
        self.loss.lost_in_kernel() == 0
            && self.loss.missing_by_sequence == 0
            && self.loss.not_stored == 0
            && self.storing_stopped.is_none()
            && self.unknown.is_none()
    }

    /// The one-line account `show` prints after `LOSS`.
    pub fn line(&self) -> String {
        let l = &self.loss;
        let detail: Vec<String> = l
            .kernel_nonzero()
            .iter()
            .map(|(k, n)| format!("{} {n}", v(k)))
            .collect();
        format!(
            "{} events lost in the kernel{}; {} missing by sequence number{}{}{}",
            l.lost_in_kernel(),
            if detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", detail.join(", "))
            },
            l.missing_by_sequence,
            if l.not_stored > l.disk_full {
                format!(
                    "; {} not stored (the capture reached --max-size)",
                    l.not_stored - l.disk_full
                )
            } else {
                String::new()
            },
            match &self.storing_stopped {
                Some(why) => format!("; storing stopped: {why}"),
                None => String::new(),
            },
            match &self.unknown {
                Some(u) => format!("; {u}"),
                None => String::new(),
            }
        )
    }
}

/// Kernel programs attached and failed.
fn programs_line(meta: &RunMeta, s: &mut String) {
    let programs = &meta.programs;
    let failed: Vec<String> = programs
        .iter()
        .filter(|p| p.attached == Some(false))
        .map(|p| {
            format!(
                "{} ({})",
                v(p.name.as_deref().unwrap_or("?")),
                v(p.error.as_deref().unwrap_or("?"))
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
            format!("[{}]", v(p.comm.as_deref().unwrap_or_default()))
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
            (Some(c), _) => format!("  (in {})", v(c)),
            _ => String::new(),
        };
        last_cwd.insert(depth, p.cwd.clone());
        let origin = match (p.origin.as_str(), p.exec_count) {
            // A fork that never exec'd still shows its parent's argv: say so.
            ("fork", 0) => " [forked, no exec]".to_owned(),
            ("fork", _) => String::new(),
            (other, _) => format!(" [{}]", v(other)),
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
            .map(|a| format!(" [agent {}]", v(a)))
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
        "  [container {} {}",
        v(id.container_name.as_deref().unwrap_or("?")),
        v(&short)
    );
    if let Some(image) = &id.container_image {
        let _ = write!(note, " image {}", v(image));
    }
    if let Some(n) = id.ns_pid {
        let _ = write!(note, ", pid {n} in it");
    }
    note.push(']');
    note
}

/// A count as shown: `?` when the capture did not say it.
pub fn count_word(n: Option<i64>) -> String {
    n.map_or_else(|| "?".to_owned(), |n| n.to_string())
}

fn activity(cap: &Capture, s: &mut String) -> Result<(), StoreError> {
    for section in cap.activity_sections()? {
        let _ = writeln!(s, "\n{}", section.title);
        if section.rows.is_empty() {
            let _ = writeln!(s, "  (none)");
        }
        for (what, a, b) in &section.rows {
            let _ = writeln!(s, "  {}  ({}, {})", v(what), count_word(*a), count_word(*b));
        }
    }
    Ok(())
}

/// The `agentsight session message` submissions made while recording
/// (`external_messages`), one line each: time, session, transport, who,
/// bytes, outcome, and the provider process when the capture has it. Only
/// when there are any, or the log could not be read whole.
fn session_messages(
    cap: &Capture,
    meta: &RunMeta,
    procs: &[ProcessRecord],
    s: &mut String,
) -> Result<(), StoreError> {
    let msgs = cap.session_messages()?;
    let note = &meta.session_messages_note;
    if msgs.is_empty() && note.is_none() {
        return Ok(());
    }
    let anchors = cap.anchors()?;
    let _ = writeln!(
        s,
        "\nEXTERNAL MESSAGES (sessions continued by agentsight session message while recording)"
    );
    if msgs.is_empty() {
        let _ = writeln!(s, "  (none)");
    }
    for m in &msgs {
        let _ = writeln!(s, "  {}", session_message_line(m, procs, &anchors));
    }
    if let Some(n) = note {
        let _ = writeln!(s, "  note: {}", v(n));
    }
    Ok(())
}

/// Most exchanges `show` lists one per line (the rest are counted).
const MAX_WIRE_LINES: usize = 200;

/// `record --enforce`: the mode, the counts, the rules only audited, and
/// one line per access refused. Nothing for a capture recorded without it.
fn enforcement(cap: &Capture, procs: &[ProcessRecord], s: &mut String) -> Result<(), StoreError> {
    let reader = cap.reader();
    let meta = reader.enforcement_meta()?;
    let rows = reader.enforcement_denials()?;
    if meta.is_none() && rows.is_empty() {
        return Ok(());
    }
    let meta = meta.unwrap_or_default();
    let _ = writeln!(
        s,
        "\nENFORCEMENT (record --enforce, mode {}): {} blocked ({}), {} not stored",
        v(&meta.mode),
        crate::store::enforcement::blocked_total(&rows),
        crate::store::enforcement::kind_counts(&rows),
        meta.lost
    );
    if !meta.audited_not_enforced.is_empty() {
        let _ = writeln!(
            s,
            "  audited, not enforced: {}",
            v(&meta.audited_not_enforced.join(", "))
        );
    }
    if meta.refused_allowed > 0 {
        let _ = writeln!(
            s,
            "  refused though the policy allows them (Landlock cannot grant them): {} write(s): {}",
            meta.refused_allowed,
            v(&meta.refused_allowed_paths.join(", "))
        );
    }
    if let Some(b) = &meta.backstop {
        let _ = writeln!(
            s,
            "  the recorder (pid {}) ended without stopping enforcement: its tree was stopped and killed ({} process(es){}); denials of its last 50 ms may be missing",
            b.recorder_pid,
            b.killed.len(),
            if b.still_running.is_empty() {
                String::new()
            } else {
                format!(", {} still running after 10 s", b.still_running.len())
            }
        );
    }
    let anchors = cap.anchors()?;
    let comm: HashMap<i64, &str> = procs
        .iter()
        .map(|p| (p.id, p.comm.as_deref().unwrap_or("?")))
        .collect();
    for r in rows.iter().take(MAX_WIRE_LINES) {
        let who = r
            .process_id
            .and_then(|id| comm.get(&id))
            .map_or_else(String::new, |c| format!(" {}", v(c)));
        let file = if !r.kind.by_identity() {
            String::new()
        } else {
            format!(", device {}, inode {}", r.dev, r.ino)
        };
        let times = if r.repeat > 1 {
            format!(" ×{}", r.repeat)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "  {} {}{times} {} pid {}{who} {} ({}{file})",
            crate::clock::rfc3339_ns(anchors.wall_ns(r.mono_ns).max(0) as u64),
            r.kind.as_str(),
            v(&r.target()),
            r.pid,
            v(&r.rule),
            v(&r.mechanism),
        );
    }
    if rows.len() > MAX_WIRE_LINES {
        let _ = writeln!(s, "  … {} more", rows.len() - MAX_WIRE_LINES);
    }
    Ok(())
}

/// The model traffic of a `record --wire` capture: its routes, its counts,
/// one line per exchange (time, API, model, status, what was sent, what came
/// back). Nothing without a wire layer.
fn wire(cap: &Capture, s: &mut String) -> Result<(), StoreError> {
    let rows = cap.reader().wire_exchanges()?;
    let notes = cap.reader().wire_notes()?;
    let routes: Vec<String> = cap
        .meta(crate::store::meta::key::WIRE_ROUTES)?
        .and_then(|j| serde_json::from_str(&j).ok())
        .unwrap_or_default();
    if rows.is_empty() && routes.is_empty() && notes.is_empty() {
        return Ok(());
    }
    let anchors = cap.anchors()?;
    // TLS exchanges and notes name their process: `pid N comm`.
    let procs: HashMap<i64, String> =
        if rows.iter().any(|r| r.process_id.is_some()) || !notes.is_empty() {
            cap.processes()?
                .into_iter()
                .map(|p| {
                    (
                        p.id,
                        format!("pid {} {}", p.pid, v(p.comm.as_deref().unwrap_or("?"))),
                    )
                })
                .collect()
        } else {
            HashMap::new()
        };
    let who = |id: Option<i64>| match id {
        Some(id) => procs
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("process row {id}")),
        None => "process unknown".to_string(),
    };
    let errors = rows.iter().filter(|r| r.raw.error.is_some()).count();
    let _ = writeln!(
        s,
        "\nMODEL TRAFFIC (record --wire): {} exchange(s), {errors} with an error",
        rows.len()
    );
    for r in &routes {
        let _ = writeln!(s, "  route {}", v(r));
    }
    for row in rows.iter().take(MAX_WIRE_LINES) {
        let _ = writeln!(s, "  {}", wire_line(row, &anchors, &who(row.process_id)));
    }
    if rows.len() > MAX_WIRE_LINES {
        let _ = writeln!(
            s,
            "  … {} more exchange(s) not listed",
            rows.len() - MAX_WIRE_LINES
        );
    }
    // TLS streams that held no HTTP/1.1 exchange (HTTP/2, other bytes).
    for n in notes.iter().take(MAX_WIRE_LINES) {
        let _ = writeln!(s, "  tls stream of {}: {}", who(n.process_id), v(&n.note));
    }
    if notes.len() > MAX_WIRE_LINES {
        let _ = writeln!(
            s,
            "  … {} more TLS stream note(s) not listed",
            notes.len() - MAX_WIRE_LINES
        );
    }
    Ok(())
}

/// One exchange as `show` prints it.
fn wire_line(
    row: &crate::store::wire::WireExchangeRow,
    anchors: &crate::clock::Anchors,
    process: &str,
) -> String {
    let x = &row.decoded;
    let time = crate::clock::rfc3339_ns(anchors.wall_ns(row.raw.request.first_ns).max(0) as u64);
    // The API's word as stored (`anthropic_messages`, `openai_chat`, …).
    let what = x
        .api
        .and_then(|a| serde_json::to_value(a).ok())
        .and_then(|w| w.as_str().map(String::from))
        .unwrap_or_else(|| "not HTTP".to_string());
    // The relay's lines stay as they were; a TLS line says how it was
    // captured and by which process.
    let via = match row.raw.via {
        agentsight_wire::Via::Relay => String::new(),
        agentsight_wire::Via::Tls => format!(" via tls ({process})"),
    };
    let mut line = format!(
        "#{}{via} {time} {} {} {} → {}",
        row.id,
        v(&what),
        v(x.method.as_deref().unwrap_or("?")),
        v(x.path.as_deref().unwrap_or("?")),
        x.status.map_or("no answer".to_string(), |s| s.to_string()),
    );
    if let Some(m) = &x.model {
        let _ = write!(line, " model {}", v(m));
    }
    let _ = write!(
        line,
        " | sent {} B (system {} B, {} tool(s), {} message(s))",
        x.request_bytes,
        x.system_bytes,
        x.tools.len(),
        x.messages.len()
    );
    let _ = write!(
        line,
        " | got {} B, text {} B, {} call(s)",
        x.response_bytes,
        x.response_text.len(),
        x.tool_calls.len()
    );
    if let Some(u) = &x.usage {
        let _ = write!(
            line,
            " | tokens in {} cache {}+{} out {} reasoning {}",
            u.input, u.cache_read, u.cache_creation, u.output, u.reasoning
        );
    }
    if let Some(e) = &row.raw.error {
        let _ = write!(line, " | ERROR {}", v(e));
    }
    if !x.notes.is_empty() {
        let _ = write!(line, " | {} decoding note(s)", x.notes.len());
    }
    line
}

/// One submission as `show` prints it.
pub fn session_message_line(
    m: &SessionMessage,
    procs: &[ProcessRecord],
    anchors: &crate::clock::Anchors,
) -> String {
    let time = crate::clock::rfc3339_ns(ms_to_ns(m.time_ms));
    let container = m
        .container
        .as_deref()
        .map(|c| format!(" in container {}", v(c)))
        .unwrap_or_default();
    let provider = match (m.provider_pid, m.provider_process(procs, anchors)) {
        (None, _) => "no provider process".to_owned(),
        (Some(pid), None) => format!("provider pid {pid} (not in the capture)"),
        (Some(pid), Some(p)) => {
            let argv: Vec<String> = p.argv.iter().map(|a| shell_word(a)).collect();
            let mut cmd = argv.join(" ");
            if cmd.chars().count() > 80 {
                cmd = cmd.chars().take(79).collect::<String>() + "…";
            }
            format!("provider pid {pid} ({cmd})")
        }
    };
    format!(
        "{time}  session {} ({}){container}  {}  by {} (uid {}) as uid {}  {} bytes  {}{}  {provider}",
        v(&m.session_id),
        v(&m.provider),
        v(&m.transport),
        v(&m.invoking_user),
        m.invoking_uid,
        m.run_as_uid,
        m.message_bytes,
        v(m.outcome
            .as_deref()
            .unwrap_or("outcome unknown (no finished line)")),
        m.detail
            .as_deref()
            .map(|d| format!(" ({})", v(d)))
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use crate::store::{Capture, CaptureRw, messages::example};

    /// Wall time of mono 0: 2026-12-01T01:02:00Z.
    const WALL0_MS: i64 = 1_796_086_920_000;

    /// A capture of `agentsight session message` (pid 300) starting the
    /// provider (pid 301, 2–5 s), with one submission at 1.5 s (mono).
    pub(crate) fn capture_with_message(dir: &std::path::Path) -> std::path::PathBuf {
        let db = dir.join("c.db");
        let c = crate::store::create(&db).unwrap();
        c.execute(
            "INSERT INTO clock_anchors (id, label, mono_ns, wall_ns) VALUES (1, 'start', 0, ?1)",
            [WALL0_MS * 1_000_000],
        )
        .unwrap();
        c.execute_batch(
            r#"INSERT INTO meta VALUES ('complete', 'true');
            INSERT INTO processes (id, pid, start_mono_ns, end_mono_ns, exit_code, parent_id, origin, argv, exec_count)
            VALUES (1, 300, 1000000000, 6000000000, 0, NULL, 'root', '["agentsight","session","message","s-1"]', 1),
                   (2, 301, 2000000000, 5000000000, 0, 1, 'fork', '["claude","-p","--resume","s-1"]', 1);
            INSERT INTO events (id, mono_ns, wall_ns, kind, cpu, seq, pid, tid, ppid, uid, gid, comm, process_id, result)
            VALUES (1, 1000000000, 1796086921000000000, 'exec', 0, 1, 300, 300, 1, 1000, 1000, 'agentsight', 1, 0),
                   (2, 2000000000, 1796086922000000000, 'exec', 0, 2, 301, 301, 300, 1000, 1000, 'claude', 2, 0);"#,
        )
        .unwrap();
        drop(c);
        let rw = CaptureRw::open(&db).unwrap();
        let mut m = example("m-1", WALL0_MS + 1_500, "s-1");
        m.finished_ms = Some(WALL0_MS + 6_000);
        let mut refused = example("m-2", WALL0_MS + 7_000, "s-2");
        refused.provider_pid = None;
        refused.outcome = Some("refused".into());
        refused.detail = Some("session is already running outside agentsight".into());
        refused.finished_ms = Some(WALL0_MS + 7_000);
        rw.put_session_messages(&[m, refused]).unwrap();
        drop(rw);
        db
    }

    #[test]
    fn show_lists_each_submission_with_its_provider_process() {
        let dir = tempfile::tempdir().unwrap();
        let db = capture_with_message(dir.path());
        let cap = Capture::open(&db).unwrap();
        let text = super::summary(&cap).unwrap();
        let section: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("EXTERNAL MESSAGES"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(
            section,
            vec![
                "EXTERNAL MESSAGES (sessions continued by agentsight session message while recording)",
                "  2026-12-01T01:02:01.500000000Z  session s-1 (claude)  claude-stream-json  by alice (uid 1000) as uid 1000  17 bytes  completed  provider pid 301 (claude -p --resume s-1)",
                "  2026-12-01T01:02:07.000000000Z  session s-2 (claude)  claude-stream-json  by alice (uid 1000) as uid 1000  17 bytes  refused (session is already running outside agentsight)  no provider process",
            ]
        );
        // The section comes before the process tree.
        assert!(text.find("EXTERNAL MESSAGES").unwrap() < text.find("process tree").unwrap());
    }

    #[test]
    fn show_reads_the_kept_summaries_as_it_read_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        crate::store::write_every_kind(&db);
        let kept = super::summary(&Capture::open(&db).unwrap()).unwrap();
        let scan = super::summary(&Capture::open(&db).unwrap().scan_only()).unwrap();
        assert_eq!(kept, scan);
        let section = |title: &str| -> Vec<String> {
            kept.lines()
                .skip_while(|l| !l.starts_with(title))
                .take_while(|l| !l.is_empty())
                .map(String::from)
                .collect()
        };
        assert_eq!(
            section("files written"),
            [
                "files written (bytes, writes)",
                "  /workspace/project/src/f1  (830, 4)",
                "  /workspace/project/src/f0  (420, 2)"
            ]
        );
        assert_eq!(
            section("network destinations"),
            [
                "network destinations (connects, failed)",
                "  inet 10.0.0.1:443  (2, 0)",
                "  inet 10.0.0.0  (1, 0)",
                "  inet 10.0.0.0:443  (1, 0)"
            ]
        );
        assert_eq!(
            section("opened under another name")[1..],
            ["  /workspace/project/src/f1 → /real/workspace/project/src/f1  (17, 0)"]
        );
        assert_eq!(section("files changed").len(), 16);
        // The same capture (interned text, directory prefixes) exports the
        // same bytes through the in-memory strings as through the view.
        let cap = Capture::open(&db).unwrap();
        let (mut fast, mut by_view) = (Vec::new(), Vec::new());
        let n = crate::views::export::jsonl(&cap, &mut fast).unwrap();
        assert_eq!(
            crate::views::export::jsonl_by_view(&cap, &mut by_view).unwrap(),
            n
        );
        assert_eq!(n, 50);
        assert_eq!(
            String::from_utf8(fast).unwrap(),
            String::from_utf8(by_view).unwrap()
        );
    }

    #[test]
    fn show_says_nothing_without_messages_and_prints_the_log_note() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        drop(crate::store::create(&db).unwrap());
        let cap = Capture::open(&db).unwrap();
        assert!(!super::summary(&cap).unwrap().contains("EXTERNAL MESSAGES"));
        drop(cap);
        let rw = CaptureRw::open(&db).unwrap();
        rw.put_meta(
            crate::store::SESSION_MESSAGES_NOTE_META,
            "message log not read, no submission stored: /h/m.jsonl: not a regular file",
        )
        .unwrap();
        drop(rw);
        let cap = Capture::open(&db).unwrap();
        let text = super::summary(&cap).unwrap();
        let section: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("EXTERNAL MESSAGES"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(
            section[1..],
            [
                "  (none)",
                "  note: message log not read, no submission stored: /h/m.jsonl: not a regular file"
            ]
        );
    }

    #[test]
    fn export_places_each_submission_among_the_events_at_its_time() {
        let dir = tempfile::tempdir().unwrap();
        let db = capture_with_message(dir.path());
        let cap = Capture::open(&db).unwrap();
        let mut out = Vec::new();
        assert_eq!(crate::views::export::jsonl(&cap, &mut out).unwrap(), 4);
        let lines: Vec<serde_json::Value> = out
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["exec", "external_message", "exec", "external_message"]
        );
        assert_eq!(
            lines[1],
            serde_json::json!({
                "ts": "2026-12-01T01:02:01.500000000Z",
                "mono_ns": 1_500_000_000u64,
                "kind": "external_message",
                "id": "m-1",
                "session_id": "s-1",
                "provider": "claude",
                "transport": "claude-stream-json",
                "invoking_uid": 1000,
                "invoking_user": "alice",
                "run_as_uid": 1000,
                "pid": 300,
                "provider_pid": 301,
                "message_bytes": 17,
                "outcome": "completed",
                "finished_ts": "2026-12-01T01:02:06.000000000Z",
            })
        );
        // After the last event: at the end, its fields the log said only.
        assert_eq!(lines[3]["mono_ns"], 7_000_000_000u64);
        assert_eq!(
            lines[3]["detail"],
            "session is already running outside agentsight"
        );
        assert!(lines[3].get("provider_pid").is_none());
    }
}
