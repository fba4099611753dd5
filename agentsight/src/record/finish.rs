//! The end of a recording: drain the ring, complete the capture, bind the
//! sessions, store the messages and the recorder's own usage; or abandon a
//! start that failed.

use std::{
    path::{Path, PathBuf},
    sync::atomic::Ordering,
    time::Duration,
};

use crate::store::meta::key;
use crate::{
    clock::{Anchor, rfc3339_ns},
    privileges::{self},
    store::{StoreMsg, Writer},
};

use super::{
    Notice, RecordError, RecordOptions,
    load::{Reading, program_stats},
    outcome::RecordOutcome,
    target::Target,
    tracker::Tracker,
    watch::Watched,
};

/// What `finish` needs besides the writer, the tracker and the reader.
pub(super) struct Ended {
    /// The start anchor's wall time: the capture's window opens there.
    pub(super) start_wall_ns: u64,
    pub(super) failed_programs: Vec<String>,
    pub(super) stats_fd: Option<std::os::fd::OwnedFd>,
    pub(super) watched: Watched,
    /// `--enforce`: what is said once the capture is finished.
    pub(super) enforced: Option<super::enforce::EnforceEnd>,
}

/// Drains the ring, completes the capture, binds sessions, and measures
/// the recorder's own cost.
pub(super) fn finish(
    opts: &RecordOptions,
    target: &Target,
    writer: Writer,
    mut tracker: Tracker,
    reading: Reading,
    mut ended: Ended,
    notify: &mut dyn FnMut(Notice),
) -> Result<RecordOutcome, RecordError> {
    tracker.tls_finish();
    let Tracker {
        probes,
        tx,
        skipped,
        ..
    } = tracker;
    let Watched {
        end_reason,
        command_status,
        fd_obs,
        started,
    } = ended.watched;
    // Drain: the reader empties the ring and returns the gaps it saw.
    reading.stop.store(true, Ordering::Release);
    let gaps = reading.thread.join().unwrap_or_default();
    let program_runs = ended.stats_fd.as_ref().map(|_| program_stats(&probes));
    drop(ended.stats_fd);
    let loss = probes.loss_counts();
    let lost: u64 = loss.iter().map(|(_, n)| n).sum();
    let _ = tx.send(StoreMsg::Loss(loss));
    let stop_anchor = Anchor::now("stop");
    let _ = tx.send(StoreMsg::Anchor(stop_anchor));
    drop(tx);
    let gap_missing: u64 = gaps.iter().map(|g| g.last_seq - g.first_seq + 1).sum();
    let mut final_meta = vec![
        (key::ENDED_AT.to_owned(), rfc3339_ns(stop_anchor.wall_ns)),
        (key::END_REASON.to_owned(), end_reason.clone()),
        (key::COMPLETE.to_owned(), "true".to_owned()),
    ];
    if let Some(s) = command_status {
        final_meta.push((key::COMMAND_EXIT_STATUS.to_owned(), s.to_string()));
    }
    if target.only_uid.is_some() {
        final_meta.push((
            key::SKIPPED_OTHER_USERS.to_owned(),
            skipped.pids.len().to_string(),
        ));
    }
    if let Some((json, _)) = &program_runs {
        final_meta.push((key::PROGRAM_STATS.to_owned(), json.clone()));
    }
    // From here on the capture is only written by this thread: as the user.
    let _as_user = privileges::AsUser::maybe(target.creds.as_ref())?;
    let summary = writer.finish(&gaps, &final_meta);
    if let Some(full) = &summary.disk_full {
        // The disk has no room for transcripts and bindings; the capture
        // itself is finished and says what it did not store.
        notify(Notice::Warning(format!(
            "sessions not bound: storing stopped ({})",
            full.message()
        )));
    } else if summary.error.is_none() {
        if let Some(e) = ended.enforced.take() {
            super::enforce::end(opts, target, e, notify);
        }
        label_agents(opts, notify);
        bind_sessions(opts, target, fd_obs, notify);
        let window_ms = (
            (ended.start_wall_ns / 1_000_000) as i64,
            stop_anchor.wall_ns.div_ceil(1_000_000) as i64,
        );
        store_messages(opts, target, window_ms, notify);
    }
    // Storing failed: the summary still says what was refused.
    if let Some(e) = ended.enforced.take() {
        super::enforce::end(opts, target, e, notify);
    }
    detach_in_parallel();
    // The links are closed above; the rest (maps, programs) closes at exit.
    std::mem::forget(probes);
    // Measured last, so the writer's deferred work (it yields the CPU while
    // the run lasts) and session matching are counted too.
    let (peak_rss_kib, cpu) = self_usage();
    if let Err(e) = store_recorder_usage(&opts.output, peak_rss_kib, cpu) {
        tracing::warn!(
            "{}: storing the recorder's usage: {e}",
            opts.output.display()
        );
    }
    Ok(RecordOutcome {
        output: opts.output.clone(),
        command_status,
        events: summary.events,
        processes: summary.processes,
        lost,
        gap_missing,
        failed_programs: ended.failed_programs,
        end_reason,
        not_stored: summary.not_stored.values().sum(),
        store_error: summary.error,
        disk_full: summary.disk_full,
        elapsed: started.elapsed(),
        peak_rss_kib,
        cpu,
        program_runs: program_runs.map(|(_, total)| total),
    })
}

