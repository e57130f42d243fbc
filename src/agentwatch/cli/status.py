"""`agentwatch status`: is the pipeline healthy: the bus, the stream, the store's consumer, the store."""

from __future__ import annotations

import argparse
import asyncio
import os

from agentwatch import config
from agentwatch.cli.errors import CliError, missing_extra, require
from agentwatch.cli.pipeline import probe_bus


def _stream_lines(url: str) -> bool:
    try:
        from agentwatch.bus.streams import stream_status
    except ImportError as exc:
        raise missing_extra(exc, "status", "tui") from None
    try:
        for line in asyncio.run(stream_status(url)):
            print(line)
    except Exception as exc:
        print(f"stream:    cannot read: {exc}")
        return False
    return True


def _store_lines() -> bool:
    from agentwatch.cli.sql import run_sql
    from agentwatch.store.queries import STATUS

    print(f"store:     {config.display_url(config.clickhouse_url())}")
    try:
        answer = run_sql(STATUS.sql, timeout=10)
    except CliError as exc:  # the read side's line: which failure, which setting to fix
        print(f"           {exc}")
        return False
    events, messages, dead, latest = answer.rows[0]
    when = "none" if latest is None else f"{latest:%Y-%m-%d %H:%M:%S} UTC"
    print(f"           {events:,} events, {messages:,} messages, {dead:,} dead letters; latest event {when}")
    return True


def cmd_status(_args: argparse.Namespace) -> int:
    require("status", "tui", "nats", "orjson")
    url = config.nats_url(os.environ)
    probe = probe_bus(url)
    print(f"bus:       {config.display_urls(url)}")
    info = probe.info
    if info is None:
        print(f"           {probe.message}")
        return 1
    js = "JetStream on" if info.get("jetstream") else "JetStream OFF"
    print(f"           nats-server {info.get('version', '?')}, {js}")
    healthy = _stream_lines(url)
    return 0 if _store_lines() and healthy else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = sub.add_parser(
        "status",
        help="bus, stream, consumer and store health",
        description="Check the pipeline: does the bus answer, how full is the stream, how far behind "
        "is the store, and how much history does the store hold.",
    )
    status.set_defaults(func=cmd_status)
