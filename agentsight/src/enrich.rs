//! Enrichment of a finished capture: match its process trees to sessions
//! (`matching`), then store the parsed sessions, raw transcript copies,
//! trees and bindings, and run what derives from them (correlations).
//!
//! Matching decides; this module only gathers its inputs and stores its
//! result, through the store's read-write handle (`store::CaptureRw`).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
};

use crate::{
    clock::Anchors,
    matching::{
        Evidence, FallbackSession, FdObservation, PathEvidence, ProcTable, SessionKey, Tree,
        TreeStatus,
        database::{self, DbSession},
        fd_evidence, match_trees, transcript_writes,
    },
    sessions::{self, AgentSession, DiscoveryOptions},
    store::{
        CaptureReader, CaptureRw, StoreError,
        sessions::{BindingRow, TreeRow},
    },
};

mod mcp;
mod messages;
mod tls;
pub use mcp::McpStored;
pub use messages::{
    MessagesStored, NOTE_META as SESSION_MESSAGES_NOTE_META, store_session_messages,
};
pub use tls::{TlsStored, store_tls_exchanges};

#[derive(Debug, thiserror::Error)]
pub enum EnrichError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Options for binding at the end of `record` (or re-binding a capture).
#[derive(Debug, Clone)]
pub struct BindOptions {
    /// Homes whose sessions are cwd-fallback candidates.
    pub homes: Vec<PathBuf>,
    /// Copy raw transcripts into the capture.
    pub copy_transcripts: bool,
    /// Byte budget for all transcript copies together.
    pub transcript_budget: u64,
    pub fd_observations: Vec<FdObservation>,
    /// Sessions inside recorded containers (`record --docker-container`):
    /// the only way evidence from a container's processes is resolved.
    pub containers: Option<ContainerSource>,
}

impl Default for BindOptions {
    fn default() -> Self {
        BindOptions {
            homes: Vec::new(),
            copy_transcripts: true,
            transcript_budget: DEFAULT_TRANSCRIPT_BUDGET,
            fd_observations: Vec::new(),
            containers: None,
        }
    }
}

/// Where the sessions of recorded containers are read: inside each
/// container (record backs it with the container's bridge). A trait, so
/// enrichment decides which sessions to ask for without knowing how they
/// are reached.
pub trait ContainerSessions {
    /// Whether sessions of the container with this `docker inspect` Id can
    /// be read (it was configured).
    fn serves(&self, container_id: &str) -> bool;
    /// Session `session_id` as read inside that container.
    fn get(&self, container_id: &str, session_id: &str) -> Result<AgentSession, String>;
}

/// A shared [`ContainerSessions`], so [`BindOptions`] stays `Clone`/`Debug`.
#[derive(Clone)]
pub struct ContainerSource(pub Arc<dyn ContainerSessions>);

impl std::fmt::Debug for ContainerSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ContainerSource")
    }
}

/// Meta key listing the sessions stored from inside containers (their raw
/// transcripts are not copied: only structured results cross the bridge).
pub const CONTAINER_SESSIONS_META: &str = crate::store::meta::key::CONTAINER_SESSIONS;

/// Default budget for raw transcript copies (all sessions together).
pub const DEFAULT_TRANSCRIPT_BUDGET: u64 = 256 * 1024 * 1024;

/// What binding stored.
#[derive(Debug, Clone, Default)]
pub struct BindSummary {
    pub trees: usize,
    pub bound: usize,
    pub sessions: Vec<String>,
    pub transcript_bytes: u64,
    pub notes: Vec<String>,
    /// The MCP servers stored (`None` when storing them failed: a note says
    /// why).
    pub mcp: Option<McpStored>,
    /// The exchanges derived from TLS plaintext (`None` when storing them
    /// failed: a note says why).
    pub tls: Option<TlsStored>,
}

/// The main transcript of a session among the paths that named it.
fn main_path(key: &SessionKey, paths: &[String]) -> Option<PathBuf> {
    let id = &key.1;
    if let Some(p) = paths.iter().find(|p| {
        Path::new(p)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.contains(id.as_str()))
            && !p.contains("/subagents/")
    }) {
        return Some(PathBuf::from(p));
    }
    for p in paths {
        // Claude ≥ 2.1.2 subagents live in <project>/<id>/subagents/…
        if let Some(i) = p.find(&format!("/{id}/subagents/")) {
            return Some(PathBuf::from(format!("{}/{id}.jsonl", &p[..i])));
        }
    }
    paths.first().map(PathBuf::from)
}

