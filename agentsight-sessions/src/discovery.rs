//! Discovery: provider-owned roots, a cheap candidate index (stat only), the
//! bounded list path, the Codex SQLite fast path, and id lookup.
//!
//! Listing never parses every transcript: candidates are found by walking
//! fixed-depth provider layouts and stat'ing files; ids that are not in the
//! file name are read from a bounded header only for candidates that may be
//! listed; only the (at most 25) listed sessions are parsed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{Result, SessionError};
use super::{AgentSession, Provider, TokenUsage};
use super::{codex, cursor, gemini, util};

/// Hard cap of the list path (issue: at most 25 rows).
pub const MAX_LIST: usize = 25;

/// Where and what to discover.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryOptions {
    /// Home to read (`--home`). `None`: the invoking user's home (under sudo,
    /// `SUDO_USER`'s), and provider env vars (`CLAUDE_CONFIG_DIR`,
    /// `CODEX_HOME`, `GEMINI_CLI_HOME`…) are honoured. With an explicit home,
    /// env vars are ignored so a copied home is read exactly as found.
    pub home: Option<PathBuf>,
    /// Providers to include; empty means all.
    pub providers: Vec<Provider>,
    /// Rows to return, clamped to 1..=25 (0 means 25).
    pub limit: usize,
    /// Only sessions updated within this age.
    pub max_age: Option<Duration>,
}

impl DiscoveryOptions {
    fn wants(&self, p: Provider) -> bool {
        self.providers.is_empty() || self.providers.contains(&p)
    }

    fn limit(&self) -> usize {
        if self.limit == 0 {
            MAX_LIST
        } else {
            self.limit.clamp(1, MAX_LIST)
        }
    }

    fn resolved_home(&self) -> Result<PathBuf> {
        match &self.home {
            Some(h) => Ok(h.clone()),
            None => default_home(),
        }
    }

    fn use_env(&self) -> bool {
        self.home.is_none()
    }

    /// Roots to scan, including env-var roots when the home is not explicit.
    pub fn roots(&self) -> Result<Vec<(Provider, PathBuf)>> {
        let home = self.resolved_home()?;
        let mut roots = roots_for(&home, self.use_env());
        roots.retain(|(p, _)| self.wants(*p));
        Ok(roots)
    }
}

// The invoking user's home lives in `util` (cursor needs it too, and
// discovery depends on cursor).
pub use super::util::default_home;

/// Checks the home a command reads (`--home`, else the invoking user's):
/// it must be an existing directory. From then on only transcripts owned by
/// its owner are opened (`util::set_transcript_owner`). Returns the home.
pub fn read_home_of_owner(home: Option<&Path>) -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let h = match home {
        Some(h) => h.to_path_buf(),
        None => default_home()?,
    };
    let m = std::fs::metadata(&h).map_err(|e| SessionError::io(&h, e))?;
    if !m.is_dir() {
        return Err(SessionError::NotADirectory { path: h });
    }
    util::set_transcript_owner(Some(m.uid()));
    Ok(h)
}

/// Provider roots under `home` (env vars not consulted). Roots may not exist.
/// Useful to recognise a transcript path seen in a file event.
pub fn provider_roots(home: &Path) -> Vec<(Provider, PathBuf)> {
    roots_for(home, false)
}

fn env_abs(name: &str) -> Option<PathBuf> {
    let v = std::env::var_os(name)?;
    let p = PathBuf::from(v);
    p.is_absolute().then_some(p)
}

fn codex_home(home: &Path, use_env: bool) -> PathBuf {
    // CODEX_HOME is honoured only when absolute (as the issue specifies).
    if use_env && let Some(p) = env_abs("CODEX_HOME") {
        return p;
    }
    home.join(".codex")
}

fn roots_for(home: &Path, use_env: bool) -> Vec<(Provider, PathBuf)> {
    let mut v: Vec<(Provider, PathBuf)> = Vec::new();
    let mut push = |p: Provider, path: PathBuf| {
        if !v.iter().any(|(q, x)| *q == p && *x == path) {
            v.push((p, path));
        }
    };
    // Claude Code.
    if use_env && let Ok(dirs) = std::env::var("CLAUDE_CONFIG_DIR") {
        for d in dirs.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let d = PathBuf::from(d);
            if d.file_name().is_some_and(|n| n == "projects") {
                push(Provider::Claude, d);
            } else {
                push(Provider::Claude, d.join("projects"));
            }
        }
    }
    let xdg = if use_env {
        env_abs("XDG_CONFIG_HOME")
    } else {
        None
    };
    push(
        Provider::Claude,
        xdg.unwrap_or_else(|| home.join(".config"))
            .join("claude/projects"),
    );
    push(Provider::Claude, home.join(".claude/projects"));
    // Codex.
    let ch = codex_home(home, use_env);
    push(Provider::Codex, ch.join("sessions"));
    push(Provider::Codex, ch.join("archived_sessions"));
    // Gemini CLI.
    let gh = if use_env {
        env_abs("GEMINI_CLI_HOME").unwrap_or_else(|| home.to_path_buf())
    } else {
        home.to_path_buf()
    };
    push(Provider::Gemini, gh.join(".gemini/tmp"));
    // Cursor.
    push(Provider::Cursor, home.join(".cursor/projects"));
    v
}

