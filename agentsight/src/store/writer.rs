//! The store writer: one thread owning the SQLite connection. It holds the
//! event batches of a burst (see `Held`), then decodes them, asks the process
//! model (`capture::model`) what to store, and writes that in one
//! transaction per batch. It implements `capture::Sink`.

use std::{
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
    CaptureRw, StoreError,
    intern::{INSERT_STRING, Interner},
    layout::{StoredRow, Value, insert_row_sql, row_values},
};
pub use crate::capture::SinkClosed as WriterStopped;
use crate::capture::{
    ProcessSeed, Sink,
    container::{self, ContainerInfo},
    decode::Event,
    model::{EventRow, ProcessChange, ProcessModel, ProcessOrigin, Step},
    reader::{Gap, RecordBatch},
};
use crate::clock::Anchor;

pub enum StoreMsg {
    /// Raw ring records (decoded here, off the reader's thread).
    Events(RecordBatch),
    Seed(ProcessSeed),
    Anchor(Anchor),
    Loss(Vec<(&'static str, u64)>),
    Meta(String, String),
    /// The containers recorded (`record --container`): a process the kernel
    /// saw in one's cgroup gets its id, name and image, and while any is
    /// recorded every process row gets its namespace identity from /proc.
    Containers(Vec<ContainerInfo>),
    /// `--max-size`: once the capture (file + WAL) reaches this many bytes,
    /// events are no longer stored but counted, per kind, as loss
    /// `max_size:KIND`.
    MaxBytes(u64),
    /// One model exchange of the wire layer (`record --wire`): decoded and
    /// stored as it arrives; past `--max-size` or on a full disk it is
    /// counted (`max_size:wire`, `disk_full:wire`), never silently dropped.
    Wire(Box<agentsight_wire::RawExchange>),
    /// What the TLS probes could decrypt of one recorded process
    /// (`store::tls`).
    TlsProcess(super::tls::TlsProcessNote),
    /// One access `record --enforce` refused (`store::enforcement`):
    /// stored at once; past `--max-size` or on a full disk counted
    /// (`max_size:denial`, `disk_full:denial`).
    /// Accesses `record --enforce` refused, handed over in batches.
    Denials(Vec<crate::enforce::Denial>),
}

/// Loss kinds of events the writer received but did not store because the
/// capture reached `--max-size` start with this.
pub const MAX_SIZE_LOSS_PREFIX: &str = "max_size:";

/// Loss kinds of what the writer received but did not store because the
/// disk was full start with this (`disk_full:syscall`, …; `disk_full:seed`
/// for processes found in /proc).
pub const DISK_FULL_LOSS_PREFIX: &str = "disk_full:";

/// The meta key saying storing stopped early: "disk full at T, N events
/// not stored" (see [`DiskFull::message`]).
pub const STORING_STOPPED_META: &str = super::meta::key::STORING_STOPPED;

/// Storing stopped because the disk was full: when, and what was received
/// but not stored since, by kind.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DiskFull {
    /// RFC 3339 wall time at which storing stopped.
    pub at: String,
    pub not_stored: std::collections::BTreeMap<&'static str, u64>,
}

impl DiskFull {
    /// Events received but not stored (the `seed` kind is a process, not
    /// an event).
    pub fn events(&self) -> u64 {
        self.not_stored
            .iter()
            .filter(|(k, _)| **k != "seed")
            .map(|(_, n)| n)
            .sum()
    }

    /// The text stored as meta [`STORING_STOPPED_META`].
    pub fn message(&self) -> String {
        format!(
            "disk full at {}, {} events not stored",
            self.at,
            self.events()
        )
    }
}

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
    /// Set when storing stopped because the disk was full; the capture was
    /// still finished (its last rows fit in the reserved room).
    pub disk_full: Option<DiskFull>,
}

