//! The live model: one entry per transcript candidate, its tail facts and
//! token totals, the desktop join, and the `Tracker` that turns them into
//! states. Reading is incremental: a change re-reads the tail (≤ 128 KiB) and
//! adds the tokens of the appended lines; a whole transcript is parsed only
//! the first time a session is listed (its totals and first prompt).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Serialize;

use super::{
    Hidden, KernelSession, NotListed, NotListedReason, REASON_PATHS, ReasonCount, Row, RowFilter,
    Snapshot, TitleSource, Tokens, TopError, TopOptions,
};
use crate::sessions::discovery::{self, Candidate, DiscoveryOptions, ScanStats};
use crate::sessions::live::{
    self, HiddenReason, LiveInputs, LiveState, ProcessTruth, TailFacts, Thresholds, Tracker,
};
use crate::sessions::{ParseBatch, Provider, TokenUsage};

/// Idle sessions listed when all are asked for (the newest ones; the rest
/// are counted): as many as `agentsight sessions` lists.
const IDLE_LISTED: usize = discovery::MAX_LIST;
/// Appended bytes read for token totals at once; a bigger jump re-parses.
const APPEND_READ_MAX: u64 = 4 * 1024 * 1024;

/// What a whole-transcript parse gave (once per listed session).
#[derive(Debug, Clone, Default)]
struct WholeFacts {
    tokens: Option<Tokens>,
    first_prompt: Option<String>,
    cwd: Option<String>,
    model: Option<String>,
    /// Bytes of the file the token totals cover.
    counted_upto: u64,
    /// Claude: the last response counted (id, usage), so an appended chunk
    /// that continues it counts it once.
    last_response: Option<(String, live::TokenTotals)>,
}

#[derive(Debug, Clone)]
struct Entry {
    provider: Provider,
    mtime_ms: i64,
    size: u64,
    /// `None` until the tail was read (old transcripts never are, unless listed).
    facts: Option<TailFacts>,
    whole: Option<WholeFacts>,
    /// Codex/Gemini ids live in the file; read once.
    header_id: Option<String>,
    /// Why the last tail read failed (`NotOwner` or `Unreadable`); cleared
    /// by a successful read.
    unreadable: Option<NotListedReason>,
    /// A session of a store holding many (opencode's database): the store
    /// and the session's id. Its entry is keyed by [`store_key`]; `mtime_ms`
    /// is the session's own `time_updated`.
    store: Option<(PathBuf, String)>,
}

/// The entry key of session `id` of a shared store: `<db>#<id>` (the map
/// and the tracker need one key per session; rows show the store's path).
fn store_key(db: &Path, id: &str) -> PathBuf {
    let mut k = db.as_os_str().to_os_string();
    k.push("#");
    k.push(id);
    PathBuf::from(k)
}

/// opencode keeps every session in one database (a shared store), the
/// others one transcript per session.
fn shared_store(p: Provider) -> bool {
    p == Provider::Opencode
}

/// How many of a store's newest sessions are candidates (as many as the
/// listing considers).
const STORE_SESSIONS: usize = 4 * discovery::MAX_LIST;

/// A store's change stamp: the newest mtime and the summed size of the
/// database and its `-wal` (a running opencode writes only the WAL).
fn store_stamp(db: &Path) -> Option<(i64, u64)> {
    let (m, s) = stat(db)?;
    let mut wal = db.as_os_str().to_os_string();
    wal.push("-wal");
    Some(match stat(Path::new(&wal)) {
        Some((wm, ws)) => (m.max(wm), s + ws),
        None => (m, s),
    })
}

/// Counts per reason a session is not listed, with the first few paths.
#[derive(Default)]
struct Tally {
    by: std::collections::BTreeMap<NotListedReason, (u64, Vec<PathBuf>)>,
}

impl Tally {
    fn add(&mut self, reason: NotListedReason, path: &Path) {
        let (n, paths) = self.by.entry(reason).or_default();
        *n += 1;
        // The smallest paths, so the list does not depend on hash order;
        // a path is cloned only when it is kept (a tick over 10,000 idle
        // transcripts stays cheap).
        if paths.len() < REASON_PATHS || paths.last().is_some_and(|l| path < l.as_path()) {
            let at = paths.partition_point(|p| p.as_path() < path);
            paths.insert(at, path.to_path_buf());
            paths.truncate(REASON_PATHS);
        }
    }

    fn into_list(self) -> Vec<ReasonCount> {
        self.by
            .into_iter()
            .map(|(reason, (count, paths))| ReasonCount {
                reason,
                count,
                paths,
            })
            .collect()
    }
}

/// A tool call of the detail pane, from the transcript.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolLine {
    /// Position among the transcript's tool calls (correlate's `tool_index`).
    pub index: usize,
    pub name: String,
    pub call_id: Option<String>,
    /// `ok`, `failed` or `unknown` (no result recorded yet).
    pub status: crate::sessions::ToolStatus,
    /// The command, else the first path the call names.
    pub summary: Option<String>,
    /// An MCP call's server and tool as the transcript names them
    /// (`fs/write_file`; `?` for a server it does not name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<String>,
    /// Times of the call and of its result (epoch ms), as recorded.
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
}

