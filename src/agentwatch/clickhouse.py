"""ClickHouse clients from AGENTWATCH_CLICKHOUSE_URL: embedded chDB by default, a server over HTTP(S).

`chdb:///path` (the default, under the data dir) runs ClickHouse inside this process through
clickhouse-connect's chDB backend; `http(s)://user:password@host:8123/database` talks to a server
with the same client API. chDB allows one engine per process and has no async client: callers run
these sync clients from a worker thread, and one process (the store) owns the embedded engine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentwatch import config

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

# Limits of the read-only query path (agentwatch sql, the dashboard's history).
QUERY_MAX_SECONDS = 30
QUERY_MAX_ROWS = 10_000


def clickhouse_url(environ: Mapping[str, str] = os.environ) -> str:
    """AGENTWATCH_CLICKHOUSE_URL, else `chdb://<data dir>/clickhouse`."""
    url = environ.get("AGENTWATCH_CLICKHOUSE_URL", "").strip()
    if url:
        return url
    return "chdb://" + os.path.join(config.data_dir(environ), "clickhouse")


def is_embedded(url: str) -> bool:
    return url.startswith("chdb:")


def display_url(url: str) -> str:
    """The URL with any password masked."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0]:
        auth, _, host = rest.partition("@")
        user = auth.split(":", 1)[0]
        return f"{scheme}{sep}{user}:***@{host}"
    return url


def connect(url: str, **settings: Any) -> Client:
    """A sync client for `url`, with `settings` applied to every query of its session."""
    import clickhouse_connect

    if is_embedded(url):
        path = url.split("://", 1)[1]
        if path and not path.startswith(":memory:"):
            config.ensure_dir(path)
        return clickhouse_connect.get_client(dsn=url, settings=settings or None)
    return clickhouse_connect.get_client(
        dsn=url, settings=settings or None, connect_timeout=5, send_receive_timeout=60
    )


def connect_readonly(url: str) -> Client:
    """A client that ClickHouse itself keeps read-only (readonly=1: no writes, no DDL, no SET),
    with bounded query time and result size."""
    return connect(
        url,
        max_execution_time=QUERY_MAX_SECONDS,
        max_result_rows=QUERY_MAX_ROWS + 1,
        result_overflow_mode="break",
        readonly=1,
    )
