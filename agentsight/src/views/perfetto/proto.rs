//! The few Perfetto trace messages the timeline export writes, declared by
//! hand with `prost` (no protoc, no build script). Field numbers and wire
//! types are facts of `perfetto_trace.proto` (protos/perfetto/trace/…),
//! pinned by the unit test below and checked end to end by the tests that
//! decode our output with the PyPI `perfetto` package's
//! `perfetto_trace_pb2`. The protos are proto2: every scalar is `optional`
//! (a zero exit code or pid must still be written) and repeated scalars are
//! not packed.

/// `Trace`: the whole file is a sequence of `packet` fields (1); the
/// encoder writes them one by one (see [`packet_frame`]).
pub const TRACE_PACKET_FIELD: u32 = 1;

#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
    #[prost(message, optional, tag = "2")]
    pub process_tree: Option<ProcessTree>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
}

/// Fields every later packet of the sequence that needs incremental state
/// takes when it does not set them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacketDefaults {
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
}

/// `TracePacket.SequenceFlags`.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `BuiltinClock`.
pub const CLOCK_REALTIME: u32 = 1;
pub const CLOCK_MONOTONIC: u32 = 3;

#[derive(Clone, PartialEq, prost::Message)]
pub struct ClockSnapshot {
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
    #[prost(uint32, optional, tag = "2")]
    pub primary_trace_clock: Option<u32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Clock {
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessTree {
    #[prost(message, repeated, tag = "1")]
    pub processes: Vec<ProcessTreeProcess>,
}

/// `ProcessTree.Process`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessTreeProcess {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub ppid: Option<i32>,
    #[prost(string, repeated, tag = "3")]
    pub cmdline: Vec<String>,
    #[prost(int32, optional, tag = "5")]
    pub uid: Option<i32>,
}

/// `TrackDescriptor.ChildTracksOrdering`.
pub const ORDER_CHRONOLOGICAL: i32 = 2;
pub const ORDER_EXPLICIT: i32 = 3;

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    #[prost(int32, optional, tag = "11")]
    pub child_ordering: Option<i32>,
    #[prost(int32, optional, tag = "12")]
    pub sibling_order_rank: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, repeated, tag = "2")]
    pub cmdline: Vec<String>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
    #[prost(int64, optional, tag = "7")]
    pub start_timestamp_ns: Option<i64>,
}

/// `TrackEvent.Type`.
pub const SLICE_BEGIN: i32 = 1;
pub const SLICE_END: i32 = 2;
pub const INSTANT: i32 = 3;

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    #[prost(uint64, optional, tag = "17")]
    pub string_value_iid: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedString>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedString>,
    /// `InternedString {iid = 1, str = 2}`: the same wire shape.
    #[prost(message, repeated, tag = "29")]
    pub debug_annotation_string_values: Vec<InternedString>,
}

/// `EventName`, `DebugAnnotationName` and `InternedString`: all three are
/// `{iid = 1, name/str = 2}` (`str` is `bytes`, written the same as a string).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

