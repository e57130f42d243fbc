"""`agentwatch otel-export` alone: the exporter (consumers/otel_export.py) on its own connection to
the bus, with the stream and its durable made before it says it is ready."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Mapping

from faststream import FastStream
from faststream.nats import NatsBroker

from agentwatch import config
from agentwatch.bus import streams as bus
from agentwatch.consumers.app import GC_THRESHOLD, broker_options, setup_logging
from agentwatch.consumers.otel_export import attach, banner_line, endpoint, ensure_consumer, log


async def _prepare(nats_url: str, environ: Mapping[str, str]) -> None:
    from agentwatch.bus.connect import connect

    await bus.prepare_stream(nats_url, environ)
    nc = await connect(nats_url, environ, name="agentwatch-otel-setup")
    try:
        await ensure_consumer(nc.jetstream(), environ)
    finally:
        await nc.close()


def run(nats_url: str, environ: Mapping[str, str], *, banner: list[str], verbose: bool) -> None:
    """Follow the bus and export until interrupted."""
    if not endpoint(environ):
        raise ValueError("AGENTWATCH_OTLP_EXPORT_URL is not set: where should the spans go?")
    setup_logging(verbose)
    asyncio.run(_prepare(nats_url, environ))
    broker = NatsBroker(
        **broker_options(config.nats_options(nats_url, environ, name="agentwatch-otel-export")),
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        logger=log,
    )
    app = attach(FastStream(broker, logger=log), broker, environ)

    @app.after_startup
    async def ready() -> None:
        # As the collector does (consumers/app.py): what start-up built stays out of the garbage
        # collector's passes, and a young pass comes every GC_THRESHOLD allocations, not 700.
        gc.collect()
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, 10, 10)
        for line in [*banner, *banner_line(environ), "Ctrl-C stops."]:
            print(line, flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(app.run())