/// The live model of every candidate transcript.
pub struct LiveModel {
    roots: Vec<(Provider, PathBuf)>,
    desktop_dir: PathBuf,
    thresholds: Thresholds,
    entries: HashMap<PathBuf, Entry>,
    tracker: Tracker,
    desktop: live::desktop::DesktopIndex,
    /// Claude Code's live registry (`~/.claude/sessions/<pid>.json`).
    registry_dir: PathBuf,
    registry: live::registry::Registry,
    skipped_lines: u64,
    /// Project directories listed by whole parses (one per directory per
    /// scan, however many transcripts it holds).
    dir_listings: u64,
    /// Shared stores (opencode databases) by path: their last change stamp
    /// and the entry keys of their sessions.
    stores: HashMap<PathBuf, ((i64, u64), Vec<PathBuf>)>,
}

fn ts_ms(ms: i64) -> Option<Timestamp> {
    Timestamp::from_millisecond(ms).ok()
}

fn stat(path: &Path) -> Option<(i64, u64)> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if !m.is_file() {
        return None;
    }
    let mtime = m
        .modified()
        .map(crate::sessions::util::system_time_ms)
        .unwrap_or(0);
    Some((mtime, m.len()))
}

impl LiveModel {
    /// Discovers every candidate (stat only) and reads the tails of those
    /// recent enough to be anything but idle.
    pub fn new(opts: &TopOptions) -> Result<Self, TopError> {
        let home = discovery::read_home_of_owner(opts.home.as_deref())?;
        let roots = DiscoveryOptions {
            home: opts.home.clone(),
            ..Default::default()
        }
        .roots()?;
        let desktop_dir = opts
            .desktop_dir
            .clone()
            .unwrap_or_else(|| live::desktop::default_user_data_dir(&home));
        let mut m = LiveModel {
            roots,
            desktop_dir,
            registry_dir: home.join(".claude/sessions"),
            thresholds: opts.thresholds,
            entries: HashMap::new(),
            tracker: Tracker::new(Timestamp::now(), opts.thresholds),
            desktop: Default::default(),
            registry: Default::default(),
            skipped_lines: 0,
            dir_listings: 0,
            stores: HashMap::new(),
        };
        m.reload_registry();
        m.reload_desktop();
        m.rescan();
        Ok(m)
    }

    pub fn roots(&self) -> &[(Provider, PathBuf)] {
        &self.roots
    }

    pub fn desktop_dir(&self) -> &Path {
        &self.desktop_dir
    }

    pub fn registry_dir(&self) -> &Path {
        &self.registry_dir
    }

    /// Re-reads Claude Code's live registry (process liveness, status).
    pub fn reload_registry(&mut self) {
        self.registry = live::registry::load(&self.registry_dir);
    }

    pub fn candidates(&self) -> usize {
        self.entries.len()
    }

    /// Re-reads the desktop bookkeeping (a corrupt or missing store changes
    /// nothing but the decoration).
    pub fn reload_desktop(&mut self) {
        self.desktop = live::desktop::load(&self.desktop_dir);
    }

    /// The provider of a path that has a transcript's shape under one of the
    /// roots (the same layouts discovery scans).
    pub fn transcript_provider(&self, path: &Path) -> Option<Provider> {
        // A name that is not UTF-8 is no transcript of any layout.
        path.file_name()?.to_str()?;
        for (p, root) in &self.roots {
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let comps: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
            if p.is_transcript(&comps) {
                return Some(*p);
            }
        }
        None
    }

    /// Full stat-only scan: new and changed transcripts are read, vanished
    /// ones dropped. Returns the number of transcripts that changed.
    pub fn rescan(&mut self) -> usize {
        let mut st = ScanStats::default();
        let found: Vec<Candidate> = discovery::scan(&self.roots, &mut st);
        let mut changed = 0;
        let mut seen = std::collections::HashSet::with_capacity(found.len());
        let mut batch = ParseBatch::default();
        for c in found {
            if shared_store(c.provider) {
                let (n, keys) = self.refresh_store(&c.path, false);
                changed += n;
                seen.extend(keys);
                continue;
            }
            seen.insert(c.path.clone());
            let same = self
                .entries
                .get(&c.path)
                .is_some_and(|e| e.mtime_ms == c.updated_ms && e.size == c.size);
            if !same {
                changed += 1;
                self.upsert(c.provider, &c.path, c.updated_ms, c.size, &mut batch);
            }
        }
        self.dir_listings += batch.dir_listings();
        let before = self.entries.len();
        self.entries.retain(|p, _| seen.contains(p));
        self.stores
            .retain(|_, (_, keys)| keys.iter().any(|k| seen.contains(k)));
        changed += before - self.entries.len();
        self.tracker.prune(&|p: &Path| seen.contains(p));
        changed
    }

    /// A file event on `path`: re-stat it and re-read its tail, or drop it.
    /// Returns whether `path` is (or was) a transcript.
    pub fn touch(&mut self, path: &Path) -> bool {
        if let Some(db) = self.store_of(path) {
            let (_, keys) = self.refresh_store(&db, false);
            let keys: std::collections::HashSet<PathBuf> = keys.into_iter().collect();
            // Sessions gone from the store (or the store itself) go too.
            self.entries
                .retain(|k, e| e.store.as_ref().is_none_or(|(d, _)| *d != db) || keys.contains(k));
            return true;
        }
        let Some(provider) = self.transcript_provider(path) else {
            return false;
        };
        match stat(path) {
            Some((mtime, size)) => {
                let same = self
                    .entries
                    .get(path)
                    .is_some_and(|e| e.mtime_ms == mtime && e.size == size && e.facts.is_some());
                if !same {
                    let mut batch = ParseBatch::default();
                    self.upsert(provider, path, mtime, size, &mut batch);
                    self.dir_listings += batch.dir_listings();
                }
            }
            None => {
                self.entries.remove(path);
            }
        }
        true
    }

