//! The capture's `meta` table, typed: one constant per key ([`key`], used
//! by every writer and reader), [`RunMeta`] (every key, read once), the
//! loss account ([`Loss`]) and [`Completeness`] with the one rule for
//! "complete".

use std::collections::HashMap;

use rusqlite::Connection;
use sha2::{Digest, Sha256};

use super::{Capture, DISK_FULL_LOSS_PREFIX, MAX_SIZE_LOSS_PREFIX, StoreError};

/// Every key the `meta` table holds, one constant each: the writer and the
/// readers name a key only through these.
pub mod key {
    /// The file is a capture: always [`crate::store::FORMAT`].
    pub const FORMAT: &str = "format";
    /// The capture format's version ([`crate::store::SCHEMA_VERSION`]).
    pub const SCHEMA_VERSION: &str = "schema_version";
    /// The recorder's version.
    pub const TOOL_VERSION: &str = "tool_version";
    /// The recording host's node name.
    pub const HOST: &str = "host";
    /// The kernel release and machine (`6.8.0 x86_64`).
    pub const KERNEL: &str = "kernel";
    /// RFC 3339 wall time of the start anchor.
    pub const STARTED_AT: &str = "started_at";
    /// RFC 3339 wall time of the stop anchor.
    pub const ENDED_AT: &str = "ended_at";
    /// `false` from the start, `true` once the recorder finished.
    pub const COMPLETE: &str = "complete";
    /// Why the recording ended.
    pub const END_REASON: &str = "end_reason";
    /// The recorded command's exit status (as a shell reports it).
    pub const COMMAND_EXIT_STATUS: &str = "command_exit_status";
    /// The recorder's own pid.
    pub const RECORDER_PID: &str = "recorder_pid";
    /// The kernel ring buffer's size.
    pub const RING_BUFFER_BYTES: &str = "ring_buffer_bytes";
    /// `record --all-users`.
    pub const ALL_USERS: &str = "all_users";
    /// `record --wire`: the relay's routes, a JSON array of "KNOB → upstream".
    pub const WIRE_ROUTES: &str = "wire_routes";
    /// `record --wire`: the relay's own address (`127.0.0.1:PORT`), which the
    /// recorded agents connect to.
    pub const WIRE_RELAY: &str = "wire_relay";
    /// `record --wire`: the relay's counts at the end (JSON: exchanges,
    /// errors, bytes each way, connections).
    pub const WIRE_STATS: &str = "wire_stats";
    /// The recorded command's argv, a JSON array of strings.
    pub const COMMAND: &str = "command";
    /// `record --pid`, a JSON array.
    pub const TARGET_PIDS: &str = "target_pids";
    /// `record --agent` (empty without it).
    pub const TARGET_AGENT: &str = "target_agent";
    /// Who the command ran as: `NAME (uid U, gid G)`.
    pub const RUN_AS: &str = "run_as";
    /// What started the recording when not the `record` command (`top`).
    pub const STARTED_BY: &str = "started_by";
    /// The recorded containers (`record --container`), a JSON array.
    pub const CONTAINERS: &str = "containers";
    /// The kernel programs, a JSON array of `{name, hook, attached, error}`.
    pub const PROGRAMS: &str = "programs";
    /// Why program statistics were unavailable.
    pub const PROGRAM_STATS_ERROR: &str = "program_stats_error";
    /// Per-program run counts and time (`--program-stats`), JSON.
    pub const PROGRAM_STATS: &str = "program_stats";
    /// A note on tracefs (where it was found or mounted).
    pub const TRACEFS: &str = "tracefs";
    /// The recorded commands' TMPDIRs, a JSON array.
    pub const TMPDIRS: &str = "tmpdirs";
    /// Other users' processes left out (under sudo without `--all-users`).
    pub const SKIPPED_OTHER_USERS: &str = "skipped_other_users";
    /// Records the writer could not decode.
    pub const DECODE_ERRORS: &str = "decode_errors";
    /// "disk full at T, N events not stored": storing stopped early.
    pub const STORING_STOPPED: &str = "storing_stopped";
    /// The recorder's peak RSS, KiB.
    pub const RECORDER_PEAK_RSS_KIB: &str = "recorder_peak_rss_kib";
    /// The recorder's CPU time, seconds (`{:.3}`).
    pub const RECORDER_CPU_SECONDS: &str = "recorder_cpu_seconds";
    /// Why the messaging log was not read whole (`session message`).
    pub const SESSION_MESSAGES_NOTE: &str = "external_messages_note";
    /// The sessions stored from inside containers, a JSON array.
    pub const CONTAINER_SESSIONS: &str = "container_sessions";
    /// The audit policy's denied files at the start (`record --audit`), JSON.
    pub const DENIED_INODES: &str = "denied_inodes";
    /// The audit policy's denied executables at the start, JSON.
    pub const DENIED_EXE_INODES: &str = "denied_exe_inodes";
    /// How many problems reading the sessions' MCP configuration had
    /// (absent when none).
    pub const MCP_CONFIG_PROBLEMS: &str = "mcp_config_problems";
    /// The recorded command's `OPENCODE_CONFIG_CONTENT` reduced to its MCP
    /// servers (`sessions::mcp::config_content_to_keep`), JSON: where
    /// enrichment finds the servers of an opencode session configured
    /// there.
    pub const OPENCODE_CONFIG_CONTENT: &str = "opencode_config_content";
    /// `record --enforce`: the mode, the counts and the rules audited but
    /// not enforced, JSON (`store::enforcement::EnforcementMeta`).
    pub const ENFORCEMENT: &str = "enforcement";

