//! The packet writer: one trusted sequence, names interned on first use,
//! every timestamp on CLOCK_MONOTONIC (the capture's `mono_ns`), packets
//! framed and written as they are made. Every text of the trace (names,
//! string annotations, command lines) passes through it, so it is where
//! secret-looking values are redacted ([`crate::views::redact`]).

use std::{borrow::Cow, collections::HashMap, io::Write};

use super::proto::{
    self, DebugAnnotation, InternedData, InternedString, TracePacket, TrackDescriptor, TrackEvent,
};

/// The one sequence every packet is written on.
pub const SEQUENCE_ID: u32 = 1;

/// A debug annotation's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Str(String),
    /// A string many events repeat (paths, flags, addresses): interned
    /// while the table has room ([`SHARED_MAX`] strings), plain after.
    Shared(String),
    Bool(bool),
}

/// Bound on interned annotation values: memory stays bounded on a capture
/// of a million distinct paths (later ones are written plain).
pub const SHARED_MAX: usize = 100_000;

/// One debug annotation: a fixed key and its value.
pub type Ann = (&'static str, Value);

/// What the writer has written, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Written {
    pub packets: u64,
    pub bytes: u64,
    pub tracks: u64,
    pub slices: u64,
    pub instants: u64,
}

pub struct TraceWriter<'w> {
    out: &'w mut dyn Write,
    frame: Vec<u8>,
    names: HashMap<String, u64>,
    keys: HashMap<&'static str, u64>,
    shared: HashMap<String, u64>,
    first: bool,
    /// Replace secret-looking values in every text written.
    redact: bool,
    pub written: Written,
}

/// A track event to write at `ts`.
pub struct Event<'a> {
    pub ts: u64,
    pub track: u64,
    pub kind: i32,
    pub name: Option<&'a str>,
    pub anns: &'a [Ann],
    pub flows: &'a [u64],
    pub terminating: &'a [u64],
}

impl<'w> TraceWriter<'w> {
    pub fn new(out: &'w mut dyn Write, redact: bool) -> Self {
        Self {
            out,
            frame: Vec::with_capacity(256),
            names: HashMap::new(),
            keys: HashMap::new(),
            shared: HashMap::new(),
            first: true,
            redact,
            written: Written::default(),
        }
    }

    fn write(&mut self, mut p: TracePacket) -> std::io::Result<()> {
        p.trusted_packet_sequence_id = Some(SEQUENCE_ID);
        if self.first {
            // The first packet starts the sequence's incremental state: the
            // interning tables, and MONOTONIC as every event's clock.
            p.sequence_flags = Some(proto::SEQ_INCREMENTAL_STATE_CLEARED);
            p.trace_packet_defaults = Some(proto::TracePacketDefaults {
                timestamp_clock_id: Some(proto::CLOCK_MONOTONIC),
            });
            self.first = false;
        }
        proto::packet_frame(&p, &mut self.frame);
        self.out.write_all(&self.frame)?;
        self.written.packets += 1;
        self.written.bytes += self.frame.len() as u64;
        Ok(())
    }

    /// A clock snapshot pairing the capture's monotonic time with wall time;
    /// MONOTONIC is the trace's clock.
    pub fn clock_snapshot(&mut self, mono_ns: u64, wall_ns: Option<u64>) -> std::io::Result<()> {
        let clock = |id, ts| proto::Clock {
            clock_id: Some(id),
            timestamp: Some(ts),
        };
        let mut clocks = vec![clock(proto::CLOCK_MONOTONIC, mono_ns)];
        clocks.extend(wall_ns.map(|w| clock(proto::CLOCK_REALTIME, w)));
        self.write(TracePacket {
            timestamp: Some(mono_ns),
            timestamp_clock_id: Some(proto::CLOCK_MONOTONIC),
            clock_snapshot: Some(proto::ClockSnapshot {
                clocks,
                primary_trace_clock: Some(proto::CLOCK_MONOTONIC),
            }),
            ..Default::default()
        })
    }

