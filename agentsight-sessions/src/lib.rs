//! Native sessions: discovery and parsing of agent transcripts into one model.
//!
//! Claude Code, Codex CLI, Gemini CLI and Cursor each write their own
//! transcript format (each parser module describes the records it reads, and
//! `fixtures/sessions/` holds examples). This crate finds
//! those files under provider-owned roots ([`discovery`]) and parses any of
//! them into one intermediate representation, [`AgentSession`].
//!
//! Rules that hold for every field of the model:
//! - **Missing means the source did not say it.** Optional fields stay `None`
//!   rather than being guessed; end times are never synthesized.
//! - **Timestamps** are `i64` milliseconds since the Unix epoch, UTC (fields
//!   end in `_ms`); [`format_ts`] renders them as RFC 3339.
//! - **Tokens** are normalized into [`TokenUsage`] (see its docs for each
//!   provider's mapping); totals count every API response exactly once,
//!   including subagents.
//! - **Bounds**: detail lists are capped ([`Bounds`]); the newest entries are
//!   kept and [`CutNote`] says what was dropped. Usage totals are computed
//!   before cutting, so they stay exact.

pub mod claude;
pub mod codex;
pub mod copilot;
pub mod cursor;
mod de;
pub mod discovery;
mod error;
pub mod gemini;
pub mod live;
pub mod mcp;
pub mod opencode;
mod provider;
pub mod qwen;
pub mod safefs;
/// Helpers shared by the parsers; the library uses a few (opening a
/// transcript, the transcript owner, argv display).
pub mod util;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use discovery::{
    DiscoveryOptions, SessionIndex, SessionRef, SessionSummary, SummarySource, discover,
    find_by_id, provider_roots, session_id_for_path,
};
pub use error::{Result, SessionError};
pub use provider::WatchLayout;
pub use util::{format_ts, parse_ts};

/// The agent that wrote a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Claude,
    Codex,
    Gemini,
    Cursor,
    Copilot,
    Opencode,
    Qwen,
}

impl Provider {
    pub const ALL: [Provider; 7] = [
        Provider::Claude,
        Provider::Codex,
        Provider::Gemini,
        Provider::Cursor,
        Provider::Copilot,
        Provider::Opencode,
        Provider::Qwen,
    ];

    pub fn as_str(self) -> &'static str {
        provider::spec(self).name
    }

    /// The name the provider's CLI is recognised by in a command line
    /// (its program or the script an interpreter runs): `cursor-agent` for
    /// Cursor, else [`Provider::as_str`].
    pub fn cli_name(self) -> &'static str {
        provider::spec(self).cli_name
    }

    /// A session transcript as the scan lists it, given its path relative
    /// to one of this provider's roots.
    pub fn is_transcript(self, rel: &[&str]) -> bool {
        (provider::spec(self).is_transcript)(rel)
    }

    /// The directories under `root` (one of this provider's roots) that
    /// may hold transcripts or lead to them.
    pub fn watch_layout(self, root: &Path) -> provider::WatchLayout {
        (provider::spec(self).watch)(root)
    }

    /// The session id is in the transcript's header, not its file name.
    pub fn id_in_header(self) -> bool {
        provider::spec(self).header_id
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Provider {
    type Err = SessionError;
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        provider::PROVIDERS
            .iter()
            .find(|p| p.name == lower || p.aliases.contains(&lower.as_str()))
            .map(|p| p.provider)
            .ok_or_else(|| SessionError::UnknownProvider(s.to_string()))
    }
}

