//! Discovery: provider-owned roots, a cheap candidate index (stat only), the
//! bounded list path, the Codex SQLite fast path, and id lookup. What differs
//! per provider (roots, layouts, names, headers) is in its row of the
//! provider table (`crate::provider`) and its folder.
//!
//! Listing never parses every transcript: candidates are found by walking
//! fixed-depth provider layouts and stat'ing files; ids that are not in the
//! file name are read from a bounded header only for candidates that may be
//! listed; only the (at most 25) listed sessions are parsed.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{Result, SessionError};
use super::provider::{IndexId, PROVIDERS, spec};
use super::{AgentSession, Provider, TokenUsage};
use super::{codex, opencode, util};

/// Codex's state database, read for the list (it lives in `codex::state`).
pub use super::codex::state::state_db as codex_state_db;

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

fn roots_for(home: &Path, use_env: bool) -> Vec<(Provider, PathBuf)> {
    let mut v: Vec<(Provider, PathBuf)> = Vec::new();
    for s in PROVIDERS {
        for path in (s.roots)(home, use_env) {
            if !v.iter().any(|(q, x)| *q == s.provider && *x == path) {
                v.push((s.provider, path));
            }
        }
    }
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
    path.file_name()?.to_str()?;
    path.file_stem()?.to_str()?;
    let comps: Vec<&str> = path
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .collect();
    // The most specific layout first: each recogniser owns the paths of
    // its layout, even those that name no session.
    let mut specs = PROVIDERS;
    specs.sort_by_key(|s| s.path_rank);
    specs
        .iter()
        .find_map(|s| (s.id_for_path)(path, &comps).map(|id| (s.provider, id)))
        .and_then(|(p, id)| Some((p, id?)))
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

/// What a provider's scan of one root adds to: the candidates, the counts,
/// and whether files are stat'ed (see [`scan`]).
pub(crate) struct Scanner<'a> {
    provider: Provider,
    out: &'a mut Vec<Candidate>,
    st: &'a mut ScanStats,
    stat: bool,
}

