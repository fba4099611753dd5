//! The store writer: one thread owning the SQLite connection. It holds the
//! event batches of a burst (see `Held`), then turns them into rows in one
//! transaction per batch and keeps the processes table (one row per process,
//! keyed by pid and start time) up to date.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering},
        mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use rusqlite::{Connection, Transaction, params};

use super::{
    StoreError, create,
    intern::{INSERT_STRING, Interner},
};
use crate::capture::{
    decode::{Detail, Event, errno_name},
    reader::{Gap, RecordBatch},
    syscalls::{FdInfo, FsState, SockAddr, SysRecord},
};
use crate::clock::Anchor;

/// A process that existed before recording started (the command we launched,
/// or one seeded from /proc).
#[derive(Clone, Debug)]
pub struct ProcessSeed {
    pub pid: u32,
    pub start_mono_ns: u64,
    pub ppid: u32,
    /// `root` (the command agentsight started) or `seeded` (found in /proc).
    pub origin: &'static str,
    pub comm: Option<String>,
    pub argv: Option<Vec<String>>,
    pub cwd: Option<String>,
    pub exe: Option<String>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Open fds and what they point to (from /proc/PID/fd), for resolving
    /// `*at` calls and writes on fds opened before recording.
    pub fds: Vec<(i32, String)>,
}

