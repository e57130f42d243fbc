"""OTLP/HTTP request bodies (logs, metrics, traces; protobuf or JSON) as rows of the store's
otel_* tables (store/otel.py writes them).

Both encodings are read through one walker over the JSON shape: a protobuf body is parsed with
opentelemetry-proto's messages and turned into that shape (google.protobuf.json_format), whose
ids are base64, where Claude Code's JSON sends them as hex; `decode` makes both hex, so a record
has one key whatever it came in. What Claude Code varies within one encoding is accepted too:
int64 fields as numbers or strings, doubles without a fraction, fields left out (their default).
Every attribute value is kept as text (see 014_otel.sql), so `"19"` and `19` read the same.
A body that does not parse raises BadBody with the reason the 400 answer gives.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

SIGNALS = ("logs", "metrics", "traces")
_TOP = {"logs": "resourceLogs", "metrics": "resourceMetrics", "traces": "resourceSpans"}
_SCOPED = {"logs": "scopeLogs", "metrics": "scopeMetrics", "traces": "scopeSpans"}
_ITEMS = {"logs": "logRecords", "metrics": "metrics", "traces": "spans"}
_TEMPORALITY = {1: "delta", 2: "cumulative", "AGGREGATION_TEMPORALITY_DELTA": "delta",
                "AGGREGATION_TEMPORALITY_CUMULATIVE": "cumulative"}  # fmt: skip

Row = dict[str, Any]


class BadBody(ValueError):
    """The body is not an OTLP request of its signal: the message says why."""


# --- values -------------------------------------------------------------------------------------


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def value_text(value: Mapping[str, Any] | None) -> str:
    """An OTLP AnyValue as text: strings as they are, numbers as decimals, booleans true/false,
    arrays and maps as JSON."""
    if not value:
        return ""
    if "stringValue" in value:
        return str(value["stringValue"])
    if "intValue" in value:
        return str(int(value["intValue"]))
    if "doubleValue" in value:
        return _number_text(float(value["doubleValue"]))
    if "boolValue" in value:
        return "true" if value["boolValue"] else "false"
    if "bytesValue" in value:
        return str(value["bytesValue"])
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values") or []
        return orjson.dumps([value_text(v) for v in items]).decode()
    if "kvlistValue" in value:
        return orjson.dumps(attributes((value["kvlistValue"] or {}).get("values"))).decode()
    return ""


def attributes(items: Iterable[Mapping[str, Any]] | None) -> dict[str, str]:
    """OTLP KeyValue pairs as {key: text}."""
    return {str(kv.get("key", "")): value_text(kv.get("value")) for kv in items or ()}


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise BadBody(f"not an integer: {str(value)[:40]!r}") from None


def _hash(*parts: Any) -> str:
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


# --- the walk -----------------------------------------------------------------------------------


def _scopes(body: Any, signal: str) -> Iterable[tuple[dict[str, str], str, dict[str, Any]]]:
    """(resource attributes, scope name, item) of every item of the request."""
    if not isinstance(body, dict):
        raise BadBody(f"an OTLP {signal} request is a JSON object with {_TOP[signal]}")
    for resource in body.get(_TOP[signal]) or ():
        if not isinstance(resource, dict):
            raise BadBody(f"{_TOP[signal]} holds objects")
        res = attributes((resource.get("resource") or {}).get("attributes"))
        for scope in resource.get(_SCOPED[signal]) or ():
            name = str((scope.get("scope") or {}).get("name", ""))
            for item in scope.get(_ITEMS[signal]) or ():
                if not isinstance(item, dict):
                    raise BadBody(f"{_ITEMS[signal]} holds objects")
                yield res, name, item


def log_rows(body: Any, ids: Callable[[str], str]) -> list[Row]:
    rows = []
    for res, scope, rec in _scopes(body, "logs"):
        attrs = attributes(rec.get("attributes"))
        text = value_text(rec.get("body"))
        when = _int(rec.get("timeUnixNano")) or _int(rec.get("observedTimeUnixNano"))
        name = attrs.get("event.name") or str(rec.get("eventName") or "") or text.removeprefix("claude_code.")
        trace, span = ids(str(rec.get("traceId") or "")), ids(str(rec.get("spanId") or ""))
        rows.append({
            "id": _hash("log", res, scope, when, name, text, attrs, trace, span),
            "timestamp": when, "event_name": name, "body": text,
            "session_id": attrs.get("session.id", ""), "prompt_id": attrs.get("prompt.id", ""),
            "tool_use_id": attrs.get("tool_use_id", ""), "agent_id": attrs.get("agent_id", ""),
            "user_id": attrs.get("user.id", ""),
            "event_sequence": _int(attrs["event.sequence"]) if attrs.get("event.sequence") else -1,
            "trace_id": trace, "span_id": span, "service_name": res.get("service.name", ""),
            "service_version": res.get("service.version", ""), "scope_name": scope,
            "attributes": attrs, "resource": res,
        })  # fmt: skip
    return rows


def _points(metric: Mapping[str, Any]) -> tuple[str, list[Any], str, bool]:
    """(kind, data points, temporality, monotonic) of one metric."""
    for kind in ("sum", "gauge", "histogram", "exponentialHistogram", "summary"):
        data = metric.get(kind)
        if isinstance(data, dict):
            temporality = _TEMPORALITY.get(data.get("aggregationTemporality", 0), "")
            return kind, list(data.get("dataPoints") or ()), temporality, bool(data.get("isMonotonic"))
    return "", [], "", False


def metric_rows(body: Any, ids: Callable[[str], str]) -> list[Row]:
    del ids  # data points carry no ids of their own
    rows = []
    for res, _, metric in _scopes(body, "metrics"):
        kind, points, temporality, monotonic = _points(metric)
        name, unit = str(metric.get("name", "")), str(metric.get("unit", ""))
        for point in points:
            attrs = attributes(point.get("attributes"))
            if "asDouble" in point:
                value = float(point["asDouble"])
            elif "asInt" in point:
                value = float(_int(point["asInt"]))
            else:
                value = float(point.get("sum") or 0.0)
            start, end = _int(point.get("startTimeUnixNano")), _int(point.get("timeUnixNano"))
            series = orjson.dumps(attrs, option=orjson.OPT_SORT_KEYS).decode()
            rows.append({
                "id": _hash("metric", res, name, series, start, end, value),
                "metric": name, "unit": unit, "kind": kind, "temporality": temporality,
                "monotonic": monotonic,
                "start_time": start, "time": end, "value": value, "count": _int(point.get("count")),
                "session_id": attrs.get("session.id", ""), "series": series, "attributes": attrs,
                "resource": res, "service_name": res.get("service.name", ""),
            })  # fmt: skip
    return rows


def span_rows(body: Any, ids: Callable[[str], str]) -> list[Row]:
    rows = []
    for res, _, span in _scopes(body, "traces"):
        attrs = attributes(span.get("attributes"))
        trace, span_id = ids(str(span.get("traceId") or "")), ids(str(span.get("spanId") or ""))
        start, end = _int(span.get("startTimeUnixNano")), _int(span.get("endTimeUnixNano"))
        status = span.get("status") or {}
        events = [
            {"time": _int(e.get("timeUnixNano")), "name": str(e.get("name", "")),
             "attributes": attributes(e.get("attributes"))}
            for e in span.get("events") or ()
        ]  # fmt: skip
        rows.append({
            "id": f"{trace}:{span_id}", "trace_id": trace, "span_id": span_id,
            "parent_span_id": ids(str(span.get("parentSpanId") or "")), "name": str(span.get("name", "")),
            "kind": _enum(span.get("kind")), "start_time": start, "end_time": end,
            "duration_ms": max(0, end - start) / 1e6, "status_code": _enum(status.get("code")),
            "status_message": str(status.get("message", "")), "session_id": attrs.get("session.id", ""),
            "prompt_id": attrs.get("prompt.id", ""),
            "tool_use_id": attrs.get("tool_use_id") or attrs.get("gen_ai.tool.call.id", ""),
            "agent_id": attrs.get("agent_id", ""), "conversation_id": attrs.get("gen_ai.conversation.id", ""),
            "events": orjson.dumps(events).decode(), "attributes": attrs, "resource": res,
            "service_name": res.get("service.name", ""),
        })  # fmt: skip
    return rows


_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5,
    "STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2,
}  # fmt: skip


def _enum(value: Any) -> int:
    return _KIND_NAMES[value] if isinstance(value, str) and value in _KIND_NAMES else _int(value)


ROWS: dict[str, Callable[[Any, Callable[[str], str]], list[Row]]] = {
    "logs": log_rows,
    "metrics": metric_rows,
    "traces": span_rows,
}


# --- the two encodings --------------------------------------------------------------------------


def _hex(text: str) -> str:
    """A JSON body's id: hex as Claude Code sends it (lower-cased)."""
    return text.lower()


def _b64_hex(text: str) -> str:
    """An id of a protobuf body turned into JSON (base64 there), as hex."""
    return base64.b64decode(text).hex() if text else ""


def _protobuf(signal: str, data: bytes) -> dict[str, Any]:
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    kinds: dict[str, Any] = {
        "logs": ExportLogsServiceRequest,
        "metrics": ExportMetricsServiceRequest,
        "traces": ExportTraceServiceRequest,
    }
    message = kinds[signal]()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise BadBody(f"not an OTLP {signal} protobuf message: {exc}") from None
    shaped: dict[str, Any] = json_format.MessageToDict(message, use_integers_for_enums=True)
    return shaped


def decode(signal: str, data: bytes, protobuf: bool) -> list[Row]:
    """The rows of one request body (uncompressed); BadBody when it does not parse."""
    if protobuf:
        return ROWS[signal](_protobuf(signal, data), _b64_hex)
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadBody(f"not JSON: {exc}") from None
    try:
        return ROWS[signal](body, _hex)
    except (AttributeError, TypeError, ValueError) as exc:
        if isinstance(exc, BadBody):
            raise
        raise BadBody(f"not an OTLP {signal} request: {exc}") from None
