"""`agentwatch otel-export`: every harness's sessions as OpenTelemetry GenAI traces and metrics.

A consumer of GENIE with its own durable (`agentwatch-otel-export`, new events only: the past is
sent with `--since`). Each fetched batch goes through the translation (consumers/otel_spans.py),
the spans it finished are sent with the OpenTelemetry SDK's OTLP/HTTP exporter
(AGENTWATCH_OTLP_EXPORT_URL, headers AGENTWATCH_OTLP_EXPORT_HEADERS as `k=v,k2=v2`), and only then
is the batch acknowledged: a batch the backend did not take is sent again, and span ids derived
from what they stand for make the repeat the same spans. On start the sessions still open are
rebuilt from the stream (what this durable acknowledged in the minute, or twice
AGENTWATCH_LOST_AFTER_S, before its last acknowledgement), without sending again what they
finished; what it had handed out unacknowledged is then sent in order before anything newer.

A session is ended as lost by event time, as the store judges it (consumers/otel_spans.py): once
an event of any session is more than AGENTWATCH_LOST_AFTER_S past its last one. When the bus is
quiet (this durable has nothing pending and nothing came for AGENTWATCH_LOST_AFTER_S), event time
moves on at the clock's pace from there: a publisher that stamped events and sent them seconds
later does not find their sessions ended, and an exporter behind (a backlog, a replay, a loaded
machine) ends sessions on the events alone, so it ends the same ones at the same times as one
that kept up. The metrics (token counts, agent and tool durations) go by the SDK's periodic
reader to the same endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from faststream import FastStream
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsBroker, NatsRouter, PullSub
from nats.aio.msg import Msg
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import Counter, Histogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.re import parse_env_headers

from agentwatch import __version__, config
from agentwatch.bus import fastpull
from agentwatch.bus import streams as bus
from agentwatch.bus.fastpull import ack_all, in_progress_all
from agentwatch.consumers.batch import batch_as_is, raw_batch
from agentwatch.consumers.otel_spans import GEMINI, Point, Span, Tracer
from agentwatch.contract import ALL_SUBJECTS

log = logging.getLogger("agentwatch.otel")

DURABLE = "agentwatch-otel-export"
TICK_S = 5.0
RETRY_S = 2.0
# On start, what the durable acknowledged within this many seconds (at least; and the lost time
# twice) before its last acknowledged message is replayed to rebuild the open sessions: their
# sub-agents' earlier runs and ended sessions included, so a run or a session after the restart
# gets the id it would have had.
REBUILD_S = 60.0
# A fetched batch waits up to this long for more: a span is not late by a second, and fewer, larger
# batches are fewer pull requests, acknowledgement writes and export requests.
FETCH_WINDOW_S = 1.0
# The GenAI conventions' commit this follows (docs/integrations.md).
SCHEMA_URL = "https://opentelemetry.io/schemas/1.41.0"
_STATUS = {"ok": Status(StatusCode.OK), "error": Status(StatusCode.ERROR), "unset": Status(StatusCode.UNSET)}
_UNITS = {"duration": "s", "tokens": "{token}"}


def endpoint(environ: Mapping[str, str]) -> str:
    """The OTLP/HTTP base URL (`/v1/traces` and `/v1/metrics` are added), or ""."""
    return environ.get("AGENTWATCH_OTLP_EXPORT_URL", "").strip().rstrip("/")


def metrics_every(environ: Mapping[str, str]) -> int:
    """Seconds between metric exports (AGENTWATCH_OTLP_EXPORT_METRICS_S); 0: none."""
    text = environ.get("AGENTWATCH_OTLP_EXPORT_METRICS_S", "").strip()
    return 0 if text == "0" else config.number(environ, "AGENTWATCH_OTLP_EXPORT_METRICS_S", 30)


def headers(environ: Mapping[str, str]) -> dict[str, str]:
    return dict(parse_env_headers(environ.get("AGENTWATCH_OTLP_EXPORT_HEADERS", ""), liberal=True))


def consumer_config(environ: Mapping[str, str] = os.environ) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=DURABLE,
        ack_policy=JsAckPolicy.EXPLICIT,
        ack_wait=bus.ack_wait(environ),
        deliver_policy=DeliverPolicy.NEW,
        max_ack_pending=bus.MAX_ACK_PENDING,
    )


async def ensure_consumer(js: JetStreamContext, environ: Mapping[str, str] = os.environ) -> None:
    """The exporter's durable, made before it says it is ready: every event published after is sent."""
    try:
        await js.consumer_info(bus.STREAM_NAME, DURABLE)
    except NotFoundError:
        await js.add_consumer(bus.STREAM_NAME, consumer_config(environ))