pub enum StoreMsg {
    /// Raw ring records (decoded here, off the reader's thread).
    Events(RecordBatch),
    Seed(ProcessSeed),
    Anchor(Anchor),
    Loss(Vec<(&'static str, u64)>),
    Meta(String, String),
    /// `--max-size`: once the capture (file + WAL) reaches this many bytes,
    /// events are no longer stored but counted, per kind, as loss
    /// `max_size:KIND`.
    MaxBytes(u64),
}

/// Loss kinds of events the writer received but did not store because the
/// capture reached `--max-size` start with this.
pub const MAX_SIZE_LOSS_PREFIX: &str = "max_size:";

/// What the writer reports when it finishes.
#[derive(Debug, Default, Clone)]
pub struct WriterSummary {
    pub events: u64,
    pub processes: u64,
    /// Ring records that could not be decoded (stored as meta `decode_errors`).
    pub decode_errors: u64,
    /// Set when a write failed (e.g. disk full); what was committed before stays.
    pub error: Option<String>,
    /// Events not stored because the capture reached `--max-size`, by kind.
    pub not_stored: std::collections::BTreeMap<&'static str, u64>,
}

pub struct Writer {
    tx: SyncSender<StoreMsg>,
    handle: JoinHandle<(Connection, WriterSummary)>,
    path: PathBuf,
    backlog: Arc<Backlog>,
}

/// Queue depth in batches (each up to 512 events): with `HOLD_BYTES`, bounds
/// the memory between reader and stored rows; beyond it, pressure becomes
/// counted kernel loss.
const QUEUE: usize = 32;

/// Queued batches at which the writer stops yielding (normal priority):
/// the last quarter of the queue, plus the kernel ring behind it, is the
/// headroom it then has to catch up before anything could be lost…
const BOOST_AT: usize = QUEUE * 3 / 4;
/// …and at or below which it yields again.
const YIELD_AT: usize = QUEUE / 8;

/// Event batches waiting for the writer, and the writer thread's priority.
/// While its backlog is small the writer runs as SCHED_IDLE: on a busy
/// machine the traced programs get the CPU first (a waking task preempts it
/// at once) and storing happens in their idle moments. Once the backlog
/// grows it competes normally, long before the queue (and then the kernel
/// ring) could fill — so yielding never turns into loss — and it keeps
/// competing until it has stored everything it took (see `caught_up`).
#[derive(Default)]
pub struct Backlog {
    queued: AtomicUsize,
    writer_tid: AtomicI32,
    boosted: AtomicBool,
    /// The recording is ending: normal priority for good.
    draining: AtomicBool,
}

impl Backlog {
    fn set_writer_yielding(&self, yielding: bool) {
        let tid = self.writer_tid.load(Ordering::Acquire);
        if tid <= 0 {
            return;
        }
        let policy = if yielding {
            libc::SCHED_IDLE
        } else {
            libc::SCHED_OTHER
        };
        let param = libc::sched_param { sched_priority: 0 };
        // Safety: plain syscall on a thread id of ours. Leaving SCHED_IDLE
        // needs CAP_SYS_NICE, which `record` has as root.
        let r = unsafe { libc::sched_setscheduler(tid, policy, &param) };
        if r != 0 {
            tracing::debug!(
                "setting the store writer's policy (yielding {yielding}): {}",
                std::io::Error::last_os_error()
            );
        }
    }

    /// Called by whoever queued a batch.
    fn queued_one(&self) {
        let n = self.queued.fetch_add(1, Ordering::AcqRel) + 1;
        if n >= BOOST_AT && !self.boosted.swap(true, Ordering::AcqRel) {
            self.set_writer_yielding(false);
        }
    }

    /// Called by the writer when it takes a batch off the queue.
    fn took_one(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }

    /// Called by the writer when it holds nothing: once boosted it stays
    /// boosted until it has *stored* what it took (a batch taken off the
    /// queue and held is not stored yet: yielding then would leave the
    /// held rows to be built as SCHED_IDLE, starved by a busy tree, while
    /// the queue fills again) and the queue is small.
    fn caught_up(&self) {
        if self.queued.load(Ordering::Acquire) <= YIELD_AT
            && !self.draining.load(Ordering::Acquire)
            && self.boosted.swap(false, Ordering::AcqRel)
        {
            self.set_writer_yielding(true);
        }
    }

    /// Normal priority for good (the recording is ending: drain fast).
    fn boost_for_good(&self) {
        self.draining.store(true, Ordering::Release);
        self.boosted.store(true, Ordering::Release);
        self.set_writer_yielding(false);
    }
}

/// Queues event batches for the writer, keeping its backlog count.
#[derive(Clone)]
pub struct EventSender {
    tx: SyncSender<StoreMsg>,
    backlog: Arc<Backlog>,
}

impl EventSender {
    /// Blocks only when the writer is a full queue behind.
    pub fn send(&self, events: RecordBatch) -> Result<(), WriterStopped> {
        self.backlog.queued_one();
        self.tx
            .send(StoreMsg::Events(events))
            .map_err(|_| WriterStopped)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the store writer has stopped")]
pub struct WriterStopped;

impl Writer {
    /// Creates the capture file (0600) and starts the writer thread.
    pub fn create(path: &Path, anchor: Anchor) -> Result<Self, StoreError> {
        Self::create_as(path, anchor, None)
    }

    /// [`Writer::create`] with the file created, and every file operation of
    /// the writer thread made, with `creds` (the invoking user's): the
    /// capture and its `-wal`/`-shm`/`-journal` sidecars are the user's from
    /// the start and a directory the user cannot write is refused. The
    /// caller's thread must already be under `creds` (see `AsUser`).
    pub fn create_as(
        path: &Path,
        anchor: Anchor,
        creds: Option<crate::privileges::FileCreds>,
    ) -> Result<Self, StoreError> {
        let conn = create(path)?;
        let (tx, rx) = sync_channel(QUEUE);
        let backlog = Arc::new(Backlog::default());
        let thread_backlog = backlog.clone();
        let handle = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || {
                // Held for the thread's life: SQLite may create or remove
                // sidecars at any write.
                let _as_user = match crate::privileges::AsUser::maybe(creds.as_ref()) {
                    Ok(g) => g,
                    Err(e) => {
                        tracing::error!("{e}");
                        None
                    }
                };
                thread_backlog
                    .writer_tid
                    .store(nix::unistd::gettid().as_raw(), Ordering::Release);
                thread_backlog.set_writer_yielding(true);
                run(conn, rx, anchor, &thread_backlog)
            })
            .map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                reason: format!("cannot start writer thread: {e}"),
            })?;
        Ok(Self {
            tx,
            handle,
            path: path.to_owned(),
            backlog,
        })
    }

    pub fn sender(&self) -> SyncSender<StoreMsg> {
        self.tx.clone()
    }

    /// The sender for event batches (it keeps the backlog count).
    pub fn event_sender(&self) -> EventSender {
        EventSender {
            tx: self.tx.clone(),
            backlog: self.backlog.clone(),
        }
    }

    /// Stores the gaps, closes the queue, waits for every queued batch, and
    /// leaves a single self-contained file (journal mode DELETE).
    pub fn finish(self, gaps: &[Gap], meta: &[(String, String)]) -> WriterSummary {
        let Self {
            tx,
            handle,
            path,
            backlog,
        } = self;
        backlog.boost_for_good();
        drop(tx);
        let (mut conn, mut summary) = match handle.join() {
            Ok(r) => r,
            Err(_) => {
                return WriterSummary {
                    error: Some("store writer panicked".into()),
                    ..Default::default()
                };
            }
        };
        let result = (|| -> rusqlite::Result<()> {
            let t = conn.transaction()?;
            for g in gaps {
                t.execute(
                    "INSERT INTO gaps (stream, cpu, first_seq, last_seq, missing, from_mono_ns, to_mono_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![g.stream, g.cpu, g.first_seq as i64, g.last_seq as i64, (g.last_seq - g.first_seq + 1) as i64, g.from_mono_ns as i64, g.to_mono_ns as i64],
                )?;
            }
            for (k, v) in meta {
                put_meta(&t, k, v)?;
            }
            put_meta(&t, "decode_errors", &summary.decode_errors.to_string())?;
            for (kind, n) in &summary.not_stored {
                t.execute(
                    "INSERT INTO loss (kind, lost) VALUES (?1, ?2)",
                    params![format!("{MAX_SIZE_LOSS_PREFIX}{kind}"), *n as i64],
                )?;
            }
            // Built once at the end rather than maintained per insert.
            t.execute_batch(super::INDEXES)?;
            t.commit()?;
            conn.execute_batch("PRAGMA journal_mode=DELETE;")?;
            Ok(())
        })();
        if let Err(e) = result {
            let msg = format!("{}: finishing the capture failed: {e}", path.display());
            summary.error.get_or_insert(msg);
        }
        summary
    }
}

pub(crate) fn put_meta(t: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    t.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [key, value],
    )?;
    Ok(())
}