    /// Every key above.
    pub const ALL: [&str; 36] = [
        FORMAT,
        SCHEMA_VERSION,
        TOOL_VERSION,
        HOST,
        KERNEL,
        STARTED_AT,
        ENDED_AT,
        COMPLETE,
        END_REASON,
        COMMAND_EXIT_STATUS,
        RECORDER_PID,
        RING_BUFFER_BYTES,
        ALL_USERS,
        COMMAND,
        TARGET_PIDS,
        TARGET_AGENT,
        RUN_AS,
        STARTED_BY,
        CONTAINERS,
        PROGRAMS,
        PROGRAM_STATS_ERROR,
        PROGRAM_STATS,
        TRACEFS,
        TMPDIRS,
        SKIPPED_OTHER_USERS,
        DECODE_ERRORS,
        STORING_STOPPED,
        RECORDER_PEAK_RSS_KIB,
        RECORDER_CPU_SECONDS,
        SESSION_MESSAGES_NOTE,
        CONTAINER_SESSIONS,
        DENIED_INODES,
        DENIED_EXE_INODES,
        MCP_CONFIG_PROBLEMS,
        OPENCODE_CONFIG_CONTENT,
        ENFORCEMENT,
    ];
}

/// One kernel program as the capture lists it (meta `programs`); a field
/// the capture did not say is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramMeta {
    pub name: Option<String>,
    pub hook: Option<String>,
    pub attached: Option<bool>,
    pub error: Option<String>,
}

