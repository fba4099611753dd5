//! Which agent session a live process belongs to, and why: the evidence of
//! `agentsight pid PID` (/proc fds, sticky capture bindings, cwd fallback).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{
    matching::{CWD_START_SLACK_MS, Evidence, TreeStatus},
    procinfo::{self, ProcInfo},
    sessions::{self, DiscoveryOptions},
    store::Capture,
};

#[derive(Debug, Serialize)]
pub struct PidAnswer {
    pub pid: u32,
    /// The process and its ancestors, nearest first.
    pub chain: Vec<u32>,
    pub provider: Option<String>,
    pub session_id: Option<String>,
    pub evidence: Option<Evidence>,
    /// The process that gave the evidence (or the bound tree's root).
    pub evidence_pid: Option<u32>,
    pub detail: String,
    /// Sessions considered but left unbound (ambiguous cwd fallback).
    pub candidates: Vec<String>,
}

fn boottime_ns() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(0)
}

fn wall_ms_now() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
        .map(|t| t.tv_sec() * 1000 + t.tv_nsec() / 1_000_000)
        .unwrap_or(0)
}

/// What `lookup` is asked.
#[derive(Debug, Clone, Default)]
pub struct PidQuery {
    pub pid: u32,
    /// Captures to consult for sticky bindings; empty: the `*.db` captures
    /// in the current directory.
    pub dbs: Vec<PathBuf>,
    /// Read transcripts from this home instead of the process owner's.
    pub home: Option<PathBuf>,
    /// Consult captures for sticky bindings (`agentsight pid`); off, the
    /// ladder is only what the live system shows (/proc fds, cwd).
    pub sticky: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PidError {
    #[error("no such process: {0}")]
    NoSuchProcess(u32),
    #[error("--home: {0}")]
    Home(String),
}

/// Answers from /proc (fd evidence), captures (sticky), then cwd fallback.
pub fn lookup(a: &PidQuery) -> Result<PidAnswer, PidError> {
    lookup_in(&procinfo::snapshot(), a)
}

/// [`lookup`] over a /proc snapshot the caller took: one read of /proc
/// for questions about many processes.
pub fn lookup_in(procs: &[ProcInfo], a: &PidQuery) -> Result<PidAnswer, PidError> {
    let by_pid: BTreeMap<u32, &ProcInfo> = procs.iter().map(|p| (p.pid, p)).collect();
    let Some(target) = by_pid.get(&a.pid).copied() else {
        return Err(PidError::NoSuchProcess(a.pid));
    };
    let mut chain: Vec<&ProcInfo> = vec![target];
    while let Some(parent) = chain
        .last()
        .filter(|p| p.ppid > 1 && chain.len() < 64)
        .and_then(|p| by_pid.get(&p.ppid).copied())
    {
        chain.push(parent);
    }
    let mut ans = PidAnswer {
        pid: a.pid,
        chain: chain.iter().map(|p| p.pid).collect(),
        provider: None,
        session_id: None,
        evidence: None,
        evidence_pid: None,
        detail: String::new(),
        candidates: Vec::new(),
    };
    if by_proc_fd(&chain, &mut ans) {
        return Ok(ans);
    }
    let dbs = if !a.sticky {
        Vec::new()
    } else if a.dbs.is_empty() {
        super::select::captures_in(Path::new("."))
    } else {
        a.dbs.clone()
    };
    if by_sticky(&dbs, &chain, &mut ans) {
        return Ok(ans);
    }
    by_cwd(a, target, &chain, &mut ans)?;
    Ok(ans)
}

/// 1. proc_fd: a transcript open by the process or one of its ancestors
///    (the agent runtime is an ancestor of every tool process).
fn by_proc_fd(chain: &[&ProcInfo], ans: &mut PidAnswer) -> bool {
    for p in chain {
        for (_, target) in &p.fds {
            if let Some((prov, id)) = sessions::session_id_for_path(Path::new(target)) {
                ans.provider = Some(prov.to_string());
                ans.session_id = Some(id);
                ans.evidence = Some(Evidence::ProcFd);
                ans.evidence_pid = Some(p.pid);
                ans.detail = format!("pid {} has {target} open", p.pid);
                return true;
            }
        }
    }
    false
}

/// 2. sticky: a capture bound a tree whose root (pid + start time) is this
///    process or an ancestor, and it still lives.
fn by_sticky(dbs: &[PathBuf], chain: &[&ProcInfo], ans: &mut PidAnswer) -> bool {
    let boot_offset = boottime_ns() - crate::clock::mono_now_ns() as i64;
    for db in dbs {
        let Ok(cap) = Capture::open_quick(db) else {
            continue;
        };
        let (Ok(trees), Ok(bindings)) = (cap.trees(), cap.bindings()) else {
            continue;
        };
        for p in chain {
            // /proc start times are CLOCK_BOOTTIME at tick resolution.
            let start_mono = p.start_ns as i64 - boot_offset;
            let Some(t) = trees.iter().find(|t| {
                t.root_pid == p.pid as i64
                    && (t.root_start_mono_ns - start_mono).abs() < 100_000_000
                    && t.status == TreeStatus::Bound.as_str()
            }) else {
                continue;
            };
            let Some(b) = bindings.iter().rfind(|b| b.tree_id == t.id) else {
                continue;
            };
            if let Ok(s) = cap.stored_sessions("")
                && let Some(s) = s.into_iter().find(|s| s.row == b.session_row)
            {
                ans.provider = Some(s.session.provider.to_string());
                ans.session_id = Some(s.session.session_id.clone());
                ans.evidence = Some(Evidence::Sticky);
                ans.evidence_pid = Some(p.pid);
                ans.detail = format!(
                    "tree of pid {} was bound by {} in {}; no contrary evidence now",
                    p.pid,
                    b.evidence,
                    db.display()
                );
                return true;
            }
        }
    }
    false
}

/// 3. cwd fallback, one-to-one: the only session in the process's cwd that
///    was active since its tree started.
fn by_cwd(
    a: &PidQuery,
    target: &ProcInfo,
    chain: &[&ProcInfo],
    ans: &mut PidAnswer,
) -> Result<(), PidError> {
    let home = match &a.home {
        Some(h) => Some(
            sessions::discovery::read_home_of_owner(Some(h))
                .map_err(|e| PidError::Home(e.to_string()))?,
        ),
        None => target
            .uid
            .and_then(|u| nix::unistd::User::from_uid(u.into()).ok().flatten())
            .map(|u| u.dir),
    };
    if a.home.is_none() {
        // The process owner's transcripts, and only theirs.
        sessions::util::set_transcript_owner(target.uid);
    }
    let cwd = target.cwd.clone().unwrap_or_default();
    let canon = |d: &str| {
        std::fs::canonicalize(d)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| d.to_string())
    };
    let start_ms =
        wall_ms_now() - (boottime_ns() - chain.last().map_or(0, |p| p.start_ns) as i64) / 1_000_000;
    let list = sessions::discover(&DiscoveryOptions {
        home,
        ..Default::default()
    })
    .unwrap_or_default();
    let cands: Vec<_> = list
        .iter()
        .filter(|s| s.cwd.as_deref().is_some_and(|c| canon(c) == canon(&cwd)))
        .filter(|s| {
            s.start_ms
                .is_some_and(|st| st + CWD_START_SLACK_MS >= start_ms)
        })
        .collect();
    match cands.as_slice() {
        [one] => {
            ans.provider = Some(one.provider.to_string());
            ans.session_id = Some(one.session_id.clone());
            ans.evidence = Some(Evidence::CwdFallback);
            ans.evidence_pid = Some(a.pid);
            ans.detail =
                format!("only session with cwd {cwd} active since the process tree started");
        }
        [] => {
            ans.detail =
                "no evidence: no transcript open, no capture binding, no session in this cwd".into()
        }
        many => {
            ans.candidates = many.iter().map(|s| s.session_id.clone()).collect();
            ans.detail = format!("{} sessions share cwd {cwd}: left unbound", many.len());
        }
    }
    Ok(())
}