/// What runs on the capture once the bindings are committed (record passes
/// `correlate::store_all`): data derived from them, in its own
/// transaction. A parameter, so enrichment does not depend on correlate;
/// its error becomes a note of the [`BindSummary`].
pub type AfterBinding<'a, E> = &'a dyn Fn(&CaptureRw) -> Result<(), E>;

/// Matches the finished capture at `path`, and stores into it the parsed
/// sessions, raw transcript copies, trees and bindings, then runs `after`.
pub fn bind_and_store<E: std::fmt::Display>(
    path: &Path,
    opts: &BindOptions,
    after: AfterBinding<'_, E>,
) -> Result<BindSummary, EnrichError> {
    let rw = CaptureRw::open(path)?;
    let cap = rw.reader();
    rw.ensure_session_schema()?;
    rw.begin()?;
    rw.clear_matching()?;
    let procs = ProcTable::load(cap)?;
    let anchors = cap.anchors()?;
    for o in &opts.fd_observations {
        let start = procs
            .alive(o.pid, o.mono_ns)
            .map(|i| procs.procs[i].start_mono_ns)
            .unwrap_or(0);
        rw.insert_proc_fd(o.pid, start, o.mono_ns, &o.path)?;
    }
    let evidence = path_evidence(cap, &procs, &anchors, &opts.fd_observations)?;
    let places = Places::load(cap, &procs)?;
    let mut summary = BindSummary::default();
    let fallback = fallback_sessions(&anchors, &opts.homes, &mut summary.notes);
    let mut trees = match_trees(&procs, &anchors, &evidence, &fallback);
    no_host_cwd_in_containers(&mut trees, &places);
    let mut sessions = SessionStore {
        rw: &rw,
        budget: if opts.copy_transcripts {
            opts.transcript_budget
        } else {
            0
        },
        copy: opts.copy_transcripts,
        summary: &mut summary,
        rows: HashMap::new(),
        places: &places,
        containers: opts.containers.as_ref(),
        unbound: HashMap::new(),
        from_containers: Vec::new(),
        host: Vec::new(),
    };
    for b in trees.iter().flat_map(|t| &t.bindings) {
        sessions.store(&b.key, &evidence, &fallback)?;
    }
    let (session_rows, unbound, host) = (sessions.rows, sessions.unbound, sessions.host);
    if !sessions.from_containers.is_empty() {
        let list = serde_json::Value::Array(sessions.from_containers).to_string();
        rw.put_meta(CONTAINER_SESSIONS_META, &list)?;
    }
    store_trees(&rw, &procs, &trees, &session_rows, &unbound, &mut summary)?;
    rw.commit()?;
    // The sessions' MCP servers, in their own transaction (a failure leaves
    // the bindings intact), before the correlations that attribute to them.
    match mcp::store_mcp_servers(&rw, &procs, &trees, &evidence, &host) {
        Ok(stored) => summary.mcp = Some(stored),
        Err(e) => summary.notes.push(format!("MCP servers not stored: {e}")),
    }
    // The TLS plaintext as exchanges, before the correlations that read them.
    match tls::store_tls_exchanges(&rw) {
        Ok(stored) => summary.tls = Some(stored),
        Err(e) => summary.notes.push(format!("TLS exchanges not stored: {e}")),
    }
    // Derived data (correlations): computed from what was just stored, in
    // its own transaction, so a failure here leaves the bindings intact.
    if let Err(e) = after(&rw) {
        summary.notes.push(format!("correlations not stored: {e}"));
    }
    Ok(summary)
}

/// Every piece of path evidence of a capture: transcript writes, `/proc`
/// fd observations, and writes of a shared session store resolved to its
/// sessions. Record's final binding and the live one (`livecap`) both use
/// it, so they bind from the same inputs.
pub fn path_evidence(
    cap: CaptureReader,
    procs: &ProcTable,
    anchors: &Anchors,
    fd_obs: &[FdObservation],
) -> Result<Vec<PathEvidence>, StoreError> {
    let mut evidence = transcript_writes(cap, procs)?;
    evidence.extend(fd_evidence(fd_obs, procs));
    let touches = database::database_touches(cap, procs, fd_obs)?;
    evidence.extend(database::database_evidence(
        procs,
        anchors,
        &touches,
        &shared_store_sessions,
    ));
    Ok(evidence)
}