    /// The shared store a path belongs to: the database itself or its
    /// `-wal` (where a running opencode writes).
    fn store_of(&self, path: &Path) -> Option<PathBuf> {
        let name = path.file_name()?.to_str()?;
        let db = match name.strip_suffix("-wal") {
            Some(base) => path.with_file_name(base),
            None => path.to_path_buf(),
        };
        self.transcript_provider(&db)
            .is_some_and(shared_store)
            .then_some(db)
    }

    /// Re-reads the sessions of a shared store when its stamp moved (or
    /// `force`): its newest [`STORE_SESSIONS`] become entries, and those
    /// recent or already read get their facts. Returns how many entries
    /// changed and the store's entry keys.
    fn refresh_store(&mut self, db: &Path, force: bool) -> (usize, Vec<PathBuf>) {
        let Some(stamp) = store_stamp(db) else {
            self.stores.remove(db);
            return (0, Vec::new());
        };
        if let Some((old, keys)) = self.stores.get(db)
            && *old == stamp
            && !force
        {
            return (0, keys.clone());
        }
        let sessions = match crate::sessions::opencode::store::recent_sessions(db, STORE_SESSIONS) {
            Ok(s) => s,
            Err(err) => {
                tracing::debug!(db = %db.display(), error = %err, "store unreadable");
                // Keep what was known: a locked database is a passing state.
                let keys = self
                    .stores
                    .get(db)
                    .map(|(_, k)| k.clone())
                    .unwrap_or_default();
                return (0, keys);
            }
        };
        let window = self.thresholds.attention_window.as_millis() as i64;
        let now = Timestamp::now().as_millisecond();
        let mut keys = Vec::with_capacity(sessions.len());
        let mut changed = 0;
        let mut batch = ParseBatch::default();
        for s in sessions {
            let key = store_key(db, &s.id);
            let updated = s.updated_ms.unwrap_or(stamp.0);
            let e = self.entries.entry(key.clone()).or_insert_with(|| Entry {
                provider: Provider::Opencode,
                mtime_ms: updated,
                size: 0,
                facts: None,
                whole: None,
                header_id: Some(s.id.clone()),
                unreadable: None,
                store: Some((db.to_path_buf(), s.id.clone())),
            });
            e.mtime_ms = updated;
            if e.facts.is_some() || now - updated <= window {
                read_store_entry(e, &mut self.skipped_lines, &mut batch);
                changed += 1;
            }
            keys.push(key);
        }
        self.dir_listings += batch.dir_listings();
        self.stores.insert(db.to_path_buf(), (stamp, keys.clone()));
        (changed, keys)
    }

    fn upsert(
        &mut self,
        provider: Provider,
        path: &Path,
        mtime_ms: i64,
        size: u64,
        batch: &mut ParseBatch,
    ) {
        let e = self
            .entries
            .entry(path.to_path_buf())
            .or_insert_with(|| Entry {
                provider,
                mtime_ms,
                size,
                facts: None,
                whole: None,
                header_id: None,
                unreadable: None,
                store: None,
            });
        let grew_from = (e.size <= size).then_some(e.size);
        e.mtime_ms = mtime_ms;
        e.size = size;
        let recent = self.recent(path, mtime_ms, provider);
        let e = self.entries.get_mut(path).expect("inserted above");
        if e.facts.is_some() || recent {
            read_entry(
                e,
                path,
                &self.thresholds,
                &mut self.skipped_lines,
                grew_from,
                batch,
            );
        }
    }

    /// Recent enough that the state rules may say anything but idle: the
    /// file or the desktop activity lies within the attention window.
    fn recent(&self, path: &Path, mtime_ms: i64, provider: Provider) -> bool {
        let window = self.thresholds.attention_window.as_millis() as i64;
        let now = Timestamp::now().as_millisecond();
        if now - mtime_ms <= window {
            return true;
        }
        provider == Provider::Claude
            && self
                .desktop_entry(path)
                .and_then(|d| d.last_activity_at)
                .is_some_and(|t| now - t.as_millisecond() <= window)
    }

    fn desktop_entry(&self, path: &Path) -> Option<&live::desktop::DesktopEntry> {
        let stem = path.file_stem()?.to_str()?;
        self.desktop.get(stem)
    }