/// Everything the `meta` table says of the run, typed, read once
/// ([`Capture::run_meta`]). A key the capture lacks (an older recorder, an
/// unfinished run) is `None` or empty; a value that does not parse is
/// treated as absent: the capture is input, a bad value never invents a fact.
#[derive(Debug, Clone, Default)]
pub struct RunMeta {
    pub tool_version: Option<String>,
    pub host: Option<String>,
    pub kernel: Option<String>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    /// The recorder finished (meta `complete` = `true`).
    pub recorder_finished: bool,
    /// Meta `complete` exactly as stored, for messages that quote it.
    pub complete_value: Option<String>,
    /// Why the recording ended (an empty value is none).
    pub end_reason: Option<String>,
    /// The recorded command's argv (empty for `--pid`/`--agent` recordings).
    pub command: Vec<String>,
    /// The recorded command's exit status, when the capture says one.
    pub command_exit_status: Option<i32>,
    pub recorder_pid: Option<u32>,
    pub ring_buffer_bytes: Option<u64>,
    pub all_users: Option<bool>,
    pub target_pids: Vec<u32>,
    /// `record --agent` (an empty value is none).
    pub target_agent: Option<String>,
    pub run_as: Option<String>,
    pub started_by: Option<String>,
    /// The recorded containers, JSON as stored.
    pub containers_json: Option<String>,
    pub programs: Vec<ProgramMeta>,
    pub program_stats_error: Option<String>,
    /// Per-program statistics, JSON as stored.
    pub program_stats_json: Option<String>,
    pub tracefs: Option<String>,
    pub tmpdirs: Vec<String>,
    pub skipped_other_users: Option<u64>,
    pub decode_errors: Option<u64>,
    /// "disk full at T, N events not stored".
    pub storing_stopped: Option<String>,
    pub recorder_peak_rss_kib: Option<u64>,
    pub recorder_cpu_seconds: Option<f64>,
    pub session_messages_note: Option<String>,
    /// The sessions stored from inside containers, JSON as stored.
    pub container_sessions_json: Option<String>,
    /// The audit policy's denied files at the start, JSON as stored (the
    /// audit parses it: the type is the audit's).
    pub denied_inodes_json: Option<String>,
    pub denied_exe_inodes_json: Option<String>,
    /// Problems reading the sessions' MCP configuration (none: `None`).
    pub mcp_config_problems: Option<u64>,
    /// Identifies the capture: start time, host and recorder pid as stored.
    capture_key: [u8; 32],
}

impl RunMeta {
    /// Types the `meta` rows (key → value).
    pub fn from_rows(mut rows: HashMap<String, String>) -> Self {
        let mut take = |k: &str| rows.remove(k);
        // Hashed as stored: the ids every export derives must not move when
        // a value is typed differently.
        let mut h = Sha256::new();
        let (started_at, host, pid) = (
            take(key::STARTED_AT),
            take(key::HOST),
            take(key::RECORDER_PID),
        );
        for part in [&started_at, &host, &pid] {
            h.update(part.as_deref().unwrap_or("").as_bytes());
            h.update([0]);
        }
        let complete_value = take(key::COMPLETE);
        Self {
            tool_version: take(key::TOOL_VERSION),
            kernel: take(key::KERNEL),
            ended_at: take(key::ENDED_AT),
            recorder_finished: complete_value.as_deref() == Some("true"),
            complete_value,
            end_reason: nonempty(take(key::END_REASON)),
            command: json_list(take(key::COMMAND)),
            command_exit_status: parsed(nonempty(take(key::COMMAND_EXIT_STATUS))),
            recorder_pid: parsed(pid.clone()),
            ring_buffer_bytes: parsed(take(key::RING_BUFFER_BYTES)),
            all_users: parsed(take(key::ALL_USERS)),
            target_pids: json_list(take(key::TARGET_PIDS)),
            target_agent: nonempty(take(key::TARGET_AGENT)),
            run_as: take(key::RUN_AS),
            started_by: take(key::STARTED_BY),
            containers_json: take(key::CONTAINERS),
            programs: programs(take(key::PROGRAMS).as_deref()),
            program_stats_error: take(key::PROGRAM_STATS_ERROR),
            program_stats_json: take(key::PROGRAM_STATS),
            tracefs: take(key::TRACEFS),
            tmpdirs: json_list(take(key::TMPDIRS)),
            skipped_other_users: parsed(take(key::SKIPPED_OTHER_USERS)),
            decode_errors: parsed(take(key::DECODE_ERRORS)),
            storing_stopped: take(key::STORING_STOPPED),
            recorder_peak_rss_kib: parsed(take(key::RECORDER_PEAK_RSS_KIB)),
            recorder_cpu_seconds: parsed(take(key::RECORDER_CPU_SECONDS)),
            session_messages_note: take(key::SESSION_MESSAGES_NOTE),
            container_sessions_json: take(key::CONTAINER_SESSIONS),
            denied_inodes_json: take(key::DENIED_INODES),
            denied_exe_inodes_json: take(key::DENIED_EXE_INODES),
            mcp_config_problems: parsed(take(key::MCP_CONFIG_PROBLEMS)),
            started_at,
            host,
            capture_key: h.finalize().into(),
        }
    }

