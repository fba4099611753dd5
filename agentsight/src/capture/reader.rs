//! The ring-buffer reader: drains kernel records, finds sequence gaps, and
//! hands the raw records in batches to a `capture::Sink` (the store
//! writer, which decodes them). It runs at normal priority, so it does as
//! little as possible: copy bytes, read headers, flush I/O aggregates at
//! exec/exit. It never touches SQLite.

use std::{
    collections::BTreeMap,
    os::fd::AsFd,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
};

use agentsight_common::{EXIT_IO_UNLISTED, EventKind, IoAgg, SEQ_STREAMS};
use aya::maps::{HashMap, MapData, PerCpuArray, RingBuf};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::{
    Sink,
    decode::{DecodeError, Detail, Event, EventHeader, decode, exit_flags, header, raw_header},
    loader::drain_io,
};

/// A run of missing sequence numbers on one CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gap {
    /// The counter the numbers come from (`SEQ_STREAM_*`).
    pub stream: u32,
    pub cpu: u32,
    /// First missing sequence number.
    pub first_seq: u64,
    /// Last missing sequence number.
    pub last_seq: u64,
    /// Time of the record before the gap (0 when the gap starts the run).
    pub from_mono_ns: u64,
    /// Time of the record after the gap.
    pub to_mono_ns: u64,
}

/// Finds missing per-CPU sequence numbers. A program can be interrupted on
/// its CPU between taking its number and submitting (by the TCP state
/// tracepoint in softirq, which submits first), so a number may arrive late:
/// ranges stay open until the end of the run and late arrivals are removed
/// from them. Out of order is never missing.
#[derive(Default)]
pub struct GapTracker {
    /// Keyed by (stream, cpu).
    cpus: BTreeMap<(u32, u32), CpuSeq>,
}

#[derive(Default)]
struct CpuSeq {
    max_seen: u64,
    max_seen_ns: u64,
    open: Vec<Gap>,
}

impl GapTracker {
    pub fn observe(&mut self, stream: u32, cpu: u32, seq: u64, mono_ns: u64) {
        let c = self.cpus.entry((stream, cpu)).or_default();
        if seq > c.max_seen {
            if seq > c.max_seen + 1 {
                c.open.push(Gap {
                    stream,
                    cpu,
                    first_seq: c.max_seen + 1,
                    last_seq: seq - 1,
                    from_mono_ns: c.max_seen_ns,
                    to_mono_ns: mono_ns,
                });
            }
            c.max_seen = seq;
            c.max_seen_ns = mono_ns;
            return;
        }
        // A late record: take it out of whichever open gap holds it.
        if let Some(i) = c
            .open
            .iter()
            .position(|g| g.first_seq <= seq && seq <= g.last_seq)
        {
            let g = c.open.remove(i);
            if g.first_seq < seq {
                c.open.push(Gap {
                    last_seq: seq - 1,
                    ..g.clone()
                });
            }
            if seq < g.last_seq {
                c.open.push(Gap {
                    first_seq: seq + 1,
                    ..g
                });
            }
        }
    }

    /// Gaps still open: records that never arrived. `final_seqs[stream][cpu]`
    /// is the kernel's last sequence number: numbers after the last record
    /// seen on a CPU were lost too (nothing came after them to show the gap).
    pub fn finish(mut self, final_seqs: &FinalSeqs, end_mono_ns: u64) -> Vec<Gap> {
        for (stream, cpu, last) in final_seqs.iter() {
            let c = self.cpus.entry((stream, cpu)).or_default();
            if last > c.max_seen {
                c.open.push(Gap {
                    stream,
                    cpu,
                    first_seq: c.max_seen + 1,
                    last_seq: last,
                    from_mono_ns: c.max_seen_ns,
                    to_mono_ns: end_mono_ns,
                });
            }
        }
        let mut out: Vec<Gap> = self.cpus.into_values().flat_map(|c| c.open).collect();
        out.sort_by_key(|g| (g.stream, g.cpu, g.first_seq));
        out
    }

    /// Nothing is missing up to `final_seqs` (the kernel's last number per
    /// CPU) on any CPU.
    pub fn settled(&self, final_seqs: &FinalSeqs) -> bool {
        let tails_seen = final_seqs.iter().all(|(stream, cpu, last)| {
            last == 0
                || self
                    .cpus
                    .get(&(stream, cpu))
                    .is_some_and(|c| c.max_seen >= last)
        });
        tails_seen && self.cpus.values().all(|c| c.open.is_empty())
    }

    pub fn missing(&self) -> u64 {
        self.cpus
            .values()
            .flat_map(|c| &c.open)
            .map(|g| g.last_seq - g.first_seq + 1)
            .sum()
    }
}