    /// `s` as the trace may show it.
    fn text<'s>(&self, s: &'s str) -> Cow<'s, str> {
        if self.redact {
            crate::views::redact::text(s)
        } else {
            Cow::Borrowed(s)
        }
    }

    /// A command line as the trace may show it.
    fn cmdline(&self, argv: Vec<String>) -> Vec<String> {
        if self.redact {
            crate::views::redact::argv(&argv)
        } else {
            argv
        }
    }

    pub fn track(&mut self, mut d: TrackDescriptor) -> std::io::Result<()> {
        self.written.tracks += 1;
        if let Some(n) = d.name.take() {
            d.name = Some(self.text(&n).into_owned());
        }
        if let Some(mut p) = d.process.take() {
            p.cmdline = self.cmdline(std::mem::take(&mut p.cmdline));
            if let Some(n) = p.process_name.take() {
                p.process_name = Some(self.text(&n).into_owned());
            }
            d.process = Some(p);
        }
        self.write(TracePacket {
            track_descriptor: Some(d),
            ..Default::default()
        })
    }

    pub fn process_tree(
        &mut self,
        ts: u64,
        mut p: proto::ProcessTreeProcess,
    ) -> std::io::Result<()> {
        p.cmdline = self.cmdline(std::mem::take(&mut p.cmdline));
        self.write(TracePacket {
            timestamp: Some(ts),
            timestamp_clock_id: Some(proto::CLOCK_MONOTONIC),
            process_tree: Some(proto::ProcessTree { processes: vec![p] }),
            ..Default::default()
        })
    }

    /// Writes one track event; its name and annotation keys are interned
    /// (declared in this packet the first time they are used).
    pub fn event(&mut self, e: &Event) -> std::io::Result<()> {
        let mut interned = InternedData::default();
        let name_iid = e.name.map(|n| {
            let n = self.text(n);
            intern(&mut self.names, &n, &mut interned.event_names)
        });
        let debug_annotations = e
            .anns
            .iter()
            .map(|(key, value)| self.annotation(key, value, &mut interned))
            .collect();
        match e.kind {
            proto::SLICE_BEGIN => self.written.slices += 1,
            proto::INSTANT => self.written.instants += 1,
            _ => {}
        }
        let has_interned = !interned.event_names.is_empty()
            || !interned.debug_annotation_names.is_empty()
            || !interned.debug_annotation_string_values.is_empty();
        // The clock is the sequence's default (set by the first packet).
        self.write(TracePacket {
            timestamp: Some(e.ts),
            sequence_flags: Some(proto::SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: has_interned.then_some(interned),
            track_event: Some(TrackEvent {
                debug_annotations,
                r#type: Some(e.kind),
                name_iid,
                track_uuid: Some(e.track),
                flow_ids: e.flows.to_vec(),
                terminating_flow_ids: e.terminating.to_vec(),
            }),
            ..Default::default()
        })
    }

    /// One annotation; its key (and a shared value) interned on first use.
    fn annotation(
        &mut self,
        key: &'static str,
        value: &Value,
        interned: &mut InternedData,
    ) -> DebugAnnotation {
        let name_iid = match self.keys.get(key) {
            Some(&iid) => iid,
            None => {
                let iid = self.keys.len() as u64 + 1;
                self.keys.insert(key, iid);
                interned.debug_annotation_names.push(InternedString {
                    iid: Some(iid),
                    name: Some(key.to_owned()),
                });
                iid
            }
        };
        let mut a = DebugAnnotation {
            name_iid: Some(name_iid),
            ..Default::default()
        };
        match value {
            Value::Int(v) => a.int_value = Some(*v),
            Value::Str(v) => a.string_value = Some(self.text(v).into_owned()),
            Value::Shared(v) if self.shared.contains_key(v) || self.shared.len() < SHARED_MAX => {
                a.string_value_iid = Some(match self.shared.get(v) {
                    Some(&iid) => iid,
                    // Keyed by the recorded text, declared as shown: each
                    // distinct value is redacted once.
                    None => {
                        let shown = self.text(v).into_owned();
                        let iid = self.shared.len() as u64 + 1;
                        self.shared.insert(v.clone(), iid);
                        interned
                            .debug_annotation_string_values
                            .push(InternedString {
                                iid: Some(iid),
                                name: Some(shown),
                            });
                        iid
                    }
                });
            }
            Value::Shared(v) => a.string_value = Some(self.text(v).into_owned()),
            Value::Bool(v) => a.bool_value = Some(*v),
        }
        a
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The iid of `name`, declared in `new` when it is new.
fn intern(table: &mut HashMap<String, u64>, name: &str, new: &mut Vec<InternedString>) -> u64 {
    if let Some(&iid) = table.get(name) {
        return iid;
    }
    let iid = table.len() as u64 + 1;
    table.insert(name.to_owned(), iid);
    new.push(InternedString {
        iid: Some(iid),
        name: Some(name.to_owned()),
    });
    iid
}