    /// The states of every candidate at `now`, filtered, sorted by urgency
    /// then newest activity.
    pub fn snapshot(
        &mut self,
        now: Timestamp,
        filter: RowFilter,
        kernel: Option<&HashMap<String, KernelSession>>,
    ) -> Snapshot {
        if filter.all {
            self.read_newest_idle();
        }
        let mut not_listed = NotListed::default();
        let mut tally = Tally::default();
        // Transcripts never read are old, so idle: counted without a row
        // (the common case by far; a tick must stay cheap over 10,000).
        // Recent ones whose read failed say why instead.
        let mut paths: Vec<PathBuf> = Vec::new();
        for (path, e) in &self.entries {
            if filter.provider.is_some_and(|p| p != e.provider) {
                not_listed.other_provider += 1;
                tally.add(NotListedReason::OtherProvider, path);
            } else if e.facts.is_some() {
                paths.push(path.clone());
            } else if let Some(reason) = e.unreadable {
                not_listed.unreadable += 1;
                tally.add(reason, path);
            } else {
                not_listed.idle += 1;
                tally.add(NotListedReason::Idle, path);
            }
        }
        let mut rows = Vec::new();
        for path in paths {
            let Some(row) = self.row(&path, now, kernel) else {
                not_listed.idle += 1;
                tally.add(NotListedReason::Idle, &path);
                continue;
            };
            if let Some(h) = row.hidden.filter(|_| !filter.all) {
                not_listed.hidden += 1;
                let reason = match h {
                    Hidden::Archived => NotListedReason::Archived,
                    Hidden::Subagent => NotListedReason::Subagent,
                    Hidden::Exec => NotListedReason::Exec,
                };
                tally.add(reason, &path);
            } else if row.state == LiveState::Idle && !filter.all {
                not_listed.idle += 1;
                tally.add(NotListedReason::Idle, &path);
            } else {
                rows.push(row);
            }
        }
        rows.sort_by(|a, b| {
            b.state
                .urgency()
                .cmp(&a.state.urgency())
                .then_with(|| b.last_activity.cmp(&a.last_activity))
                .then_with(|| a.path.cmp(&b.path))
        });
        Snapshot {
            at: now.to_string(),
            degraded: None,
            degraded_reason: None,
            watched_dirs: 0,
            candidates: self.entries.len() as u64,
            kernel: kernel.is_some(),
            kernel_error: None,
            rows,
            not_listed,
            hidden_reasons: tally.into_list(),
            skipped_lines: self.skipped_lines,
            desktop_skipped: self.desktop.skipped as u64,
        }
    }

    /// With all rows asked for, the newest transcripts are read too (the
    /// same [`IDLE_LISTED`] each time, so the cost stays bounded).
    fn read_newest_idle(&mut self) {
        let mut newest: Vec<(i64, PathBuf)> = self
            .entries
            .iter()
            .map(|(p, e)| (e.mtime_ms, p.clone()))
            .collect();
        newest.sort_by(|a, b| b.cmp(a));
        let mut batch = ParseBatch::default();
        for (_, p) in newest.into_iter().take(IDLE_LISTED) {
            if let Some(e) = self.entries.get_mut(&p)
                && e.facts.is_none()
            {
                let skipped = &mut self.skipped_lines;
                if e.store.is_some() {
                    read_store_entry(e, skipped, &mut batch);
                } else {
                    read_entry(e, &p, &self.thresholds, skipped, None, &mut batch);
                }
            }
        }
        self.dir_listings += batch.dir_listings();
    }

    /// One row; `None` for a transcript never read (old, so idle).
    fn row(
        &mut self,
        path: &Path,
        now: Timestamp,
        kernel: Option<&HashMap<String, KernelSession>>,
    ) -> Option<Row> {
        let e = self.entries.get(path)?;
        let facts = e.facts.as_ref()?;
        let desk = if e.provider == Provider::Claude {
            self.desktop_entry(path).cloned()
        } else {
            None
        };
        let session_id = session_id(e, path);
        let ks = kernel.and_then(|k| k.get(&session_id)).copied();
        let reg = (e.provider == Provider::Claude)
            .then(|| self.registry.by_session.get(&session_id))
            .flatten();
        // The kernel's view of the tree beats the registry's pid check.
        let process = match (ks, reg) {
            (Some(k), _) => k.process,
            (None, Some(r)) => r.process_truth(Path::new("/proc")),
            (None, None) => ProcessTruth::Unknown,
        };
        let inputs = LiveInputs {
            facts,
            mtime: ts_ms(e.mtime_ms),
            desktop_activity: desk.as_ref().and_then(|d| d.last_activity_at),
            process,
            registry_status: reg.and_then(|r| r.status.as_ref()),
        };
        let activity = live::activity_time(&inputs);
        let state = self.tracker.classify(path, &inputs, now);
        let whole = e.whole.clone().unwrap_or_default();
        let cwd = facts
            .cwd
            .clone()
            .or(whole.cwd)
            .or_else(|| desk.as_ref().and_then(|d| d.cwd.clone()));
        let first_prompt = facts.first_prompt.clone().or(whole.first_prompt);
        let (title, title_source) =
            match (desk.as_ref().and_then(|d| d.title.clone()), first_prompt) {
                (Some(t), _) => (Some(t), TitleSource::Desktop),
                (None, Some(p)) => (Some(p), TitleSource::FirstPrompt),
                (None, None) => match &cwd {
                    Some(c) => (Some(c.clone()), TitleSource::Cwd),
                    None => (None, TitleSource::None),
                },
            };
        let hidden = match facts.hidden {
            Some(HiddenReason::CodexExec) => Some(Hidden::Exec),
            Some(_) => Some(Hidden::Subagent),
            None if desk.as_ref().is_some_and(|d| d.archived) => Some(Hidden::Archived),
            None => None,
        };
        let resets_at = match &facts.signal {
            Some(live::Signal::RateLimited { resets_at: Some(t) }) => Some(t.to_string()),
            _ => None,
        };
        Some(Row {
            provider: e.provider,
            session_id,
            state,
            title,
            title_source,
            cwd,
            model: facts
                .model
                .clone()
                .or(whole.model)
                .or_else(|| desk.as_ref().and_then(|d| d.model.clone())),
            last_activity: activity.map(|t| t.to_string()),
            age_s: activity.map(|t| (now.as_second() - t.as_second()).max(0) as u64),
            tokens: whole.tokens,
            hidden,
            resets_at,
            kernel: ks.map(|k| k.columns),
            // A store's session shows the store (its key is no file).
            path: e.store.as_ref().map_or(path, |(db, _)| db).to_path_buf(),
        })
    }