/// Provider and session id of a transcript path, from its shape alone (plus
/// a bounded header read for Gemini and Claude 2.0.x agent files). Subagent
/// files map to their parent session. Works on any absolute path, e.g. one
/// seen in a file event or `/proc/<pid>/fd`.
pub fn session_id_for_path(path: &Path) -> Option<(Provider, String)> {
    let s = path.to_str()?;
    let s = s.strip_suffix(" (deleted)").unwrap_or(s);
    let path = Path::new(s);
    let name = path.file_name()?.to_str()?;
    let comps: Vec<&str> = path
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .collect();
    let has = |x: &str| comps.contains(&x);
    let stem = path.file_stem()?.to_str()?;
    if name.ends_with(".jsonl") && has("agent-transcripts") {
        // cursor: .../agent-transcripts/<id>[.jsonl | /<id>.jsonl | /subagents/<x>.jsonl]
        let i = comps.iter().rposition(|c| *c == "agent-transcripts")?;
        let after = &comps[i + 1..];
        return match after {
            [f] => Some((Provider::Cursor, f.strip_suffix(".jsonl")?.to_string())),
            [d, _] => Some((Provider::Cursor, (*d).to_string())),
            [d, "subagents", _] => Some((Provider::Cursor, (*d).to_string())),
            _ => None,
        };
    }
    if name.starts_with("rollout-")
        && name.ends_with(".jsonl")
        && (has("sessions") || has("archived_sessions"))
    {
        return codex::id_from_file_name(path).map(|id| (Provider::Codex, id));
    }
    if (name.ends_with(".json") || name.ends_with(".jsonl")) && has("chats") && has("tmp") {
        let i = comps.iter().rposition(|c| *c == "chats")?;
        if comps.len() == i + 3 {
            // chats/<parentSessionId>/<sub>.jsonl
            return Some((Provider::Gemini, comps[i + 1].to_string()));
        }
        if name.starts_with("session-") {
            return gemini::header_session_id(path).map(|id| (Provider::Gemini, id));
        }
        return None;
    }
    if name.ends_with(".jsonl") && has("projects") {
        let i = comps.iter().rposition(|c| *c == "projects")?;
        let after = &comps[i + 1..];
        return match after {
            [_, f] if !f.starts_with("agent-") => Some((Provider::Claude, stem.to_string())),
            [_, _] => super::claude::header_session_id(path).map(|id| (Provider::Claude, id)),
            [_, sid, "subagents", ..] => Some((Provider::Claude, (*sid).to_string())),
            _ => None,
        };
    }
    None
}

/// A transcript found by the stat-only scan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub provider: Provider,
    pub path: PathBuf,
    pub updated_ms: i64,
    pub size: u64,
    /// Cursor: under the special empty-window project.
    pub empty_window: bool,
}

/// Counted problems of a scan (nothing aborts it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanStats {
    pub dirs: u64,
    pub files: u64,
    pub unreadable: u64,
    /// Entries named like transcripts that are not regular files (symbolic
    /// links, which are never followed to a transcript, directories, FIFOs…).
    #[serde(default)]
    pub not_files: u64,
}

fn read_dir_sorted(dir: &Path, st: &mut ScanStats) -> Vec<std::fs::DirEntry> {
    match std::fs::read_dir(dir) {
        Ok(rd) => {
            st.dirs += 1;
            rd.flatten().collect()
        }
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                st.unreadable += 1;
                tracing::debug!(dir = %dir.display(), error = %e, "cannot read directory");
            }
            Vec::new()
        }
    }
}

/// `metadata` following symlinks; a loop or dangling link is counted and
/// skipped.
fn file_meta(e: &std::fs::DirEntry, st: &mut ScanStats) -> Option<std::fs::Metadata> {
    match std::fs::metadata(e.path()) {
        Ok(m) => Some(m),
        Err(err) => {
            st.unreadable += 1;
            tracing::debug!(path = %e.path().display(), error = %err, "cannot stat");
            None
        }
    }
}

fn is_dir(e: &std::fs::DirEntry, st: &mut ScanStats) -> bool {
    match e.file_type() {
        Ok(t) if t.is_dir() => true,
        Ok(t) if t.is_symlink() => file_meta(e, st).is_some_and(|m| m.is_dir()),
        _ => false,
    }
}

fn mtime_ms(m: &std::fs::Metadata) -> i64 {
    m.modified().map(util::system_time_ms).unwrap_or(0)
}

