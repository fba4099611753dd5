//! The processes the recording follows besides the command it starts:
//! `--pid` trees, `--agent` processes and containers, adopted into the
//! kernel's map; and the command itself (`spawn`).

use std::{
    collections::BTreeSet,
    ffi::OsString,
    os::fd::{AsFd, AsRawFd},
    process::Child,
    sync::mpsc::SyncSender,
};

use aya::maps::IterableMap;

use crate::sessions::mcp::CONFIG_CONTENT_VAR;
use crate::store::meta::key;
use crate::{
    capture::{
        ProcessOrigin, ProcessSeed,
        container::{self, ContainerInfo},
        loader::Probes,
    },
    clock::mono_now_ns,
    privileges::TargetUser,
    procinfo::{self, AgentName},
    store::StoreMsg,
};

use super::{Notice, RecordError, RecordOptions, host_agent};

/// The processes the recording follows besides the command it starts:
/// `--pid` trees and `--agent` processes, adopted into the kernel's map.
pub(super) struct Tracker {
    pub(super) probes: Probes,
    pub(super) tx: SyncSender<StoreMsg>,
    /// Pids adopted so far (the kernel map makes re-adding harmless).
    pub(super) known: BTreeSet<u32>,
    /// The recorded commands' TMPDIRs, stored as meta `tmpdirs`.
    pub(super) tmpdirs: Vec<String>,
    /// The kept `OPENCODE_CONFIG_CONTENT`, stored as meta
    /// `opencode_config_content`.
    pub(super) config_content: Option<String>,
    pub(super) skipped: Skipped,
    /// With `--wire`: the TLS probes' attach state (`capture::tls`).
    pub(super) tls: Option<crate::capture::tls::TlsTracker>,
}

impl Tracker {
    /// With `--wire`: the TLS probes on the system's TLS libraries before
    /// the command starts (a short command would finish its TLS before a
    /// scan of its maps found them); the rest is found per process.
    pub(super) fn start_tls(&mut self, notify: &mut dyn FnMut(Notice)) {
        let mut tls = crate::capture::tls::TlsTracker::default();
        let path = std::env::var("PATH").ok();
        for lib in crate::capture::tls::system_candidates(path.as_deref()) {
            let shown = lib.display().to_string();
            tls.consider(&mut self.probes, &lib, &shown);
        }
        for e in &tls.errors {
            notify(Notice::Warning(format!("TLS probes not attached: {e}")));
        }
        self.tls = Some(tls);
    }

    /// Scans the tracked processes for TLS libraries; stores the note of
    /// each process that ended.
    pub(super) fn tls_tick(&mut self, tracked: &[u32]) {
        let Some(tls) = self.tls.as_mut() else {
            return;
        };
        for n in tls.tick(&mut self.probes, tracked) {
            let _ = self.tx.send(StoreMsg::TlsProcess(n));
        }
    }

    /// The notes of the processes still known at the end.
    pub(super) fn tls_finish(&mut self) {
        if let Some(tls) = self.tls.take() {
            for n in tls.finish(&mut self.probes) {
                let _ = self.tx.send(StoreMsg::TlsProcess(n));
            }
        }
    }

    /// The `--pid` trees and the agents already running.
    pub(super) fn adopt_targets(&mut self, opts: &RecordOptions, notify: &mut dyn FnMut(Notice)) {
        if !opts.pids.is_empty() {
            let procs = procinfo::snapshot();
            let roots: BTreeSet<u32> = opts.pids.iter().copied().collect();
            let tree = self
                .skipped
                .keep_own(procinfo::tree_of(&procs, &roots), notify);
            self.adopt(&tree, ProcessOrigin::Seeded);
        }
        if let Some(agent) = host_agent(opts) {
            self.scan_agents(agent, notify);
        }
    }

    /// The processes already in each container: its init's tree and every
    /// process in its cgroup (earlier `docker exec`s are not the init's
    /// descendants). They are adopted whoever owns them: naming the
    /// container asks for all of it, as the kernel's cgroup match does.
    pub(super) fn adopt_containers(&mut self, containers: &[ContainerInfo]) {
        if containers.is_empty() {
            return;
        }
        let procs = procinfo::snapshot();
        let mut roots = BTreeSet::new();
        for c in containers {
            roots.insert(c.init_pid);
            roots.extend(container::cgroup_pids(&c.cgroup_dir).unwrap_or_default());
        }
        let tree = procinfo::tree_of(&procs, &roots);
        self.adopt(&tree, ProcessOrigin::Seeded);
    }

    /// Tracks `procs` in the kernel and seeds their rows.
    pub(super) fn adopt(&mut self, procs: &[procinfo::ProcInfo], origin: ProcessOrigin) {
        // The roots' TMPDIR (their environment as /proc shows it): an allowed
        // root for `audit` by default.
        let pids: BTreeSet<u32> = procs.iter().map(|p| p.pid).collect();
        for p in procs.iter().filter(|p| !pids.contains(&p.ppid)) {
            if !self.known.contains(&p.pid) {
                self.note_environment(p.pid);
            }
        }
        for p in procs {
            if !self.known.insert(p.pid) {
                continue;
            }
            if let Err(e) = self.probes.track(p.pid) {
                tracing::warn!("{e}");
                continue;
            }
            let _ = self.tx.send(StoreMsg::Seed(p.seed(origin)));
        }
    }