    /// The last tool calls of a session's transcript (detail pane): parsed
    /// on demand for the one selected session.
    /// `path` and `session_id` as a row shows them.
    pub fn tool_calls(&self, path: &Path, session_id_: &str, last: usize) -> Vec<ToolLine> {
        let key = store_key(path, session_id_);
        let (key, file) = match self.entries.get(&key) {
            Some(e) => (key.as_path(), e.store.as_ref().map_or(path, |(db, _)| db)),
            None => (path, path),
        };
        let Some(e) = self.entries.get(key) else {
            return Vec::new();
        };
        // The id names the session in a store holding many (opencode's database).
        let id = session_id(e, key);
        let Ok(s) = crate::sessions::parse_session_in(
            e.provider,
            file,
            Some(&id),
            &crate::sessions::Bounds::default(),
            &mut ParseBatch::default(),
        ) else {
            return Vec::new();
        };
        let skip = s.tools.len().saturating_sub(last);
        s.tools
            .iter()
            .enumerate()
            .skip(skip)
            .map(|(index, t)| ToolLine {
                index,
                name: t.name.clone(),
                call_id: t.call_id.clone(),
                status: t.status,
                summary: t
                    .command
                    .clone()
                    .or_else(|| t.paths.first().map(|p| p.path.clone())),
                mcp: t.mcp.as_ref().map(|m| m.label()),
                start_ms: t.start_ms,
                end_ms: t.end_ms,
            })
            .collect()
    }
}