fn push_file(
    out: &mut Vec<Candidate>,
    p: Provider,
    e: &std::fs::DirEntry,
    st: &mut ScanStats,
    empty_window: bool,
    stat: bool,
) {
    // Only regular files: a transcript is never opened through a link, and
    // a directory or FIFO named like one is counted, not silently dropped.
    match e.file_type() {
        Ok(t) if t.is_file() => {}
        Ok(_) => {
            st.not_files += 1;
            return;
        }
        Err(_) => {
            st.unreadable += 1;
            return;
        }
    }
    // The id index needs names only: a regular file known from the
    // directory entry is taken without a stat (10,000 stats dominate lookup).
    if !stat {
        st.files += 1;
        out.push(Candidate {
            provider: p,
            path: e.path(),
            updated_ms: 0,
            size: 0,
            empty_window,
        });
        return;
    }
    if let Some(m) = file_meta(e, st)
        && m.is_file()
    {
        st.files += 1;
        out.push(Candidate {
            provider: p,
            path: e.path(),
            updated_ms: mtime_ms(&m),
            size: m.len(),
            empty_window,
        });
    }
}

/// Stat-only scan of fixed-depth provider layouts (never a blind recursive
/// hunt, so symlink loops cannot trap it).
pub fn scan(roots: &[(Provider, PathBuf)], st: &mut ScanStats) -> Vec<Candidate> {
    scan_with(roots, st, true)
}