    /// What a recorded command's environment says that the capture keeps:
    /// its TMPDIR and its `OPENCODE_CONFIG_CONTENT` (one read of it).
    pub(super) fn note_environment(&mut self, pid: u32) {
        let [tmpdir, config] = procinfo::env_vars(pid, ["TMPDIR", CONFIG_CONTENT_VAR]);
        if let Some(t) = tmpdir {
            self.note_tmpdir(&t);
        }
        if let Some(c) = config {
            self.note_config_content(&c);
        }
    }

    /// Keeps a recorded command's `OPENCODE_CONFIG_CONTENT` (its MCP
    /// servers only) in the capture's meta `opencode_config_content`, the
    /// last value seen: enrichment reads the servers of its opencode
    /// sessions there (the variable is in no file).
    fn note_config_content(&mut self, value: &str) {
        let Some(kept) = crate::sessions::mcp::config_content_to_keep(value) else {
            return;
        };
        if self.config_content.as_deref() == Some(kept.as_str()) {
            return;
        }
        self.config_content = Some(kept.clone());
        let _ = self.tx.send(StoreMsg::Meta(
            key::OPENCODE_CONFIG_CONTENT.to_owned(),
            kept,
        ));
    }

    /// Adds a recorded command's TMPDIR to the capture's meta `tmpdirs` (a
    /// JSON array of distinct paths, in the order seen).
    fn note_tmpdir(&mut self, t: &str) {
        let Some(t) = crate::envreset::usable_tmpdir(t) else {
            return;
        };
        if self.tmpdirs.contains(&t) {
            return;
        }
        self.tmpdirs.push(t);
        let json = serde_json::to_string(&self.tmpdirs).unwrap_or_default();
        let _ = self.tx.send(StoreMsg::Meta(key::TMPDIRS.to_owned(), json));
    }

    /// Finds agent processes (and their trees) not yet tracked. Processes
    /// the kernel already tracks (children of tracked ones) are skipped by
    /// `known` only when we adopted them; the kernel map makes re-adding
    /// harmless.
    pub(super) fn scan_agents(&mut self, agent: AgentName, notify: &mut dyn FnMut(Notice)) {
        let procs = procinfo::snapshot();
        let me = std::process::id();
        let roots: BTreeSet<u32> = procs
            .iter()
            .filter(|p| p.pid != me && !self.known.contains(&p.pid) && agent.matches(p))
            .map(|p| p.pid)
            .collect();
        if roots.is_empty() {
            return;
        }
        let tree = self
            .skipped
            .keep_own(procinfo::tree_of(&procs, &roots), notify);
        self.adopt(&tree, ProcessOrigin::Seeded);
    }

    /// Starts the command as `user`, tracked by the kernel before it executes.
    pub(super) fn spawn_tracked(
        &mut self,
        user: &TargetUser,
        command: &[OsString],
        env: &[crate::envreset::EnvArg],
        landlock_fd: Option<std::os::fd::RawFd>,
    ) -> Result<Child, RecordError> {
        let map_fd = self.probes.tracked.map().fd().as_fd().as_raw_fd();
        let (mut cmd, tmpdir) = super::spawn::command_as(user, command, env, map_fd, landlock_fd);
        if let Some(t) = tmpdir {
            self.note_tmpdir(&t);
        }
        let spawned_mono = mono_now_ns();
        let child = cmd.spawn().map_err(|e| RecordError::Spawn {
            program: command[0].to_string_lossy().into_owned(),
            reason: e.to_string(),
        })?;
        let pid = child.id();
        let info = procinfo::ProcInfo::read(pid);
        let _ = self.tx.send(StoreMsg::Seed(ProcessSeed {
            pid,
            start_mono_ns: spawned_mono,
            ppid: std::process::id(),
            origin: ProcessOrigin::Root,
            comm: info.as_ref().map(|i| i.comm.clone()),
            argv: Some(
                command
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect(),
            ),
            cwd: info.as_ref().and_then(|i| i.cwd.clone()),
            exe: info.as_ref().and_then(|i| i.exe.clone()),
            uid: Some(user.uid),
            gid: Some(user.gid),
            fds: info.as_ref().map(|i| i.fds.clone()).unwrap_or_default(),
        }));
        Ok(child)
    }
}

/// Other users' processes left out under sudo (`--all-users` keeps them).
pub(super) struct Skipped {
    pub(super) only_uid: Option<u32>,
    pub(super) pids: BTreeSet<u32>,
}

impl Skipped {
    pub(super) fn new(only_uid: Option<u32>) -> Self {
        Self {
            only_uid,
            pids: BTreeSet::new(),
        }
    }

    /// The caller's own processes of `tree`; says when more were skipped.
    pub(super) fn keep_own(
        &mut self,
        tree: Vec<procinfo::ProcInfo>,
        notify: &mut dyn FnMut(Notice),
    ) -> Vec<procinfo::ProcInfo> {
        let (own, others) = procinfo::split_by_owner(tree, self.only_uid);
        let before = self.pids.len();
        self.pids.extend(others.iter().map(|p| p.pid));
        if self.pids.len() > before {
            notify(Notice::SkippedOtherUsers(self.pids.len()));
        }
        own
    }
}

pub(super) fn tracked_count(probes: &Probes) -> usize {
    probes.tracked.keys().filter(|k| k.is_ok()).count()
}