/// Live state of one process, to attach events to its row.
struct Live {
    row: i64,
    argv: Option<String>,
    cwd: Option<String>,
    exe: Option<String>,
    /// cwd and fd table for resolving paths of file syscalls.
    fs: FsState,
}

fn seed_fs(s: &ProcessSeed) -> FsState {
    FsState {
        cwd: s.cwd.clone(),
        fds: s
            .fds
            .iter()
            .map(|(fd, target)| {
                let is_path = target.starts_with('/');
                (
                    *fd,
                    FdInfo {
                        target: target.clone(),
                        is_path,
                        cloexec: false,
                        sock: None,
                    },
                )
            })
            .collect(),
    }
}

struct State {
    /// pid → the newest process row with that pid.
    live: HashMap<u32, Live>,
    /// pid → row of a process that already exited, for a seed that arrives
    /// after its process's whole life (a command that exits at once).
    exited: HashMap<u32, i64>,
    summary: WriterSummary,
    /// `--max-size` and whether it was reached.
    max_bytes: Option<u64>,
    capped: bool,
    /// The `clock_anchors` row of the newest anchor: a row's `wall_ns` is its
    /// `mono_ns` plus that anchor's offset.
    anchor_row: i64,
    strings: Interner,
    /// `insert_row_sql()`, built once.
    insert_row: String,
}

/// Event batches received but not yet stored. While the traced tree is busy
/// (batches keep arriving) storing waits: on a saturated machine even a
/// SCHED_IDLE writer slows a build by several percent, measurably more than
/// the kernel programs cost it, so the rows of a burst (a build, a test run)
/// are built once the burst is over. Held records are raw ring bytes, the
/// most compact form they have; the bounds below cap both memory and how
/// much a killed recorder (SIGKILL) could take with it.
#[derive(Default)]
struct Held {
    batches: Vec<RecordBatch>,
    bytes: usize,
    since: Option<Instant>,
    last_arrival: Option<Instant>,
}

/// No batch for this long: the burst is over, store what is held.
const QUIET: Duration = Duration::from_millis(200);
/// Store at the latest once the oldest held batch is this old…
const HOLD_AGE: Duration = Duration::from_secs(1);
/// …or once this much memory is held.
const HOLD_BYTES: usize = 4 << 20;

impl Held {
    fn push(&mut self, batch: RecordBatch) {
        let batch = batch.compacted();
        let now = Instant::now();
        self.bytes += batch.heap_bytes();
        self.batches.push(batch);
        self.since.get_or_insert(now);
        self.last_arrival = Some(now);
    }

    fn due(&self) -> bool {
        self.bytes >= HOLD_BYTES || self.since.is_some_and(|t| t.elapsed() >= HOLD_AGE)
    }

    /// How long to wait for the next message before the burst counts as over.
    fn quiet_left(&self) -> Option<Duration> {
        let last = self.last_arrival?;
        Some(QUIET.saturating_sub(last.elapsed()))
    }

    /// Everything held, leaving nothing held.
    fn take(&mut self) -> Vec<RecordBatch> {
        std::mem::take(self).batches
    }
}

fn run(
    mut conn: Connection,
    rx: Receiver<StoreMsg>,
    anchor: Anchor,
    backlog: &Backlog,
) -> (Connection, WriterSummary) {
    let mut st = State {
        live: HashMap::new(),
        exited: HashMap::new(),
        summary: WriterSummary::default(),
        max_bytes: None,
        capped: false,
        anchor_row: 0,
        strings: Interner::default(),
        insert_row: insert_row_sql(),
    };
    match store_anchor(&conn, &anchor) {
        Ok(id) => st.anchor_row = id,
        Err(e) => st.summary.error = Some(e.to_string()),
    }
    let mut held = Held::default();
    loop {
        if held.batches.is_empty() {
            backlog.caught_up();
        }
        let msg = match held.quiet_left() {
            None => rx.recv().ok(),
            Some(wait) => match rx.recv_timeout(wait) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => {
                    store_held(&mut conn, &mut st, &mut held);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => None,
            },
        };
        let Some(msg) = msg else { break };
        if matches!(msg, StoreMsg::Events(_)) {
            backlog.took_one();
        }
        if st.summary.error.is_some() {
            // After a write error (disk full…) keep draining so the reader is
            // never blocked, but stop writing: what is committed stays valid.
            continue;
        }
        let r = match msg {
            StoreMsg::Events(batch) => {
                held.push(batch);
                if held.due() {
                    store_held(&mut conn, &mut st, &mut held);
                }
                Ok(())
            }
            // Order-sensitive for the rows before them: a seed starts a
            // process's state, an anchor changes how wall times are computed.
            StoreMsg::Seed(seed) => {
                store_held(&mut conn, &mut st, &mut held);
                write_seed(&conn, &mut st, &seed)
            }
            StoreMsg::Anchor(a) => {
                store_held(&mut conn, &mut st, &mut held);
                store_anchor(&conn, &a).map(|id| st.anchor_row = id)
            }
            StoreMsg::Loss(counts) => write_loss(&mut conn, &counts),
            StoreMsg::Meta(k, v) => put_meta(&conn, &k, &v),
            StoreMsg::MaxBytes(n) => {
                st.max_bytes = Some(n);
                Ok(())
            }
        };
        if let Err(e) = r {
            fail(&mut st, e);
        }
    }
    store_held(&mut conn, &mut st, &mut held);
    (conn, st.summary)
}

