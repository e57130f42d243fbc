"""ClickHouse clients: embedded chDB by default, a server over HTTP(S).

`chdb:///path` (the default, under the data dir) runs ClickHouse inside this process through
clickhouse-connect's chDB backend; `http(s)://user:password@host:8123/database` talks to a server
with the same client API. chDB allows one engine per process and has no async client: callers run
these sync clients from a worker thread, and one process (the store) owns the embedded engine.
Which URL to use is config.clickhouse_url()'s business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentwatch import config
from agentwatch.store.queries import QUERY_MAX_ROWS, QUERY_MAX_SECONDS

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client


def connect(url: str, **settings: Any) -> Client:
    """A sync client for `url`, with `settings` applied to every query of its session."""
    import clickhouse_connect

    if config.is_embedded(url):
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


def server_problem(url: str, exc: BaseException) -> str:
    """The one line for a ClickHouse server that cannot be used (config.unreachable)."""
    return config.unreachable("clickhouse", config.display_url(url), config.reason_chain(exc))


def is_unreachable(exc: BaseException) -> bool:
    """The server could not be used at all (network, TLS, credentials), as opposed to a query
    the server refused or failed."""
    from clickhouse_connect.driver.exceptions import OperationalError

    if isinstance(exc, OperationalError | OSError):
        return True
    return config.problem_kind(config.reason_chain(exc)) == config.CREDENTIALS
