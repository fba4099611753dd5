//! The kernel programs, loaded and attached, and the ring reader.

use std::{
    sync::{Arc, atomic::AtomicBool, mpsc::SyncSender},
    time::Duration,
};

use crate::store::meta::key;
use crate::{
    capture::{
        loader::Probes,
        reader::{self, ReaderStats},
    },
    store::{StoreMsg, Writer},
};

use super::{Notice, RecordError, RecordOptions};

/// The kernel programs as loaded, with what the capture and summary say
/// about them.
pub(super) struct Loaded {
    pub(super) probes: Probes,
    /// Statistics stay on while this fd is open (the kernel counts for every
    /// program while anyone holds one).
    pub(super) stats_fd: Option<std::os::fd::OwnedFd>,
    pub(super) failed_programs: Vec<String>,
}

/// The TLS uprobe programs (`capture::tls`), attached only with `--wire`.
const TLS_PROGRAMS: [&str; 2] = [
    agentsight_common::PROG_TLS_ENTER,
    agentsight_common::PROG_TLS_RETURN,
];

/// `record --enforce`'s network programs, loaded and attached only when the
/// `[network]` rules are enforced.
const NET_PROGRAMS: [&str; 4] = [
    agentsight_common::PROG_NET_CONNECT4,
    agentsight_common::PROG_NET_CONNECT6,
    agentsight_common::PROG_NET_SENDMSG4,
    agentsight_common::PROG_NET_SENDMSG6,
];

/// Loads and attaches the programs; notes each one's state in the capture.
pub(super) fn load_programs(
    opts: &RecordOptions,
    cgroups: &[(u64, agentsight_common::ContainerNs)],
    tx: &SyncSender<StoreMsg>,
    notify: &mut dyn FnMut(Notice),
) -> Result<Loaded, crate::capture::loader::LoadError> {
    let meta = |k: &str, v: String| {
        let _ = tx.send(StoreMsg::Meta(k.to_owned(), v));
    };
    let mut probes = Probes::load(opts.ring_bytes, cgroups)?;
    // The TLS uprobes are loaded always but attached only with --wire:
    // without it they are not among the recording's programs.
    if !opts.wire {
        probes
            .programs
            .retain(|p| !TLS_PROGRAMS.contains(&p.name.as_str()));
    }
    // Loading parsed the kernel's BTF (tens of MiB of small allocations, all
    // freed by now); give those pages back to the system, or they stay
    // resident under everything held later. glibc only returns them on request.
    // Safety: malloc_trim has no preconditions.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0)
    };
    let stats_fd = if opts.program_stats {
        match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
            Ok(fd) => Some(fd),
            Err(e) => {
                notify(Notice::Warning(format!(
                    "program statistics unavailable: {e}"
                )));
                meta(key::PROGRAM_STATS_ERROR, e.to_string());
                None
            }
        }
    } else {
        None
    };
    let programs_json: Vec<serde_json::Value> = probes
        .programs
        .iter()
        .map(|p| serde_json::json!({"name": p.name, "hook": p.hook, "attached": p.error.is_none(), "error": p.error}))
        .collect();
    meta(
        "programs",
        serde_json::Value::Array(programs_json).to_string(),
    );
    if let Some(note) = &probes.tracefs_note {
        tracing::info!("{note}");
        meta(key::TRACEFS, note.clone());
    }
    let failed_programs: Vec<String> = probes
        .programs
        .iter()
        .filter_map(|p| {
            p.error
                .as_ref()
                .map(|e| format!("{} ({}): {e}", p.name, p.hook))
        })
        .collect();
    for f in &failed_programs {
        notify(Notice::Warning(format!("program not attached: {f}")));
    }
    Ok(Loaded {
        probes,
        stats_fd,
        failed_programs,
    })
}

/// The ring reader's thread and what it shares with the main thread.
pub(super) struct Reading {
    pub(super) thread: std::thread::JoinHandle<Vec<crate::capture::reader::Gap>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) stats: Arc<ReaderStats>,
}

pub(super) fn start_reader(probes: &mut Probes, writer: &Writer) -> Result<Reading, RecordError> {
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(ReaderStats::default());
    let ring = probes.take_ring()?;
    let io = probes.io.take();
    let seq = probes.take_seq().ok();
    let thread = reader::spawn(
        ring,
        io,
        seq,
        writer.event_sender(),
        stop.clone(),
        stats.clone(),
    )
    .map_err(|e| RecordError::Other(format!("cannot start ring reader: {e}")))?;
    Ok(Reading {
        thread,
        stop,
        stats,
    })
}

/// Each attached program's run count and total run time since statistics
/// were turned on (every process's syscalls, not only the tracked ones'),
/// as meta JSON, and the totals.
pub(super) fn program_stats(probes: &Probes) -> (String, (u64, Duration)) {
    let mut items = Vec::new();
    let (mut runs, mut time) = (0u64, Duration::ZERO);
    for (name, program) in probes.ebpf.programs() {
        if !probes.tls_attached && TLS_PROGRAMS.contains(&name)
            || !probes.net_attached && NET_PROGRAMS.contains(&name)
        {
            continue;
        }
        match program.info() {
            Ok(info) => {
                runs += info.run_count();
                time += info.run_time();
                items.push(serde_json::json!({
                    "name": name,
                    "runs": info.run_count(),
                    "run_ns": info.run_time().as_nanos() as u64,
                }));
            }
            Err(e) => items.push(serde_json::json!({"name": name, "error": e.to_string()})),
        }
    }
    (serde_json::Value::Array(items).to_string(), (runs, time))
}