fn session_id(e: &Entry, path: &Path) -> String {
    if let Some(id) = e.facts.as_ref().and_then(|f| f.session_id.clone()) {
        return id;
    }
    if let Some(id) = &e.header_id {
        return id.clone();
    }
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Reads a shared store's session: its live facts from the newest rows,
/// and (each time they are read, as the session changed) its whole parse
/// for tokens, first prompt, cwd and model.
fn read_store_entry(e: &mut Entry, skipped: &mut u64, batch: &mut ParseBatch) {
    let Some((db, id)) = e.store.clone() else {
        return;
    };
    let facts = match crate::sessions::opencode::live::facts(&db, &id) {
        Ok(f) => f,
        Err(err) => {
            tracing::debug!(db = %db.display(), %id, error = %err, "store session unreadable");
            e.unreadable = Some(unreadable_reason(&db));
            return;
        }
    };
    e.unreadable = None;
    *skipped += u64::from(facts.skipped_lines);
    e.facts = Some(facts);
    e.whole = Some(whole_facts(e.provider, &db, &id, 0, batch));
}

/// Reads an entry's tail, and its token totals: from the tail when it
/// covers the whole session (a small file, or cumulative totals as Codex
/// writes them); else a whole parse the first time, then only the appended
/// complete lines (`grew_from`: the old size when the file grew).
fn read_entry(
    e: &mut Entry,
    path: &Path,
    t: &Thresholds,
    skipped: &mut u64,
    grew_from: Option<u64>,
    batch: &mut ParseBatch,
) {
    let facts = match live::read_tail(e.provider, path, t) {
        Ok(f) => f,
        Err(err) => {
            tracing::debug!(path = %path.display(), error = %err, "tail unreadable");
            e.unreadable = Some(unreadable_reason(path));
            return;
        }
    };
    e.unreadable = None;
    *skipped += u64::from(facts.skipped_lines);
    let tail_whole = facts.tokens.whole_session;
    let tail_tokens = tokens_of_totals(&facts.tokens);
    // The tail ends where the file ends: its last response is the file's.
    let tail_last_response = facts.response_ends.last.clone();
    e.facts = Some(facts);
    if e.header_id.is_none() && e.provider.id_in_header() {
        e.header_id = discovery::candidate_id(&Candidate {
            provider: e.provider,
            path: path.to_path_buf(),
            updated_ms: e.mtime_ms,
            size: e.size,
            empty_window: false,
        });
    }
    let counted = match (&e.whole, grew_from) {
        (Some(_), _) if tail_whole => true,
        (Some(w), Some(old)) if old >= w.counted_upto => add_appended(e, path),
        (Some(w), _) => w.counted_upto == e.size,
        (None, _) => false,
    };
    if !counted {
        e.whole = Some(WholeFacts {
            last_response: tail_last_response,
            ..whole_facts(e.provider, path, &session_id(e, path), e.size, batch)
        });
    }
    // A tail from the file's start knows the first prompt: kept, since the
    // appends that follow are not parsed whole again.
    if let Some(w) = e.whole.as_mut()
        && w.first_prompt.is_none()
    {
        w.first_prompt = e.facts.as_ref().and_then(|f| f.first_prompt.clone());
    }
    if let Some(w) = e.whole.as_mut()
        && tail_whole
        && e.provider != Provider::Cursor
    {
        w.tokens = Some(tail_tokens);
        w.counted_upto = e.size;
        w.last_response = e.facts.as_ref().and_then(|f| f.response_ends.last.clone());
    }
}

/// Why a transcript's tail could not be read: another user's file in the
/// home (refused by design, `sessions::util::open_regular`), or anything else.
fn unreadable_reason(path: &Path) -> NotListedReason {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::symlink_metadata(path).map(|m| m.uid()).ok();
    match (uid, crate::sessions::util::transcript_owner()) {
        (Some(u), Some(owner)) if u != owner => NotListedReason::NotOwner,
        _ => NotListedReason::Unreadable,
    }
}

fn tokens_of(u: &TokenUsage) -> Tokens {
    Tokens {
        input: u.input + u.cache_read + u.cache_creation,
        output: u.output,
    }
}

fn tokens_of_totals(t: &live::TokenTotals) -> Tokens {
    Tokens {
        input: t.input + t.cache_read + t.cache_creation,
        output: t.output,
    }
}

fn whole_facts(
    provider: Provider,
    path: &Path,
    id: &str,
    size: u64,
    batch: &mut ParseBatch,
) -> WholeFacts {
    let bounds = crate::sessions::Bounds::default();
    match crate::sessions::parse_session_in(provider, path, Some(id), &bounds, batch) {
        Ok(s) => WholeFacts {
            // Cursor transcripts carry no usage: unknown, not zero.
            tokens: (provider != Provider::Cursor).then(|| tokens_of(&s.usage)),
            first_prompt: s.prompts.first().map(|p| p.text.clone()).or(s.preview),
            cwd: s.cwd,
            model: s.models.last().cloned(),
            counted_upto: size,
            last_response: None,
        },
        Err(err) => {
            tracing::debug!(path = %path.display(), error = %err, "transcript unreadable");
            WholeFacts::default()
        }
    }
}

/// Adds the tokens of the complete lines appended since the last count
/// (and takes their first prompt when none came before).
/// Returns false when a whole parse is needed instead (the file shrank, or
/// jumped by more than [`APPEND_READ_MAX`]).
fn add_appended(e: &mut Entry, path: &Path) -> bool {
    let size = e.size;
    let provider = e.provider;
    let Some(w) = e.whole.as_mut() else {
        return false;
    };
    let Some(tokens) = w.tokens.as_mut() else {
        w.counted_upto = size;
        return true;
    };
    let from = w.counted_upto;
    if size < from || size - from > APPEND_READ_MAX {
        return false;
    }
    let Ok(mut f) = crate::safefs::open_regular(path, true) else {
        return false;
    };
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err()
        || f.by_ref().take(size - from).read_to_end(&mut buf).is_err()
    {
        return false;
    }
    let Some(end) = buf.iter().rposition(|b| *b == b'\n') else {
        return true; // no complete line yet
    };
    buf.truncate(end + 1);
    // The chunk starts on a line boundary: its first line is whole.
    let facts = live::read_tail_bytes(provider, &buf, true);
    // No prompt before the chunk (Claude writes its queue records first):
    // the chunk's first is the session's; no whole parse comes again.
    if w.first_prompt.is_none() {
        w.first_prompt = facts.first_prompt.clone();
    }
    let mut add = facts.tokens;
    let ends = &facts.response_ends;
    if let (Some((prev_id, prev)), Some((id, now))) = (&w.last_response, &ends.first)
        && prev_id == id
    {
        // The chunk continues the response counted last: it counts once,
        // with its largest count (as a whole parse does), not twice.
        let keep_prev = total(prev) > total(now);
        let counted_twice = if keep_prev { now } else { prev };
        add.input = add.input.saturating_sub(counted_twice.input);
        add.output = add.output.saturating_sub(counted_twice.output);
        add.cache_read = add.cache_read.saturating_sub(counted_twice.cache_read);
        add.cache_creation = add
            .cache_creation
            .saturating_sub(counted_twice.cache_creation);
    }
    if let Some((id, now)) = &ends.last {
        let kept_prev = match (&w.last_response, &ends.first) {
            (Some((prev_id, prev)), Some((first_id, _))) if prev_id == id && first_id == id => {
                (total(prev) > total(now)).then_some(*prev)
            }
            _ => None,
        };
        w.last_response = Some((id.clone(), kept_prev.unwrap_or(*now)));
    }
    let add = tokens_of_totals(&add);
    tokens.input += add.input;
    tokens.output += add.output;
    w.counted_upto = from + buf.len() as u64;
    true
}

/// All tokens of one response's usage (how "its largest count" is judged).
fn total(t: &live::TokenTotals) -> u64 {
    t.input + t.output + t.cache_read + t.cache_creation
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    const ID: &str = "5f0c1e2a-7b3d-4c8e-9a10-2b4c6d8e0f77";

    fn user_line(text: &str) -> String {
        serde_json::json!({
            "type": "user", "uuid": "u1", "sessionId": ID, "cwd": "/w",
            "timestamp": jiff::Timestamp::now().to_string(),
            "message": {"role": "user", "content": text},
        })
        .to_string()
    }

    fn assistant_line(
        uuid: &str,
        msg: &str,
        usage: [u64; 4],
        content: serde_json::Value,
    ) -> String {
        serde_json::json!({
            "type": "assistant", "uuid": uuid, "sessionId": ID, "cwd": "/w",
            "timestamp": jiff::Timestamp::now().to_string(),
            "message": {
                "id": msg, "role": "assistant", "model": "claude-opus-4-6",
                "stop_reason": null, "content": [content],
                "usage": {
                    "input_tokens": usage[0], "output_tokens": usage[1],
                    "cache_read_input_tokens": usage[2],
                    "cache_creation_input_tokens": usage[3],
                },
            },
        })
        .to_string()
    }

    /// Every recent transcript of a crowded project is parsed whole at
    /// start-up; the project is listed once for all of them (per transcript,
    /// start-up was quadratic), and once more for a later new transcript.
    #[test]
    fn start_up_lists_a_crowded_project_once() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".claude/projects/-w");
        std::fs::create_dir_all(&dir).unwrap();
        let path = |i: u32| dir.join(format!("5f0c1e2a-7b3d-4c8e-9a10-{i:012}.jsonl"));
        for i in 0..40 {
            std::fs::write(path(i), user_line("go") + "\n").unwrap();
        }
        let opts = TopOptions {
            home: Some(home.path().to_path_buf()),
            ..Default::default()
        };
        let mut m = LiveModel::new(&opts).unwrap();
        assert_eq!(m.candidates(), 40);
        assert!(m.entries.values().all(|e| e.whole.is_some()));
        assert_eq!(m.dir_listings, 1);
        std::fs::write(path(40), user_line("more") + "\n").unwrap();
        assert!(m.touch(&path(40)));
        assert_eq!((m.candidates(), m.dir_listings), (41, 2));
    }

    /// Every session is counted; the first three paths by name are kept,
    /// whatever order the (hash-ordered) entries come in.
    #[test]
    fn tally_counts_all_and_keeps_the_smallest_paths() {
        let mut t = Tally::default();
        for p in ["/e", "/b", "/d", "/a", "/c"] {
            t.add(NotListedReason::Idle, Path::new(p));
        }
        t.add(NotListedReason::NotOwner, Path::new("/z"));
        let list = t.into_list();
        let got: Vec<(NotListedReason, u64, Vec<&str>)> = list
            .iter()
            .map(|r| {
                let paths = r.paths.iter().map(|p| p.to_str().unwrap()).collect();
                (r.reason, r.count, paths)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (NotListedReason::Idle, 5, vec!["/a", "/b", "/c"]),
                (NotListedReason::NotOwner, 1, vec!["/z"]),
            ]
        );
    }

    fn tokens(m: &mut LiveModel) -> Option<Tokens> {
        let snap = m.snapshot(Timestamp::now(), RowFilter::default(), None);
        assert_eq!(snap.rows.len(), 1, "{:?}", snap.rows);
        snap.rows[0].tokens
    }

    /// A response whose lines arrive in two appends (text, then its tool
    /// call, both carrying the usage) counts once, as a whole parse does —
    /// also when the transcript is past the tail, so appends are added.
    #[test]
    fn a_response_split_across_two_appends_counts_once() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".claude/projects/-w");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{ID}.jsonl"));
        // A 200 KB prompt: the file is past the 128 KiB tail from the start.
        let mut f = std::fs::File::create(&path).unwrap();
        writeln!(f, "{}", user_line(&"x".repeat(200_000))).unwrap();
        let text = serde_json::json!({"type": "text", "text": "looking"});
        writeln!(
            f,
            "{}",
            assistant_line("a1", "msg_A", [10, 2, 100, 5], text)
        )
        .unwrap();
        f.flush().unwrap();
        let opts = TopOptions {
            home: Some(home.path().to_path_buf()),
            ..Default::default()
        };
        let mut m = LiveModel::new(&opts).unwrap();
        assert_eq!(
            tokens(&mut m),
            Some(Tokens {
                input: 115,
                output: 2
            })
        );
        // The same response's tool call, with its final usage.
        let call = serde_json::json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}});
        writeln!(
            f,
            "{}",
            assistant_line("a2", "msg_A", [10, 50, 100, 5], call)
        )
        .unwrap();
        f.flush().unwrap();
        assert!(m.touch(&path));
        assert_eq!(
            tokens(&mut m),
            Some(Tokens {
                input: 115,
                output: 50
            })
        );
        // A new response adds its own.
        let text = serde_json::json!({"type": "text", "text": "done"});
        writeln!(f, "{}", assistant_line("a3", "msg_B", [3, 7, 0, 0], text)).unwrap();
        f.flush().unwrap();
        assert!(m.touch(&path));
        assert_eq!(
            tokens(&mut m),
            Some(Tokens {
                input: 118,
                output: 57
            })
        );
        // A whole parse of the final file agrees.
        let whole = whole_facts(Provider::Claude, &path, "s", 0, &mut ParseBatch::default()).tokens;
        assert_eq!(
            whole,
            Some(Tokens {
                input: 118,
                output: 57
            })
        );
    }

    /// Claude Code 2.1.3xx creates the transcript, then writes its queue
    /// records, then the prompt: a session first read before the prompt
    /// (empty, or queue records only), whose prompt comes in a small append
    /// or with 200 KB of records in one go (the tail no longer starts at the
    /// file's start), is titled by its prompt, not its cwd.
    #[test]
    fn a_prompt_appended_after_the_first_read_titles_the_row() {
        let queue = |op: &str| {
            serde_json::json!({
                "type": "queue-operation", "operation": op, "sessionId": ID,
                "timestamp": jiff::Timestamp::now().to_string(), "content": "Build it",
            })
            .to_string()
                + "\n"
        };
        let records: String = (0..20)
            .map(|i| {
                let text = serde_json::json!({"type": "text", "text": "x".repeat(10_000)});
                assistant_line("a1", &format!("msg_{i}"), [1, 1, 0, 0], text) + "\n"
            })
            .collect();
        let prompt = user_line("Build it") + "\n";
        let starts = [String::new(), queue("enqueue") + &queue("dequeue")];
        for start in &starts {
            for appends in [
                vec![prompt.clone() + &records],
                vec![prompt.clone(), records.clone()],
            ] {
                let home = tempfile::tempdir().unwrap();
                let dir = home.path().join(".claude/projects/-w");
                std::fs::create_dir_all(&dir).unwrap();
                let path = dir.join(format!("{ID}.jsonl"));
                let mut f = std::fs::File::create(&path).unwrap();
                f.write_all(start.as_bytes()).unwrap();
                let opts = TopOptions {
                    home: Some(home.path().to_path_buf()),
                    ..Default::default()
                };
                let mut m = LiveModel::new(&opts).unwrap();
                for a in &appends {
                    f.write_all(a.as_bytes()).unwrap();
                    assert!(m.touch(&path));
                }
                let snap = m.snapshot(Timestamp::now(), RowFilter::default(), None);
                let titles: Vec<_> = snap
                    .rows
                    .iter()
                    .map(|r| (r.title.as_deref(), r.title_source))
                    .collect();
                assert_eq!(
                    titles,
                    vec![(Some("Build it"), TitleSource::FirstPrompt)],
                    "start {start:?}, {} appends",
                    appends.len()
                );
            }
        }
    }
}