/// Normalized token counts of one response or a sum of responses.
///
/// Normalization (all fields are disjoint except `reasoning` and `total`):
/// - `input`: prompt tokens that were neither read from nor written to a cache.
/// - `cache_read`: prompt tokens served from a cache.
/// - `cache_creation`: prompt tokens written to a cache (Claude only).
/// - `output`: generated tokens, **including** reasoning tokens.
/// - `reasoning`: the part of `output` spent on reasoning/thoughts.
/// - `total`: `input + cache_read + cache_creation + output`.
///
/// Per provider:
/// - Claude: `input_tokens` already excludes cache reads/writes, so it maps
///   directly; `cache_creation` prefers the sum of `cache_creation.ephemeral_*`
///   when present (as ccusage does); reasoning is not reported separately (0).
/// - Codex: `input_tokens` includes `cached_input_tokens`, so
///   `input = input_tokens - cached`; `output_tokens` already includes
///   `reasoning_output_tokens`. Counts are per-response deltas of the
///   cumulative `total_token_usage`.
/// - Gemini: `input` (promptTokenCount) includes `cached`, so
///   `input = input - cached + tool` (tool-use prompt tokens are prompt
///   tokens); `output = output + thoughts` because candidates exclude thoughts.
/// - Cursor: transcripts carry no usage; `state.vscdb` bubbles give only
///   input/output (no cache split).
/// - Copilot CLI: `session.usage_record`s, de-duplicated by
///   `(sourceSessionId, sequence)`; `inputTokens` holds the whole prompt
///   (Anthropic wire: input + cache write + cache read), so
///   `input = inputTokens - cacheRead - cacheWrite`; cumulative
///   `session.shutdown` totals are never added.
/// - Qwen Code: `usageMetadata` of assistant records; `promptTokenCount`
///   includes `cachedContentTokenCount`, so `input = prompt - cached`;
///   `candidatesTokenCount` already includes `thoughtsTokenCount` on the
///   OpenAI wire (`total = prompt + candidates`), so `output = candidates`
///   (plus thoughts only when the total shows them apart).
/// - opencode: `tokens` of each assistant message (never also its
///   `step-finish` copy); `input` already excludes the cache (`cache.read`,
///   `cache.write` apart) and `output` excludes reasoning, so
///   `output = output + reasoning`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
    pub reasoning: u64,
    pub total: u64,
}

impl TokenUsage {
    /// Builds a usage whose `total` is the sum of the disjoint parts.
    pub fn new(
        input: u64,
        output: u64,
        cache_read: u64,
        cache_creation: u64,
        reasoning: u64,
    ) -> Self {
        TokenUsage {
            input,
            output,
            cache_read,
            cache_creation,
            reasoning,
            total: input
                .saturating_add(output)
                .saturating_add(cache_read)
                .saturating_add(cache_creation),
        }
    }

    pub fn add(&mut self, o: &TokenUsage) {
        self.input = self.input.saturating_add(o.input);
        self.output = self.output.saturating_add(o.output);
        self.cache_read = self.cache_read.saturating_add(o.cache_read);
        self.cache_creation = self.cache_creation.saturating_add(o.cache_creation);
        self.reasoning = self.reasoning.saturating_add(o.reasoning);
        self.total = self.total.saturating_add(o.total);
    }

    pub fn is_zero(&self) -> bool {
        *self == TokenUsage::default()
    }
}

/// A human prompt (a turn boundary).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    /// 0-based position among this session's prompts (stable after cutting:
    /// cut prompts keep their indexes, so later indexes do not shift).
    pub index: usize,
    /// `"<index>:<16 hex FNV-1a 64 of the full text>"`, stable across runs and
    /// platforms; computed before any text truncation.
    pub key: String,
    pub ts_ms: Option<i64>,
    pub text: String,
    /// Byte length of the full text as written by the source.
    pub text_len: usize,
    /// `true` when `text` was shortened by the text budget.
    #[serde(default)]
    pub text_truncated: bool,
}

impl Prompt {
    pub fn new(index: usize, ts_ms: Option<i64>, text: String) -> Self {
        let key = prompt_key(index, &text);
        Prompt {
            index,
            key,
            ts_ms,
            text_len: text.len(),
            text,
            text_truncated: false,
        }
    }
}

/// The stable key of a prompt: index plus a hash of its text.
pub fn prompt_key(index: usize, text: &str) -> String {
    format!("{index}:{:016x}", util::fnv1a64(text.as_bytes()))
}