/// The kernel's last sequence number per stream and CPU, read at the end.
#[derive(Default)]
pub struct FinalSeqs(pub Vec<Vec<u64>>);

impl FinalSeqs {
    /// Reads every stream of the SEQ map (a missing map or entry: none).
    fn read(seq: Option<&PerCpuArray<MapData, u64>>) -> FinalSeqs {
        let Some(map) = seq else {
            return FinalSeqs::default();
        };
        FinalSeqs(
            (0..SEQ_STREAMS)
                .map(|stream| {
                    map.get(&stream, 0)
                        .map(|v| v.iter().copied().collect())
                        .unwrap_or_default()
                })
                .collect(),
        )
    }

    /// (stream, cpu, last number).
    fn iter(&self) -> impl Iterator<Item = (u32, u32, u64)> + '_ {
        self.0.iter().enumerate().flat_map(|(stream, cpus)| {
            cpus.iter()
                .enumerate()
                .map(move |(cpu, &last)| (stream as u32, cpu as u32, last))
        })
    }
}

/// Counters the live status line reads.
#[derive(Default)]
pub struct ReaderStats {
    pub events: AtomicU64,
}

/// Ring records as they came (decoded later, by the writer) and the I/O
/// aggregates user space flushed between them, in arrival order.
pub struct RecordBatch {
    bytes: Vec<u8>,
    items: Vec<BatchItem>,
}

enum BatchItem {
    /// A kernel record: its byte range in `bytes`.
    Kernel { start: usize, end: usize },
    /// An event user space made (an I/O aggregate swept at exit or stop);
    /// boxed so the common item stays small in queued batches.
    Made(Box<Event>),
}