/// The sessions of a shared session store (opencode's database) created or
/// updated in `[from_ms, to_ms]`, read by the provider's own reader.
pub fn shared_store_sessions(
    provider: sessions::Provider,
    db: &Path,
    from_ms: i64,
    to_ms: i64,
) -> Vec<DbSession> {
    if provider != sessions::Provider::Opencode {
        return Vec::new();
    }
    match sessions::opencode::sessions_between(db, from_ms, to_ms) {
        // A row without its times cannot be placed in a process's life.
        Ok(rows) => rows
            .into_iter()
            .filter_map(|r| {
                let created_ms = r.created_ms?;
                Some(DbSession {
                    id: r.id,
                    directory: r.directory,
                    parent_id: r.parent_id,
                    created_ms,
                    updated_ms: r.updated_ms.unwrap_or(created_ms),
                })
            })
            .collect(),
        Err(e) => {
            tracing::warn!(db = %db.display(), error = %e, "session store unreadable: its writers stay unbound");
            Vec::new()
        }
    }
}

/// The recorded container a process ran in (`processes.container_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    id: String,
    name: Option<String>,
}

impl Place {
    /// How notes name it: the name `--docker-container` takes, else the id.
    fn shown(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// Each process's container (by `ProcTable` index); `None` on the host.
struct Places(Vec<Option<Place>>);

impl Places {
    fn load(cap: CaptureReader, procs: &ProcTable) -> Result<Self, StoreError> {
        let mut v = vec![None; procs.procs.len()];
        for r in cap.processes()? {
            if let (Some(id), Some(&i)) = (r.identity.container_id, procs.by_id.get(&r.id)) {
                v[i] = Some(Place {
                    id,
                    name: r.identity.container_name,
                });
            }
        }
        Ok(Places(v))
    }

    fn of(&self, proc: usize) -> Option<&Place> {
        self.0.get(proc).and_then(|p| p.as_ref())
    }
}

/// A container's cwd is a path in the container: never compared with the
/// cwd of a host session (the cwd fallback reads host homes only).
fn no_host_cwd_in_containers(trees: &mut [Tree], places: &Places) {
    for t in trees {
        if places.of(t.root).is_none() {
            continue;
        }
        let before = t.bindings.len();
        t.bindings.retain(|b| b.evidence != Evidence::CwdFallback);
        if before > 0 && t.bindings.is_empty() {
            t.status = TreeStatus::Unmatched;
            t.note = Some("in a container: not matched by cwd to host sessions".into());
        }
    }
}

/// Where the evidence for one session comes from.
enum Origin<'a> {
    Host,
    Container(&'a Place),
    /// From several places (the host and a container, or two containers).
    Mixed(String),
}

/// cwd-fallback candidates: sessions of the given homes active during the
/// capture (by its first and last clock anchors). Also the live binding's
/// (`livecap`), so both bind from the same candidates.
pub fn fallback_sessions(
    anchors: &Anchors,
    homes: &[PathBuf],
    notes: &mut Vec<String>,
) -> Vec<FallbackSession> {
    let (Some(first), Some(last)) = (
        anchors.0.first().map(|a| a.1 / 1_000_000),
        anchors.0.last().map(|a| a.1 / 1_000_000),
    ) else {
        return Vec::new();
    };
    let mut fallback = Vec::new();
    for home in homes {
        let d = DiscoveryOptions {
            home: Some(home.clone()),
            ..Default::default()
        };
        let list = match sessions::discover(&d) {
            Ok(list) => list,
            Err(e) => {
                notes.push(format!("sessions under {}: {e}", home.display()));
                continue;
            }
        };
        for s in list {
            let (Some(cwd), Some(start)) = (s.cwd.clone(), s.start_ms) else {
                continue;
            };
            if s.updated_ms + 5_000 < first || start > last + 5_000 {
                continue;
            }
            fallback.push(FallbackSession {
                key: (s.provider, s.session_id.clone()),
                path: s.path.clone(),
                cwd,
                start_ms: start,
                end_ms: Some(s.updated_ms),
            });
        }
    }
    fallback
}

/// Stores each bound session once (parsed, with raw copies of its
/// transcripts within the byte budget).
struct SessionStore<'a> {
    rw: &'a CaptureRw,
    /// Bytes of transcript copies still allowed.
    budget: u64,
    copy: bool,
    summary: &'a mut BindSummary,
    /// Session → its `sessions` row.
    rows: HashMap<SessionKey, i64>,
    places: &'a Places,
    containers: Option<&'a ContainerSource>,
    /// Sessions left unstored, and why (their trees are stored unmatched).
    unbound: HashMap<SessionKey, String>,
    /// Meta `container_sessions`: each session read inside a container.
    from_containers: Vec<serde_json::Value>,
    /// The sessions stored from host files, in row order (their MCP
    /// configuration is read on the host; a container's is not).
    host: Vec<mcp::HostSession>,
}

impl<'a> SessionStore<'a> {
    fn store(
        &mut self,
        key: &SessionKey,
        evidence: &[PathEvidence],
        fallback: &[FallbackSession],
    ) -> Result<(), StoreError> {
        if self.rows.contains_key(key) || self.unbound.contains_key(key) {
            return Ok(());
        }
        match self.origin(key, evidence) {
            Origin::Host => self.store_host(key, evidence, fallback),
            Origin::Container(place) => self.store_from_container(key, place),
            Origin::Mixed(places) => {
                self.leave_unbound(
                    key,
                    format!(
                        "session {} was written in {places}: not bound (a container's paths are never resolved on the host)",
                        key.1
                    ),
                );
                Ok(())
            }
        }
    }

