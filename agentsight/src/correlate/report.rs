//! The report types: what `correlate --json` prints (documented in
//! `docs/correlate.md`) and the words its vocabularies use. Every enum
//! serializes to the word its `as_str` returns, so the JSON and the text
//! timeline say the same thing.

use serde::Serialize;

use crate::{
    matching,
    sessions::{PathAccess, ToolCategory, ToolPath, ToolStatus},
    store::read::ContainerRef,
    vocabulary::vocabulary,
};

vocabulary! {
    /// What an observed activity did.
    Op {
        Exec => "exec",
        Write => "write",
        Read => "read",
        Delete => "delete",
        Rename => "rename",
        Mkdir => "mkdir",
        Link => "link",
        Connect => "connect",
        Bind => "bind",
        Listen => "listen",
    }
}

impl Op {
    /// A socket operation (its activity has an address, not a path).
    pub fn is_network(self) -> bool {
        matches!(self, Op::Connect | Op::Bind | Op::Listen)
    }
}

vocabulary! {
    /// Why an activity is attributed to a call, strongest first (see the
    /// module documentation).
    Reason {
        ArgvMatch => "argv_match",
        Descendant => "descendant",
        PathMatch => "path_match",
        ViaRename => "via_rename",
        TimeWindow => "time_window",
        /// Activity of the MCP server process (tree) an MCP call names,
        /// inside the call's window.
        McpServer => "mcp_server",
    }
}

vocabulary! {
    /// Who did an activity no call claims.
    By {
        /// The agent's own process (a tree's root or a transcript writer).
        Runtime => "runtime",
        /// Another process of the tree.
        Child => "child",
    }
}

vocabulary! {
    /// What a call claimed that was not seen: the exec of its command, or
    /// the path access it names.
    Claim {
        Exec => "exec",
        Read => "read",
        Write => "write",
        Create => "create",
        Delete => "delete",
        RenameFrom => "rename_from",
        Rename => "rename",
    }
}

impl From<PathAccess> for Claim {
    fn from(a: PathAccess) -> Self {
        match a {
            PathAccess::Read => Claim::Read,
            PathAccess::Write => Claim::Write,
            PathAccess::Create => Claim::Create,
            PathAccess::Delete => Claim::Delete,
            PathAccess::RenameFrom => Claim::RenameFrom,
            PathAccess::Rename => Claim::Rename,
        }
    }
}

vocabulary! {
    /// How a call's outcome disagrees with what its processes did.
    MismatchKind {
        /// A read-only call whose processes changed a path it names.
        ReadWrote => "read_wrote",
        /// A non-zero exit where the transcript says ok.
        ExitStatus => "exit_status",
        FailedButExitZero => "failed_but_exit_zero",
        /// A matched process exited with another code than the stated one.
        ExitCode => "exit_code",
    }
}

vocabulary! {
    /// The clocks compared.
    ClockBasis {
        AnchorsVsTranscript => "capture clock_anchors (CLOCK_MONOTONIC to UTC) vs transcript UTC timestamps",
    }
}

vocabulary! {
    /// How a call window's tolerance was set.
    ToleranceBasis {
        MeasuredSkew => "measured skew + 1 ms",
        Default => "default (no argv match to measure the skew)",
    }
}

vocabulary! {
    /// Where the session model came from.
    SessionSource {
        /// Stored in the capture by `record`.
        Capture => "capture",
        /// Parsed from the live transcript in the home.
        Home => "home",
        /// Parsed inside a container by its bridge (`--docker-container`).
        Container => "container",
    }
}

/// What matching made of a process tree (matching's own vocabulary).
pub use crate::matching::TreeStatus;