fn fail(st: &mut State, e: rusqlite::Error) {
    tracing::error!("capture write failed, recording stops storing: {e}");
    st.summary.error = Some(e.to_string());
}

/// Decodes and stores every held batch, one transaction per batch (a write
/// that fails, e.g. on a full disk, leaves every earlier batch committed).
fn store_held(conn: &mut Connection, st: &mut State, held: &mut Held) {
    if !held.batches.is_empty() {
        tracing::debug!(
            "storing {} held batches ({} bytes)",
            held.batches.len(),
            held.bytes
        );
    }
    for batch in held.take() {
        if st.summary.error.is_some() {
            return;
        }
        let (events, errors) = batch.decode();
        for e in &errors {
            tracing::warn!("undecodable record: {e}");
        }
        st.summary.decode_errors += errors.len() as u64;
        if reached_max_size(conn, st) {
            for ev in &events {
                *st.summary
                    .not_stored
                    .entry(ev.header.kind.name())
                    .or_default() += 1;
            }
            continue;
        }
        if let Err(e) = write_events(conn, st, &events) {
            fail(st, e);
        }
    }
}

/// Whether the capture (its file and WAL) has reached `--max-size`; once it
/// has, it stays reached (nothing more is stored, so nothing would shrink).
fn reached_max_size(conn: &Connection, st: &mut State) -> bool {
    let Some(max) = st.max_bytes else {
        return false;
    };
    if !st.capped {
        let size = |p: String| std::fs::metadata(p).map_or(0, |m| m.len());
        let main = conn.path().unwrap_or_default().to_owned();
        let used = size(main.clone()) + size(format!("{main}-wal"));
        if used >= max {
            tracing::warn!("the capture reached --max-size ({used} ≥ {max} bytes): storing stops");
            st.capped = true;
        }
    }
    st.capped
}

/// Stores a clock anchor; returns its row id.
fn store_anchor(conn: &Connection, a: &Anchor) -> rusqlite::Result<i64> {
    conn.execute(
        "INSERT INTO clock_anchors (label, mono_ns, wall_ns) VALUES (?1, ?2, ?3)",
        params![a.label, a.mono_ns as i64, a.wall_ns as i64],
    )?;
    Ok(conn.last_insert_rowid())
}