pub struct Writer {
    tx: SyncSender<StoreMsg>,
    handle: JoinHandle<(Connection, WriterSummary, Pending)>,
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

impl Sink for EventSender {
    /// Blocks only when the writer is a full queue behind.
    fn send(&self, events: RecordBatch) -> Result<(), WriterStopped> {
        self.backlog.queued_one();
        self.tx
            .send(StoreMsg::Events(events))
            .map_err(|_| WriterStopped)
    }
}

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
        let conn = CaptureRw::create(path)?.into_conn();
        // The summaries the writer keeps (a capture without them is scanned).
        conn.execute_batch(super::summary::SCHEMA)
            .map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        // Opened by this thread (already under `creds`), before any event.
        let reserve = Reserve::open(path);
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
                run(conn, rx, anchor, &thread_backlog, reserve)
            })
            .map_err(|e| {
                // Nothing was recorded: leave nothing behind.
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let mut p = path.as_os_str().to_owned();
                    p.push(suffix);
                    let _ = std::fs::remove_file(p);
                }
                StoreError::Open {
                    path: path.display().to_string(),
                    reason: format!("cannot start writer thread: {e}"),
                }
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
        let (mut conn, mut summary, pending) = match handle.join() {
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
            // What arrived after the disk filled (see `Pending`).
            upsert_loss(&t, &pending.loss)?;
            for (k, v) in pending.meta.iter().chain(meta) {
                put_meta(&t, k, v)?;
            }
            put_meta(
                &t,
                super::meta::key::DECODE_ERRORS,
                &summary.decode_errors.to_string(),
            )?;
            for (kind, n) in &summary.not_stored {
                t.execute(
                    "INSERT INTO loss (kind, lost) VALUES (?1, ?2)",
                    params![format!("{MAX_SIZE_LOSS_PREFIX}{kind}"), *n as i64],
                )?;
            }
            if let Some(full) = &summary.disk_full {
                for (kind, n) in &full.not_stored {
                    t.execute(
                        "INSERT INTO loss (kind, lost) VALUES (?1, ?2)",
                        params![format!("{DISK_FULL_LOSS_PREFIX}{kind}"), *n as i64],
                    )?;
                }
                put_meta(&t, STORING_STOPPED_META, &full.message())?;
            } else {
                // Built once at the end rather than maintained per insert;
                // not on a full disk, where they would not fit (readers
                // work without them, only slower).
                t.execute_batch(super::INDEXES)?;
            }
            t.commit()?;
            conn.execute_batch("PRAGMA journal_mode=DELETE;")?;
            Ok(())
        })();
        // The capture is one file now: the room kept past its end is given
        // back (and the -wal's, unlinked, with its handle).
        pending.reserve.release();
        if let Err(e) = result {
            let msg = format!("{}: finishing the capture failed: {e}", path.display());
            summary.error.get_or_insert(msg);
        }
        summary
    }
}

/// Room kept allocated past the end of the capture and of its -wal
/// (`fallocate(FALLOC_FL_KEEP_SIZE)`: the sizes do not change, the blocks
/// are ours), so a full disk never stops the capture from being finished.
/// It is topped up before every batch is written, and once it cannot be,
/// the disk counts as full and storing stops (`DiskFull`), with the room
/// still there for the last rows: the gaps, loss and meta (the indexes are
/// then skipped) go into the -wal's room, and the checkpoint that makes the
/// capture one file again (journal mode DELETE) moves at most every page of
/// the -wal into the capture's room. The -wal holds at most SQLite's
/// auto-checkpoint (1000 pages, 4 MiB at 4 KiB pages) plus one batch's
/// transaction, hence the sizes below; the room is given back at the end.
/// On a file system without `fallocate` there is no room kept, and a write
/// failing with SQLITE_FULL stops storing the same way (finishing may then
/// fail, leaving what was committed readable).
struct Reserve {
    /// The capture and its -wal, with the room each keeps.
    files: Vec<(std::fs::File, i64)>,
}