    /// Identifies the capture (its start time, host and recorder pid as
    /// stored): the seed of every id an export derives, so they are stable
    /// across runs.
    pub fn capture_key(&self) -> [u8; 32] {
        self.capture_key
    }
}

/// An empty value says nothing.
fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|v| !v.is_empty())
}

/// A value that does not parse is treated as absent.
fn parsed<T: std::str::FromStr>(v: Option<String>) -> Option<T> {
    v.and_then(|v| v.parse().ok())
}

/// A JSON array; empty when absent or when it does not parse.
fn json_list<T: serde::de::DeserializeOwned>(v: Option<String>) -> Vec<T> {
    v.and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default()
}

/// Meta `programs`: each entry's fields as far as they are what they
/// should be; a value that is no JSON array lists none.
fn programs(raw: Option<&str>) -> Vec<ProgramMeta> {
    let list: Vec<serde_json::Value> = raw
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    list.iter()
        .map(|p| ProgramMeta {
            name: text(&p["name"]),
            hook: text(&p["hook"]),
            attached: p["attached"].as_bool(),
            error: text(&p["error"]),
        })
        .collect()
}

/// What a capture lost, from every source: kernel reserve failures per
/// kind, per-CPU sequence gaps, and events not stored (`--max-size`, a
/// full disk). Zero is a fact too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loss {
    /// Every `loss` row, `(kind, count)`, by kind, zeros included.
    pub counters: Vec<(String, u64)>,
    /// The kernel's (and other losses'), by kind, zeros included.
    pub kernel: Vec<(String, u64)>,
    /// Events not stored: once the capture reached `--max-size`, or once
    /// the disk was full (`disk_full:seed` counts processes found in /proc,
    /// not events, and is in neither).
    pub not_stored: u64,
    /// Of `not_stored`, those lost to a full disk.
    pub disk_full: u64,
    /// Records missing by per-CPU sequence number.
    pub missing_by_sequence: u64,
}

impl Loss {
    /// Splits the `loss` rows as readers show them.
    pub fn from_counters(counters: Vec<(String, u64)>, missing_by_sequence: u64) -> Self {
        let disk_full_seed = format!("{DISK_FULL_LOSS_PREFIX}seed");
        let mut loss = Loss {
            missing_by_sequence,
            ..Default::default()
        };
        for (k, n) in &counters {
            if k.starts_with(DISK_FULL_LOSS_PREFIX) {
                if *k != disk_full_seed {
                    loss.not_stored += n;
                    loss.disk_full += n;
                }
            } else if k.starts_with(MAX_SIZE_LOSS_PREFIX) {
                loss.not_stored += n;
            } else {
                loss.kernel.push((k.clone(), *n));
            }
        }
        loss.counters = counters;
        loss
    }

    /// Events lost in the kernel, all kinds.
    pub fn lost_in_kernel(&self) -> u64 {
        self.kernel.iter().map(|(_, n)| n).sum()
    }

    /// The kernel's kinds that lost any.
    pub fn kernel_nonzero(&self) -> Vec<(String, u64)> {
        nonzero(&self.kernel)
    }

    /// Every counter that counted any.
    pub fn counters_nonzero(&self) -> Vec<(String, u64)> {
        nonzero(&self.counters)
    }

    /// No exit record can be missing: none lost in the kernel, no gap.
    pub fn exits_whole(&self) -> bool {
        !self.kernel.iter().any(|(k, n)| k == "exit" && *n > 0) && self.missing_by_sequence == 0
    }
}

fn nonzero(counts: &[(String, u64)]) -> Vec<(String, u64)> {
    counts.iter().filter(|(_, n)| *n > 0).cloned().collect()
}

/// Whether a capture holds the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Completeness {
    /// The recorder finished (meta `complete`).
    pub recorder_finished: bool,
    /// Events lost in the kernel.
    pub lost_in_kernel: u64,
    /// Events not stored (`--max-size`, a full disk).
    pub not_stored: u64,
    /// Records missing by per-CPU sequence number.
    pub missing_by_sequence: u64,
}

