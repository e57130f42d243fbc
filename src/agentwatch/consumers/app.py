"""The collector's FastStream application: broker, the store and query routers, lifespan.

This module only wires; each concern lives in its router module (store.py, query.py).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from faststream import FastStream
from faststream.nats import NatsBroker

from agentwatch import config
from agentwatch.bus import fastpull
from agentwatch.bus import streams as bus
from agentwatch.consumers.alerts import FETCH_WINDOW_S, Watchdog, alerts_router, rules_path
from agentwatch.consumers.metrics import Metrics
from agentwatch.consumers.otel_export import attach as attach_otel
from agentwatch.consumers.otel_export import banner_line as otel_line
from agentwatch.consumers.otlp import OtlpReceiver
from agentwatch.consumers.query import Readers, query_router
from agentwatch.consumers.store import (
    STORE_FETCH_S,
    StoreWriter,
    advisory_router,
    insert_spacing,
    store_router,
)
from agentwatch.store import client as clickhouse
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.writes import insert_batch, insert_new

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

log = logging.getLogger("agentwatch")

# Stopping: seconds for the pull subscriptions' open requests to end and what they brought to be
# handed over, and in all, with writing and acknowledging it (docs/collector.md states it).
FETCH_CLOSE_S = 3.0
STOP_S = 15.0
# Objects allocated (net) between two young-generation passes of the garbage collector.
GC_THRESHOLD = 100_000


@dataclass
class Collector:
    app: FastStream
    broker: NatsBroker
    writer: StoreWriter
    store_client: Client
    readers: Readers
    applied: list[str]
    watchdog: Watchdog | None = None
    metrics: Metrics | None = None
    otlp: OtlpReceiver | None = None


def build(
    nats_url: str,
    clickhouse_url: str,
    environ: Mapping[str, str] = os.environ,
    *,
    status: TextIO | None = None,
    name: str = "agentwatch-store",
    store: bool = True,
    alerts: bool = True,
) -> Collector:
    """Connect ClickHouse (applying migrations) and wire the store and query service, and the
    watchdog, on NATS (`store=False`: the watchdog alone)."""
    store_client = clickhouse.connect(clickhouse_url)
    applied = apply_migrations(store_client, config.number(environ, "AGENTWATCH_RETENTION_DAYS", 0))
    readers = Readers.of(clickhouse_url, environ)
    closing = False

    async def _on_disconnect() -> None:
        if not closing:  # closing the connection on shutdown is no news
            log.warning("disconnected from NATS; reconnecting")

    broker = NatsBroker(
        **broker_options(config.nats_options(nats_url, environ, name=name, role=config.STORE)),
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        logger=log,
        disconnected_cb=_on_disconnect,
        reconnected_cb=_on_reconnect,
    )

    metrics, otlp = _doors(environ, clickhouse_url) if store else (None, None)
    writer = StoreWriter(
        store_client,
        insert=metrics.timed(insert_new) if metrics else insert_batch,
        spacing_seconds=insert_spacing(environ),
    )
    durable = bus.STORE_DURABLE if store else bus.ALERTS_DURABLE
    watchdog = Watchdog(clickhouse.connect(clickhouse_url), environ, durable=durable) if alerts else None
    _subscribe(broker, writer if store else None, watchdog, readers)
    app = attach_otel(FastStream(broker, logger=log), broker, environ, on=store)  # when its URL is set
    reporter: list[asyncio.Task[None]] = []

    @app.after_startup
    async def started() -> None:
        # What start-up built (modules, FastStream, pydantic, chDB bindings) stays for the life of
        # the process: keep it out of the garbage collector's full passes, which otherwise walk
        # all of it every few hundred thousand allocations (tens of milliseconds each, on the
        # event loop's thread: about a microsecond per stored event).
        gc.collect()
        gc.freeze()
        # The messages held between fetch and acknowledgement (up to MAX_HELD) come and go by the
        # tens of thousands: a young-generation pass every 700 of them walked the held ones over
        # and over (0.2 to 0.3 s of CPU per 100,000 events). Nearly everything is freed by its
        # reference count; a pass every 100,000 objects more still collects the rare cycles.
        gc.set_threshold(GC_THRESHOLD, 10, 10)
        writer.start(lambda: broker.config.connection_state.stream, environ)
        if metrics is not None:
            metrics.attach(writer, lambda: consumer_info(broker), clickhouse_url)
        if watchdog is not None:
            await watchdog.start(broker)
        if status is not None and store:
            reporter.append(asyncio.create_task(_report(broker, writer, status)))

    @app.on_shutdown
    async def stopping() -> None:
        nonlocal closing
        closing = True
        for task in reporter:
            task.cancel()
        await stop_consuming(broker, writer)
        if watchdog is not None:
            await watchdog.stop()
            watchdog.client.close()
        if status is not None and store:
            s = writer.stats
            summary = f"{s.stored} events and {s.messages} messages stored, {s.dead_letters} dead letters"
            summary += f"; {s.usage} usage records stored" if s.usage else ""
            print(f"\nstopped: {summary}", file=status, flush=True)

    return Collector(app, broker, writer, store_client, readers, applied, watchdog, metrics, otlp)


def _subscribe(
    broker: NatsBroker, writer: StoreWriter | None, watchdog: Watchdog | None, readers: Readers
) -> None:
    """The store's subscribers (with a `writer`) and the watchdog's. Beside the store the watchdog
    sees the store's deliveries (one fetch, parse and acknowledgement per event for both: its own
    durable doubled them, a third of the event loop's time and half of nats-server's); alone, it
    reads its own durable."""
    if writer is None:
        if watchdog is not None:
            broker.include_router(alerts_router(watchdog))
        return
    watch = watchdog.see if watchdog is not None else None
    # The watchdog's fetch window when it reads the store's fetches: an event waits that long at
    # most before its rules see it.
    window = FETCH_WINDOW_S if watchdog is not None else STORE_FETCH_S
    broker.include_router(store_router(writer, watch=watch, fetch_timeout=window))
    broker.include_router(advisory_router(writer))
    broker.include_router(query_router(readers))


def _doors(environ: Mapping[str, str], clickhouse_url: str) -> tuple[Metrics | None, OtlpReceiver | None]:
    """/metrics and the OTLP receiver, as configured (each may be off)."""
    metrics = Metrics.from_settings(environ)
    return metrics, OtlpReceiver.from_settings(environ, clickhouse_url, metrics)


def serve_doors(collector: Collector, environ: Mapping[str, str]) -> list[str]:
    """Bind /metrics and the OTLP receiver; the banner's lines for them. An address that is taken
    stops the collector when the setting named it (CollectorError), and at the default leaves that
    door closed, said on its line (a second collector on this machine, say)."""
    lines = []
    for name, door, setting in (
        ("metrics", collector.metrics, "AGENTWATCH_METRICS_ADDR"),
        ("otlp", collector.otlp, "AGENTWATCH_OTLP_ADDR"),
    ):
        if door is None:
            continue
        try:
            url = door.listen()
        except OSError as exc:
            where = f"{door.host}:{door.port}"
            if environ.get(setting, "").strip():
                close_doors(collector)
                raise CollectorError(f"cannot listen on {where} ({exc}): change {setting}") from None
            lines.append(f"{name + ':':<12} not served: {where} is in use ({exc.strerror}); set {setting}")
            continue
        what = (
            "Prometheus"
            if name == "metrics"
            else "OTLP/HTTP: Claude Code's telemetry, `hooks install --otel`"
        )
        lines.append(f"{name + ':':<12} {url} ({what})")
    return lines


def close_doors(collector: Collector) -> None:
    for door in (collector.otlp, collector.metrics):
        if door is not None:
            door.close()


async def stop_consuming(broker: NatsBroker, writer: StoreWriter, seconds: float = STOP_S) -> bool:
    """Stop asking for messages; hand what was fetched to the writer and the watchdog; write and
    acknowledge it while the connection is still open, so a restart finds nothing in flight.
    Bounded by `seconds` in all: what ClickHouse did not take by then is handed back to the
    stream (delivered again at once). True when everything fetched was written."""
    from nats.js.client import JetStreamContext

    deadline = time.monotonic() + seconds
    subs = (getattr(sub, "subscription", None) for sub in broker.subscribers)
    pulls = [s for s in subs if isinstance(s, JetStreamContext.PullSubscription)]
    await fastpull.close(pulls, min(FETCH_CLOSE_S, seconds))
    for sub in broker.subscribers:
        await sub.stop()
    return await writer.stop(max(deadline - time.monotonic(), 1.0))


def broker_options(opts: dict[str, Any]) -> dict[str, Any]:
    """config.nats_options as FastStream takes them: credentials and TLS as one `security` object
    (FastStream deprecates nats-py's own keyword arguments for them)."""
    from faststream.nats import NatsCredentials, NatsNKey, NatsSecurity, NatsToken, NatsUserPassword

    opts = dict(opts)
    tls = {"ssl_context": opts.pop("tls")} if "tls" in opts else {}
    security: NatsSecurity | None = None
    if "user_credentials" in opts:
        security = NatsCredentials(opts.pop("user_credentials"), **tls)
    elif "nkeys_seed" in opts:
        security = NatsNKey(opts.pop("nkeys_seed"), **tls)
    elif "user" in opts:
        security = NatsUserPassword(opts.pop("user"), opts.pop("password"), **tls)
    elif "token" in opts:
        security = NatsToken(opts.pop("token"), **tls)
    elif tls:
        security = NatsSecurity(**tls)
    for key in ("user", "password", "token", "user_credentials", "nkeys_seed"):
        opts.pop(key, None)  # a creds file or NKEY takes the place of a URL's user or token
    return {**opts, "security": security}


async def _on_reconnect() -> None:
    log.warning("reconnected to NATS")


async def consumer_info(broker: NatsBroker) -> Any:
    """JetStream's ConsumerInfo of the store's durable consumer (raises when it cannot be asked)."""
    js: Any = broker.config.connection_state.stream
    return await js.consumer_info(bus.STREAM_NAME, bus.STORE_DURABLE)


async def consumer_pending(broker: NatsBroker) -> tuple[int, int] | None:
    """(messages not yet delivered, delivered but not acked) of the store's durable consumer."""
    try:
        info = await consumer_info(broker)
    except Exception:
        return None
    return int(info.num_pending or 0), int(info.num_ack_pending or 0)


async def _report(broker: NatsBroker, writer: StoreWriter, out: TextIO) -> None:
    """A live one-line status: events/s, stored, pending, errors."""
    tty = out.isatty()
    last_stored, last_t = 0, time.monotonic()
    pending: tuple[int, int] | None = None
    tick = 0
    while True:
        await asyncio.sleep(1.0)
        tick += 1
        if tick % 2 == 1:
            pending = await consumer_pending(broker)
        s = writer.stats
        now = time.monotonic()
        rate = (s.stored - last_stored) / max(now - last_t, 1e-6)
        last_stored, last_t = s.stored, now
        waiting = "?" if pending is None else f"{pending[0] + pending[1] + writer.backlog:,}"
        errors = s.insert_failures + s.dead_letters
        line = (
            f"{rate:>8,.0f} events/s | stored {s.stored:,} events, {s.messages:,} messages, "
            f"{s.usage:,} usage | "
            f"pending {waiting} | errors {errors}"
        )
        if s.last_error:
            line += f" (last: {s.last_error[:60]})"
        if tty:
            print("\r" + line.ljust(110), end="", file=out, flush=True)
        elif tick % 10 == 0:
            print(line, file=out, flush=True)


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def events_line(client: Any) -> str:
    """The banner's word on events: how many the store already holds, or how to bring some."""
    try:
        held = int(client.command("SELECT count() FROM events"))
    except Exception:  # a store that cannot say is no reason not to start
        held = 0
    if held:
        return f"events:      {held:,} stored already; `agentwatch` opens the dashboard on them"
    return "events:      register the hook with `agentwatch hooks install`, or try `agentwatch demo`"


class CollectorError(Exception):
    """The collector could not start; the message says what to do."""


def run(
    nats_url: str,
    environ: Mapping[str, str],
    *,
    banner: list[str],
    verbose: bool,
    started_at: float | None = None,
    out: TextIO = sys.stdout,
    store: bool = True,
    alerts: bool = True,
    at_start: Callable[[], list[str]] | None = None,
) -> None:
    """Set up the stream, open ClickHouse, print what runs where, and serve until interrupted
    (`store=False`: the watchdog alone, `agentwatch alerts run`; `alerts=False`: the store without
    a watchdog, `agentwatch store --no-watchdog`). `at_start` runs once the stream is there and
    before the store reads it (`up` sends the spool); its lines join the banner."""
    setup_logging(verbose)
    ch_url = config.clickhouse_url(environ)
    try:
        how = asyncio.run(bus.prepare_stream(nats_url, environ, watchdog_alone=not store))
    except Exception as exc:
        raise CollectorError(
            f"cannot set up the GENIE stream on {config.display_urls(nats_url)}: {exc}"
        ) from None
    try:
        collector = build(nats_url, ch_url, environ, status=out, store=store, alerts=alerts)
    except Exception as exc:
        raise CollectorError(f"cannot open ClickHouse at {config.display_url(ch_url)}: {exc}") from None
    schema = f"applied {', '.join(collector.applied)}" if collector.applied else "up to date"
    try:
        served = serve_doors(collector, environ)
    except CollectorError:
        collector.store_client.close()
        collector.readers.close()
        raise
    early = at_start() if at_start is not None else []
    lines = [
        *banner,
        f"stream:      GENIE on genie.> ({how}; JetStream de-duplicates by Nats-Msg-Id)",
        f"clickhouse:  {config.display_url(ch_url)} (schema {schema})",
        *(
            [
                'queries:     agentwatch sql "SELECT ..."   (request/reply on agentwatch.query)',
                events_line(collector.store_client),
            ]
            if store
            else []
        ),
        f"alerts:      rules in {rules_path(environ)}; alerts on agentwatch.alert.> (`agentwatch alerts`)"
        if alerts
        else "alerts:      no watchdog here (--no-watchdog); `agentwatch alerts run` watches the bus",
        *served,
        *otel_line(environ),
        *early,
    ]

    @collector.app.after_startup
    async def ready() -> None:
        """What runs where, once it does: the subscribers are on the bus (a question asked on
        the last line's word is answered), so "ready" is true when it is said."""
        done = [] if started_at is None else [f"ready in:    {time.monotonic() - started_at:.1f}s"]
        for line in [*lines, *done, "Ctrl-C stops; the last batch is written before exit."]:
            print(line, file=out, flush=True)

    try:
        asyncio.run(collector.app.run())
    except KeyboardInterrupt:
        pass
    finally:
        close_doors(collector)
        collector.store_client.close()
        collector.readers.close()
