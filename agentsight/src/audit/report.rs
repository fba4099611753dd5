//! The report types: what `audit --format json` prints (and SARIF/JUnit
//! are rendered from), documented in `docs/audit.md`.

use serde::Serialize;

use super::policy::Severity;
use crate::vocabulary::as_word;

/// What a correlation row of the capture says of its event or call (the
/// store's vocabulary: it owns the `correlations` table).
pub use crate::store::sessions::Role;

/// What a finding is about: the event kind it was judged on, or what a
/// finding without an event stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FindingKind {
    /// The `events.kind` (`openat`, `exec`, `connect`, …).
    Event(String),
    /// Records lost in the kernel.
    Loss,
    /// Per-CPU sequence gaps.
    Gap,
    /// The recorder did not finish.
    Incomplete,
    /// What the audit could not check.
    Note,
    /// A correlate flag with no event (`claimed_not_observed`, `mismatch`).
    Correlation(Role),
    /// A stored `agentsight session message` submission.
    SessionMessage,
    /// A stored MCP server the policy's `[mcp]` does not allow.
    McpServer,
    /// A model exchange of the wire layer (`record --wire`).
    WireExchange,
}

impl FindingKind {
    pub fn as_str(&self) -> &str {
        match self {
            FindingKind::Event(kind) => kind,
            FindingKind::Loss => "loss",
            FindingKind::Gap => "gap",
            FindingKind::Incomplete => "incomplete",
            FindingKind::Note => "note",
            FindingKind::Correlation(role) => role.as_str(),
            FindingKind::SessionMessage => "external_message",
            FindingKind::McpServer => "mcp_server",
            FindingKind::WireExchange => "wire_exchange",
        }
    }
}

/// How a finding's subject was accessed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Delete,
    Exec,
    Connect,
    /// `sendto`/`sendmsg`/`sendmmsg` to a destination.
    Send,
    /// A DNS name asked.
    Dns,
    /// A correlate-derived finding: the event's kind as it is.
    Event(String),
}

impl Access {
    pub fn as_str(&self) -> &str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Delete => "delete",
            Access::Exec => "exec",
            Access::Connect => "connect",
            Access::Send => "send",
            Access::Dns => "dns",
            Access::Event(kind) => kind,
        }
    }
}

as_word!(FindingKind, Access);

#[derive(Debug, Clone, Serialize)]
pub struct ChainEntry {
    pub pid: i64,
    pub process_id: i64,
    pub argv: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessInfo {
    pub pid: i64,
    pub process_id: i64,
    pub argv: Vec<String>,
    /// From the recorded root (or the oldest known ancestor) down to this process.
    pub chain: Vec<ChainEntry>,
}

/// The container of a finding's process (the store's: correlate says it too).
pub use crate::store::read::ContainerRef;

#[derive(Debug, Clone, Serialize)]
pub struct ToolRef {
    pub provider: String,
    pub session_id: String,
    pub tool_index: Option<i64>,
    /// The call's tool name, for an MCP call (`mcp__fs__read_text_file`);
    /// absent for built-in tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub call_id: Option<String>,
    pub role: Role,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Evidence {
    /// `events.id` of the occurrences folded into this finding (the first
    /// `fold::MAX_EVENT_IDS`; a folded group: each example's first).
    pub event_ids: Vec<i64>,
    /// How many syscalls it stands for (a stored row may repeat).
    pub count: u64,
    pub result: Option<i64>,
    pub errno: Option<String>,
    pub flags: Option<String>,
    /// The policy entry that decided, when one did.
    pub matched: Option<String>,
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub rule: String,
    pub severity: Severity,
    pub message: String,
    pub kind: FindingKind,
    pub access: Option<Access>,
    pub path: Option<String>,
    pub addr: Option<String>,
    pub port: Option<u16>,
    pub query: Option<String>,
    pub argv: Option<Vec<String>>,
    /// RFC 3339 UTC of the first occurrence.
    pub time: Option<String>,
    pub process: Option<ProcessInfo>,
    /// The container of the process the finding cites; absent (not null)
    /// for a host process, so host-only reports are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerRef>,
    pub session: Option<ToolRef>,
    pub evidence: Evidence,
    /// Set when this finding stands for a group of many (see `fold`).
    pub folded: Option<Folded>,
    /// `record --enforce` refused the access before it happened (a row of
    /// `enforcement_denials`).
    pub blocked: bool,
}

/// Many findings of one rule, access and pattern, reported as one (see
/// `fold`).
#[derive(Debug, Clone, Serialize)]
pub struct Folded {
    /// The path pattern (`/dir/*`), executable, destination or DNS name the
    /// folded findings share.
    pub pattern: String,
    /// How many distinct findings (each would have been its own) are folded.
    pub findings: u64,
    /// How many processes they came from.
    pub processes: u64,
    /// The first `fold::FOLD_EXAMPLES` of them, in full, in time order.
    pub examples: Vec<Finding>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuleInfo {
    pub id: String,
    pub severity: Severity,
    pub description: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub capture: String,
    pub policy: String,
    pub workspace: Option<String>,
    pub home: Option<String>,
    /// The recorded command's TMPDIR(s), allowed by `${tmpdir}/**`.
    pub tmpdirs: Vec<String>,
    /// Whether the capture holds bindings/correlations to attribute findings with.
    pub correlations: bool,
    pub rules: Vec<RuleInfo>,
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn count(&self, s: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == s).count()
    }

    pub fn passed(&self) -> bool {
        self.count(Severity::Error) == 0
    }
}

/// How process chains and TCP outcomes are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// From what the single pass over the events collected (exec argv and
    /// `tcp_state` history), for the findings kept; findings folded per
    /// group. What `audit` does.
    #[default]
    Streaming,
    /// The approach before: two SQL queries per finding occurrence and chain
    /// entry (`events` by process, no fitting index), every finding and
    /// event id kept. Only for `cargo xtask bench audit`'s baseline.
    PerFindingQueries,
}