/// One `Trace.packet` field: its key and length, then the packet. A file of
/// such frames is a `Trace`, so packets are written as they are made.
pub fn packet_frame(packet: &TracePacket, buf: &mut Vec<u8>) {
    use prost::Message;
    buf.clear();
    prost::encoding::encode_key(
        TRACE_PACKET_FIELD,
        prost::encoding::WireType::LengthDelimited,
        buf,
    );
    prost::encoding::encode_varint(packet.encoded_len() as u64, buf);
    // Encoding into a Vec cannot run out of room.
    let _ = packet.encode(buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// The bytes of a message with one field set: key (field << 3 | wire
    /// type) first, so the field number and wire type are pinned.
    fn key_of(bytes: &[u8]) -> (u64, u8) {
        let mut b = bytes;
        let key = prost::encoding::decode_varint(&mut b).unwrap();
        (key >> 3, (key & 7) as u8)
    }

    #[test]
    fn field_numbers_and_wire_types_are_perfettos() {
        const VARINT: u8 = 0;
        const FIXED64: u8 = 1;
        const LEN: u8 = 2;
        let p = |f: fn(&mut TracePacket)| {
            let mut p = TracePacket::default();
            f(&mut p);
            key_of(&p.encode_to_vec())
        };
        assert_eq!(p(|p| p.timestamp = Some(1)), (8, VARINT));
        assert_eq!(p(|p| p.timestamp_clock_id = Some(3)), (58, VARINT));
        assert_eq!(p(|p| p.trusted_packet_sequence_id = Some(1)), (10, VARINT));
        assert_eq!(p(|p| p.sequence_flags = Some(1)), (13, VARINT));
        assert_eq!(p(|p| p.clock_snapshot = Some(Default::default())), (6, LEN));
        assert_eq!(p(|p| p.process_tree = Some(Default::default())), (2, LEN));
        assert_eq!(p(|p| p.track_event = Some(Default::default())), (11, LEN));
        assert_eq!(p(|p| p.interned_data = Some(Default::default())), (12, LEN));
        assert_eq!(
            p(|p| p.track_descriptor = Some(Default::default())),
            (60, LEN)
        );
        assert_eq!(
            p(|p| p.trace_packet_defaults = Some(Default::default())),
            (59, LEN)
        );
        let defaults = TracePacketDefaults {
            timestamp_clock_id: Some(3),
        };
        assert_eq!(key_of(&defaults.encode_to_vec()), (58, VARINT));

        let t = |f: fn(&mut TrackDescriptor)| {
            let mut t = TrackDescriptor::default();
            f(&mut t);
            key_of(&t.encode_to_vec())
        };
        assert_eq!(t(|t| t.uuid = Some(1)), (1, VARINT));
        assert_eq!(t(|t| t.name = Some("a".into())), (2, LEN));
        assert_eq!(t(|t| t.process = Some(Default::default())), (3, LEN));
        assert_eq!(t(|t| t.parent_uuid = Some(1)), (5, VARINT));
        assert_eq!(t(|t| t.child_ordering = Some(2)), (11, VARINT));
        assert_eq!(t(|t| t.sibling_order_rank = Some(1)), (12, VARINT));

        let pd = |f: fn(&mut ProcessDescriptor)| {
            let mut d = ProcessDescriptor::default();
            f(&mut d);
            key_of(&d.encode_to_vec())
        };
        assert_eq!(pd(|d| d.pid = Some(1)), (1, VARINT));
        assert_eq!(pd(|d| d.cmdline = vec!["a".into()]), (2, LEN));
        assert_eq!(pd(|d| d.process_name = Some("a".into())), (6, LEN));
        assert_eq!(pd(|d| d.start_timestamp_ns = Some(1)), (7, VARINT));

        let e = |f: fn(&mut TrackEvent)| {
            let mut e = TrackEvent::default();
            f(&mut e);
            key_of(&e.encode_to_vec())
        };
        assert_eq!(
            e(|e| e.debug_annotations = vec![Default::default()]),
            (4, LEN)
        );
        assert_eq!(e(|e| e.r#type = Some(INSTANT)), (9, VARINT));
        assert_eq!(e(|e| e.name_iid = Some(1)), (10, VARINT));
        assert_eq!(e(|e| e.track_uuid = Some(1)), (11, VARINT));
        // Not packed: each id is its own fixed64 field.
        assert_eq!(e(|e| e.flow_ids = vec![7]), (47, FIXED64));
        assert_eq!(e(|e| e.terminating_flow_ids = vec![7]), (48, FIXED64));
        let two = TrackEvent {
            flow_ids: vec![1, 2],
            ..Default::default()
        };
        assert_eq!(two.encode_to_vec().len(), 2 * (2 + 8));

        let d = |f: fn(&mut DebugAnnotation)| {
            let mut d = DebugAnnotation::default();
            f(&mut d);
            key_of(&d.encode_to_vec())
        };
        assert_eq!(d(|d| d.name_iid = Some(1)), (1, VARINT));
        assert_eq!(d(|d| d.bool_value = Some(true)), (2, VARINT));
        assert_eq!(d(|d| d.int_value = Some(0)), (4, VARINT));
        assert_eq!(d(|d| d.string_value = Some("a".into())), (6, LEN));
        assert_eq!(d(|d| d.string_value_iid = Some(1)), (17, VARINT));

        let i = |f: fn(&mut InternedData)| {
            let mut i = InternedData::default();
            f(&mut i);
            key_of(&i.encode_to_vec())
        };
        assert_eq!(i(|i| i.event_names = vec![Default::default()]), (2, LEN));
        assert_eq!(
            i(|i| i.debug_annotation_names = vec![Default::default()]),
            (3, LEN)
        );
        assert_eq!(
            i(|i| i.debug_annotation_string_values = vec![Default::default()]),
            (29, LEN)
        );
        let s = InternedString {
            iid: Some(1),
            name: None,
        };
        assert_eq!(key_of(&s.encode_to_vec()), (1, VARINT));

        let c = ClockSnapshot {
            clocks: vec![],
            primary_trace_clock: Some(CLOCK_MONOTONIC),
        };
        assert_eq!(key_of(&c.encode_to_vec()), (2, VARINT));
        let c = Clock {
            clock_id: None,
            timestamp: Some(5),
        };
        assert_eq!(key_of(&c.encode_to_vec()), (2, VARINT));
        let t = ProcessTreeProcess {
            ppid: Some(0),
            ..Default::default()
        };
        assert_eq!(key_of(&t.encode_to_vec()), (2, VARINT));
        let t = ProcessTreeProcess {
            uid: Some(0),
            ..Default::default()
        };
        assert_eq!(key_of(&t.encode_to_vec()), (5, VARINT));
        assert_eq!(
            (SLICE_BEGIN, SLICE_END, INSTANT, ORDER_CHRONOLOGICAL),
            (1, 2, 3, 2)
        );
        assert_eq!((CLOCK_REALTIME, CLOCK_MONOTONIC), (1, 3));
    }

    #[test]
    fn a_frame_is_one_trace_packet_field() {
        let p = TracePacket {
            timestamp: Some(300),
            ..Default::default()
        };
        let mut buf = Vec::new();
        packet_frame(&p, &mut buf);
        // Field 1, length-delimited; length 3 (key 0x40, varint 300 = 0xac 0x02).
        assert_eq!(buf, [0x0a, 3, 0x40, 0xac, 0x02]);
    }
}