fn write_loss(conn: &mut Connection, counts: &[(&'static str, u64)]) -> rusqlite::Result<()> {
    let t = conn.transaction()?;
    for (kind, lost) in counts {
        t.execute(
            "INSERT INTO loss (kind, lost) VALUES (?1, ?2) ON CONFLICT(kind) DO UPDATE SET lost = excluded.lost",
            params![kind, *lost as i64],
        )?;
    }
    t.commit()
}

fn write_seed(conn: &Connection, st: &mut State, s: &ProcessSeed) -> rusqlite::Result<()> {
    let argv = s.argv.as_ref().map(|a| json_array(a));
    let known = st
        .live
        .get(&s.pid)
        .map(|l| l.row)
        .or_else(|| st.exited.get(&s.pid).copied());
    if let Some(row) = known {
        // Its events arrived first (the command can exec, or even exit,
        // before we learn its pid): complete that row instead of adding a
        // second one. Fields set by its own events win over what we knew.
        conn.execute(
            "UPDATE processes SET origin = ?1, ppid = ?2, start_mono_ns = MIN(start_mono_ns, ?3),
                argv = COALESCE(argv, ?4), cwd = COALESCE(cwd, ?5), exe = COALESCE(exe, ?6),
                uid = COALESCE(uid, ?7), gid = COALESCE(gid, ?8) WHERE id = ?9",
            params![
                s.origin,
                s.ppid,
                s.start_mono_ns as i64,
                argv,
                s.cwd,
                s.exe,
                s.uid,
                s.gid,
                row
            ],
        )?;
        if let Some(l) = st.live.get_mut(&s.pid) {
            l.argv = l.argv.take().or(argv);
            l.cwd = l.cwd.take().or_else(|| s.cwd.clone());
            l.exe = l.exe.take().or_else(|| s.exe.clone());
            let seeded = seed_fs(s);
            l.fs.cwd = l.fs.cwd.take().or(seeded.cwd);
            for (fd, info) in seeded.fds {
                l.fs.fds.entry(fd).or_insert(info);
            }
        }
        return Ok(());
    }
    let parent = st.live.get(&s.ppid).map(|l| l.row);
    conn.execute(
        "INSERT INTO processes (pid, start_mono_ns, parent_id, ppid, origin, comm, argv, cwd, exe, uid, gid)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![s.pid, s.start_mono_ns as i64, parent, s.ppid, s.origin, s.comm, argv, s.cwd, s.exe, s.uid, s.gid],
    )?;
    let row = conn.last_insert_rowid();
    st.summary.processes += 1;
    st.live.insert(
        s.pid,
        Live {
            row,
            argv,
            cwd: s.cwd.clone(),
            exe: s.exe.clone(),
            fs: seed_fs(s),
        },
    );
    Ok(())
}

fn json_array(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

/// A failed syscall held back while the same process keeps repeating it.
struct Repeat<'a> {
    ev: &'a Event,
    count: i64,
}

/// Failed calls a process repeats back to back (same syscall, same
/// arguments as given, same error) become one row with `repeat` = N: a
/// program probing a path in a loop must not cost a row per try. Any other
/// event of that process ends the run.
/// (syscall, first buffer, second buffer, dirfd/fd and flags arguments, result)
type RepeatKey<'a> = (u32, &'a [u8], &'a [u8], [u64; 2], i64);

fn repeat_key(ev: &Event) -> Option<RepeatKey<'_>> {
    match &ev.detail {
        Detail::Sys(raw) if raw.ret < 0 && raw.op != agentsight_common::op::CLOSE => Some((
            raw.op,
            &raw.buf1,
            &raw.buf2,
            [raw.args[0], raw.args[2]],
            raw.ret,
        )),
        _ => None,
    }
}

/// The statements a batch's rows are written with.
struct Stmts<'t> {
    row: rusqlite::CachedStatement<'t>,
    string: rusqlite::CachedStatement<'t>,
}

fn write_events(conn: &mut Connection, st: &mut State, events: &[Event]) -> rusqlite::Result<()> {
    let t = conn.transaction()?;
    let written = write_batch(&t, st, events).and_then(|()| t.commit());
    if written.is_err() {
        // Ids handed out in a transaction that did not commit name no row.
        st.strings.clear();
    }
    written?;
    st.summary.events += events.len() as u64;
    Ok(())
}

fn write_batch(t: &Transaction, st: &mut State, events: &[Event]) -> rusqlite::Result<()> {
    // Prepared once per batch: the statement is long, and looking it up
    // in the cache per event cost more than the insert itself.
    let mut stmts = Stmts {
        row: t.prepare_cached(&st.insert_row)?,
        string: t.prepare_cached(INSERT_STRING)?,
    };
    let mut held: HashMap<u32, Repeat> = HashMap::new();
    for ev in events {
        let pid = ev.header.pid;
        let key = repeat_key(ev);
        if let (Some(k), Some(r)) = (&key, held.get_mut(&pid))
            && repeat_key(r.ev).as_ref() == Some(k)
        {
            r.count += 1;
            continue;
        }
        if let Some(r) = held.remove(&pid) {
            write_event(t, &mut stmts, st, r.ev, (r.count > 1).then_some(r.count))?;
        }
        if key.is_some() {
            held.insert(pid, Repeat { ev, count: 1 });
            continue;
        }
        write_event(t, &mut stmts, st, ev, None)?;
    }
    // A batch boundary ends every run: rows never wait for a later batch.
    let mut rest: Vec<Repeat> = held.into_values().collect();
    rest.sort_by_key(|r| r.ev.header.mono_ns);
    for r in rest {
        write_event(t, &mut stmts, st, r.ev, (r.count > 1).then_some(r.count))?;
    }
    Ok(())
}

/// Row of the process an event belongs to, creating one when the process was
/// never seen starting (it then has no start time of its own: we use the
/// first event's).
fn process_row(t: &Transaction, st: &mut State, ev: &Event) -> rusqlite::Result<i64> {
    let h = &ev.header;
    if let Some(l) = st.live.get(&h.pid) {
        return Ok(l.row);
    }
    let parent = st.live.get(&h.ppid).map(|l| l.row);
    t.execute(
        "INSERT INTO processes (pid, start_mono_ns, parent_id, ppid, origin, comm, uid, gid)
         VALUES (?1, ?2, ?3, ?4, 'unseen_start', ?5, ?6, ?7)",
        params![
            h.pid,
            h.mono_ns as i64,
            parent,
            h.ppid,
            h.comm,
            h.uid,
            h.gid
        ],
    )?;
    let row = t.last_insert_rowid();
    st.summary.processes += 1;
    st.live.insert(
        h.pid,
        Live {
            row,
            argv: None,
            cwd: None,
            exe: None,
            fs: FsState::default(),
        },
    );
    Ok(row)
}

