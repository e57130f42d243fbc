"""ClickHouse clients: embedded chDB by default, a server over HTTP(S).

`chdb:///path` (the default, under the data dir) runs ClickHouse inside this process through
clickhouse-connect's chDB backend; `http(s)://user:password@host:8123/database` talks to a server
with the same client API. chDB allows one engine per process and has no async client: callers run
these sync clients from a worker thread, and one process (the store) owns the embedded engine.
Which URL to use is config.clickhouse_url()'s business.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentwatch import config, reach
from agentwatch.store.queries import QUERY_MAX_ROWS, QUERY_MAX_SECONDS

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

# How long one query's answer may take to arrive from a server (the query service's own limit,
# QUERY_MAX_SECONDS, is ClickHouse's; inserts of a large batch take longer than that).
QUERY_READ_SECONDS = 60


def connect(url: str, environ: Mapping[str, str] = os.environ, **settings: Any) -> Client:
    """A sync client for `url`, with `settings` applied to every query of its session.

    A server must answer the client's first question (its version) within
    AGENTWATCH_CONNECT_TIMEOUT, so one that takes the connection and never answers is told
    within seconds; the queries after it may take a minute. `https://` means TLS: clickhouse-connect
    reads a DSN's host, port and credentials but not its scheme (TLS only on ports 443 and 8443),
    so an `https://host:8123` URL would otherwise send the password in clear."""
    import clickhouse_connect

    if config.is_embedded(url):
        path = url.split("://", 1)[1]
        if path and not path.startswith(":memory:"):
            config.ensure_dir(path)
        return clickhouse_connect.get_client(dsn=url, settings=settings or None)
    from clickhouse_connect.driver.httpclient import HttpClient
    from urllib3.util import Timeout  # clickhouse-connect's own HTTP client, and its timeout type

    answer = config.connect_timeout(environ)
    client = clickhouse_connect.get_client(
        dsn=url,
        secure=url.lower().startswith("https:"),
        settings=settings or None,
        connect_timeout=answer,
        send_receive_timeout=answer,
    )
    if isinstance(client, HttpClient):
        client.timeout = Timeout(connect=answer, read=QUERY_READ_SECONDS)
    return client


# What one read-only query may take by default (AGENTWATCH_QUERY_MAX_MEMORY): an embedded store
# shares its process with the reader, so a reader without a limit can take the store down.
QUERY_MAX_MEMORY = 1 << 30


def connect_readonly(url: str, environ: Mapping[str, str] = os.environ) -> Client:
    """A client that ClickHouse itself keeps read-only (readonly=1: no writes, no DDL, no SET),
    with bounded query time, memory and result size. readonly comes last: it forbids the SETs
    of the settings after it. What readonly lets through (INTO OUTFILE, KILL) is guard.py's."""
    return connect(
        url,
        environ,
        max_execution_time=QUERY_MAX_SECONDS,
        max_memory_usage=config.number(environ, "AGENTWATCH_QUERY_MAX_MEMORY", QUERY_MAX_MEMORY),
        max_result_rows=QUERY_MAX_ROWS + 1,
        result_overflow_mode="break",
        readonly=1,
    )


def server_problem(url: str, exc: BaseException) -> str:
    """The one line for a ClickHouse server that cannot be used (reach.unreachable)."""
    return reach.unreachable("clickhouse", config.display_url(url), reach.reason_chain(exc))


def is_unreachable(exc: BaseException) -> bool:
    """The server could not be used at all (network, TLS, credentials), as opposed to a query
    the server refused or failed."""
    from clickhouse_connect.driver.exceptions import OperationalError

    if isinstance(exc, OperationalError | OSError):
        return True
    return reach.problem_kind(reach.reason_chain(exc)) == reach.CREDENTIALS