/// How a tool touched a path, as stated by the tool's own arguments/result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathAccess {
    Read,
    Write,
    Create,
    Delete,
    /// Source of a rename/move.
    RenameFrom,
    /// Destination of a rename/move (`previous_path` holds the source).
    Rename,
}

impl PathAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            PathAccess::Read => "read",
            PathAccess::Write => "write",
            PathAccess::Create => "create",
            PathAccess::Delete => "delete",
            PathAccess::RenameFrom => "rename_from",
            PathAccess::Rename => "rename",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolPath {
    pub path: String,
    pub access: PathAccess,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_path: Option<String>,
}

impl ToolPath {
    pub fn new(path: impl Into<String>, access: PathAccess) -> Self {
        ToolPath {
            path: path.into(),
            access,
            previous_path: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCategory {
    Shell,
    Read,
    Search,
    Edit,
    Web,
    Plan,
    Subagent,
    Mcp,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// A result was recorded and it did not say the tool failed.
    Ok,
    /// The result (or a failure flag/exit code) says the tool failed.
    Failed,
    /// No result was recorded (pending, interrupted, or the source never
    /// records results, e.g. Cursor transcripts).
    Unknown,
}

/// One tool call, paired with its result when the source records one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolEvent {
    /// Prompt (turn) this call belongs to; `None` before the first prompt.
    pub prompt_index: Option<usize>,
    /// Index into [`AgentSession::subagents`] when a subagent made the call.
    pub subagent: Option<usize>,
    pub name: String,
    pub category: ToolCategory,
    pub call_id: Option<String>,
    /// Command text (shell command, patch, query…), capped by the budget.
    pub command: Option<String>,
    #[serde(default)]
    pub command_truncated: bool,
    /// Working directory the tool was told to use.
    pub cwd: Option<String>,
    pub status: ToolStatus,
    /// Exit code of the command as the transcript states it (Codex
    /// `exit_code` / `Exit code: N` / `Process exited with code N`, Gemini
    /// CLI `Exit Code: N`, Claude Code `Exit code N` on a failed Bash result);
    /// `None` when the source did not say (e.g. Claude Code and Gemini CLI
    /// write no code for a command that succeeded).
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Time of the call record.
    pub start_ms: Option<i64>,
    /// Time of the result record; never synthesized.
    pub end_ms: Option<i64>,
    pub paths: Vec<ToolPath>,
    pub domains: Vec<String>,
    /// An MCP tool call: server, tool and arguments (`None` for built-in
    /// tools; see [`mcp`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<mcp::McpCall>,
}

/// One model response (one API call), merged from split source records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    pub prompt_index: Option<usize>,
    pub subagent: Option<usize>,
    pub ts_ms: Option<i64>,
    pub model: Option<String>,
    /// Source-native id (Claude `message.id`, Gemini message `id`).
    pub native_id: Option<String>,
    /// Claude `requestId`.
    pub request_id: Option<String>,
    /// Lifecycle phase where recorded (Codex `commentary`/`final_answer`,
    /// Claude `stop_reason`).
    pub phase: Option<String>,
    pub text: String,
    #[serde(default)]
    pub text_truncated: bool,
    /// `None` when the source recorded no usage for this response.
    pub tokens: Option<TokenUsage>,
}

/// An error or interruption marker (kept as an event, not a turn).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub prompt_index: Option<usize>,
    pub subagent: Option<usize>,
    pub ts_ms: Option<i64>,
    pub kind: ErrorKind,
    pub message: String,
}

/// What an [`ErrorEvent`] is; serialized as the bare name (`"rate_limit"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    ApiError,
    RateLimit,
    Interrupted,
    TurnAborted,
    Error,
    Warning,
    /// A provider's own code (Codex `codex_error_info`), kept verbatim.
    #[serde(untagged)]
    Provider(String),
}

