"""`agentwatch otel-export`: sessions as OpenTelemetry GenAI traces and metrics, to any OTLP backend.

Alone it follows the bus with its own durable (consumers/otel_export.py); `agentwatch up` runs it
beside the store when AGENTWATCH_OTLP_EXPORT_URL is set. With `--since` it sends the stored history
instead, read through the read side (cli/sources.History) in time order, at most `--rate` events a
second, with its progress on stderr, and ends every session still open at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentwatch import config
from agentwatch.cli.errors import CliError, missing_extra, require

if TYPE_CHECKING:
    from agentwatch.cli.sources import History

PAGE = 5000
# The columns of an envelope the translation reads, from the events table and from usage.
_EVENTS = """
SELECT id, timestamp AS at, event, kind, agent, team, session_id, agent_id,
       agent_type, tool_name, tool_use_id, host, harness, duration_ms, data,
       '' AS model, '' AS message_id, '' AS request_id, 0 AS input_tokens, 0 AS output_tokens,
       0 AS cache_read_input_tokens, 0 AS cache_creation_input_tokens, 0 AS reasoning_tokens,
       '' AS subagent_id
FROM events FINAL WHERE (timestamp, id) > ({ts:DateTime64(3)}, {id:String})
UNION ALL
SELECT envelope_id, timestamp, 'Usage', 'usage', agent, team, session_id, agent_id,
       agent_type, '', '', host, harness, NULL, '', model, message_id, request_id, input_tokens,
       output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, subagent_id
FROM usage FINAL WHERE (timestamp, envelope_id) > ({ts:DateTime64(3)}, {id:String})
"""
# (constant text: the page's bounds are query parameters)
_PAGE_SQL = "SELECT * FROM (" + _EVENTS + ") ORDER BY at, id LIMIT " + str(PAGE)  # noqa: S608


def history_envelopes(history: History, since: str) -> Iterator[dict[str, Any]]:
    """The stored events and usage records since `since`, as envelopes, oldest first, a page at a time."""
    after_ts, after_id = since, ""
    while True:
        answer = history.query(_PAGE_SQL, {"ts": after_ts, "id": after_id})
        rows = answer.dicts()
        for row in rows:
            row["timestamp"] = row.pop("at").isoformat()
            yield row
        if len(rows) < PAGE:
            return
        last = datetime.fromisoformat(rows[-1]["timestamp"])
        after_ts, after_id = last.strftime("%Y-%m-%d %H:%M:%S.%f")[:23], str(rows[-1]["id"])


def backfill(environ: Mapping[str, str], since: str, rate: int) -> int:
    """Send the history since `since`; returns the number of spans sent."""
    from agentwatch.cli.sources import History
    from agentwatch.consumers.otel_export import Exporter

    exporter = Exporter(environ)  # (lost is judged on the history's own time, as live)
    history = History(environ)
    started = time.monotonic()
    done = 0
    pending: list[Any] = []
    try:
        for env in history_envelopes(history, since):
            pending.extend(exporter.tracer.take(env))
            done += 1
            if done % 500 == 0:
                _flush(exporter, pending)
                _progress(done, exporter.sent, started)
                # at most `rate` events a second: wait for the time this many should have taken
                time.sleep(max(done / rate - (time.monotonic() - started), 0.0))
        pending.extend(exporter.tracer.close_all(time.time_ns()))
        _flush(exporter, pending)
        _progress(done, exporter.sent, started)
        print(file=sys.stderr)
    finally:
        history.close()
        exporter.shutdown()
    return exporter.sent


def _flush(exporter: Any, spans: list[Any]) -> None:
    for attempt in range(5):
        if exporter.send(spans):
            exporter.record()
            spans.clear()
            return
        time.sleep(1 + attempt)
    raise CliError(f"the OTLP backend at {config.display_url(exporter.url)} did not take the spans")


def _progress(events: int, spans: int, started: float) -> None:
    took = max(time.monotonic() - started, 1e-6)
    print(
        f"\r{events:,} events, {spans:,} spans sent ({events / took:,.0f} events/s)", end="", file=sys.stderr
    )


def cmd_otel_export(args: argparse.Namespace) -> int:
    require("otel-export", "consumers", "faststream", "opentelemetry")
    environ = os.environ
    if not environ.get("AGENTWATCH_OTLP_EXPORT_URL", "").strip():
        raise CliError(
            "set AGENTWATCH_OTLP_EXPORT_URL to the OTLP/HTTP endpoint (e.g. http://127.0.0.1:6006)"
        )
    if args.since:
        from agentwatch.cli.cost import parse_since
        from agentwatch.store.answer import HistoryUnreachable, QueryFailed

        when = parse_since(args.since)
        try:
            sent = backfill(environ, when, max(int(args.rate), 1))
        except (HistoryUnreachable, QueryFailed) as exc:
            raise CliError(f"cannot read the history: {exc}") from None
        print(f"{sent} spans sent for the history since {when} UTC")
        return 0
    from agentwatch.cli.pipeline import require_bus

    try:
        from agentwatch.consumers import otel_run
    except ImportError as exc:
        raise missing_extra(exc, "otel-export", "consumers") from None
    url = config.nats_url(environ)
    require_bus(url)
    otel_run.run(
        url, environ, banner=[f"agentwatch otel-export on {config.display_urls(url)}"], verbose=args.verbose
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = sub.add_parser(
        "otel-export",
        help="send every session as OpenTelemetry GenAI traces and metrics to an OTLP endpoint",
        description="Follow the bus and send every harness's sessions, sub-agents, tool calls and model "
        "requests as OpenTelemetry GenAI spans and metrics to AGENTWATCH_OTLP_EXPORT_URL (OTLP/HTTP). "
        "With --since, send the stored history instead.",
    )
    cmd.add_argument(
        "--since", metavar="WHEN", help="send the stored history since: 30m, 12h, 7d, or a date (UTC)"
    )
    cmd.add_argument("--rate", type=int, default=2000, help="with --since: at most this many events/s (2000)")
    cmd.add_argument("-v", "--verbose", action="store_true", help="log more")
    cmd.set_defaults(func=cmd_otel_export)