    /// Where the evidence naming `key` was given: the host, one container,
    /// or several places. A session with no path evidence (cwd fallback)
    /// is a host home's.
    fn origin(&self, key: &SessionKey, evidence: &[PathEvidence]) -> Origin<'a> {
        let places: &'a Places = self.places;
        let mut seen: Vec<Option<&'a Place>> = Vec::new();
        for e in evidence.iter().filter(|e| &e.key == key) {
            let p = places.of(e.proc);
            if !seen.contains(&p) {
                seen.push(p);
            }
        }
        match seen.as_slice() {
            [] | [None] => Origin::Host,
            [Some(p)] => Origin::Container(p),
            many => Origin::Mixed(
                many.iter()
                    .map(|p| {
                        p.map_or("the host".to_string(), |p| {
                            format!("container {}", p.shown())
                        })
                    })
                    .collect::<Vec<_>>()
                    .join(" and "),
            ),
        }
    }

    fn leave_unbound(&mut self, key: &SessionKey, why: String) {
        self.summary.notes.push(why.clone());
        self.unbound.insert(key.clone(), why);
    }

    /// A session written inside a container: read there through its
    /// source (never from the host file at the same path); no raw copy.
    fn store_from_container(&mut self, key: &SessionKey, place: &Place) -> Result<(), StoreError> {
        let name = place.shown();
        let Some(src) = self.containers.filter(|c| c.0.serves(&place.id)) else {
            self.leave_unbound(
                key,
                format!(
                    "session {} was written in container {name}: not bound; pass --docker-container {name} to read it there",
                    key.1
                ),
            );
            return Ok(());
        };
        let session = match src.0.get(&place.id, &key.1) {
            Ok(s) if s.provider == key.0 && s.session_id == key.1 => s,
            Ok(s) => {
                let why = format!(
                    "session {} in container {name}: the container answered {} session {}, not {}",
                    key.1, s.provider, s.session_id, key.0
                );
                self.leave_unbound(key, why);
                return Ok(());
            }
            Err(e) => {
                self.leave_unbound(key, format!("session {} in container {name}: {e}", key.1));
                return Ok(());
            }
        };
        let row = self.rw.insert_session(&session)?;
        self.rows.insert(key.clone(), row);
        self.summary.sessions.push(key.1.clone());
        self.from_containers.push(serde_json::json!({
            "provider": key.0.as_str(),
            "session_id": key.1,
            "container_id": place.id,
            "container_name": place.name,
        }));
        if self.copy {
            self.summary.notes.push(format!(
                "session {} from container {name}: raw transcript not copied (only structured results cross the bridge)",
                key.1
            ));
        }
        Ok(())
    }

    /// A host session: parsed from its file, raw copies within the budget.
    fn store_host(
        &mut self,
        key: &SessionKey,
        evidence: &[PathEvidence],
        fallback: &[FallbackSession],
    ) -> Result<(), StoreError> {
        let mut paths: Vec<String> = evidence
            .iter()
            .filter(|e| &e.key == key)
            .map(|e| e.path.clone())
            .collect();
        if let Some(p) = fallback.iter().find(|f| &f.key == key) {
            paths.push(p.path.display().to_string());
        }
        paths.sort();
        paths.dedup();
        let Some(main) = main_path(key, &paths) else {
            return Ok(());
        };
        // The id names the session in a store holding many (opencode's
        // database); for a transcript file it is the file's own.
        let session = match sessions::parse_session_in(
            key.0,
            &main,
            Some(&key.1),
            &sessions::Bounds::default(),
            &mut sessions::ParseBatch::default(),
        ) {
            Ok(s) => s,
            Err(e) => {
                self.summary.notes.push(format!("session {}: {e}", key.1));
                let mut s = sessions::AgentSession::new(key.0, key.1.clone(), main.clone());
                s.stats.first_error = Some(e.to_string());
                s
            }
        };
        let row = self.rw.insert_session(&session)?;
        self.rows.insert(key.clone(), row);
        self.summary.sessions.push(key.1.clone());
        self.host.push(mcp::HostSession {
            key: key.clone(),
            row,
            transcript: session.source_path.clone(),
            cwd: session.cwd.clone(),
        });
        if !self.copy {
            return Ok(());
        }
        // A store shared by many sessions (opencode's database) holds
        // other sessions too: never copied.
        if database::shared_database(&main.display().to_string()).is_some() {
            self.summary.notes.push(format!(
                "session {}: {} holds other sessions too: not copied",
                key.1,
                main.display()
            ));
            return Ok(());
        }
        let mut files: Vec<String> = vec![main.display().to_string()];
        files.extend(paths.iter().cloned());
        for sub in &session.subagents {
            files.push(sub.source_path.display().to_string());
        }
        files.sort();
        files.dedup();
        for f in files {
            self.copy_transcript(row, &f)?;
        }
        Ok(())
    }