class Exporter:
    """The translation and the SDK's exporters: envelopes in, spans and metric points out."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        url = endpoint(environ)
        if not url:
            raise ValueError("AGENTWATCH_OTLP_EXPORT_URL is not set: where should the spans go?")
        self.url = url
        self.tracer = Tracer(
            lost_after_s=float(config.lost_after_s(environ)),
            content=config.flag(environ, "AGENTWATCH_OTLP_EXPORT_CONTENT"),
        )
        self.resource = Resource.create(
            {"service.name": "agentwatch", "service.version": __version__}, schema_url=SCHEMA_URL
        )
        self.scope = InstrumentationScope("agentwatch", __version__, SCHEMA_URL)
        auth = headers(environ)
        self.spans = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers=auth, timeout=10)
        every = metrics_every(environ)
        readers = (  # (0: no metrics, for a backend that takes traces only)
            [
                PeriodicExportingMetricReader(
                    OTLPMetricExporter(endpoint=f"{url}/v1/metrics", headers=auth, timeout=10),
                    export_interval_millis=float(every * 1000),
                )
            ]
            if every > 0
            else []
        )
        self.meters = MeterProvider(resource=self.resource, metric_readers=readers)
        self.metrics_on = bool(readers)
        self._meter = self.meters.get_meter("agentwatch", __version__, schema_url=SCHEMA_URL)
        self._instruments: dict[str, Counter | Histogram] = {}
        self.sent = 0
        self.taken = 0  # the highest stream sequence translated by this process
        self.closed = False
        self.events = 0
        self.failures = 0
        self.came = time.monotonic()  # when the last batch came (the newest event time with it)
        self.ready = asyncio.Event()  # set once the open sessions are rebuilt (OtelService.start)

    # -- the SDK's objects ---------------------------------------------------------------------

    def readable(self, span: Span) -> ReadableSpan:
        context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=TraceFlags(1))
        parent = (
            SpanContext(span.trace_id, span.parent_id, is_remote=False, trace_flags=TraceFlags(1))
            if span.parent_id
            else None
        )
        operation = span.attributes.get("gen_ai.operation.name")
        kind = SpanKind.CLIENT if operation == "chat" or span.root else SpanKind.INTERNAL
        return ReadableSpan(
            name=span.name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=span.attributes,
            kind=kind,
            status=_STATUS[span.status],
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=self.scope,
        )

    def send(self, spans: Sequence[Span]) -> bool:
        """Export `spans` (blocking: call it off the event loop); True when the backend took them."""
        if not spans:
            return True
        result = self.spans.export([self.readable(s) for s in spans])
        if result is SpanExportResult.SUCCESS:
            self.sent += len(spans)
            return True
        self.failures += 1
        return False

    def record(self) -> None:
        """The metric points the translation made since last time, into the SDK's instruments
        (the counters' summed by instrument and attributes first: one call each per batch)."""
        points, self.tracer.points = self.tracer.points, []
        if not self.metrics_on:
            return
        sums: dict[tuple[str, tuple[tuple[str, Any], ...]], list[Any]] = {}
        for p in points:
            instrument = self._instrument(p)
            if isinstance(instrument, Histogram):
                instrument.record(p.value, p.attributes)
                continue
            key = (p.name, tuple(p.attributes.items()))
            if key in sums:
                sums[key][1] += int(p.value)
            else:
                sums[key] = [instrument, int(p.value), p.attributes]
        for instrument, value, attributes in sums.values():
            instrument.add(value, attributes)

    def _instrument(self, p: Point) -> Counter | Histogram:
        found = self._instruments.get(p.name)
        if found is None:
            if p.name.endswith(".duration"):
                found = self._meter.create_histogram(p.name, unit=_UNITS["duration"])
            else:
                found = self._meter.create_counter(p.name, unit=_UNITS["tokens"])
            self._instruments[p.name] = found
        return found

    # -- the flow ------------------------------------------------------------------------------

    def translate(self, msgs: Sequence[tuple[str, bytes]]) -> list[Span]:
        """The spans a batch of (subject, body) finished. Without content only an envelope's
        headline is parsed: `data` comes last on the wire (contract.ENVELOPE_FIELDS) and a
        quote inside a string is escaped, so the first `,"data":` is the top-level one; usage
        records, whose tokens follow their `data`, are parsed whole."""
        out: list[Span] = []
        take = self.tracer.take
        whole = self.tracer.content
        self.came = time.monotonic()
        for subject, body in msgs:
            cut = -1 if whole or subject.endswith(".usage") else body.find(b',"data":')
            try:
                env = orjson.loads(body[:cut] + b"}" if cut > 0 else body)
            except orjson.JSONDecodeError:
                continue
            if type(env) is dict:
                if cut > 0 and env.get("event") == "PostModelRequest" and env.get("harness") == GEMINI:
                    with contextlib.suppress(orjson.JSONDecodeError):  # (its finish reason is in `data`)
                        env = orjson.loads(body)
                self.events += 1
                out.extend(take(env))
        return out

    async def deliver(self, spans: list[Span], msgs: list[Msg] | None = None) -> None:
        """Send `spans`, retrying until the backend takes them (the bus keeps the rest meanwhile,
        and is told the batch `msgs` is still being worked on, so it is not delivered again);
        raises once stopping, so the batch is not acknowledged and comes again at the next start."""
        while not await asyncio.to_thread(self.send, spans):
            if self.closed:
                raise RuntimeError("otel-export stopped before the backend took the spans")
            log.warning(
                "otel-export: the backend at %s did not take %d spans; retrying", self.url, len(spans)
            )
            if msgs:
                await in_progress_all(msgs)
            await asyncio.sleep(RETRY_S)
        self.record()

    async def take(self, msgs: list[Msg]) -> None:
        """A fetched batch: translated, its spans sent, then acknowledged. A message this process
        translated already (delivered again while the backend kept its export waiting past the
        ack wait) is acknowledged without being translated twice: deliveries come in stream order,
        so it is one at or below the highest sequence taken."""
        await self.ready.wait()
        fresh: list[tuple[str, bytes]] = []
        if msgs and _sequence(msgs[0]) > self.taken:  # the usual batch: all new (one look each end)
            fresh = [(m.subject, m.data) for m in msgs]
            self.taken = max(self.taken, _sequence(msgs[-1]))
        else:
            for m in msgs:
                seq = _sequence(m)
                if seq > self.taken:
                    fresh.append((m.subject, m.data))
                    self.taken = seq
        await self.deliver(self.translate(fresh), msgs)
        await ack_all(msgs)

    async def lost(self, js: JetStreamContext) -> None:
        """On a quiet bus, event time moved on by the time since the newest event came less the
        lost time, and the sessions lost by then ended; nothing while this durable has messages
        pending or in hand."""
        newest = self.tracer.newest_ns
        if not newest or not self.tracer.sessions:
            return
        info = await js.consumer_info(bus.STREAM_NAME, DURABLE)
        if info.num_pending or info.num_ack_pending:
            return  # behind: the events end the sessions they outlive
        quiet_ns = int((time.monotonic() - self.came - self.tracer.lost_after_s) * 1e9)
        if quiet_ns > 0 and self.tracer.newest_ns == newest:
            await self.deliver(self.tracer.tick(newest + quiet_ns))

    async def rebuild(self, js: JetStreamContext) -> int:
        """What was open when this durable stopped, from the stream: the messages it acknowledged
        in the rebuild window before the last of them, replayed without sending (their finished
        spans were sent); then `catch_up`. Returns the number replayed."""
        try:
            info = await js.consumer_info(bus.STREAM_NAME, DURABLE)
            last = int(info.ack_floor.stream_seq or 0)
            handed = int(info.delivered.stream_seq or 0)
            msgs = await bus.read_range(js, 1, last, since=await self._window(js, last)) if last else []
        except Exception as exc:  # no durable yet, or the bus away: start empty
            log.warning("otel-export: nothing rebuilt from the stream (%s)", exc)
            return 0
        for msg in msgs:
            with contextlib.suppress(orjson.JSONDecodeError):
                env = orjson.loads(msg.data)
                if type(env) is dict:
                    self.tracer.replay(env)
        if handed > last:
            await self.catch_up(js, last + 1, handed)
        return len(msgs)

    async def _window(self, js: JetStreamContext, last: int) -> float:
        since = time.time()
        with contextlib.suppress(NotFoundError):  # (gone from the stream: from now, then)
            taken = (await js.get_msg(bus.STREAM_NAME, last)).time
            since = taken.timestamp() if taken else since
        return since - max(REBUILD_S, 2 * self.tracer.lost_after_s) - TICK_S

    async def catch_up(self, js: JetStreamContext, first: int, last: int) -> None:
        """The messages `first`..`last` the durable handed out and saw no acknowledgement of (an
        exporter stopped with them in hand), translated and sent now, in order: the bus would
        deliver them again only after their ack wait, behind newer ones, and a session's events
        out of order are another session. Their new deliveries are then acknowledged as taken."""
        try:
            msgs = await bus.read_range(js, first, last)
        except Exception as exc:  # (then they come again, later: as before)
            log.warning("otel-export: the messages in hand at the last stop were not read (%s)", exc)
            return
        await self.deliver(self.translate([(m.subject, m.data) for m in msgs]))
        self.taken = max(self.taken, last)

    def shutdown(self) -> None:
        self.closed = True
        with contextlib.suppress(Exception):
            self.meters.shutdown(timeout_millis=5000)
        self.spans.shutdown()  # type: ignore[no-untyped-call]


def _sequence(msg: Msg) -> int:
    """The stream sequence of a JetStream delivery (from its reply subject; 0 for another message)."""
    try:
        return int(msg.metadata.sequence.stream)
    except Exception:
        return 0


def otel_router(
    exporter: Exporter, *, fetch_batch: int = 2000, fetch_timeout: float = FETCH_WINDOW_S
) -> NatsRouter:
    """The exporter's FastStream subscriber: its own durable pull consumer of GENIE."""
    fastpull.install()
    router = NatsRouter()

    @router.subscriber(
        ALL_SUBJECTS,
        stream=JStream(bus.STREAM_NAME, subjects=[ALL_SUBJECTS], declare=False),
        durable=DURABLE,
        config=consumer_config(),
        pull_sub=PullSub(batch_size=fetch_batch, timeout=fetch_timeout, batch=True),
        ack_policy=AckPolicy.MANUAL,
        parser=batch_as_is,
        decoder=raw_batch,
        title="otel-export",
        description="Every envelope as OpenTelemetry GenAI spans and metrics, to an OTLP endpoint.",
    )
    async def export(batch: Any) -> None:
        await exporter.take(batch)

    return router


async def lost_ticker(exporter: Exporter, js: JetStreamContext, every: float = TICK_S) -> None:
    while True:
        await asyncio.sleep(every)
        try:
            await exporter.lost(js)
        except Exception:  # one bad tick never stops the exporter
            log.exception("otel-export: tick failed")


class OtelService:
    """The exporter in a collector's life: rebuilt on start, lost sessions ended on a timer, the
    SDK's exporters flushed on stop."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter
        self._task: asyncio.Task[None] | None = None

    async def start(self, js: JetStreamContext) -> None:
        """The rebuild and then the lost timer, in a task: the collector is ready meanwhile (a
        backend away does not hold it), and batches fetched before the rebuild ends wait for it."""
        self._task = asyncio.create_task(self._run(js), name="agentwatch-otel-lost")

    async def _run(self, js: JetStreamContext) -> None:
        try:
            rebuilt = await self.exporter.rebuild(js)
            log.info("otel-export: %d messages replayed to rebuild the open sessions", rebuilt)
        finally:
            self.exporter.ready.set()
        every = min(TICK_S, max(self.exporter.tracer.lost_after_s / 8, 0.5))
        await lost_ticker(self.exporter, js, every)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.to_thread(self.exporter.shutdown)


def banner_line(environ: Mapping[str, str]) -> list[str]:
    url = endpoint(environ)
    return (
        [f"otel export: spans and metrics to {config.display_url(url)} (`agentwatch otel-export`)"]
        if url
        else []
    )


def attach(app: FastStream, broker: NatsBroker, environ: Mapping[str, str], *, on: bool = True) -> FastStream:
    """The exporter's subscriber on `broker` and its life in `app`'s, when AGENTWATCH_OTLP_EXPORT_URL
    is set (`agentwatch up`, `agentwatch otel-export`); `app` as it was otherwise."""
    if not (on and endpoint(environ)):
        return app
    service = OtelService(Exporter(environ))
    router = otel_router(service.exporter)
    mine = list(router.subscribers)
    broker.include_router(router)

    @app.after_startup
    async def started() -> None:
        await service.start(broker.config.connection_state.stream)

    @app.on_shutdown
    async def stopping() -> None:
        for sub in mine:  # no more fetches; what is in hand is sent (or, unacknowledged, sent again)
            await sub.stop()
        await service.stop()
        log.info("otel-export: %d spans sent for %d events", service.exporter.sent, service.exporter.events)

    return app