/// Room past the capture's end: the largest checkpoint (see `Reserve`).
const RESERVE_DB: i64 = 6 << 20;
/// Room past the -wal's end: the last transaction's pages.
const RESERVE_WAL: i64 = 2 << 20;

impl Reserve {
    fn open(path: &Path) -> Self {
        use std::os::unix::fs::OpenOptionsExt;
        let mut files = Vec::new();
        for (suffix, room) in [("", RESERVE_DB), ("-wal", RESERVE_WAL)] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&p)
            {
                Ok(f) => files.push((f, room)),
                Err(e) => tracing::debug!("no room kept for {}: {e}", Path::new(&p).display()),
            }
        }
        Self { files }
    }

    /// Keeps the room past each file's end. Err only when the disk has no
    /// space for it; a file system that cannot keep room is left without.
    fn keep(&mut self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let mut result = Ok(());
        self.files.retain(|(f, room)| {
            let end = match f.metadata() {
                Ok(m) => m.len() as i64,
                Err(_) => return false,
            };
            // Safety: plain syscall on a file we own; KEEP_SIZE changes no size.
            let r =
                unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, end, *room) };
            if r == 0 {
                return true;
            }
            let e = std::io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
                result = Err(e);
                return true;
            }
            tracing::debug!("no room kept past the capture's end: {e}");
            false
        });
        result
    }

    /// Gives the room back (the part past each file's end).
    fn release(self) {
        use std::os::fd::AsRawFd;
        for (f, room) in self.files {
            if let Ok(m) = f.metadata() {
                // Safety: as in `keep`; punching past the end changes no size.
                unsafe {
                    libc::fallocate(
                        f.as_raw_fd(),
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        m.len() as i64,
                        room,
                    )
                };
            }
        }
    }
}

/// What the writer could not write while the disk was full, written when
/// the capture is finished (into the reserved room), and the room itself.
struct Pending {
    /// The newest loss counts (cumulative: the newest replace the older).
    loss: Vec<(&'static str, u64)>,
    meta: Vec<(String, String)>,
    reserve: Reserve,
}

fn is_disk_full(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}

pub(crate) fn put_meta(t: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    t.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [key, value],
    )?;
    Ok(())
}

struct State {
    /// Which process and event rows to write.
    model: ProcessModel,
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
    /// The summaries the open transaction adds (`summary`), and the field
    /// each INSERT parameter fills.
    kept: super::summary::SummaryDelta,
    slots: Vec<Option<super::summary::Slot>>,
    /// The recorded containers by cgroup id (empty: a host-only capture,
    /// whose process rows stay as they always were).
    containers: std::collections::HashMap<u64, ContainerInfo>,
    pending: Pending,
    /// TLS notes per process, stored at the end: a process's TLS rows may
    /// still be held when its note arrives, and they decide the note.
    tls_notes: Vec<super::tls::TlsProcessNote>,
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

impl State {
    /// A writer's state before its first batch.
    fn new(reserve: Reserve) -> Self {
        State {
            model: ProcessModel::default(),
            summary: WriterSummary::default(),
            max_bytes: None,
            capped: false,
            anchor_row: 0,
            strings: Interner::default(),
            insert_row: insert_row_sql(),
            kept: Default::default(),
            slots: super::layout::summary_slots(),
            containers: std::collections::HashMap::new(),
            pending: Pending {
                loss: Vec::new(),
                meta: Vec::new(),
                reserve,
            },
            tls_notes: Vec::new(),
        }
    }
}

fn run(
    mut conn: Connection,
    rx: Receiver<StoreMsg>,
    anchor: Anchor,
    backlog: &Backlog,
    reserve: Reserve,
) -> (Connection, WriterSummary, Pending) {
    let mut st = State::new(reserve);
    if st.pending.reserve.keep().is_err() {
        stop_storing(&mut st);
    }
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
        if st.summary.disk_full.is_some() {
            // Nothing more is written: it is counted or kept for the end.
            after_disk_full(&mut st, &mut held, msg);
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
            StoreMsg::Loss(counts) => write_loss(&mut conn, &counts).inspect_err(|e| {
                if is_disk_full(e) {
                    st.pending.loss = counts;
                }
            }),
            StoreMsg::Meta(k, v) => put_meta(&conn, &k, &v).inspect_err(|e| {
                if is_disk_full(e) {
                    st.pending.meta.push((k, v));
                }
            }),
            StoreMsg::MaxBytes(n) => {
                st.max_bytes = Some(n);
                Ok(())
            }
            StoreMsg::Containers(list) => {
                st.containers = list.into_iter().map(|c| (c.cgroup_id, c)).collect();
                Ok(())
            }
            StoreMsg::Wire(raw) => store_wire(&conn, &mut st, &raw),
            StoreMsg::TlsProcess(note) => {
                st.tls_notes.push(note);
                Ok(())
            }
            StoreMsg::Denials(d) => store_denials(&mut conn, &mut st, &d),
        };
        if let Err(e) = r {
            fail(&mut st, e);
        }
    }
    store_held(&mut conn, &mut st, &mut held);
    if st.summary.error.is_none()
        && st.summary.disk_full.is_none()
        && !st.tls_notes.is_empty()
        && let Err(e) = super::tls::insert_processes(&conn, &st.tls_notes)
    {
        fail(&mut st, e);
    }
    (conn, st.summary, st.pending)
}