/// One observed activity.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Activity {
    pub event_id: i64,
    pub ts: String,
    pub mono_ns: u64,
    pub pid: u32,
    pub process_id: i64,
    pub comm: String,
    pub op: Op,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// The file the kernel opened, when it is not `path` (a symlink, a
    /// bind mount, `/proc/self/fd/N`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    pub result: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// For execs: how the process ended (`None` while running at the end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Why it is attributed; `None` when unclaimed.
    pub reason: Option<Reason>,
    /// Happened after the call's result (+ tolerance).
    pub late: bool,
    /// For unclaimed activity: who did it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<By>,
    /// The container its process ran in; absent for a host process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerRef>,
    /// Refused by `record --enforce` before it happened: the denial's row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<Blocked>,
    #[serde(skip)]
    pub(super) wall_ms: i64,
    /// The process's index in the capture view's process table.
    #[serde(skip)]
    pub(super) proc_ix: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolReport {
    pub tool_index: usize,
    pub call_id: Option<String>,
    pub name: String,
    pub category: ToolCategory,
    pub command: Option<String>,
    pub paths: Vec<ToolPath>,
    pub status: ToolStatus,
    /// The exit code the transcript states (`None`: it says none).
    pub exit_code: Option<i32>,
    pub start: Option<String>,
    pub end: Option<String>,
    pub duration_ms: Option<i64>,
    /// Exit codes of the argv-matched processes, in order.
    pub exit_codes: Vec<Option<i64>>,
    /// For an MCP call: its server, as configured and as found running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpServerInfo>,
    pub activity: Vec<Activity>,
}

