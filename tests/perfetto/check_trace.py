"""Decodes an agentsight Perfetto trace with the PyPI `perfetto` package's
own protobuf definitions (independent of our encoder), checks its structure
and prints what it holds as one JSON object for the Rust test to assert on.

usage: check_trace.py [--texts] TRACE.pftrace [EXPORT.jsonl]

With --texts, "texts" lists every text the trace holds (event and track
names, process names and command lines, annotation strings, interned or
not), for the redaction test.

Structural checks (each violation is one line in "errors"):
- one trusted_packet_sequence_id; the first packet clears incremental state;
  every packet using an interned id says it needs incremental state, and
  every iid used was interned before (or in the same packet);
- every track a descriptor's parent_uuid or an event's track_uuid names was
  declared in an earlier packet (or the parent in an earlier descriptor);
- timestamps never go back; every timestamped packet is on CLOCK_MONOTONIC
  (its own timestamp_clock_id, or the sequence default the first packet
  sets, for packets that need incremental state); interned annotation
  string values resolve;
- per track, slices nest strictly: no end without a begin, nothing left
  open, and no track of ours ever holds two slices at once (depth <= 1), so
  every end closes the begin it was written for;
- every flow has exactly one start and one end.
With a jsonl export of the same capture: every event line has its instant,
in the same order, with the same kind and pid, at its mono_ns, and the wall
time the clock snapshots give it equals the line's "ts" to the nanosecond.
"""

import bisect
import calendar
import json
import sys
import time
from collections import Counter, defaultdict

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

BEGIN, END, INSTANT = 1, 2, 3
CLEARED, NEEDS = 1, 2
MONOTONIC, REALTIME = 3, 1


def rfc3339_ns(ts):
    """'2026-12-01T09:00:00.123456789Z' -> ns since the epoch (exact)."""
    secs, frac = ts.rstrip("Z").split(".")
    t = calendar.timegm(time.strptime(secs, "%Y-%m-%dT%H:%M:%S"))
    return t * 1_000_000_000 + int(frac.ljust(9, "0"))