fn fail(st: &mut State, e: rusqlite::Error) {
    if is_disk_full(&e) {
        stop_storing(st);
        return;
    }
    tracing::error!("capture write failed, recording stops storing: {e}");
    st.summary.error = Some(e.to_string());
}

/// The disk is full: from now on nothing is stored (see `Reserve`).
fn stop_storing(st: &mut State) {
    if st.summary.disk_full.is_none() {
        let at = crate::clock::rfc3339_ns(Anchor::now("disk_full").wall_ns);
        tracing::error!("the disk is full ({at}): storing stops, what arrives is counted");
        st.summary.disk_full = Some(DiskFull {
            at,
            not_stored: Default::default(),
        });
    }
}

/// Counts `events` as received but not stored (the disk is full).
fn not_stored_disk_full(st: &mut State, kinds: impl Iterator<Item = &'static str>) {
    if let Some(full) = &mut st.summary.disk_full {
        for k in kinds {
            *full.not_stored.entry(k).or_default() += 1;
        }
    }
}

/// One message after the disk filled: events and seeds are counted, loss
/// counts and meta kept for the end, the rest dropped (an anchor only
/// serves rows that will not be stored).
fn after_disk_full(st: &mut State, held: &mut Held, msg: StoreMsg) {
    let mut batches = held.take();
    match msg {
        StoreMsg::Events(b) => batches.push(b),
        StoreMsg::Seed(_) => not_stored_disk_full(st, std::iter::once("seed")),
        StoreMsg::Loss(counts) => st.pending.loss = counts,
        StoreMsg::Meta(k, v) => st.pending.meta.push((k, v)),
        StoreMsg::MaxBytes(n) => st.max_bytes = Some(n),
        StoreMsg::Wire(_) => not_stored_disk_full(st, std::iter::once("wire")),
        StoreMsg::TlsProcess(_) => not_stored_disk_full(st, std::iter::once("tls_process")),
        StoreMsg::Denials(d) => not_stored_disk_full(st, d.iter().map(|_| "denial")),
        StoreMsg::Anchor(_) | StoreMsg::Containers(_) => {}
    }
    for batch in batches {
        let (events, errors) = batch.decode();
        st.summary.decode_errors += errors.len() as u64;
        not_stored_disk_full(st, events.iter().map(|e| e.header.kind.name()));
    }
}