    /// Copies one transcript file into the capture, as much as the budget
    /// allows (a part copy is noted).
    fn copy_transcript(&mut self, session_row: i64, f: &str) -> Result<(), StoreError> {
        // A regular file, not through a link, the home owner's.
        let file = match sessions::util::open_regular(Path::new(f)) {
            Ok(file) => file,
            Err(sessions::SessionError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(());
            }
            Err(e) => {
                self.summary
                    .notes
                    .push(format!("transcript not copied: {e}"));
                return Ok(());
            }
        };
        let Ok(meta) = file.metadata() else {
            return Ok(());
        };
        let size = meta.len();
        let take = size.min(self.budget);
        let content = match read_prefix(file, take) {
            Ok(c) => c,
            Err(e) => {
                self.summary.notes.push(format!("cannot copy {f}: {e}"));
                return Ok(());
            }
        };
        self.budget -= content.len() as u64;
        self.summary.transcript_bytes += content.len() as u64;
        if (content.len() as u64) < size {
            self.summary.notes.push(format!(
                "transcript {f} copied only in part ({} of {size} bytes): copy budget spent",
                content.len()
            ));
        }
        self.rw.insert_transcript(session_row, f, size, &content)
    }
}

/// Stores every tree and the bindings of those whose session was stored.
fn store_trees(
    rw: &CaptureRw,
    procs: &ProcTable,
    trees: &[Tree],
    session_rows: &HashMap<SessionKey, i64>,
    unbound: &HashMap<SessionKey, String>,
    summary: &mut BindSummary,
) -> Result<(), StoreError> {
    for t in trees {
        let (status, note) = stored_status(t, session_rows, unbound);
        let p = &procs.procs[t.root];
        let tree_id = rw.insert_tree(&TreeRow {
            id: 0,
            root_process_id: p.id,
            root_pid: p.pid as i64,
            root_start_mono_ns: p.start_mono_ns as i64,
            status: status.to_string(),
            note,
        })?;
        summary.trees += 1;
        if status == TreeStatus::Bound {
            summary.bound += 1;
        }
        for b in &t.bindings {
            let Some(&session_row) = session_rows.get(&b.key) else {
                continue;
            };
            rw.insert_binding(&BindingRow {
                tree_id,
                session_row,
                evidence: b.evidence.as_str().to_string(),
                evidence_count: b.evidence_count,
                evidence_process_id: b.evidence_proc.map(|i| procs.procs[i].id),
                evidence_path: b.evidence_path.clone(),
                first_evidence_mono_ns: b.first_evidence_mono_ns.map(|v| v as i64),
                from_mono_ns: b.from_mono_ns as i64,
                to_mono_ns: b.to_mono_ns.map(|v| v as i64),
            })?;
        }
    }
    Ok(())
}

/// A tree's stored status: unmatched, with the reasons, when every session
/// it was matched to was left unbound (e.g. a container not configured).
fn stored_status(
    t: &Tree,
    session_rows: &HashMap<SessionKey, i64>,
    unbound: &HashMap<SessionKey, String>,
) -> (TreeStatus, Option<String>) {
    let reasons: Vec<&str> = t
        .bindings
        .iter()
        .filter(|b| !session_rows.contains_key(&b.key))
        .filter_map(|b| unbound.get(&b.key).map(String::as_str))
        .collect();
    if t.status == TreeStatus::Bound && !t.bindings.is_empty() && reasons.len() == t.bindings.len()
    {
        return (TreeStatus::Unmatched, Some(reasons.join("; ")));
    }
    (t.status, t.note.clone())
}

fn read_prefix(f: std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    f.take(max).read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