/// `INSERT INTO event_rows` with the columns the recorder writes, in
/// storage order (`layout::recorder_columns`).
fn insert_row_sql() -> String {
    let cols: Vec<&str> = super::layout::recorder_columns().collect();
    let params: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO event_rows ({}) VALUES ({})",
        cols.join(", "),
        params.join(", ")
    )
}

/// Columns (and parameters) the recorder writes per row.
const ROW_VALUES: usize = 52;

/// The kind-specific columns of one event row.
#[derive(Default)]
struct Fields {
    child_pid: Option<u32>,
    child_row: Option<i64>,
    filename: Option<String>,
    argv: Option<String>,
    argc: Option<u32>,
    argv_trunc: Option<bool>,
    argv_incomplete: Option<bool>,
    cwd: Option<String>,
    cwd_status: Option<&'static str>,
    exe: Option<String>,
    exe_status: Option<&'static str>,
    result: Option<i64>,
    errno: Option<String>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    core: Option<bool>,
    sys: SysRecord,
    io: Option<crate::capture::decode::IoAggregate>,
    tcp_state: Option<&'static str>,
}

/// A column value before its text is interned.
#[derive(Clone, Copy)]
enum V<'a> {
    Null,
    Int(i64),
    Text(&'a str),
}

fn int<T: Into<i64>>(v: Option<T>) -> V<'static> {
    v.map_or(V::Null, |x| V::Int(x.into()))
}

fn text(v: Option<&str>) -> V<'_> {
    v.map_or(V::Null, V::Text)
}

fn write_event(
    t: &Transaction,
    stmts: &mut Stmts,
    st: &mut State,
    ev: &Event,
    repeat: Option<i64>,
) -> rusqlite::Result<()> {
    let h = &ev.header;
    let row = process_row(t, st, ev)?;
    let f = match &ev.detail {
        Detail::Fork { child_pid, .. } => fork_fields(t, st, ev, row, *child_pid)?,
        Detail::Exec { .. } => exec_fields(t, st, ev, row)?,
        Detail::Sys(raw) => {
            let sys = match st.live.get_mut(&h.pid) {
                Some(l) => l.fs.apply(raw),
                None => FsState::default().apply(raw),
            };
            Fields {
                result: Some(sys.result),
                errno: sys.errno.clone(),
                sys,
                ..Default::default()
            }
        }
        Detail::Io { fd, agg } => io_fields(st, h.pid, *fd, *agg),
        Detail::TcpState {
            newstate,
            family,
            dport,
            daddr,
            ..
        } => tcp_fields(*newstate, *family, *dport, daddr),
        Detail::Exit {
            exit_code,
            signal,
            core_dumped,
        } => {
            t.execute(
                "UPDATE processes SET end_mono_ns = ?1, exit_code = ?2, signal = ?3, core_dumped = ?4 WHERE id = ?5",
                params![h.mono_ns as i64, exit_code, signal, core_dumped, row],
            )?;
            if let Some(l) = st.live.remove(&h.pid) {
                st.exited.insert(h.pid, l.row);
            }
            Fields {
                exit_code: *exit_code,
                signal: *signal,
                core: Some(*core_dumped),
                ..Default::default()
            }
        }
    };
    let kind = match &ev.detail {
        Detail::Sys(_) | Detail::Io { .. } | Detail::TcpState { .. } => f.sys.kind,
        _ => h.kind.name(),
    };
    let (sys, io) = (&f.sys, f.io);
    let values: [V; ROW_VALUES] = [
        V::Int(h.mono_ns as i64),
        V::Int(st.anchor_row),
        V::Text(kind),
        V::Int(h.cpu.into()),
        V::Int(h.seq as i64),
        V::Int(h.pid.into()),
        int((h.tid != h.pid).then_some(h.tid)),
        V::Int(h.ppid.into()),
        V::Int(h.uid.into()),
        V::Int(h.gid.into()),
        V::Text(&h.comm),
        V::Int(row),
        int(f.result),
        int(sys.fd),
        text(sys.path.as_deref()),
        text(sys.path_as_given.as_deref()),
        text(sys.path_status),
        text(f.errno.as_deref()),
        text(sys.flags.as_deref()),
        int(sys.mode),
        text(sys.real_path.as_deref()),
        text(sys.real_path_status),
        int(sys.dev),
        int(sys.ino),
        int(repeat),
        int(io.map(|i| i.write_bytes as i64)),
        int(io.map(|i| i.write_calls as i64)),
        int(io.map(|i| i.read_bytes as i64)),
        int(io.map(|i| i.read_calls as i64)),
        text(sys.old_path.as_deref()),
        text(sys.old_path_as_given.as_deref()),
        text(sys.new_path.as_deref()),
        text(sys.new_path_as_given.as_deref()),
        text(sys.family),
        text(sys.addr.as_deref()),
        int(sys.port),
        text(sys.query.as_deref()),
        text(f.tcp_state),
        int(f.child_pid),
        int(f.child_row),
        text(f.filename.as_deref()),
        text(f.argv.as_deref()),
        int(f.argc),
        int(f.argv_trunc),
        int(f.argv_incomplete),
        text(f.cwd.as_deref()),
        text(f.cwd_status),
        text(f.exe.as_deref()),
        text(f.exe_status),
        int(f.exit_code),
        int(f.signal),
        int(f.core),
    ];
    insert_row(stmts, &mut st.strings, &values)
}