impl Scanner<'_> {
    /// The entries of `dir` (none when it is missing; counted when it is
    /// unreadable).
    pub(crate) fn read_dir(&mut self, dir: &Path) -> Vec<std::fs::DirEntry> {
        match std::fs::read_dir(dir) {
            Ok(rd) => {
                self.st.dirs += 1;
                rd.flatten().collect()
            }
            Err(e) => {
                if e.kind() != std::io::ErrorKind::NotFound {
                    self.st.unreadable += 1;
                    tracing::debug!(dir = %dir.display(), error = %e, "cannot read directory");
                }
                Vec::new()
            }
        }
    }

    /// `metadata` following symlinks; a loop or dangling link is counted and
    /// skipped.
    fn file_meta(&mut self, e: &std::fs::DirEntry) -> Option<std::fs::Metadata> {
        match std::fs::metadata(e.path()) {
            Ok(m) => Some(m),
            Err(err) => {
                self.st.unreadable += 1;
                tracing::debug!(path = %e.path().display(), error = %err, "cannot stat");
                None
            }
        }
    }

    /// A directory, or a link to one.
    pub(crate) fn is_dir(&mut self, e: &std::fs::DirEntry) -> bool {
        match e.file_type() {
            Ok(t) if t.is_dir() => true,
            Ok(t) if t.is_symlink() => self.file_meta(e).is_some_and(|m| m.is_dir()),
            _ => false,
        }
    }

    /// A transcript named by a directory entry: taken when it is a regular
    /// file. Returns whether it was taken.
    pub(crate) fn push_file(&mut self, e: &std::fs::DirEntry, empty_window: bool) -> bool {
        // Only regular files: a transcript is never opened through a link, and
        // a directory or FIFO named like one is counted, not silently dropped.
        match e.file_type() {
            Ok(t) if t.is_file() => {}
            Ok(_) => {
                self.st.not_files += 1;
                return false;
            }
            Err(_) => {
                self.st.unreadable += 1;
                return false;
            }
        }
        // The id index needs names only: a regular file known from the
        // directory entry is taken without a stat (10,000 stats dominate lookup).
        if !self.stat {
            self.st.files += 1;
            self.out.push(Candidate {
                provider: self.provider,
                path: e.path(),
                updated_ms: 0,
                size: 0,
                empty_window,
            });
            return true;
        }
        // Stat'ed through the open directory (one name to look up, not the
        // whole path: the listing's main cost) and not through a link, as
        // the entry is a regular file.
        match e.metadata() {
            Ok(m) if m.is_file() => {
                self.st.files += 1;
                self.out.push(Candidate {
                    provider: self.provider,
                    path: e.path(),
                    updated_ms: mtime_ms(&m),
                    size: m.len(),
                    empty_window,
                });
                true
            }
            Ok(_) => false,
            Err(err) => {
                self.st.unreadable += 1;
                tracing::debug!(path = %e.path().display(), error = %err, "cannot stat");
                false
            }
        }
    }

    /// A transcript inside a scanned directory (Cursor's nested layout):
    /// stat'ed, taken when it is a file; a missing one is not counted.
    /// Returns whether it was taken.
    pub(crate) fn push_nested(&mut self, path: PathBuf, empty_window: bool) -> bool {
        if let Ok(m) = std::fs::metadata(&path)
            && m.is_file()
        {
            self.st.files += 1;
            self.out.push(Candidate {
                provider: self.provider,
                path,
                updated_ms: mtime_ms(&m),
                size: m.len(),
                empty_window,
            });
            return true;
        }
        false
    }

    /// The transcript taken last is as fresh as the newest of the files
    /// `files_of` its path names (Cursor: a parent and its subagents), when
    /// update times are wanted; files that cannot be stat'ed are passed over.
    pub(crate) fn freshen_last(&mut self, files_of: impl FnOnce(&Path) -> Vec<PathBuf>) {
        if !self.stat {
            return;
        }
        if let Some(c) = self.out.last_mut() {
            for f in files_of(&c.path) {
                if let Ok(m) = std::fs::metadata(&f) {
                    c.updated_ms = c.updated_ms.max(mtime_ms(&m));
                }
            }
        }
    }
}

/// A file's modification time in ms (0 when the platform has none).
pub(crate) fn mtime_ms(m: &std::fs::Metadata) -> i64 {
    m.modified().map(util::system_time_ms).unwrap_or(0)
}

/// Stat-only scan of fixed-depth provider layouts (never a blind recursive
/// hunt, so symlink loops cannot trap it).
pub fn scan(roots: &[(Provider, PathBuf)], st: &mut ScanStats) -> Vec<Candidate> {
    scan_with(roots, st, true)
}

/// [`scan`] with `stat = false`: names only (update time and size are 0),
/// for the id index.
fn scan_with(roots: &[(Provider, PathBuf)], st: &mut ScanStats, stat: bool) -> Vec<Candidate> {
    // The roots are scanned on two threads (the scan is bound by stat
    // syscalls, 10,000 of them over a large home); their candidates are
    // joined in root order, as one thread would have found them.
    let per_root = on_two_threads(roots.len(), |i| {
        let (p, root) = &roots[i];
        let mut out = Vec::new();
        let mut root_st = ScanStats::default();
        let mut scanner = Scanner {
            provider: *p,
            out: &mut out,
            st: &mut root_st,
            stat,
        };
        (spec(*p).scan_root)(root, &mut scanner);
        (out, root_st)
    });
    let mut out = Vec::with_capacity(per_root.iter().map(|(c, _)| c.len()).sum());
    for (cands, s) in per_root {
        out.extend(cands);
        st.dirs += s.dirs;
        st.files += s.files;
        st.unreadable += s.unreadable;
        st.not_files += s.not_files;
    }
    for s in PROVIDERS {
        if let Some(after) = s.after_scan {
            after(&mut out, stat);
        }
    }
    out
}