/// `--agent`: labels every process row the agent's executable/argv rules
/// recognise (`processes.agent`), on the host or in a container alike.
pub(super) fn label_agents(opts: &RecordOptions, notify: &mut dyn FnMut(Notice)) {
    let Some(agent) = opts.agent else {
        return;
    };
    let labelled = crate::store::CaptureRw::open(&opts.output).and_then(|c| {
        c.label_agents(&|argv: &[String], exe: Option<&str>| {
            agent.recognise(argv, exe).map(|a| a.as_str())
        })
    });
    if let Err(e) = labelled {
        notify(Notice::Warning(format!(
            "agent processes not labelled: {e}"
        )));
    }
}

/// Binds the trees to sessions and stores sessions, transcripts, bindings
/// and correlations in the finished capture (a failure there never loses
/// the capture).
pub(super) fn bind_sessions(
    opts: &RecordOptions,
    target: &Target,
    fd_obs: Vec<crate::matching::FdObservation>,
    notify: &mut dyn FnMut(Notice),
) {
    // Transcripts are copied into the user's capture only if they are the
    // user's own files (and, under sudo, read as the user: see `finish`).
    crate::sessions::util::set_transcript_owner(target.user.as_ref().map(|u| u.uid));
    let bind = crate::enrich::BindOptions {
        homes: target
            .user
            .iter()
            .map(|u| PathBuf::from(&u.home))
            .chain(opts.live.iter().flat_map(|l| l.homes.iter().cloned()))
            .collect(),
        copy_transcripts: opts.copy_transcripts,
        transcript_budget: opts.transcript_budget,
        fd_observations: fd_obs,
        containers: opts.container_sessions.clone(),
    };
    match crate::enrich::bind_and_store(&opts.output, &bind, &crate::correlate::store_all) {
        Ok(b) => {
            for n in &b.notes {
                tracing::warn!("{n}");
            }
        }
        Err(e) => notify(Notice::Warning(format!("sessions not bound: {e}"))),
    }
}

/// Stores the `session message` submissions for the capture's window from
/// the run-as user's log (home from passwd; the invoking user's when no
/// command ran) and every log a recorded process wrote; a log it cannot read
/// is a note in the capture, never a failed recording.
pub(super) fn store_messages(
    opts: &RecordOptions,
    target: &Target,
    window_ms: (i64, i64),
    notify: &mut dyn FnMut(Notice),
) {
    let home = match (&target.user, &target.creds) {
        (Some(u), _) => Some(PathBuf::from(&u.home)),
        (None, Some(c)) => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(c.uid))
            .ok()
            .flatten()
            .map(|u| u.dir),
        (None, None) => None,
    };
    match crate::enrich::store_session_messages(&opts.output, home.as_deref(), window_ms) {
        Ok(stored) => {
            if let Some(n) = stored.note {
                notify(Notice::Warning(n));
            }
        }
        Err(e) => notify(Notice::Warning(format!(
            "session message submissions not stored: {e}"
        ))),
    }
}

/// A start that failed before anything was recorded: stop the writer and
/// remove the capture and its sidecars (all created by us, O_EXCL).
pub(super) fn abandon(
    writer: Writer,
    output: &Path,
    creds: Option<&privileges::FileCreds>,
    notify: &mut dyn FnMut(Notice),
) {
    let _ = writer.finish(&[], &[]);
    let _as_user = privileges::AsUser::maybe(creds).ok().flatten();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = output.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                notify(Notice::CleanupFailed(format!(
                    "could not remove {}: {e}",
                    Path::new(&p).display()
                )));
            }
            _ => {}
        }
    }
}

/// Adds the recorder's own usage to the finished capture's meta table.
pub(super) fn store_recorder_usage(
    path: &Path,
    peak_rss_kib: u64,
    cpu: Duration,
) -> Result<(), crate::store::StoreError> {
    let cap = crate::store::CaptureRw::open(path)?;
    cap.put_meta(key::RECORDER_PEAK_RSS_KIB, &peak_rss_kib.to_string())?;
    cap.put_meta(
        key::RECORDER_CPU_SECONDS,
        &format!("{:.3}", cpu.as_secs_f64()),
    )
}

/// The recorder's own peak RSS (VmHWM) and CPU time so far.
pub(super) fn self_usage() -> (u64, Duration) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let cpu = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
            };
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or_default();
    (hwm, cpu)
}

/// Closes the perf-event links of our tracepoints from many threads at once.
/// Each close waits for an RCU grace period in the kernel (~70 ms here);
/// one after another, 90 of them kept `record` from exiting for 6 s, while
/// concurrent closes share grace periods. Called once capturing is over and
/// before `Probes` is forgotten, so no fd number can have been reused.
pub(super) fn detach_in_parallel() {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok())
        .filter(|e| {
            std::fs::read_link(e.path())
                .map(|t| {
                    let t = t.to_string_lossy();
                    t.contains("[perf_event]") || t.contains("bpf_link") || t.contains("bpf-link")
                })
                .unwrap_or(false)
        })
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    let handles: Vec<_> = fds
        .chunks(4)
        .map(|chunk| {
            let chunk = chunk.to_vec();
            std::thread::spawn(move || {
                for fd in chunk {
                    // Safety: these fds belong to links nothing uses any more.
                    unsafe { libc::close(fd) };
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}