impl RecordBatch {
    pub(crate) fn with_capacity(items: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(items * 256),
            items: Vec::with_capacity(items),
        }
    }

    /// Copies the record's used bytes (`decode::used_len`): a queued or
    /// held syscall record takes about half the memory of the ring's.
    pub(crate) fn push_record(&mut self, record: &[u8]) {
        let start = self.bytes.len();
        self.bytes
            .extend_from_slice(&record[..super::decode::used_len(record)]);
        self.items.push(BatchItem::Kernel {
            start,
            end: self.bytes.len(),
        });
    }

    fn push_made(&mut self, ev: Event) {
        self.items.push(BatchItem::Made(Box::new(ev)));
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// A copy in exactly sized allocations, for holding a batch a while: a
    /// batch is allocated for 512 records and often sent with a few. Copying
    /// (rather than shrinking in place) frees the whole original, so the
    /// reader's next batch reuses it instead of fragmenting its heap.
    pub fn compacted(self) -> Self {
        let mut items = Vec::with_capacity(self.items.len());
        items.extend(self.items);
        Self {
            bytes: self.bytes.as_slice().to_vec(),
            items,
        }
    }

    /// Heap memory the batch holds.
    pub fn heap_bytes(&self) -> usize {
        let made = self
            .items
            .iter()
            .filter(|i| matches!(i, BatchItem::Made(_)))
            .count();
        self.bytes.capacity()
            + self.items.capacity() * std::mem::size_of::<BatchItem>()
            + made * std::mem::size_of::<Event>()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Decodes every record, in order; undecodable ones come back as errors
    /// (the caller counts them; the rest of the batch is unaffected).
    pub fn decode(self) -> (Vec<Event>, Vec<DecodeError>) {
        let Self { bytes, items } = self;
        let mut events = Vec::with_capacity(items.len());
        let mut errors = Vec::new();
        for item in items {
            match item {
                BatchItem::Kernel { start, end } => match decode(&bytes[start..end]) {
                    Ok(ev) => events.push(ev),
                    Err(e) => errors.push(e),
                },
                BatchItem::Made(ev) => events.push(*ev),
            }
        }
        (events, errors)
    }
}

const BATCH: usize = 512;

/// How often the ring is drained: a stop is seen promptly, and even at
/// 250,000 records/s one interval is ~5,000 records, a small part of the
/// default 16 MiB ring.
const DRAIN_INTERVAL_MS: u16 = 20;

/// Starts the reader thread. It runs until `stop` is set, then drains what is
/// left in the ring and returns the gaps it found.
pub fn spawn(
    mut ring: RingBuf<MapData>,
    mut io: Option<HashMap<MapData, u64, IoAgg>>,
    seq: Option<PerCpuArray<MapData, u64>>,
    tx: impl Sink,
    stop: Arc<AtomicBool>,
    stats: Arc<ReaderStats>,
) -> std::io::Result<JoinHandle<Vec<Gap>>> {
    std::thread::Builder::new()
        .name("ring-reader".into())
        .spawn(move || {
            let mut gaps = GapTracker::default();
            let mut batch = RecordBatch::with_capacity(BATCH);
            while !stop.load(Ordering::Acquire) {
                drain_ring(&mut ring, &mut io, &mut gaps, &mut batch, &tx, &stats);
                flush(&tx, &mut batch, &stats);
                // The kernel submits without wakeups (BPF_RB_NO_WAKEUP), so
                // this is a timed sleep between drains.
                let fd = ring.as_fd();
                let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
                let _ = poll(&mut fds, PollTimeout::from(DRAIN_INTERVAL_MS));
            }
            // The kernel's last numbers are read before the last drains: a
            // record submitted after the last drain (processes may still be
            // running) would otherwise read as lost, and one still being
            // filled gets a few short retries to arrive.
            let final_seqs = FinalSeqs::read(seq.as_ref());
            for _ in 0..FINAL_DRAINS {
                drain_ring(&mut ring, &mut io, &mut gaps, &mut batch, &tx, &stats);
                if gaps.settled(&final_seqs) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            if let Some(io) = io.as_mut() {
                // Processes still running at the end: what they did so far.
                let now = crate::clock::mono_now_ns();
                for (pid, fd, agg) in drain_io(io, None) {
                    batch.push_made(io_event(pid, fd, agg, now));
                }
            }
            flush(&tx, &mut batch, &stats);
            gaps.finish(&final_seqs, crate::clock::mono_now_ns())
        })
}

/// Drains at the end of a run until no number up to the kernel's last is
/// missing (real loss never settles: then this many, 10 ms apart).
const FINAL_DRAINS: usize = 5;

/// Copies every record now in the ring into `batch` (flushing full batches),
/// noting sequence numbers; an exit flagged EXIT_IO_UNLISTED sweeps that
/// process's I/O aggregates from the map.
fn drain_ring(
    ring: &mut RingBuf<MapData>,
    io: &mut Option<HashMap<MapData, u64, IoAgg>>,
    gaps: &mut GapTracker,
    batch: &mut RecordBatch,
    tx: &impl Sink,
    stats: &ReaderStats,
) {
    while let Some(item) = ring.next() {
        // A record too short for a header is still passed on: the
        // writer's decode counts it as an error.
        if let Ok(h) = raw_header(&item) {
            gaps.observe(h.seq_stream, h.cpu, h.seq, h.mono_ns);
            // The kernel flushes a process's listed I/O aggregates
            // itself at exec and exit; an exit says when some were
            // never listed, and only then is the map swept.
            if h.kind == EventKind::Exit as u32
                && exit_flags(&item) & EXIT_IO_UNLISTED != 0
                && let Some(io) = io.as_mut()
                && let Ok(h) = header(&h)
            {
                for ev in io_events(drain_io(io, Some(h.pid)), &h) {
                    batch.push_made(ev);
                }
            }
        }
        batch.push_record(&item);
        if batch.len() >= BATCH {
            flush(tx, batch, stats);
        }
    }
}

/// An I/O aggregate flushed by user space (not a kernel record: cpu and seq
/// are u32::MAX / 0 so gap tracking never sees it).
fn io_event(pid: u32, fd: i32, agg: IoAgg, mono_ns: u64) -> Event {
    Event {
        header: EventHeader {
            kind: EventKind::Io,
            cpu: u32::MAX,
            seq: 0,
            mono_ns,
            tid: pid,
            pid,
            ppid: 0,
            uid: 0,
            gid: 0,
            comm: String::new(),
        },
        detail: Detail::Io {
            fd,
            agg: agg.into(),
        },
    }
}

fn io_events(items: Vec<(u32, i32, IoAgg)>, exit: &EventHeader) -> Vec<Event> {
    items
        .into_iter()
        .map(|(pid, fd, agg)| {
            let mut ev = io_event(pid, fd, agg, exit.mono_ns);
            ev.header.ppid = exit.ppid;
            ev.header.uid = exit.uid;
            ev.header.gid = exit.gid;
            ev.header.comm = exit.comm.clone();
            ev
        })
        .collect()
}

fn flush(tx: &impl Sink, batch: &mut RecordBatch, stats: &ReaderStats) {
    if batch.is_empty() {
        return;
    }
    stats
        .events
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    let events = std::mem::replace(batch, RecordBatch::with_capacity(BATCH));
    // Blocks only when the writer is a full queue behind; the kernel then
    // counts what the ring cannot hold, so pressure shows up as counted loss.
    if tx.send(events).is_err() {
        tracing::error!("store writer stopped; events from now on are not stored");
    }
}

/// Raw ring records for tests.
#[cfg(test)]
pub(crate) mod test_records {
    use agentsight_common::{EventKind, ForkEvent, Header};

    /// A fork record of pid 7 (`sh`) on CPU 1, at mono_ns 1000 + seq.
    pub fn fork_record(seq: u64, child: u32) -> Vec<u8> {
        let ev = ForkEvent {
            header: Header {
                kind: EventKind::Fork as u32,
                cpu: 1,
                seq,
                mono_ns: 1000 + seq,
                tid: 7,
                pid: 7,
                ppid: 1,
                uid: 1000,
                gid: 1000,
                seq_stream: 0,
                comm: *b"sh\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
            },
            child_pid: child,
            child_tid: child,
            cgroup_id: 0,
        };
        // Safety: a repr(C) record viewed as its bytes.
        unsafe {
            std::slice::from_raw_parts(
                &ev as *const ForkEvent as *const u8,
                std::mem::size_of::<ForkEvent>(),
            )
        }
        .to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::test_records::fork_record;
    use super::*;
    use agentsight_common::Header;

    #[test]
    fn batch_decodes_in_arrival_order_and_counts_bad_records() {
        let mut batch = RecordBatch::with_capacity(4);
        batch.push_record(&fork_record(1, 100));
        batch.push_made(io_event(7, 3, IoAgg::default(), 5000));
        batch.push_record(&[1, 2, 3]);
        batch.push_record(&fork_record(2, 101));
        assert_eq!(batch.len(), 4);
        let (events, errors) = batch.decode();
        assert_eq!(
            errors,
            vec![DecodeError::Short {
                kind: "header",
                len: 3,
                need: std::mem::size_of::<Header>()
            }]
        );
        let shape: Vec<(EventKind, u64)> = events
            .iter()
            .map(|e| (e.header.kind, e.header.mono_ns))
            .collect();
        assert_eq!(
            shape,
            vec![
                (EventKind::Fork, 1001),
                (EventKind::Io, 5000),
                (EventKind::Fork, 1002)
            ]
        );
        assert!(matches!(
            events[2].detail,
            Detail::Fork {
                child_pid: 101,
                child_tid: 101,
                cgroup_id: 0,
            }
        ));
        assert_eq!(events[0].header.comm, "sh");
    }

    #[test]
    fn out_of_order_is_not_missing_and_settles() {
        let mut t = GapTracker::default();
        // A record (3) submitted before one that took its number earlier (2).
        t.observe(0, 0, 1, 10);
        t.observe(0, 0, 3, 30);
        let last = |task: Vec<u64>| FinalSeqs(vec![task, vec![]]);
        assert!(!t.settled(&last(vec![3])));
        t.observe(0, 0, 2, 20);
        assert!(t.settled(&last(vec![3])));
        // The kernel took 4 but it has not arrived yet: not settled.
        assert!(!t.settled(&last(vec![4])));
        // A CPU that never took a number is settled without records.
        assert!(t.settled(&last(vec![3, 0])));
        assert_eq!(t.finish(&last(vec![3, 0]), 99), vec![]);
    }

    #[test]
    fn streams_count_separately() {
        let mut t = GapTracker::default();
        // The TCP stream's 1 on CPU 0 does not fill the task stream's gap.
        t.observe(0, 0, 2, 20);
        t.observe(1, 0, 1, 15);
        let gaps = t.finish(&FinalSeqs(vec![vec![2], vec![1]]), 99);
        assert_eq!(
            gaps,
            vec![Gap {
                stream: 0,
                cpu: 0,
                first_seq: 1,
                last_seq: 1,
                from_mono_ns: 0,
                to_mono_ns: 20
            }]
        );
    }

    #[test]
    fn gaps_are_found_and_late_records_fill_them() {
        let mut t = GapTracker::default();
        t.observe(0, 0, 1, 10);
        t.observe(0, 0, 2, 20);
        t.observe(0, 0, 6, 60); // 3,4,5 missing
        t.observe(0, 1, 2, 15); // 1 missing on cpu 1
        t.observe(0, 0, 4, 40); // 4 arrives late
        assert_eq!(t.missing(), 3);
        // CPU 1's counter went on to 4 after its last record (2): 3 and 4 lost.
        let gaps = t.finish(&FinalSeqs(vec![vec![6, 4]]), 99);
        let g = |cpu, first_seq, last_seq, from_mono_ns, to_mono_ns| Gap {
            stream: 0,
            cpu,
            first_seq,
            last_seq,
            from_mono_ns,
            to_mono_ns,
        };
        assert_eq!(
            gaps,
            vec![
                g(0, 3, 3, 20, 60),
                g(0, 5, 5, 20, 60),
                g(1, 1, 1, 0, 15),
                g(1, 3, 4, 15, 99),
            ]
        );
    }
}