impl ErrorKind {
    /// A provider's code: one of the names above when it is one (so a code
    /// reads back as the same value), else kept as [`ErrorKind::Provider`].
    pub fn from_code(code: String) -> Self {
        match code.as_str() {
            "api_error" => Self::ApiError,
            "rate_limit" => Self::RateLimit,
            "interrupted" => Self::Interrupted,
            "turn_aborted" => Self::TurnAborted,
            "error" => Self::Error,
            "warning" => Self::Warning,
            _ => Self::Provider(code),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::ApiError => "api_error",
            Self::RateLimit => "rate_limit",
            Self::Interrupted => "interrupted",
            Self::TurnAborted => "turn_aborted",
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Provider(code) => code,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad` so width and alignment (`{:<12}`) apply as to a string.
        f.pad(self.as_str())
    }
}

/// A subagent/sidechain whose events are folded into this session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubagentInfo {
    /// Provider id of the subagent (`agentId`, Cursor/Gemini sub-session id),
    /// `None` when the source gives none (Claude 1.x inline sidechains).
    pub agent_id: Option<String>,
    /// Agent type or kind (`Explore`, `compact`, `thread_spawn`…).
    pub kind: Option<String>,
    pub description: Option<String>,
    /// Call id of the parent's tool call that spawned it, when recorded.
    pub parent_call_id: Option<String>,
    /// Transcript the events came from (the parent's own file for inline).
    pub source_path: PathBuf,
    pub models: Vec<String>,
    /// This subagent's own share of [`AgentSession::usage`].
    pub usage: TokenUsage,
    pub responses: usize,
    pub tools: usize,
}

/// Counted problems met while reading a transcript. Nothing here aborts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseStats {
    pub files: u32,
    pub bytes: u64,
    pub lines: u64,
    pub blank_lines: u64,
    /// Lines that were not valid JSON (or not the expected shape).
    pub bad_lines: u64,
    /// Lines repaired by replacing invalid UTF-8.
    pub invalid_utf8_lines: u64,
    /// Lines over the per-line cap, skipped.
    pub oversized_lines: u64,
    /// Records of a type this parser does not know, skipped.
    pub unknown_records: u64,
    /// The last line had no newline and did not parse: a live session.
    pub partial_last_line: bool,
    /// Codex: token_count events repeating an unchanged cumulative total.
    pub repeated_usage_skipped: u64,
    /// Lines skipped as replayed parent history (Codex forks/subagents,
    /// Claude sidechain replays of parent responses).
    pub replayed_skipped: u64,
    /// Extra files (subagents) that could not be read.
    pub unreadable_files: u32,
    /// Token counts that were not integers in range (negative, fractional,
    /// huge, not a number): read as 0 and counted here.
    #[serde(default)]
    pub bad_token_values: u64,
    /// Message contents that were neither text nor a list of blocks (a
    /// number, a boolean, an object): read as empty and counted here.
    #[serde(default)]
    pub bad_contents: u64,
    pub first_error: Option<String>,
    /// Human-readable notes (e.g. an enrichment database that was unusable).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Detail bounds applied after parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    pub max_prompts: usize,
    pub max_responses: usize,
    pub max_tools: usize,
    pub max_errors: usize,
    pub prompt_text_bytes: usize,
    pub response_text_bytes: usize,
    pub command_text_bytes: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_prompts: 1_000,
            max_responses: 2_000,
            max_tools: 2_000,
            max_errors: 1_000,
            prompt_text_bytes: 2 * 1024 * 1024,
            response_text_bytes: 2 * 1024 * 1024,
            command_text_bytes: 1024 * 1024,
        }
    }
}

/// What the bounds removed. All zero means the detail is complete.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutNote {
    pub prompts_dropped: usize,
    pub responses_dropped: usize,
    pub tools_dropped: usize,
    pub errors_dropped: usize,
    pub prompt_text_bytes_cut: usize,
    pub response_text_bytes_cut: usize,
    pub command_text_bytes_cut: usize,
}

impl CutNote {
    pub fn is_empty(&self) -> bool {
        *self == CutNote::default()
    }
}

/// A plan step (Codex `update_plan`, Claude `TodoWrite`, Gemini `write_todos`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    pub step: String,
    pub status: Option<String>,
}

/// One parsed session in the common model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSession {
    pub provider: Provider,
    /// The id the provider uses for this transcript (Claude/Cursor: file
    /// stem; Codex: `session_meta.id`; Gemini: `sessionId`).
    pub session_id: String,
    /// A real conversation/thread id recorded by the source, never invented.
    pub conversation_id: Option<String>,
    /// Parent session when this transcript is itself a subagent (Codex
    /// thread-spawn rollouts, forks).
    pub parent_session_id: Option<String>,
    pub source_path: PathBuf,
    pub cwd: Option<String>,
    /// Models in order of first use.
    pub models: Vec<String>,
    pub start_ms: Option<i64>,
    /// Latest timestamp recorded in the source; never synthesized.
    pub end_ms: Option<i64>,
    pub title: Option<String>,
    /// First prompt, shortened.
    pub preview: Option<String>,
    pub git_branch: Option<String>,
    /// Agent version (`version`, `cli_version`).
    pub agent_version: Option<String>,
    /// Sum over all responses including subagents, each counted once.
    pub usage: TokenUsage,
    pub usage_by_model: BTreeMap<String, TokenUsage>,
    /// Number of prompts/responses/tool events before bounding.
    pub prompt_count: usize,
    pub response_count: usize,
    pub tool_count: usize,
    pub prompts: Vec<Prompt>,
    pub responses: Vec<LlmResponse>,
    pub tools: Vec<ToolEvent>,
    pub errors: Vec<ErrorEvent>,
    pub subagents: Vec<SubagentInfo>,
    /// Latest plan/todo list, when the session kept one.
    pub plan: Vec<PlanStep>,
    pub stats: ParseStats,
    pub cut: CutNote,
}

impl AgentSession {
    pub fn new(provider: Provider, session_id: String, source_path: PathBuf) -> Self {
        AgentSession {
            provider,
            session_id,
            conversation_id: None,
            parent_session_id: None,
            source_path,
            cwd: None,
            models: Vec::new(),
            start_ms: None,
            end_ms: None,
            title: None,
            preview: None,
            git_branch: None,
            agent_version: None,
            usage: TokenUsage::default(),
            usage_by_model: BTreeMap::new(),
            prompt_count: 0,
            response_count: 0,
            tool_count: 0,
            prompts: Vec::new(),
            responses: Vec::new(),
            tools: Vec::new(),
            errors: Vec::new(),
            subagents: Vec::new(),
            plan: Vec::new(),
            stats: ParseStats::default(),
            cut: CutNote::default(),
        }
    }

    /// Records a timestamp seen in the source (start = min, end = max).
    pub(crate) fn see_ts(&mut self, ts: Option<i64>) {
        if let Some(t) = ts {
            self.start_ms = Some(self.start_ms.map_or(t, |s| s.min(t)));
            self.end_ms = Some(self.end_ms.map_or(t, |e| e.max(t)));
        }
    }

    pub(crate) fn see_model(&mut self, model: &str) {
        if !model.is_empty() && model != "<synthetic>" && !self.models.iter().any(|m| m == model) {
            self.models.push(model.to_string());
        }
    }

    /// Adds a human prompt and returns its index (public so sessions can be
    /// built by hand, as the library's correlate tests do).
    pub fn push_prompt(&mut self, ts_ms: Option<i64>, text: String) -> usize {
        let index = self.prompts.len();
        if self.preview.is_none() {
            self.preview = Some(util::preview(&text, 180));
        }
        self.prompts.push(Prompt::new(index, ts_ms, text));
        index
    }

    pub(crate) fn current_prompt(&self) -> Option<usize> {
        self.prompts.len().checked_sub(1)
    }

    /// Computes totals, per-model usage and per-subagent figures from the
    /// events, then applies the bounds. Parsers call this once at the end.
    pub(crate) fn finish(&mut self, bounds: &Bounds) {
        self.usage = TokenUsage::default();
        self.usage_by_model.clear();
        for s in &mut self.subagents {
            s.usage = TokenUsage::default();
            s.responses = 0;
            s.tools = 0;
            s.models.clear();
        }
        for r in &self.responses {
            if let Some(m) = r.model.as_deref()
                && let Some(si) = r.subagent
                && let Some(s) = self.subagents.get_mut(si)
                && !m.is_empty()
                && m != "<synthetic>"
                && !s.models.iter().any(|x| x == m)
            {
                s.models.push(m.to_string());
            }
            if let Some(si) = r.subagent
                && let Some(s) = self.subagents.get_mut(si)
            {
                s.responses += 1;
                if let Some(t) = &r.tokens {
                    s.usage.add(t);
                }
            }
            if let Some(t) = &r.tokens {
                self.usage.add(t);
                let key = r.model.clone().unwrap_or_else(|| "unknown".to_string());
                self.usage_by_model.entry(key).or_default().add(t);
            }
        }
        for t in &self.tools {
            if let Some(si) = t.subagent
                && let Some(s) = self.subagents.get_mut(si)
            {
                s.tools += 1;
            }
        }
        self.prompt_count = self.prompts.len();
        self.response_count = self.responses.len();
        self.tool_count = self.tools.len();
        apply_bounds(self, bounds);
    }
}

/// Keeps the newest entries within the bounds and records what was cut.
fn apply_bounds(s: &mut AgentSession, b: &Bounds) {
    fn keep_newest<T>(v: &mut Vec<T>, max: usize) -> usize {
        let n = v.len().saturating_sub(max);
        if n > 0 {
            v.drain(..n);
        }
        n
    }
    s.cut.prompts_dropped = keep_newest(&mut s.prompts, b.max_prompts);
    s.cut.responses_dropped = keep_newest(&mut s.responses, b.max_responses);
    s.cut.tools_dropped = keep_newest(&mut s.tools, b.max_tools);
    s.cut.errors_dropped = keep_newest(&mut s.errors, b.max_errors);

    // Text budgets are spent newest to oldest.
    fn spend(text: &mut String, flag: &mut bool, budget: &mut usize) -> usize {
        let len = text.len();
        if len <= *budget {
            *budget -= len;
            0
        } else {
            util::truncate_str(text, *budget);
            *budget -= text.len();
            *flag = true;
            len - text.len()
        }
    }
    let mut budget = b.prompt_text_bytes;
    for p in s.prompts.iter_mut().rev() {
        s.cut.prompt_text_bytes_cut += spend(&mut p.text, &mut p.text_truncated, &mut budget);
    }
    let mut budget = b.response_text_bytes;
    for r in s.responses.iter_mut().rev() {
        s.cut.response_text_bytes_cut += spend(&mut r.text, &mut r.text_truncated, &mut budget);
    }
    let mut budget = b.command_text_bytes;
    for t in s.tools.iter_mut().rev() {
        if let Some(c) = t.command.as_mut() {
            s.cut.command_text_bytes_cut += spend(c, &mut t.command_truncated, &mut budget);
        }
        // An MCP call's arguments share the budget; JSON cannot be cut
        // without changing it, so arguments that do not fit are dropped.
        if let Some(m) = t.mcp.as_mut()
            && let Some(args) = &m.arguments
        {
            let len = json_len(args);
            if len <= budget {
                budget -= len;
            } else {
                m.arguments = None;
                s.cut.command_text_bytes_cut += len;
            }
        }
    }
}

/// The length of a value's compact JSON text, without building it.
fn json_len(v: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing a Value to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut n, v);
    n.0
}

/// Parses a transcript of a known provider with default bounds.
///
/// For Claude, Gemini and Cursor this also folds in the subagent files that
/// belong to the session (found next to it); for Codex a thread-spawn
/// rollout is parsed on its own and linked via `parent_session_id`.
pub fn parse_file(provider: Provider, path: &Path) -> Result<AgentSession> {
    parse_file_with(provider, path, &Bounds::default())
}

/// [`parse_file`] with explicit bounds.
pub fn parse_file_with(provider: Provider, path: &Path, bounds: &Bounds) -> Result<AgentSession> {
    parse_file_in(provider, path, bounds, &mut ParseBatch::default())
}

/// What the parses of one pass over many transcripts share: each Claude
/// project directory is listed (and its 2.0.x `agent-*.jsonl` headers read)
/// once per batch, not once per transcript — parsing every session of a
/// project of 5,000 was quadratic. A batch keeps the listings it made: use
/// one for one pass, not for a session that goes on changing.
#[derive(Debug, Default)]
pub struct ParseBatch {
    claude_agents: std::collections::HashMap<PathBuf, claude::ProjectAgents>,
    dir_listings: u64,
}

impl ParseBatch {
    /// Project directories listed so far (what the batch saves is visible).
    pub fn dir_listings(&self) -> u64 {
        self.dir_listings
    }

    fn project_agents(&mut self, project: &Path) -> &claude::ProjectAgents {
        let listings = &mut self.dir_listings;
        self.claude_agents
            .entry(project.to_path_buf())
            .or_insert_with(|| {
                *listings += 1;
                claude::ProjectAgents::list(project)
            })
    }
}

/// [`parse_file_with`] sharing the directory listings of `batch`.
pub fn parse_file_in(
    provider: Provider,
    path: &Path,
    bounds: &Bounds,
    batch: &mut ParseBatch,
) -> Result<AgentSession> {
    parse_session_in(provider, path, None, bounds, batch)
}

/// [`parse_file_in`] naming the session: a provider whose sessions share
/// one store (opencode's database) needs the id; for the others it is
/// not needed (the file is the session).
pub fn parse_session_in(
    provider: Provider,
    path: &Path,
    id: Option<&str>,
    bounds: &Bounds,
    batch: &mut ParseBatch,
) -> Result<AgentSession> {
    de::take_bad_counts();
    de::take_bad_contents();
    let mut s = (provider::spec(provider).parse)(path, id, batch)?;
    s.stats.bad_token_values += de::take_bad_counts();
    s.stats.bad_contents += de::take_bad_contents();
    s.finish(bounds);
    Ok(s)
}

/// Parses the transcript a discovery result points at.
pub fn parse_session(r: &SessionRef) -> Result<AgentSession> {
    let mut s = parse_session_in(
        r.provider,
        &r.path,
        Some(&r.session_id),
        &Bounds::default(),
        &mut ParseBatch::default(),
    )?;
    if let Some(enrich) = provider::spec(r.provider).enrich {
        enrich(&mut s, r.home.as_deref());
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabularies_serialize_as_their_bare_names() {
        let kinds = [
            (ErrorKind::ApiError, "\"api_error\""),
            (ErrorKind::RateLimit, "\"rate_limit\""),
            (ErrorKind::Interrupted, "\"interrupted\""),
            (ErrorKind::TurnAborted, "\"turn_aborted\""),
            (ErrorKind::Error, "\"error\""),
            (ErrorKind::Warning, "\"warning\""),
            (
                ErrorKind::Provider("context_window_exceeded".into()),
                "\"context_window_exceeded\"",
            ),
        ];
        for (kind, json) in kinds {
            assert_eq!(serde_json::to_string(&kind).ok().as_deref(), Some(json));
            assert_eq!(
                serde_json::from_str::<ErrorKind>(json).ok(),
                Some(kind.clone())
            );
            assert_eq!(ErrorKind::from_code(kind.as_str().to_string()), kind);
        }
        assert_eq!(format!("[{:<12}]", ErrorKind::RateLimit), "[rate_limit  ]");
        for (source, json) in [
            (SummarySource::Parsed, "\"parsed\""),
            (SummarySource::CodexSqlite, "\"codex_sqlite\""),
            (SummarySource::Error, "\"error\""),
        ] {
            assert_eq!(serde_json::to_string(&source).ok().as_deref(), Some(json));
        }
    }
}