/// `f(0)`, …, `f(n - 1)` on two threads (the listing's work is syscall and
/// JSON bound; more threads would fight the capture daemon for cores),
/// returned in index order. A panic in `f` is a panic of the caller.
fn on_two_threads<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    if n <= 1 {
        return (0..n).map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut v = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= n {
                break;
            }
            v.push((i, f(i)));
        }
        v
    };
    let mut done = std::thread::scope(|sc| {
        // Without a second thread (none to be had) this one does it all.
        let other = std::thread::Builder::new().spawn_scoped(sc, work);
        let mut done = work();
        match other.map(|h| h.join()) {
            Ok(Ok(v)) => done.extend(v),
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(e) => tracing::debug!(error = %e, "no second thread"),
        }
        done
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, t)| t).collect()
}

/// Session id of a candidate: the file stem (Claude, Cursor) or a bounded
/// header read (Codex `session_meta.id`, Gemini `sessionId`).
pub fn candidate_id(c: &Candidate) -> Option<String> {
    (spec(c.provider).candidate_id)(&c.path)
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

/// Long-lived discovery state: the id→path index and the Codex tail cache.
/// One-shot CLI calls create one per command; a daemon keeps one.
pub struct SessionIndex {
    opts: DiscoveryOptions,
    ids: HashMap<String, Vec<(Provider, PathBuf)>>,
    /// Transcripts not yet header-read (Gemini chats), by the id prefix in
    /// their name ([`IndexId::Prefix`]).
    deferred: HashMap<String, Vec<(Provider, PathBuf)>>,
    /// The lengths of the prefixes in `deferred`.
    deferred_lens: BTreeSet<usize>,
    built: bool,
    codex_tails: codex::state::TailCache,
}

impl SessionIndex {
    pub fn new(opts: DiscoveryOptions) -> Self {
        SessionIndex {
            opts,
            ids: HashMap::new(),
            deferred: HashMap::new(),
            deferred_lens: BTreeSet::new(),
            built: false,
            codex_tails: codex::state::TailCache::default(),
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

        // Codex threads the state database knows: rows found by rollout,
        // rollouts outside the scanned roots added, their update times.
        let codex_rows = if self.opts.wants(Provider::Codex) {
            codex::state::StateRows::load(&home, self.opts.use_env(), &mut listing.notes)
        } else {
            codex::state::StateRows::default()
        };
        codex_rows.merge(&mut cands);
        let row_of = |c: &Candidate| codex_rows.row_of(c);
        // opencode's database holds many sessions: one candidate each.
        let mut cands = opencode_sessions(cands, &mut listing.notes);
        if let Some(age) = self.opts.max_age {
            let now = util::system_time_ms(std::time::SystemTime::now());
            let min = now.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
            cands.retain(|(c, _)| c.updated_ms >= min);
        }
        cands.sort_by(|(a, ai), (b, bi)| {
            b.updated_ms
                .cmp(&a.updated_ms)
                .then_with(|| a.path.cmp(&b.path))
                .then_with(|| ai.cmp(bi))
        });

        // Walk newest first, resolving ids, until `limit` unique ids.
        let limit = self.opts.limit();
        let mut chosen: Vec<(Candidate, String)> = Vec::new();
        let mut pos: HashMap<(Provider, String), usize> = HashMap::new();
        for (c, known) in cands {
            if chosen.len() >= limit {
                break;
            }
            let id = match (known, row_of(&c)) {
                (Some(id), _) => Some(id),
                (None, Some(r)) => Some(r.id.clone()),
                (None, None) => candidate_id(&c),
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
                    // Only Cursor marks the empty window and only Gemini
                    // writes `.json` twins, so the rules hold for all.
                    let replace = (old.empty_window && !c.empty_window)
                        || (old.path.extension().is_some_and(|e| e == "json")
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
                rows[i] = Some(codex::state::row_summary(&mut self.codex_tails, r, c, id));
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
        self.hydrate_deferred(id);
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
        // Gemini .jsonl twins win over .json; Cursor outside empty-window;
        // then the newest, as the listing picks: a Gemini CLI resume that
        // starts in a later minute leaves a two-line file of the same id
        // beside the session's own file, which the resumed turn then
        // appends to.
        hits.sort_by_cached_key(|(p, path, _)| {
            let s = path.to_string_lossy();
            let modified = std::fs::symlink_metadata(path)
                .and_then(|m| m.modified())
                .ok();
            (
                *p,
                s.contains("empty-window"),
                path.extension().is_some_and(|e| e == "json"),
                std::cmp::Reverse(modified),
                path.clone(),
            )
        });
        let home = self.opts.resolved_home().ok();
        for (p, path, full) in hits {
            // Verify: the parsed id must equal the requested one.
            if (spec(p).verify_id)(&path, &full) {
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
        self.deferred.clear();
        self.deferred_lens.clear();
        for c in cands {
            if c.provider == Provider::Opencode {
                // Every session of the database (ids only).
                match opencode::store::session_ids(&c.path) {
                    Ok(ids) => {
                        for id in ids {
                            self.ids
                                .entry(id)
                                .or_default()
                                .push((c.provider, c.path.clone()));
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "opencode database not indexed"),
                }
                continue;
            }
            match (spec(c.provider).index_id)(&c.path) {
                IndexId::Id(id) => self.ids.entry(id).or_default().push((c.provider, c.path)),
                IndexId::Prefix(p) => {
                    self.deferred_lens.insert(p.len());
                    self.deferred
                        .entry(p)
                        .or_default()
                        .push((c.provider, c.path));
                }
                IndexId::None => {}
            }
        }
        self.built = true;
        Ok(())
    }

    /// Reads the headers of the deferred transcripts whose name holds a
    /// prefix of `id`, moving them into the id index.
    fn hydrate_deferred(&mut self, id: &str) {
        for len in &self.deferred_lens {
            let Some(prefix) = id.get(..*len) else {
                continue;
            };
            let Some(paths) = self.deferred.remove(prefix) else {
                continue;
            };
            for (p, path) in paths {
                if let Some(full) = (spec(p).candidate_id)(&path) {
                    self.ids.entry(full).or_default().push((p, path));
                }
            }
        }
    }
}

/// The candidates with the session id each names: an opencode database
/// becomes one candidate per session (its newest `4 * MAX_LIST`, by
/// `time_updated`, one indexed query), every other transcript stays one
/// candidate whose id is found later. An unreadable database is a note.
fn opencode_sessions(
    cands: Vec<Candidate>,
    notes: &mut Vec<String>,
) -> Vec<(Candidate, Option<String>)> {
    let mut out = Vec::with_capacity(cands.len());
    for c in cands {
        if c.provider != Provider::Opencode {
            out.push((c, None));
            continue;
        }
        match opencode::store::recent_sessions(&c.path, 4 * MAX_LIST) {
            Ok(rows) => out.extend(rows.into_iter().map(|r| {
                let updated_ms = r.updated_ms.unwrap_or(c.updated_ms);
                (
                    Candidate {
                        updated_ms,
                        ..c.clone()
                    },
                    Some(r.id),
                )
            })),
            Err(e) => notes.push(format!("opencode database not read: {e}")),
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::on_two_threads;

    #[test]
    fn work_on_two_threads_comes_back_in_index_order() {
        assert_eq!(on_two_threads(0, |i| i), Vec::<usize>::new());
        assert_eq!(on_two_threads(1, |i| i + 7), [7]);
        // Uneven work, so the threads finish out of order.
        let v = on_two_threads(9, |i| {
            if i % 2 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
            i * 10
        });
        assert_eq!(v, [0, 10, 20, 30, 40, 50, 60, 70, 80]);
    }
}