/// Stores a batch of enforcement denials in one transaction, or counts
/// them once the capture reached `--max-size`.
fn store_denials(
    conn: &mut Connection,
    st: &mut State,
    denials: &[crate::enforce::Denial],
) -> rusqlite::Result<()> {
    if reached_max_size(conn, st) {
        *st.summary.not_stored.entry("denial").or_default() += denials.len() as u64;
        return Ok(());
    }
    let t = conn.transaction()?;
    super::enforcement::insert(&t, denials)?;
    t.commit()
}

/// Stores one wire exchange with its decoding, or counts it as not stored
/// once the capture reached `--max-size`.
fn store_wire(
    conn: &Connection,
    st: &mut State,
    raw: &agentsight_wire::RawExchange,
) -> rusqlite::Result<()> {
    if reached_max_size(conn, st) {
        *st.summary.not_stored.entry("wire").or_default() += 1;
        return Ok(());
    }
    let decoded = agentsight_wire::decode::decode(raw, &agentsight_wire::decode::Limits::default());
    super::wire::insert(conn, raw, &decoded.exchange)
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
        if st.summary.disk_full.is_none() && st.pending.reserve.keep().is_err() {
            stop_storing(st);
        }
        if st.summary.disk_full.is_some() {
            not_stored_disk_full(st, events.iter().map(|e| e.header.kind.name()));
            continue;
        }
        if let Err(e) = write_events(conn, st, &events) {
            fail(st, e);
            // Rolled back: on a full disk, these too were not stored.
            not_stored_disk_full(st, events.iter().map(|e| e.header.kind.name()));
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
    upsert_loss(&t, counts)?;
    t.commit()
}

fn upsert_loss(t: &Connection, counts: &[(&'static str, u64)]) -> rusqlite::Result<()> {
    for (kind, lost) in counts {
        t.execute(
            "INSERT INTO loss (kind, lost) VALUES (?1, ?2) ON CONFLICT(kind) DO UPDATE SET lost = excluded.lost",
            params![kind, *lost as i64],
        )?;
    }
    Ok(())
}

fn write_seed(conn: &Connection, st: &mut State, s: &ProcessSeed) -> rusqlite::Result<()> {
    let change = st.model.seed(s);
    write_process(conn, st, &change)?;
    if st.containers.is_empty() {
        return Ok(());
    }
    let id = match &change {
        ProcessChange::Insert(p) => p.id,
        ProcessChange::CompleteFromSeed { id, .. } => *id,
        _ => return Ok(()),
    };
    // A process found in /proc: its cgroup from there too.
    let cgroup_id = container::cgroup_of(s.pid).ok().map(|(_, id)| id);
    write_identity(conn, st, id, s.pid, cgroup_id, s.start_mono_ns, None)
}

/// The container (by cgroup id) and namespace identity (from /proc, if the
/// process is still the one seen at `seen_ns`; else the pid namespace and
/// pid the kernel read at its exec, `kernel_ns`) of a process row. Only
/// while containers are recorded: host-only captures keep these columns NULL.
fn write_identity(
    conn: &Connection,
    st: &State,
    id: i64,
    pid: u32,
    cgroup_id: Option<u64>,
    seen_ns: u64,
    kernel_ns: Option<(u64, u32)>,
) -> rusqlite::Result<()> {
    if st.containers.is_empty() {
        return Ok(());
    }
    if let Some(c) = cgroup_id.and_then(|g| st.containers.get(&g)) {
        conn.execute(
            "UPDATE processes SET container_id = ?1, container_name = ?2, container_image = ?3 WHERE id = ?4",
            params![c.id, c.name, c.image, id],
        )?;
    }
    if let Some(ns) = container::ns_identity(pid, seen_ns) {
        conn.execute(
            "UPDATE processes SET pid_ns = ?1, mnt_ns = ?2, ns_pid = ?3 WHERE id = ?4",
            params![ns.pid_ns as i64, ns.mnt_ns as i64, ns.ns_pid, id],
        )?;
    } else if let Some((pid_ns, ns_pid)) = kernel_ns {
        // Gone already: what the kernel saw at its exec (the mount
        // namespace it cannot tell cheaply stays NULL).
        conn.execute(
            "UPDATE processes SET pid_ns = ?1, ns_pid = ?2 WHERE id = ?3",
            params![pid_ns as i64, ns_pid, id],
        )?;
    }
    Ok(())
}

/// Writes one change to `processes`.
fn write_process(conn: &Connection, st: &mut State, c: &ProcessChange) -> rusqlite::Result<()> {
    match c {
        ProcessChange::Insert(p) => {
            // A fork whose (pid, start) is already stored adds nothing.
            let on_conflict = if p.origin == ProcessOrigin::Fork {
                " ON CONFLICT(pid, start_mono_ns) DO NOTHING"
            } else {
                ""
            };
            conn.execute(
                &format!(
                    "INSERT INTO processes (id, pid, start_mono_ns, parent_id, ppid, origin, comm, argv, cwd, exe, uid, gid)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12){on_conflict}"
                ),
                params![
                    p.id,
                    p.pid,
                    p.start_mono_ns as i64,
                    p.parent_id,
                    p.ppid,
                    p.origin.as_str(),
                    p.comm,
                    p.argv,
                    p.cwd,
                    p.exe,
                    p.uid,
                    p.gid
                ],
            )?;
            st.summary.processes += 1;
        }
        ProcessChange::CompleteFromSeed {
            id,
            origin,
            ppid,
            start_mono_ns,
            argv,
            cwd,
            exe,
            uid,
            gid,
        } => {
            conn.execute(
                "UPDATE processes SET origin = ?1, ppid = ?2, start_mono_ns = MIN(start_mono_ns, ?3),
                    argv = COALESCE(argv, ?4), cwd = COALESCE(cwd, ?5), exe = COALESCE(exe, ?6),
                    uid = COALESCE(uid, ?7), gid = COALESCE(gid, ?8) WHERE id = ?9",
                params![
                    origin.as_str(),
                    ppid,
                    *start_mono_ns as i64,
                    argv,
                    cwd,
                    exe,
                    uid,
                    gid,
                    id
                ],
            )?;
        }
        ProcessChange::Exec {
            id,
            argv,
            argv_truncated,
            cwd,
            exe,
            comm,
            uid,
            gid,
        } => {
            conn.execute(
                "UPDATE processes SET argv = ?1, argv_truncated = ?2, cwd = ?3, exe = ?4, comm = ?5, uid = ?6, gid = ?7, exec_count = exec_count + 1 WHERE id = ?8",
                params![argv, argv_truncated, cwd, exe, comm, uid, gid, id],
            )?;
        }
        ProcessChange::InCgroup {
            id,
            pid,
            cgroup_id,
            at_ns,
            ns_pid,
        } => {
            write_identity(conn, st, *id, *pid, Some(*cgroup_id), *at_ns, *ns_pid)?;
        }
        ProcessChange::Exit {
            id,
            end_mono_ns,
            exit_code,
            signal,
            core_dumped,
        } => {
            conn.execute(
                "UPDATE processes SET end_mono_ns = ?1, exit_code = ?2, signal = ?3, core_dumped = ?4 WHERE id = ?5",
                params![*end_mono_ns as i64, exit_code, signal, core_dumped, id],
            )?;
        }
    }
    Ok(())
}

/// The statements a batch's rows are written with.
struct Stmts<'t> {
    row: rusqlite::CachedStatement<'t>,
    string: rusqlite::CachedStatement<'t>,
}

fn write_events(conn: &mut Connection, st: &mut State, events: &[Event]) -> rusqlite::Result<()> {
    let steps = st.model.steps(events);
    let t = conn.transaction()?;
    let written = write_steps(&t, st, &steps).and_then(|()| t.commit());
    if written.is_err() {
        // Ids handed out in a transaction that did not commit name no row.
        st.strings.clear();
        st.kept = Default::default();
    }
    written?;
    st.summary.events += events.len() as u64;
    Ok(())
}

fn write_steps(t: &Transaction, st: &mut State, steps: &[Step]) -> rusqlite::Result<()> {
    // Prepared once per batch: the statement is long, and looking it up
    // in the cache per event cost more than the insert itself.
    let mut stmts = Stmts {
        row: t.prepare_cached(&st.insert_row)?,
        string: t.prepare_cached(INSERT_STRING)?,
    };
    if steps.iter().any(|s| matches!(s, Step::Tls { .. })) {
        // The table exists only in captures that have TLS rows.
        t.execute_batch(super::tls::SCHEMA)?;
    }
    let mut last_row = None;
    for step in steps {
        match step {
            Step::Process(c) => write_process(t, st, c)?,
            Step::Event(row) => {
                write_event(&mut stmts, st, row)?;
                last_row = Some(t.last_insert_rowid());
            }
            Step::Tls {
                process_id,
                header,
                data,
            } => super::tls::insert_record(t, *process_id, st.anchor_row, header, data)?,
        }
    }
    // In the rows' transaction: the summaries never disagree with them.
    st.kept.store(t, last_row)
}

/// Binds a row's non-NULL values (unbound parameters are NULL, and binding
/// dozens of NULLs per row cost as much as the insert itself), text as its
/// `strings` id, and inserts it.
fn write_event(stmts: &mut Stmts, st: &mut State, row: &EventRow) -> rusqlite::Result<()> {
    let stored = StoredRow {
        anchor: st.anchor_row,
        event: row,
    };
    stmts.row.clear_bindings();
    let mut kept = super::summary::SummaryInput::default();
    for (i, v) in row_values(&stored) {
        if let Some(Some(slot)) = st.slots.get(i) {
            match v {
                Value::Null => kept.set(*slot, None, None),
                Value::Int(x) => kept.set(*slot, Some(x), None),
                Value::Text(t) => kept.set(*slot, None, Some(t)),
            }
        }
        match v {
            Value::Null => {}
            Value::Int(x) => stmts.row.raw_bind_parameter(i, x)?,
            Value::Text(s) => {
                let id = st.strings.id(&mut stmts.string, s)?;
                stmts.row.raw_bind_parameter(i, id)?;
            }
        }
    }
    stmts.row.raw_execute()?;
    st.kept.add(&kept);
    Ok(())
}

/// A capture written by the writer's own path (one transaction per batch,
/// summaries kept) with a row of every event kind, and rows for each
/// activity section of `show`: written, read, changed (and failed), opened
/// under another name, connected (failed, in progress), DNS names.
#[cfg(test)]
pub(crate) fn write_every_kind(path: &Path) {
    use crate::capture::{decode::EventHeader, model::EventFields};
    use crate::store::events::EventKind;
    let mut conn = CaptureRw::create(path).unwrap().into_conn();
    conn.execute_batch(super::summary::SCHEMA).unwrap();
    let mut st = State::new(Reserve::open(path));
    let anchor = Anchor {
        label: "start",
        mono_ns: 0,
        wall_ns: 1_000_000_000_000,
    };
    st.anchor_row = store_anchor(&conn, &anchor).unwrap();
    let mut kinds: Vec<&'static str> = EventKind::KNOWN.iter().map(|k| k.as_str()).collect();
    // Every section more than once, in two transactions.
    kinds.extend([
        "io", "io", "openat", "unlink", "connect", "connect", "dns", "rename",
    ]);
    let headers: Vec<EventHeader> = (0..kinds.len() as u64)
        .map(|i| EventHeader {
            kind: agentsight_common::EventKind::Sys,
            cpu: (i % 2) as u32,
            seq: i,
            mono_ns: 1_000 + 10 * (i % 7) + i,
            tid: 100,
            pid: 100,
            ppid: 1,
            uid: 0,
            gid: 0,
            comm: "tool".into(),
        })
        .collect();
    let rows: Vec<EventRow> = kinds
        .iter()
        .zip(&headers)
        .enumerate()
        .map(|(i, (kind, header))| {
            let mut fields = EventFields::default();
            // Long enough (≥ 24 bytes with a `/`) to be stored as prefix + rest.
            let file = format!("/workspace/project/src/f{}", i % 3);
            fields.result = Some(if i % 4 == 0 { -2 } else { 3 });
            fields.errno = (i % 4 == 0).then(|| ["ENOENT", "EINPROGRESS"][i % 8 / 4].to_string());
            fields.sys.path = Some(file.clone());
            fields.sys.flags = Some(
                if i % 2 == 0 {
                    "O_WRONLY|O_CREAT"
                } else {
                    "O_RDONLY"
                }
                .into(),
            );
            fields.sys.real_path = (i % 3 == 1).then(|| format!("/real{file}"));
            if *kind == "io" {
                fields.io = Some(crate::capture::decode::IoAggregate {
                    write_bytes: 10 * i as u64,
                    write_calls: 2,
                    read_bytes: (i % 2) as u64 * 7,
                    read_calls: 1,
                    first_ns: 0,
                    last_ns: 0,
                });
            }
            if matches!(*kind, "connect" | "sendto") {
                fields.sys.family = Some("inet");
                fields.sys.addr = Some(format!("10.0.0.{}", i % 2));
                fields.sys.port = (i % 3 != 0).then_some(443);
            }
            if *kind == "dns" {
                fields.sys.query = Some(["a.example", "b.example"][i % 2].into());
            }
            EventRow {
                header,
                kind,
                process_id: 1 + (i % 2) as i64,
                repeat: None,
                fields,
            }
        })
        .collect();
    let half = rows.len() / 2;
    for part in [&rows[..half], &rows[half..]] {
        let steps: Vec<Step> = part.iter().cloned().map(Step::Event).collect();
        let t = conn.transaction().unwrap();
        write_steps(&t, &mut st, &steps).unwrap();
        t.commit().unwrap();
    }
    put_meta(&conn, "complete", "true").unwrap();
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

    fn names_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_planted_sidecar_fails_the_start_before_anything_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        // A -shm link (dangling) and a -journal directory.
        std::os::unix::fs::symlink("/nonexistent", dir.path().join("x.db-shm")).unwrap();
        let Err(e) = Writer::create(&path, anchor(1)) else {
            panic!("created next to a planted -shm");
        };
        assert_eq!(
            e.to_string(),
            format!(
                "{}-shm: exists already (SQLite would take it as the new capture's own): remove it or choose another output",
                path.display()
            )
        );
        assert_eq!(names_in(dir.path()), vec!["x.db-shm"]);
        std::fs::remove_file(dir.path().join("x.db-shm")).unwrap();
        std::fs::create_dir(dir.path().join("x.db-journal")).unwrap();
        assert!(Writer::create(&path, anchor(1)).is_err());
        assert_eq!(names_in(dir.path()), vec!["x.db-journal"]);
        std::fs::remove_dir(dir.path().join("x.db-journal")).unwrap();
        let summary = Writer::create(&path, anchor(1)).unwrap().finish(&[], &[]);
        assert_eq!(summary.error, None);
        assert_eq!(names_in(dir.path()), vec!["x.db"]);
    }

    #[test]
    fn the_room_kept_past_the_end_is_given_back_and_sizes_never_change() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let writer = Writer::create(&path, anchor(1)).unwrap();
        let events = writer.event_sender();
        events.send(batch(1..100)).unwrap();
        drop(events);
        let summary = writer.finish(&[], &[]);
        assert_eq!(
            (summary.events, summary.error, summary.disk_full),
            (99, None, None)
        );
        // No block past the end is left allocated.
        let m = std::fs::metadata(&path).unwrap();
        assert!(
            m.blocks() * 512 <= m.len().next_multiple_of(4096),
            "{} blocks for {} bytes",
            m.blocks(),
            m.len()
        );
        assert_eq!(names_in(dir.path()), vec!["c.db"]);
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
