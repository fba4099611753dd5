"""Decodes agentsight's OTLP output with the PyPI opentelemetry-proto package
(an independent decoder) and prints one JSON summary for the Rust tests.

    decode.py json FILE.jsonl      # OTLP File Exporter lines (TracesData)
    decode.py proto BODY...        # OTLP/HTTP protobuf bodies (ExportTraceServiceRequest)

OTLP/JSON writes trace and span ids as hex, where protobuf's canonical JSON
mapping (json_format) expects base64: they are converted first.
"""

import base64
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

ID_KEYS = ("traceId", "spanId", "parentSpanId")


def hex_ids_to_base64(line_obj):
    for rs in line_obj.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ID_KEYS:
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return line_obj


def any_value(v):
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "int_value":
        return v.int_value
    if kind == "double_value":
        return v.double_value
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind is None:
        return None
    raise ValueError(f"unexpected AnyValue {kind}")


def attrs(kvs):
    out = {}
    for kv in kvs:
        if kv.key in out:
            raise ValueError(f"duplicate attribute {kv.key}")
        out[kv.key] = any_value(kv.value)
    return out


def summarize(resource_spans_lists):
    batches, spans = [], []
    for resource_spans in resource_spans_lists:
        for rs in resource_spans:
            batch = {
                "schema_url": rs.schema_url,
                "resource": attrs(rs.resource.attributes),
                "scopes": [],
            }
            for ss in rs.scope_spans:
                batch["scopes"].append(
                    {"name": ss.scope.name, "version": ss.scope.version, "schema_url": ss.schema_url}
                )
                for s in ss.spans:
                    spans.append(
                        {
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent_span_id": s.parent_span_id.hex(),
                            "name": s.name,
                            "kind": trace_pb2.Span.SpanKind.Name(s.kind),
                            "start": s.start_time_unix_nano,
                            "end": s.end_time_unix_nano,
                            "attributes": attrs(s.attributes),
                            "events": [
                                {"name": e.name, "time": e.time_unix_nano, "attributes": attrs(e.attributes)}
                                for e in s.events
                            ],
                            "dropped_events": s.dropped_events_count,
                            "status": trace_pb2.Status.StatusCode.Name(s.status.code),
                        }
                    )
            batches.append(batch)
    return {"batches": batches, "spans": spans}


def main():
    mode, paths = sys.argv[1], sys.argv[2:]
    lists = []
    if mode == "json":
        for path in paths:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.endswith("\n"):
                        raise ValueError(f"{path}:{n}: last line has no newline")
                    data = trace_pb2.TracesData()
                    json_format.Parse(json.dumps(hex_ids_to_base64(json.loads(line))), data)
                    lists.append(data.resource_spans)
    elif mode == "proto":
        for path in paths:
            with open(path, "rb") as f:
                req = trace_service_pb2.ExportTraceServiceRequest.FromString(f.read())
            lists.append(req.resource_spans)
    else:
        raise SystemExit(f"unknown mode {mode}")
    json.dump(summarize(lists), sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