/// The server of an MCP call (`docs/correlate.md`, MCP).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct McpServerInfo {
    /// The configured server name.
    pub server: String,
    /// The server's own tool name.
    pub tool: Option<String>,
    /// `stdio`, `http`, `sse`; `None` when no configuration declared the
    /// server (its activity cannot be told apart).
    pub transport: Option<String>,
    /// A server whose tools' effects are known (`filesystem`), whose calls'
    /// arguments are checked as claims.
    pub kind: Option<String>,
    /// The process that ran a stdio server, when found.
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PromptReport {
    pub index: Option<usize>,
    pub ts: Option<String>,
    pub text: String,
    pub tools: Vec<ToolReport>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Claimed {
    pub tool_index: usize,
    pub call_id: Option<String>,
    pub name: String,
    pub what: Claim,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Mismatch {
    pub tool_index: usize,
    pub call_id: Option<String>,
    pub name: String,
    pub kind: MismatchKind,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Late {
    pub tool_index: usize,
    pub call_id: Option<String>,
    pub event_id: i64,
    pub op: Op,
    pub ts: String,
    pub after_end_ms: i64,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Flags {
    /// Tool indices of the calls that ended before the recording began
    /// (a session resumed, continued or adopted mid-way): nothing of them
    /// could be observed, so they are not judged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before_recording: Vec<usize>,
    pub claimed_not_observed: Vec<Claimed>,
    pub observed_not_claimed: Vec<Activity>,
    pub mismatches: Vec<Mismatch>,
    pub late: Vec<Late>,
}

/// The agent runtime's own activity outside every call, of one program:
/// the runtime's own processes, or a helper it started outside calls (with
/// the helper's children), never flagged (rules in `docs/correlate.md`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RuntimeGroup {
    /// The program: the runtime process's, or the helper's the runtime
    /// started (its children are counted under it).
    pub program: String,
    /// `runtime`: the runtime's own processes; `child`: its helpers.
    pub by: By,
    /// Distinct processes.
    pub processes: usize,
    /// Activities (`activity.len()`).
    pub count: usize,
    /// Every activity of the group, in time order.
    pub activity: Vec<Activity>,
}

impl RuntimeGroup {
    /// The first `n` distinct activities as `OP WHAT` (text and report).
    pub fn examples(&self, n: usize) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in &self.activity {
            let line = format!("{} {}", a.op, describe(a));
            if !out.contains(&line) {
                out.push(line);
                if out.len() == n {
                    break;
                }
            }
        }
        out
    }
}

/// Writes by the agent to its own state (transcripts, caches under its
/// provider directory): listed as counts, not flagged.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Bookkeeping {
    pub path: String,
    pub op: Op,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClockInfo {
    pub basis: ClockBasis,
    /// Slack on both ends of a call's own window (every attribution but
    /// argv_match, and "late").
    pub tolerance_ms: i64,
    /// How `tolerance_ms` was set.
    pub tolerance_basis: ToleranceBasis,
    /// Slack on both ends when looking for a call's own command's exec.
    pub argv_search_ms: i64,
    pub anchors: usize,
    /// How far the transcript clock appears ahead of the capture's (ms):
    /// the largest amount by which a matched exec preceded its call; 0
    /// when every exec followed its call.
    pub skew_ms: i64,
    /// Matched execs used for the estimate.
    pub skew_samples: usize,
    /// Median delay from a call's timestamp to its matched exec (ms).
    pub median_exec_delay_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BindingInfo {
    pub root_pid: u32,
    pub root_process_id: i64,
    pub root_argv: Vec<String>,
    pub evidence: matching::Evidence,
    pub evidence_count: i64,
    pub evidence_path: Option<String>,
    pub from: String,
    pub to: Option<String>,
    /// The container the tree's root ran in; absent for a host tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerRef>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TreeInfo {
    pub root_pid: u32,
    pub root_process_id: i64,
    pub root_argv: Vec<String>,
    pub status: TreeStatus,
    pub note: Option<String>,
    /// The container the tree's root ran in; absent for a host tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerRef>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    pub provider: String,
    pub session_id: String,
    pub cwd: Option<String>,
    pub source_path: String,
    pub start: Option<String>,
    pub end: Option<String>,
    pub models: Vec<String>,
    pub tool_count: usize,
}

/// The whole correlation of one session with one capture.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub session: SessionInfo,
    pub capture: String,
    pub session_source: SessionSource,
    pub clock: ClockInfo,
    pub bindings: Vec<BindingInfo>,
    pub prompts: Vec<PromptReport>,
    pub flags: Flags,
    pub agent_bookkeeping: Vec<Bookkeeping>,
    /// The agent runtime's own activity outside every call, by program
    /// (first seen first); not flagged.
    pub runtime_activity: Vec<RuntimeGroup>,
    /// Trees of the capture bound to no session (or left ambiguous).
    pub unmatched_trees: Vec<TreeInfo>,
    /// The `agentsight session message` submissions to this session made
    /// while the capture was recording (`external_messages`), by time.
    pub external_messages: Vec<crate::store::read::SessionMessage>,
    /// The model exchanges of a capture recorded with `--wire`, joined to
    /// this session's turns; absent without a wire layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wire: Option<super::wire::WireReport>,
}

/// What refused an access (`record --enforce`): the `enforcement_denials`
/// row, the policy rule and the mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocked {
    pub denial_id: i64,
    pub rule: String,
    pub mechanism: String,
}

/// One line describing an activity (for text output and flag details).
pub fn describe(a: &Activity) -> String {
    match a.op {
        Op::Exec => a
            .argv
            .as_ref()
            .map(|v| crate::sessions::util::join_argv(v))
            .unwrap_or_default(),
        Op::Connect | Op::Bind | Op::Listen => format!(
            "{}:{}{}",
            a.addr.as_deref().unwrap_or("?"),
            a.port.map(|p| p.to_string()).unwrap_or_default(),
            a.errno
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ),
        Op::Rename => format!(
            "{} → {}",
            a.old_path.as_deref().unwrap_or("?"),
            a.path.as_deref().unwrap_or("?")
        ),
        _ => match &a.real_path {
            Some(real) => format!("{} (opened {real})", a.path.as_deref().unwrap_or("?")),
            None => a.path.clone().unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON word of every variant is its `as_str` (what text prints).
    #[test]
    fn vocabularies_serialize_as_their_words() {
        fn check<T: Serialize + Copy>(all: &[T], word: fn(T) -> &'static str) {
            for &v in all {
                let json = serde_json::to_string(&v).unwrap();
                assert_eq!(json, format!("\"{}\"", word(v)));
            }
        }
        check(Op::ALL, Op::as_str);
        check(Reason::ALL, Reason::as_str);
        check(By::ALL, By::as_str);
        check(Claim::ALL, Claim::as_str);
        check(MismatchKind::ALL, MismatchKind::as_str);
        check(ClockBasis::ALL, ClockBasis::as_str);
        check(ToleranceBasis::ALL, ToleranceBasis::as_str);
        check(SessionSource::ALL, SessionSource::as_str);
        check(TreeStatus::ALL, TreeStatus::as_str);
        assert_eq!(format!("{:<7}|", Op::Exec), "exec   |");
        for a in [
            PathAccess::Read,
            PathAccess::Write,
            PathAccess::Create,
            PathAccess::Delete,
            PathAccess::RenameFrom,
            PathAccess::Rename,
        ] {
            assert_eq!(Claim::from(a).as_str(), a.as_str());
        }
    }
}