class Checker:
    def __init__(self):
        self.errors = []
        self.seqs = set()
        self.names, self.keys, self.strings = {}, {}, {}
        self.default_clock = None
        self.tracks = {}
        self.stacks = defaultdict(list)
        self.flow_out, self.flow_in = Counter(), Counter()
        self.last_ts = None
        self.snapshots = []
        self.primary = set()
        self.tree = []
        self.slices = Counter()
        self.instants = Counter()
        self.event_instants = []
        self.tool_slices = []
        self.mcp_slices = []
        self.wire_slices = []
        self.open_wire = {}
        self.process_slices = {}
        self.texts = set()

    def err(self, i, msg):
        if len(self.errors) < 50:
            self.errors.append(f"packet {i}: {msg}")

    def packet(self, i, p):
        self.seqs.add(p.trusted_packet_sequence_id)
        if i == 0 and not p.sequence_flags & CLEARED:
            self.err(i, "first packet does not clear incremental state")
        if p.HasField("interned_data"):
            for n in p.interned_data.event_names:
                self.names[n.iid] = n.name
                self.texts.add(n.name)
            for n in p.interned_data.debug_annotation_names:
                self.keys[n.iid] = n.name
            for n in p.interned_data.debug_annotation_string_values:
                self.strings[n.iid] = n.str.decode("utf-8")
                self.texts.add(self.strings[n.iid])
        if p.HasField("trace_packet_defaults"):
            if i != 0:
                self.err(i, "packet defaults after the first packet")
            if p.trace_packet_defaults.HasField("timestamp_clock_id"):
                self.default_clock = p.trace_packet_defaults.timestamp_clock_id
        if p.HasField("timestamp"):
            clock = (p.timestamp_clock_id if p.HasField("timestamp_clock_id") else
                     self.default_clock if p.sequence_flags & NEEDS else None)
            if clock != MONOTONIC:
                self.err(i, f"clock {clock}, not MONOTONIC")
            # Clock snapshots all come first: they place the clocks, not
            # something on the timeline.
            if p.HasField("clock_snapshot"):
                pass
            elif self.last_ts is not None and p.timestamp < self.last_ts:
                self.err(i, f"timestamp {p.timestamp} goes back from {self.last_ts}")
            else:
                self.last_ts = p.timestamp
        if p.HasField("clock_snapshot"):
            c = {k.clock_id: k.timestamp for k in p.clock_snapshot.clocks}
            self.primary.add(p.clock_snapshot.primary_trace_clock)
            if REALTIME in c:
                self.snapshots.append((c[MONOTONIC], c[REALTIME]))
        if p.HasField("track_descriptor"):
            self.descriptor(i, p.track_descriptor)
        if p.HasField("process_tree"):
            for q in p.process_tree.processes:
                self.texts.update(q.cmdline)
                self.tree.append({"ts": p.timestamp, "pid": q.pid,
                                  "ppid": q.ppid if q.HasField("ppid") else None})
        if p.HasField("track_event"):
            self.event(i, p, p.track_event)

    def descriptor(self, i, d):
        self.texts.add(d.name)
        if d.HasField("process"):
            self.texts.add(d.process.process_name)
            self.texts.update(d.process.cmdline)
        if d.uuid in self.tracks:
            self.err(i, f"track {d.uuid} declared twice")
        if d.HasField("parent_uuid") and d.parent_uuid not in self.tracks:
            self.err(i, f"parent {d.parent_uuid} of {d.uuid} not declared before")
        kind = "process" if d.HasField("process") else {
            1: "session", 2: "lane", 4: "tree", 5: "loss", 6: "no_process",
            7: "wire"}.get(d.uuid & 7, "?")
        self.tracks[d.uuid] = {"kind": kind, "name": d.name,
                               "pid": d.process.pid if d.HasField("process") else None,
                               "start": d.process.start_timestamp_ns if d.HasField("process") else None,
                               "process_name": d.process.process_name if d.HasField("process") else None}

    def anns(self, i, e):
        out = {}
        for a in e.debug_annotations:
            if a.name_iid not in self.keys:
                self.err(i, f"annotation name iid {a.name_iid} not interned")
            k = self.keys.get(a.name_iid, "?")
            if a.HasField("string_value"):
                self.texts.add(a.string_value)
            if a.HasField("string_value_iid") and a.string_value_iid not in self.strings:
                self.err(i, f"string value iid {a.string_value_iid} not interned")
            out[k] = (a.int_value if a.HasField("int_value") else
                      a.string_value if a.HasField("string_value") else
                      self.strings.get(a.string_value_iid) if a.HasField("string_value_iid") else
                      a.bool_value if a.HasField("bool_value") else None)
        return out

    def event(self, i, p, e):
        if not p.sequence_flags & NEEDS:
            self.err(i, "event with interned ids does not need incremental state")
        if e.track_uuid not in self.tracks:
            self.err(i, f"track {e.track_uuid} used before it is declared")
        track = self.tracks.get(e.track_uuid, {"kind": "?"})
        name = None
        if e.HasField("name_iid"):
            if e.name_iid not in self.names:
                self.err(i, f"event name iid {e.name_iid} not interned")
            name = self.names.get(e.name_iid)
        anns = self.anns(i, e)
        for f in e.flow_ids:
            self.flow_out[f] += 1
        for f in e.terminating_flow_ids:
            self.flow_in[f] += 1
        stack = self.stacks[e.track_uuid]
        if e.type == BEGIN:
            stack.append(p.timestamp)
            if len(stack) > 1:
                self.err(i, f"slice {name} opens inside another on track {e.track_uuid}")
            self.slices[track["kind"]] += 1
            if track["kind"] == "lane":
                self.tool_slices.append({"name": name, "ts": p.timestamp,
                                         "tool_index": anns.get("tool_index"),
                                         "flows": len(e.flow_ids)})
                if "mcp_server" in anns:
                    # An MCP call's slice: its mcp_* annotations and
                    # arguments, as written.
                    self.mcp_slices.append(dict({"name": name}, **{
                        k: v for k, v in anns.items()
                        if k.startswith("mcp_") or k == "arguments"}))
            if track["kind"] == "wire":
                w = dict(anns, name=name, begin=p.timestamp, end=None,
                         begin_wall_ns=self.wall(p.timestamp), track=track["name"])
                self.wire_slices.append(w)
                self.open_wire[e.track_uuid] = w
            if track["kind"] == "process":
                self.process_slices[e.track_uuid] = {"begin": p.timestamp, "end": None,
                                                     "flows_in": len(e.terminating_flow_ids),
                                                     "ppid": anns.get("ppid"), "pid": anns.get("pid")}
        elif e.type == END:
            if not stack:
                self.err(i, f"end without a begin on track {e.track_uuid}")
            else:
                stack.pop()
            if track["kind"] == "wire" and e.track_uuid in self.open_wire:
                self.open_wire.pop(e.track_uuid)["end"] = p.timestamp
            if track["kind"] == "process" and e.track_uuid in self.process_slices:
                s = self.process_slices[e.track_uuid]
                s["end"] = p.timestamp
                s["exit_code"] = anns.get("exit_code")
                s["running"] = anns.get("running_at_capture_end", False)
        elif e.type == INSTANT:
            self.instants[track["kind"]] += 1
            if "event_id" in anns:
                # An event's pid is its process track's, or its own annotation.
                anns.setdefault("pid", track.get("pid"))
                self.event_instants.append((p.timestamp, name, anns, track["kind"], e.track_uuid,
                                            len(e.terminating_flow_ids)))
        else:
            self.err(i, f"event type {e.type}")

    def wall(self, mono):
        """Wall time of a monotonic one, from the newest snapshot at or
        before it (the first one for earlier times), as trace processor
        converts it."""
        snaps = self.snapshots
        k = bisect.bisect_right([s[0] for s in snaps], mono)
        m, w = snaps[max(k - 1, 0)]
        return w + mono - m