/// opencode keeps every session in one database: each is its own row, with
/// its own state, read from the recorded 1.18.33 store (its newest rows only
/// in the `-wal`).
#[cfg(test)]
mod store_tests {
    use super::*;

    fn copy_home() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/sessions/opencode-1.18.33/home/.local/share/opencode");
        let dst = t.path().join(".local/share/opencode");
        std::fs::create_dir_all(&dst).unwrap();
        for e in std::fs::read_dir(&src).unwrap().flatten() {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
        t
    }

    #[test]
    fn each_session_of_an_opencode_database_is_a_row() {
        let home = copy_home();
        let db = home.path().join(".local/share/opencode/opencode.db");
        let opts = TopOptions {
            home: Some(home.path().to_path_buf()),
            // The recording is old: a window of years keeps it recent.
            thresholds: Thresholds::scaled(1e6),
            ..Default::default()
        };
        let mut m = LiveModel::new(&opts).unwrap();
        let snap = m.snapshot(Timestamp::now(), RowFilter::default(), None);
        let got: Vec<_> = snap
            .rows
            .iter()
            .map(|r| (r.session_id.as_str(), r.state, r.path == db, r.tokens))
            .collect();
        let tok = |input, output| Some(Tokens { input, output });
        let done = LiveState::YourTurn;
        assert_eq!(
            got,
            vec![
                ("ses_dc91de60fffe143stbETqZSq2W", done, true, tok(5600, 169)),
                ("ses_dc91c9ca0ffezSnHAyOoHdUkH4", done, true, tok(0, 0)),
                ("ses_dc91ce720ffepDCXeHnNkYstFH", done, true, tok(2750, 83)),
                ("ses_dc91d5fecffegkeh4F9Hy0tzkB", done, true, tok(2750, 83)),
            ]
        );
        assert_eq!(snap.candidates, 4);
        // The detail pane names the session by the row's path and id.
        let names: Vec<String> = m
            .tool_calls(&db, "ses_dc91de60fffe143stbETqZSq2W", 10)
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["write", "bash"]);
        // A new prompt in one session (as opencode writes it, into the WAL):
        // that session works, the others keep their state.
        let now = Timestamp::now().as_millisecond();
        crate::store::foreign_for_tests::opencode_add_prompt(
            &db,
            "ses_dc91de60fffe143stbETqZSq2W",
            now,
        )
        .unwrap();
        let wal = home.path().join(".local/share/opencode/opencode.db-wal");
        assert!(m.touch(&wal));
        let snap = m.snapshot(Timestamp::now(), RowFilter::default(), None);
        let got: Vec<_> = snap
            .rows
            .iter()
            .map(|r| (r.session_id.as_str(), r.state))
            .collect();
        assert_eq!(
            got,
            vec![
                ("ses_dc91c9ca0ffezSnHAyOoHdUkH4", done),
                ("ses_dc91ce720ffepDCXeHnNkYstFH", done),
                ("ses_dc91d5fecffegkeh4F9Hy0tzkB", done),
                ("ses_dc91de60fffe143stbETqZSq2W", LiveState::Working),
            ]
        );
        // The database gone, its sessions go.
        std::fs::remove_file(&db).unwrap();
        assert!(m.touch(&db));
        assert_eq!(m.candidates(), 0);
    }
}