/// [`scan`] with `stat = false`: names only (update time and size are 0),
/// for the id index.
fn scan_with(roots: &[(Provider, PathBuf)], st: &mut ScanStats, stat: bool) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (p, root) in roots {
        match p {
            Provider::Claude => {
                for proj in read_dir_sorted(root, st) {
                    if !is_dir(&proj, st) {
                        continue;
                    }
                    for f in read_dir_sorted(&proj.path(), st) {
                        let n = f.file_name();
                        let n = n.to_string_lossy();
                        if n.ends_with(".jsonl") && !n.starts_with("agent-") {
                            push_file(&mut out, *p, &f, st, false, stat);
                        }
                    }
                }
            }
            Provider::Codex => {
                let archived = root.file_name().is_some_and(|n| n == "archived_sessions");
                // sessions/YYYY/MM/DD/rollout-*.jsonl plus early flat files.
                let mut stack = vec![(root.clone(), 0u32)];
                while let Some((dir, depth)) = stack.pop() {
                    for e in read_dir_sorted(&dir, st) {
                        let n = e.file_name();
                        let n = n.to_string_lossy();
                        if n.starts_with("rollout-") && n.ends_with(".jsonl") {
                            push_file(&mut out, *p, &e, st, false, stat);
                        } else if !archived && depth < 3 && is_dir(&e, st) {
                            stack.push((e.path(), depth + 1));
                        }
                    }
                }
            }
            Provider::Gemini => {
                for proj in read_dir_sorted(root, st) {
                    if !is_dir(&proj, st) {
                        continue;
                    }
                    for f in read_dir_sorted(&proj.path().join("chats"), st) {
                        let n = f.file_name();
                        let n = n.to_string_lossy();
                        if n.starts_with("session-")
                            && (n.ends_with(".json") || n.ends_with(".jsonl"))
                        {
                            push_file(&mut out, *p, &f, st, false, stat);
                        }
                    }
                }
            }
            Provider::Cursor => {
                for proj in read_dir_sorted(root, st) {
                    if !is_dir(&proj, st) {
                        continue;
                    }
                    let empty = proj.file_name().to_string_lossy().contains("empty-window");
                    let at = proj.path().join("agent-transcripts");
                    for e in read_dir_sorted(&at, st) {
                        let n = e.file_name();
                        let n = n.to_string_lossy().to_string();
                        if n.ends_with(".jsonl") {
                            push_file(&mut out, *p, &e, st, empty, stat);
                        } else if is_dir(&e, st) {
                            let nested = e.path().join(format!("{n}.jsonl"));
                            if let Ok(m) = std::fs::metadata(&nested)
                                && m.is_file()
                            {
                                st.files += 1;
                                out.push(Candidate {
                                    provider: *p,
                                    path: nested,
                                    updated_ms: mtime_ms(&m),
                                    size: m.len(),
                                    empty_window: empty,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    // A Cursor parent is as fresh as its newest subagent transcript.
    for c in out
        .iter_mut()
        .filter(|c| stat && c.provider == Provider::Cursor)
    {
        for f in cursor::subagent_files(&c.path) {
            if let Ok(m) = std::fs::metadata(&f) {
                c.updated_ms = c.updated_ms.max(mtime_ms(&m));
            }
        }
    }
    // Prefer sessions/ over archived_sessions/ for the same rollout file.
    let mut seen_codex: HashSet<std::ffi::OsString> = HashSet::new();
    out.retain(|c| {
        if c.provider != Provider::Codex {
            return true;
        }
        let archived = c
            .path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "archived_sessions");
        match c.path.file_name() {
            Some(n) if archived => !seen_codex.contains(n),
            Some(n) => {
                seen_codex.insert(n.to_os_string());
                true
            }
            None => true,
        }
    });
    out
}

/// Session id of a candidate: the file stem (Claude, Cursor) or a bounded
/// header read (Codex `session_meta.id`, Gemini `sessionId`).
pub fn candidate_id(c: &Candidate) -> Option<String> {
    match c.provider {
        Provider::Claude | Provider::Cursor => c
            .path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string),
        Provider::Codex => codex::read_header(&c.path).ok().and_then(|h| h.id),
        Provider::Gemini => gemini::header_session_id(&c.path),
    }
}

/// A reference to a discovered transcript, enough to parse it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRef {
    pub provider: Provider,
    pub session_id: String,
    pub path: PathBuf,
    /// Home used for discovery (Cursor enrichment looks for `state.vscdb`).
    pub home: Option<PathBuf>,
}

/// One row of the session list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub provider: Provider,
    pub session_id: String,
    pub path: PathBuf,
    /// Update time (file mtime, Cursor: newest of parent and subagents;
    /// Codex with SQLite: the thread's `updated_at`).
    pub updated_ms: i64,
    pub start_ms: Option<i64>,
    pub cwd: Option<String>,
    /// Most recent model.
    pub model: Option<String>,
    pub title: Option<String>,
    pub preview: Option<String>,
    pub parent_session_id: Option<String>,
    /// `None` when not counted on this path (Codex SQLite rows).
    pub prompts: Option<usize>,
    pub tools: Option<usize>,
    pub usage: Option<TokenUsage>,
    pub source: SummarySource,
    pub error: Option<String>,
}

/// Where a [`SessionSummary`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummarySource {
    /// The transcript was parsed.
    Parsed,
    /// A Codex `state_*.sqlite` row (with the rollout's tail).
    CodexSqlite,
    /// The transcript could not be read or parsed (see `error`).
    Error,
}

impl SessionSummary {
    pub fn session_ref(&self, home: Option<&Path>) -> SessionRef {
        SessionRef {
            provider: self.provider,
            session_id: self.session_id.clone(),
            path: self.path.clone(),
            home: home.map(Path::to_path_buf),
        }
    }

    fn from_session(s: &AgentSession, updated_ms: i64) -> Self {
        SessionSummary {
            provider: s.provider,
            session_id: s.session_id.clone(),
            path: s.source_path.clone(),
            updated_ms,
            start_ms: s.start_ms,
            cwd: s.cwd.clone(),
            // The main conversation's latest model (subagents often use a
            // smaller one).
            model: s
                .responses
                .iter()
                .rev()
                .filter(|r| r.subagent.is_none())
                .find_map(|r| r.model.clone().filter(|m| m != "<synthetic>"))
                .or_else(|| s.models.last().cloned()),
            title: s.title.clone(),
            preview: s.preview.clone(),
            parent_session_id: s.parent_session_id.clone(),
            prompts: Some(s.prompt_count),
            tools: Some(s.tool_count),
            usage: Some(s.usage),
            source: SummarySource::Parsed,
            error: None,
        }
    }
}

/// Result of a list: rows plus notes about sources that were skipped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Listing {
    pub sessions: Vec<SessionSummary>,
    pub notes: Vec<String>,
    pub scan: ScanStats,
}

/// Lists recent sessions (at most 25). See [`SessionIndex::list`].
pub fn discover(opts: &DiscoveryOptions) -> Result<Vec<SessionSummary>> {
    Ok(SessionIndex::new(opts.clone()).list()?.sessions)
}

/// Finds a session by id (also outside the 25 newest). See
/// [`SessionIndex::resolve`].
pub fn find_by_id(opts: &DiscoveryOptions, id: &str) -> Result<Option<SessionRef>> {
    SessionIndex::new(opts.clone()).resolve(id)
}

/// A Codex thread row from `state_*.sqlite`.
#[derive(Debug, Clone, Default)]
struct CodexRow {
    id: String,
    rollout: PathBuf,
    created_ms: Option<i64>,
    updated_ms: Option<i64>,
    cwd: Option<String>,
    title: Option<String>,
    preview: Option<String>,
    model: Option<String>,
    tokens_used: Option<i64>,
    parent: Option<String>,
}

/// Long-lived discovery state: the id→path index and the Codex tail cache.
/// One-shot CLI calls create one per command; a daemon keeps one.
pub struct SessionIndex {
    opts: DiscoveryOptions,
    ids: HashMap<String, Vec<(Provider, PathBuf)>>,
    /// Gemini chats not yet header-read, by the id prefix in their name.
    gemini_prefix: HashMap<String, Vec<PathBuf>>,
    built: bool,
    tail_cache: HashMap<(PathBuf, u64, i64), codex::TailSummary>,
}

/// Bound of the Codex rollout-tail cache (issue: 64 entries).
const TAIL_CACHE_MAX: usize = 64;

impl SessionIndex {
    pub fn new(opts: DiscoveryOptions) -> Self {
        SessionIndex {
            opts,
            ids: HashMap::new(),
            gemini_prefix: HashMap::new(),
            built: false,
            tail_cache: HashMap::new(),
        }
    }

    pub fn options(&self) -> &DiscoveryOptions {
        &self.opts
    }

    /// The recent-session list: candidates sorted by update time, duplicate
    /// ids collapsed, clamped to the limit, then only those rows hydrated.
    pub fn list(&mut self) -> Result<Listing> {
        let home = self.opts.resolved_home()?;
        let roots = self.opts.roots()?;
        let mut listing = Listing::default();
        let mut cands = scan(&roots, &mut listing.scan);
        if listing.scan.not_files + listing.scan.unreadable > 0 {
            listing.notes.push(format!(
                "skipped {} entries named like transcripts that are not regular files (links are never followed, directories, FIFOs) and {} unreadable files or directories",
                listing.scan.not_files, listing.scan.unreadable
            ));
        }

        let codex_rows = if self.opts.wants(Provider::Codex) {
            match self.codex_rows(&home) {
                Ok(r) => r,
                Err(e) => {
                    listing.notes.push(format!(
                        "codex state database not used, scanning rollouts: {e}"
                    ));
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        // Rollout file names embed the thread id, so they key rows without
        // resolving every path (a realpath per candidate costs more than the
        // whole scan).
        let rows: HashMap<std::ffi::OsString, CodexRow> = codex_rows
            .into_iter()
            .filter_map(|r| Some((r.rollout.file_name()?.to_os_string(), r)))
            .collect();
        let row_of = |c: &Candidate| -> Option<&CodexRow> {
            if c.provider == Provider::Codex {
                rows.get(c.path.file_name()?)
            } else {
                None
            }
        };
        // Rows whose rollout lies outside the scanned roots become candidates.
        let scanned: HashSet<&std::ffi::OsStr> = cands
            .iter()
            .filter(|c| c.provider == Provider::Codex)
            .filter_map(|c| c.path.file_name())
            .collect();
        let mut extra = Vec::new();
        for (name, r) in &rows {
            if !scanned.contains(name.as_os_str())
                && let Ok(m) = std::fs::metadata(&r.rollout)
                && m.is_file()
            {
                extra.push(Candidate {
                    provider: Provider::Codex,
                    path: r.rollout.clone(),
                    updated_ms: mtime_ms(&m),
                    size: m.len(),
                    empty_window: false,
                });
            }
        }
        cands.extend(extra);
        // Codex rows known to SQLite sort by the thread's updated time.
        for c in cands.iter_mut() {
            if let Some(u) = row_of(c).and_then(|r| r.updated_ms) {
                c.updated_ms = u;
            }
        }
        if let Some(age) = self.opts.max_age {
            let now = util::system_time_ms(std::time::SystemTime::now());
            let min = now.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
            cands.retain(|c| c.updated_ms >= min);
        }
        cands.sort_by(|a, b| {
            b.updated_ms
                .cmp(&a.updated_ms)
                .then_with(|| a.path.cmp(&b.path))
        });

        // Walk newest first, resolving ids, until `limit` unique ids.
        let limit = self.opts.limit();
        let mut chosen: Vec<(Candidate, String)> = Vec::new();
        let mut pos: HashMap<(Provider, String), usize> = HashMap::new();
        for c in cands {
            if chosen.len() >= limit {
                break;
            }
            let id = match row_of(&c) {
                Some(r) => Some(r.id.clone()),
                None => candidate_id(&c),
            };
            let Some(id) = id else {
                listing.notes.push(format!(
                    "{}: no session id in header, skipped",
                    c.path.display()
                ));
                continue;
            };
            let key = (c.provider, id.clone());
            match pos.get(&key) {
                None => {
                    pos.insert(key, chosen.len());
                    chosen.push((c, id));
                }
                Some(&i) => {
                    let (old, _) = &chosen[i];
                    // Cursor: prefer outside the empty-window tree; Gemini:
                    // prefer the .jsonl twin (the .json is left behind on
                    // resume). Update time stays the newest one's.
                    let replace =
                        (c.provider == Provider::Cursor && old.empty_window && !c.empty_window)
                            || (c.provider == Provider::Gemini
                                && old.path.extension().is_some_and(|e| e == "json")
                                && c.path.extension().is_some_and(|e| e == "jsonl"));
                    if replace {
                        let updated = old.updated_ms.max(c.updated_ms);
                        chosen[i].0 = Candidate {
                            updated_ms: updated,
                            ..c
                        };
                    }
                }
            }
        }

        // Hydrate the chosen rows: Codex rows known to SQLite from the row
        // plus a rollout tail; everything else by a full parse, two threads.
        let mut rows: Vec<Option<SessionSummary>> = vec![None; chosen.len()];
        let mut to_parse: Vec<usize> = Vec::new();
        for (i, (c, id)) in chosen.iter().enumerate() {
            if let Some(r) = row_of(c) {
                rows[i] = Some(self.codex_row_summary(r, c, id));
            } else {
                to_parse.push(i);
            }
        }
        let parsed = parse_many(&chosen, &to_parse, &home);
        for (i, s) in parsed {
            rows[i] = Some(s);
        }
        listing.sessions = rows.into_iter().flatten().collect();
        Ok(listing)
    }

    fn codex_row_summary(&mut self, r: &CodexRow, c: &Candidate, id: &str) -> SessionSummary {
        let tail = self.tail(&c.path);
        let usage = tail.as_ref().and_then(|t| t.total).or_else(|| {
            // Without a tail, `tokens_used` is Codex's cumulative total
            // (input incl. cached + output); it has no split.
            r.tokens_used
                .and_then(|t| u64::try_from(t).ok())
                .map(|t| TokenUsage {
                    total: t,
                    ..TokenUsage::default()
                })
        });
        SessionSummary {
            provider: Provider::Codex,
            session_id: id.to_string(),
            path: c.path.clone(),
            updated_ms: c.updated_ms,
            start_ms: r.created_ms,
            cwd: r.cwd.clone(),
            model: r
                .model
                .clone()
                .or_else(|| tail.as_ref().and_then(|t| t.model.clone())),
            title: r.title.clone(),
            preview: r.preview.as_deref().map(|p| util::preview(p, 180)),
            parent_session_id: r.parent.clone(),
            prompts: None,
            tools: None,
            usage,
            source: SummarySource::CodexSqlite,
            error: None,
        }
    }

    /// Latest usage/plan from the final 1 MiB of a rollout, cached by
    /// (path, length, mtime) in a cache bounded to 64 entries.
    fn tail(&mut self, path: &Path) -> Option<codex::TailSummary> {
        let m = std::fs::metadata(path).ok()?;
        let key = (path.to_path_buf(), m.len(), mtime_ms(&m));
        if let Some(t) = self.tail_cache.get(&key) {
            return Some(t.clone());
        }
        let t = codex::tail_summary(path).ok()?;
        if self.tail_cache.len() >= TAIL_CACHE_MAX {
            self.tail_cache.clear();
        }
        self.tail_cache.insert(key, t.clone());
        Some(t)
    }

    /// Recent threads from the highest-numbered readable `state_*.sqlite`.
    fn codex_rows(&self, home: &Path) -> Result<Vec<CodexRow>> {
        let use_env = self.opts.use_env();
        let ch = codex_home(home, use_env);
        let dir = if use_env {
            env_abs("CODEX_SQLITE_HOME").unwrap_or_else(|| ch.clone())
        } else {
            ch.clone()
        };
        let Some(db) = codex_state_db(&dir) else {
            return Ok(Vec::new());
        };
        read_codex_rows(&db, &ch, 4 * MAX_LIST)
    }

    /// Resolves an id to a transcript: from the index, rebuilt on a miss or a
    /// vanished path; the parsed session id must equal the requested id. A
    /// unique prefix of at least 8 characters is accepted too.
    pub fn resolve(&mut self, id: &str) -> Result<Option<SessionRef>> {
        if let Some(r) = self.lookup(id)? {
            return Ok(Some(r));
        }
        if self.built {
            self.rebuild()?;
            return self.lookup(id);
        }
        Ok(None)
    }

    fn lookup(&mut self, id: &str) -> Result<Option<SessionRef>> {
        if !self.built {
            self.rebuild()?;
        }
        self.hydrate_gemini(id);
        let mut hits: Vec<(Provider, PathBuf, String)> = match self.ids.get(id) {
            Some(v) => v
                .iter()
                .map(|(p, x)| (*p, x.clone(), id.to_string()))
                .collect(),
            None if id.len() >= 8 => {
                let m: Vec<_> = self
                    .ids
                    .iter()
                    .filter(|(k, _)| k.starts_with(id))
                    .flat_map(|(k, v)| v.iter().map(move |(p, x)| (*p, x.clone(), k.clone())))
                    .collect();
                let distinct: std::collections::BTreeSet<&String> =
                    m.iter().map(|(_, _, k)| k).collect();
                if distinct.len() > 1 {
                    return Err(SessionError::AmbiguousId {
                        prefix: id.to_string(),
                        count: distinct.len(),
                        ids: distinct
                            .iter()
                            .take(5)
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
                m
            }
            None => Vec::new(),
        };
        if hits.iter().any(|(_, p, _)| !p.exists()) {
            // A vanished path: rebuild once and retry.
            self.rebuild()?;
            hits.retain(|(_, p, _)| p.exists());
        }
        // Gemini .jsonl twins win over .json; Cursor outside empty-window.
        hits.sort_by_key(|(p, path, _)| {
            let s = path.to_string_lossy();
            (
                *p,
                s.contains("empty-window"),
                path.extension().is_some_and(|e| e == "json"),
            )
        });
        let home = self.opts.resolved_home().ok();
        for (p, path, full) in hits {
            // Verify: the parsed id must equal the requested one.
            let verified = match p {
                Provider::Claude | Provider::Cursor => true,
                Provider::Codex => {
                    codex::read_header(&path).ok().and_then(|h| h.id).as_deref()
                        == Some(full.as_str())
                }
                Provider::Gemini => {
                    gemini::header_session_id(&path).as_deref() == Some(full.as_str())
                }
            };
            if verified {
                return Ok(Some(SessionRef {
                    provider: p,
                    session_id: full,
                    path,
                    home: home.clone(),
                }));
            }
        }
        Ok(None)
    }

    /// Rebuilds the id→path index from a full stat scan. Claude/Cursor ids
    /// are file stems and Codex ids come from the file name (each verified by
    /// a header read on lookup); Gemini files carry only the first 8
    /// characters of the id in their name, so they are indexed under that
    /// prefix and their bounded header is read only for a matching lookup.
    pub fn rebuild(&mut self) -> Result<()> {
        let roots = self.opts.roots()?;
        let mut st = ScanStats::default();
        let cands = scan_with(&roots, &mut st, false);
        self.ids.clear();
        self.gemini_prefix.clear();
        for c in cands {
            let id = match c.provider {
                Provider::Codex => codex::id_from_file_name(&c.path).or_else(|| candidate_id(&c)),
                Provider::Gemini => {
                    if let Some(p) = gemini_name_prefix(&c.path) {
                        self.gemini_prefix.entry(p).or_default().push(c.path);
                        continue;
                    }
                    candidate_id(&c)
                }
                _ => candidate_id(&c),
            };
            if let Some(id) = id {
                self.ids.entry(id).or_default().push((c.provider, c.path));
            }
        }
        self.built = true;
        Ok(())
    }

    /// Reads the headers of Gemini chats whose file name matches the first
    /// 8 characters of `id`, moving them into the id index.
    fn hydrate_gemini(&mut self, id: &str) {
        let Some(prefix) = id.get(..8) else { return };
        let Some(paths) = self.gemini_prefix.remove(prefix) else {
            return;
        };
        for p in paths {
            if let Some(full) = gemini::header_session_id(&p) {
                self.ids
                    .entry(full)
                    .or_default()
                    .push((Provider::Gemini, p));
            }
        }
    }
}

/// `session-<YYYY-MM-DDTHH-MM>-<8 chars>.json[l]` → the 8 characters.
fn gemini_name_prefix(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    let tail = stem.rsplit('-').next()?;
    (tail.len() == 8 && stem.starts_with("session-")).then(|| tail.to_string())
}

/// Highest-numbered `state_<N>.sqlite` (or legacy `state.sqlite`) in `dir`.
pub fn codex_state_db(dir: &Path) -> Option<PathBuf> {
    let mut best: Option<(u32, PathBuf)> = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        let num = if n == "state.sqlite" {
            Some(0)
        } else {
            n.strip_prefix("state_")
                .and_then(|r| r.strip_suffix(".sqlite"))
                .and_then(|d| d.parse::<u32>().ok())
        };
        if let Some(num) = num
            && best.as_ref().is_none_or(|(b, _)| num > *b)
        {
            best = Some((num, e.path()));
        }
    }
    best.map(|(_, p)| p)
}

/// `path` is a `rollout-*.jsonl` under `codex_home`'s `sessions/` or
/// `archived_sessions/`, without `..` or `.` components (checked lexically;
/// the file itself is then opened without following a link).
pub(crate) fn in_codex_roots(path: &Path, codex_home: &Path) -> bool {
    use std::path::Component;
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return false;
    }
    let name_ok = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(".jsonl"));
    name_ok
        && ["sessions", "archived_sessions"]
            .iter()
            .any(|r| path.starts_with(codex_home.join(r)))
}

fn read_codex_rows(db: &Path, codex_home: &Path, limit: usize) -> Result<Vec<CodexRow>> {
    let c = cursor::open_ro(db)?;
    let err = |e| SessionError::Sqlite {
        path: db.to_path_buf(),
        source: e,
    };
    let mut cols: HashSet<String> = HashSet::new();
    {
        let mut st = c.prepare("PRAGMA table_info(threads)").map_err(err)?;
        let mut rows = st.query([]).map_err(err)?;
        while let Some(r) = rows.next().map_err(err)? {
            let name: String = r.get(1).map_err(err)?;
            cols.insert(name);
        }
    }
    if !cols.contains("id") || !cols.contains("rollout_path") {
        return Err(SessionError::Format {
            path: db.to_path_buf(),
            provider: "codex",
            reason: "no threads(id, rollout_path) table".into(),
        });
    }
    let col = |name: &str| -> String {
        if cols.contains(name) {
            name.to_string()
        } else {
            "NULL".to_string()
        }
    };
    let updated = if cols.contains("updated_at_ms") {
        "updated_at_ms".to_string()
    } else if cols.contains("updated_at") {
        "updated_at * 1000".to_string()
    } else {
        "NULL".to_string()
    };
    let created = if cols.contains("created_at_ms") {
        "created_at_ms".to_string()
    } else if cols.contains("created_at") {
        "created_at * 1000".to_string()
    } else {
        "NULL".to_string()
    };
    let preview = match (
        cols.contains("preview"),
        cols.contains("first_user_message"),
    ) {
        (true, true) => "COALESCE(preview, first_user_message)".to_string(),
        (true, false) => "preview".to_string(),
        (false, true) => "first_user_message".to_string(),
        _ => "NULL".to_string(),
    };
    let sql = format!(
        "SELECT id, rollout_path, {created}, {updated}, {}, {}, {preview}, {}, {}, {}, {} \
         FROM threads ORDER BY {updated} DESC LIMIT {limit}",
        col("cwd"),
        col("title"),
        col("model"),
        col("tokens_used"),
        col("source"),
        col("parent_thread_id"),
    );
    let mut st = c.prepare(&sql).map_err(err)?;
    let mut rows = st.query([]).map_err(err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(err)? {
        let text = |i: usize| -> Option<String> {
            match r.get_ref(i).ok()? {
                rusqlite::types::ValueRef::Text(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            }
        };
        let int = |i: usize| -> Option<i64> {
            match r.get_ref(i).ok()? {
                rusqlite::types::ValueRef::Integer(v) => Some(v),
                rusqlite::types::ValueRef::Real(v) => Some(v as i64),
                _ => None,
            }
        };
        let (Some(id), Some(rollout)) = (text(0), text(1)) else {
            continue;
        };
        let rollout = PathBuf::from(rollout);
        let rollout = if rollout.is_absolute() {
            rollout
        } else {
            codex_home.join(rollout)
        };
        // A path from a database is not trusted: only a rollout under the
        // Codex roots is ever opened (in every command).
        if !in_codex_roots(&rollout, codex_home) {
            tracing::info!(
                "codex state row {id}: rollout_path {} is outside the Codex roots; ignored",
                rollout.display()
            );
            continue;
        }
        let source = text(9);
        let parent = text(10).or_else(|| {
            let v: serde_json::Value = serde_json::from_str(source.as_deref()?).ok()?;
            v.get("subagent")?
                .get("thread_spawn")?
                .get("parent_thread_id")?
                .as_str()
                .map(str::to_string)
        });
        out.push(CodexRow {
            id,
            rollout,
            created_ms: int(2),
            updated_ms: int(3),
            cwd: text(4),
            title: text(5).filter(|t| !t.is_empty()),
            preview: text(6).filter(|t| !t.is_empty()),
            model: text(7),
            tokens_used: int(8),
            parent,
        });
    }
    Ok(out)
}

/// Parses the selected candidates on two threads (the work is I/O and JSON
/// bound; more threads would fight the capture daemon for cores).
fn parse_many(
    chosen: &[(Candidate, String)],
    which: &[usize],
    home: &Path,
) -> Vec<(usize, SessionSummary)> {
    let one = |i: usize| -> (usize, SessionSummary) {
        let (c, id) = &chosen[i];
        let r = SessionRef {
            provider: c.provider,
            session_id: id.clone(),
            path: c.path.clone(),
            home: Some(home.to_path_buf()),
        };
        match super::parse_session(&r) {
            Ok(s) => (i, SessionSummary::from_session(&s, c.updated_ms)),
            Err(e) => (
                i,
                SessionSummary {
                    provider: c.provider,
                    session_id: id.clone(),
                    path: c.path.clone(),
                    updated_ms: c.updated_ms,
                    start_ms: None,
                    cwd: None,
                    model: None,
                    title: None,
                    preview: None,
                    parent_session_id: None,
                    prompts: None,
                    tools: None,
                    usage: None,
                    source: SummarySource::Error,
                    error: Some(e.to_string()),
                },
            ),
        }
    };
    let threads = 2.min(which.len());
    if threads <= 1 {
        return which.iter().map(|&i| one(i)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out = Vec::new();
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                sc.spawn(|| {
                    let mut v = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&i) = which.get(k) else { break };
                        v.push(one(i));
                    }
                    v
                })
            })
            .collect();
        for h in hs {
            match h.join() {
                Ok(v) => out.extend(v),
                Err(_) => tracing::error!("session parse thread panicked"),
            }
        }
    });
    out
}