def main():
    texts = "--texts" in sys.argv
    if texts:
        sys.argv.remove("--texts")
    trace = pb.Trace()
    with open(sys.argv[1], "rb") as f:
        trace.ParseFromString(f.read())
    c = Checker()
    for i, p in enumerate(trace.packet):
        c.packet(i, p)
    for uuid, stack in c.stacks.items():
        if stack:
            c.errors.append(f"track {uuid}: {len(stack)} slices never end")
    for f in set(c.flow_out) | set(c.flow_in):
        if c.flow_out[f] != 1 or c.flow_in[f] != 1:
            c.errors.append(f"flow {f}: {c.flow_out[f]} starts, {c.flow_in[f]} ends")
    kinds = Counter(t["kind"] for t in c.tracks.values())
    proc_tracks = [t for t in c.tracks.values() if t["kind"] == "process"]
    out = {
        "packets": len(trace.packet),
        "bytes": len(open(sys.argv[1], "rb").read()),
        "queries": sorted({e[2]["query"] for e in c.event_instants if "query" in e[2]}),
        "paths": sorted({e[2]["path"] for e in c.event_instants if "path" in e[2]})[:50],
        "sequence_ids": sorted(c.seqs),
        "errors": c.errors,
        "primary_clocks": sorted(c.primary),
        "clock_snapshots": len(c.snapshots),
        "track_kinds": dict(kinds),
        "track_names": sorted(t["name"] for t in c.tracks.values() if t["kind"] in ("session", "loss")),
        "process_tracks": sorted([t["pid"], t["start"], t["process_name"]] for t in proc_tracks),
        "slices": dict(c.slices),
        "instants": dict(c.instants),
        "event_instants_by_kind": dict(Counter(e[1] for e in c.event_instants)),
        "tool_slices": c.tool_slices,
        "mcp_slices": c.mcp_slices,
        "wire_slices": c.wire_slices,
        "process_slices": sorted(c.process_slices.values(), key=lambda s: (s["begin"], s["pid"] or 0)),
        "flows": len(c.flow_out),
        "process_tree": c.tree,
        "attributed_events": sum(1 for e in c.event_instants if "attributed_to" in e[2]),
        "flow_ends_on_events": sum(e[5] for e in c.event_instants),
    }
    if len(sys.argv) > 2:
        compare_jsonl(c, sys.argv[2], out)
    if texts:
        out["texts"] = sorted(t for t in c.texts if t)
    json.dump(out, sys.stdout, sort_keys=True)


def compare_jsonl(c, path, out):
    lines = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    # Session-message submissions (kind external_message) sit among the
    # events in jsonl but are not kernel events: the trace has no instant
    # for them. A capture holds them when the run-as user's messaging log
    # has entries in its window (another test messaging as that user).
    lines = [l for l in lines if l.get("kind") != "external_message"]
    out["jsonl_events"] = len(lines)
    bad = []
    for k, line in enumerate(lines):
        if k >= len(c.event_instants):
            bad.append(f"jsonl line {k + 1}: no instant")
            break
        ts, kind, anns, _, _, _ = c.event_instants[k]
        wall = c.wall(ts)
        if (ts, kind, anns.get("pid"), wall) != (line["mono_ns"], line["kind"], line["pid"], rfc3339_ns(line["ts"])):
            bad.append(f"jsonl line {k + 1}: {line['kind']} pid {line['pid']} mono {line['mono_ns']} ts {line['ts']}"
                       f" vs instant {kind} pid {anns.get('pid')} mono {ts} wall {wall}")
    out["jsonl_mismatches"] = bad[:20]
    out["jsonl_mismatch_count"] = len(bad)


if __name__ == "__main__":
    main()