/// Binds a row's non-NULL values (unbound parameters are NULL, and binding
/// dozens of NULLs per row cost as much as the insert itself), text as its
/// `strings` id, and inserts it.
fn insert_row(stmts: &mut Stmts, strings: &mut Interner, values: &[V]) -> rusqlite::Result<()> {
    stmts.row.clear_bindings();
    for (i, v) in values.iter().enumerate() {
        match *v {
            V::Null => {}
            V::Int(x) => stmts.row.raw_bind_parameter(i + 1, x)?,
            V::Text(s) => {
                let id = strings.id(&mut stmts.string, s)?;
                stmts.row.raw_bind_parameter(i + 1, id)?;
            }
        }
    }
    stmts.row.raw_execute()?;
    Ok(())
}

/// A fork: the child's process row, a copy of its parent's (same argv, cwd,
/// exe, fd table).
fn fork_fields(
    t: &Transaction,
    st: &mut State,
    ev: &Event,
    row: i64,
    c: u32,
) -> rusqlite::Result<Fields> {
    let h = &ev.header;
    let parent = st.live.get(&h.pid);
    let (p_argv, p_cwd, p_exe, p_fs) = parent
        .map(|l| (l.argv.clone(), l.cwd.clone(), l.exe.clone(), l.fs.clone()))
        .unwrap_or_default();
    t.execute(
        "INSERT INTO processes (pid, start_mono_ns, parent_id, ppid, origin, comm, argv, cwd, exe, uid, gid)
         VALUES (?1, ?2, ?3, ?4, 'fork', ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT(pid, start_mono_ns) DO NOTHING",
        params![c, h.mono_ns as i64, row, h.pid, h.comm, p_argv, p_cwd, p_exe, h.uid, h.gid],
    )?;
    let crow = t.last_insert_rowid();
    st.summary.processes += 1;
    st.exited.remove(&c);
    st.live.insert(
        c,
        Live {
            row: crow,
            argv: p_argv,
            cwd: p_cwd,
            exe: p_exe,
            fs: p_fs,
        },
    );
    Ok(Fields {
        child_row: Some(crow),
        child_pid: Some(c),
        ..Default::default()
    })
}

fn exec_fields(t: &Transaction, st: &mut State, ev: &Event, row: i64) -> rusqlite::Result<Fields> {
    let h = &ev.header;
    let Detail::Exec {
        ok,
        errno: e,
        filename,
        argc,
        argv,
        argv_truncated,
        argv_incomplete,
        cwd: c,
        exe: x,
        exe_dev,
        exe_ino,
        ..
    } = &ev.detail
    else {
        return Ok(Fields::default());
    };
    let a_json = json_array(argv);
    let exe = x.as_ref().map(|p| p.path.clone());
    let mut f = Fields {
        filename: Some(filename.clone()),
        argv: Some(a_json.clone()),
        argc: ok.then_some(*argc),
        argv_trunc: Some(*argv_truncated),
        argv_incomplete: Some(*argv_incomplete),
        cwd: Some(c.path.clone()),
        cwd_status: Some(c.status),
        exe: exe.clone(),
        exe_status: x.as_ref().map(|p| p.status),
        ..Default::default()
    };
    if *ok {
        f.result = Some(0);
        // The file the kernel ran, in the same columns an open's uses.
        if let Some(p) = x {
            f.sys.real_path = Some(p.path.clone());
            f.sys.real_path_status = Some(p.status);
        }
        if *exe_ino != 0 {
            f.sys.dev = Some(i64::from(*exe_dev));
            f.sys.ino = Some(*exe_ino as i64);
        }
        t.execute(
            "UPDATE processes SET argv = ?1, argv_truncated = ?2, cwd = ?3, exe = ?4, comm = ?5, uid = ?6, gid = ?7, exec_count = exec_count + 1 WHERE id = ?8",
            params![a_json, argv_truncated, c.path, exe, h.comm, h.uid, h.gid, row],
        )?;
        if let Some(l) = st.live.get_mut(&h.pid) {
            l.argv = Some(a_json);
            l.cwd = Some(c.path.clone());
            l.exe = exe;
            l.fs.on_exec(c.is_complete().then(|| c.path.clone()));
        }
    } else {
        f.result = Some(-(*e as i64));
        f.errno = Some(errno_name(*e));
    }
    Ok(f)
}

/// An fd's summed reads and writes, with what the fd refers to.
fn io_fields(st: &State, pid: u32, fd: i32, agg: crate::capture::decode::IoAggregate) -> Fields {
    let target = st.live.get(&pid).and_then(|l| l.fs.fds.get(&fd)).cloned();
    let is_path = target.as_ref().is_some_and(|t| t.is_path);
    Fields {
        sys: SysRecord {
            kind: "io",
            fd: Some(fd as i64),
            path: target
                .as_ref()
                .filter(|t| t.is_path)
                .map(|t| t.target.clone()),
            path_status: Some(if is_path { "resolved" } else { "fd_unknown" }),
            addr: target.filter(|t| !t.is_path).map(|t| t.target),
            ..Default::default()
        },
        io: Some(agg),
        ..Default::default()
    }
}

/// The TCP outcome of a connect.
fn tcp_fields(newstate: i32, family: u16, dport: u16, daddr: &[u8; 16]) -> Fields {
    let mut b = vec![0u8; 24];
    b[..2].copy_from_slice(&family.to_le_bytes());
    b[2..4].copy_from_slice(&dport.to_be_bytes());
    if family == 10 {
        b[8..24].copy_from_slice(daddr);
    } else {
        b[4..8].copy_from_slice(&daddr[..4]);
    }
    let sa = SockAddr::parse(&b);
    Fields {
        sys: SysRecord {
            kind: "tcp_state",
            family: sa.as_ref().map(|s| s.family),
            addr: sa.as_ref().map(|s| s.addr.clone()),
            port: Some(dport as i64),
            ..Default::default()
        },
        tcp_state: Some(if newstate == 1 {
            "established"
        } else {
            "closed"
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::reader::test_records::fork_record;

    fn batch(seqs: std::ops::Range<u64>) -> RecordBatch {
        let mut b = RecordBatch::with_capacity((seqs.end - seqs.start) as usize);
        for s in seqs {
            b.push_record(&fork_record(s, 100 + s as u32));
        }
        b
    }

    fn anchor(wall_ns: u64) -> Anchor {
        Anchor {
            label: "test",
            mono_ns: 0,
            wall_ns,
        }
    }

    fn stored(path: &Path) -> Vec<(i64, i64, i64)> {
        let conn =
            Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let mut q = conn
            .prepare("SELECT mono_ns, wall_ns, child_pid FROM events ORDER BY mono_ns")
            .unwrap();
        q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    }

    #[test]
    fn a_row_binds_one_value_per_stored_column() {
        assert_eq!(super::super::layout::recorder_columns().count(), ROW_VALUES);
    }

    #[test]
    fn held_rows_are_stored_once_the_stream_goes_quiet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let writer = Writer::create(&path, anchor(1_000_000_000_000)).unwrap();
        let events = writer.event_sender();
        events.send(batch(1..4)).unwrap();
        events.send(batch(4..6)).unwrap();
        // Nothing more arrives: the rows must appear while the recording
        // is still running, not only when it ends.
        let deadline = Instant::now() + Duration::from_secs(20);
        while stored(&path).len() < 5 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let rows = stored(&path);
        assert_eq!(
            rows.iter().map(|r| (r.0, r.2)).collect::<Vec<_>>(),
            vec![
                (1001, 101),
                (1002, 102),
                (1003, 103),
                (1004, 104),
                (1005, 105)
            ]
        );
        drop(events);
        let summary = writer.finish(&[], &[]);
        assert_eq!((summary.events, summary.error), (5, None));
    }

    #[test]
    fn an_anchor_stores_the_rows_held_before_it_with_the_old_anchor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let writer = Writer::create(&path, anchor(1_000_000_000_000)).unwrap();
        let events = writer.event_sender();
        events.send(batch(1..3)).unwrap();
        writer
            .sender()
            .send(StoreMsg::Anchor(anchor(5_000_000_000_000)))
            .unwrap();
        events.send(batch(3..4)).unwrap();
        drop(events);
        let summary = writer.finish(&[], &[]);
        assert_eq!((summary.events, summary.error), (3, None));
        assert_eq!(
            stored(&path),
            vec![
                (1001, 1_000_000_001_001, 101),
                (1002, 1_000_000_001_002, 102),
                (1003, 5_000_000_001_003, 103)
            ]
        );
    }

    #[test]
    fn holding_ends_at_the_memory_bound() {
        let mut held = Held::default();
        assert_eq!(held.quiet_left(), None);
        let mut pushed = 0;
        while !held.due() {
            held.push(batch(0..512));
            pushed += 1;
            assert!(held.quiet_left().is_some_and(|q| q <= QUIET));
        }
        // Due at the first batch that reaches the bound, not before.
        let one = batch(0..512).compacted();
        let per_batch = one.heap_bytes();
        assert!(per_batch >= 512 * std::mem::size_of::<agentsight_common::ForkEvent>());
        assert_eq!(pushed, HOLD_BYTES.div_ceil(per_batch));
        assert_eq!(held.bytes, pushed * per_batch);
        assert_eq!(pushed, held.batches.len());
        assert_eq!(held.take().len(), pushed);
        assert_eq!((held.bytes, held.quiet_left()), (0, None));
    }
}