impl Completeness {
    pub fn of(meta: &RunMeta, loss: &Loss) -> Self {
        Self {
            recorder_finished: meta.recorder_finished,
            lost_in_kernel: loss.lost_in_kernel(),
            not_stored: loss.not_stored,
            missing_by_sequence: loss.missing_by_sequence,
        }
    }

    /// Nothing lost, left unstored or found missing.
    pub fn nothing_lost(&self) -> bool {
        self.lost_in_kernel == 0 && self.not_stored == 0 && self.missing_by_sequence == 0
    }

    /// Complete only if the recorder finished and nothing was lost, left
    /// unstored or found missing: a capture with loss is never complete.
    pub fn complete(&self) -> bool {
        self.recorder_finished && self.nothing_lost()
    }
}

fn meta_rows(conn: &Connection) -> rusqlite::Result<HashMap<String, String>> {
    let mut st = conn.prepare("SELECT key, value FROM meta")?;
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
}

impl Capture {
    /// Every `meta` key, typed, in one read.
    pub fn run_meta(&self) -> Result<RunMeta, StoreError> {
        meta_rows(&self.conn)
            .map(RunMeta::from_rows)
            .map_err(|e| self.query_err(e))
    }

    /// The loss account: every counter and the sequence gaps' sum.
    pub fn loss_account(&self) -> Result<Loss, StoreError> {
        Ok(Loss::from_counters(self.loss()?, self.gap_missing()?))
    }

    /// The sequence gaps, by time.
    pub fn gaps(&self) -> Result<Vec<super::read::Gap>, StoreError> {
        super::read::gaps(&self.conn).map_err(|e| self.query_err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_listed_once() {
        let unique: std::collections::HashSet<&str> = key::ALL.into_iter().collect();
        assert_eq!(unique.len(), key::ALL.len());
    }

    #[test]
    fn run_meta_types_what_parses_and_drops_what_does_not() {
        let rows: HashMap<String, String> = [
            (key::COMPLETE, "true"),
            (key::COMMAND, r#"["sh","-c","true"]"#),
            (key::COMMAND_EXIT_STATUS, "3"),
            (key::RECORDER_PID, "not a pid"),
            (key::END_REASON, ""),
            (
                key::PROGRAMS,
                r#"[{"name":"a","attached":false,"error":"e"},{"name":"b","attached":true}]"#,
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let m = RunMeta::from_rows(rows);
        assert!(m.recorder_finished);
        assert_eq!(m.command, ["sh", "-c", "true"]);
        assert_eq!(m.command_exit_status, Some(3));
        assert_eq!(m.recorder_pid, None);
        assert_eq!(m.end_reason, None);
        assert_eq!(m.programs.len(), 2);
        assert_eq!(m.programs[0].attached, Some(false));
        assert_eq!(m.programs[0].error.as_deref(), Some("e"));
        // The key hashes the stored text, the bad pid included.
        let other = RunMeta::from_rows(
            [(key::RECORDER_PID.to_owned(), "1".to_owned())]
                .into_iter()
                .collect(),
        );
        assert_ne!(m.capture_key(), other.capture_key());
    }

    #[test]
    fn loss_splits_kernel_from_not_stored_and_completeness_needs_both() {
        let loss = Loss::from_counters(
            vec![
                ("disk_full:exec".into(), 2),
                ("disk_full:seed".into(), 5),
                ("exit".into(), 0),
                ("max_size:open".into(), 3),
                ("open".into(), 4),
            ],
            1,
        );
        assert_eq!(loss.lost_in_kernel(), 4);
        assert_eq!((loss.not_stored, loss.disk_full), (5, 2));
        assert_eq!(loss.kernel_nonzero(), vec![("open".to_owned(), 4)]);
        assert_eq!(loss.counters_nonzero().len(), 4);
        assert!(!loss.exits_whole());
        let meta = RunMeta {
            recorder_finished: true,
            ..Default::default()
        };
        assert!(!Completeness::of(&meta, &loss).complete());
        assert!(Completeness::of(&meta, &Loss::default()).complete());
        assert!(!Completeness::of(&RunMeta::default(), &Loss::default()).complete());
    }
}
