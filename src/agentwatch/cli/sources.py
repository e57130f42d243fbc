"""Where the read side's data comes from, chosen from configuration: the history of a ClickHouse
server is read directly (with its own read-only user); an embedded store belongs to the process
that runs it, so its history is asked of that process's query service on the bus."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

from agentwatch import config
from agentwatch.store.queries import QUERY_MAX_ROWS, QUERY_MAX_SECONDS


class History:
    """Read-only SQL over the event history, wherever it is (the dashboard's HistorySource)."""

    def __init__(
        self, environ: Mapping[str, str] = os.environ, timeout: float = QUERY_MAX_SECONDS + 5.0
    ) -> None:
        self.environ = environ
        self.timeout = timeout

    @property
    def where(self) -> str:
        """The history's place, masked, for messages."""
        url = config.clickhouse_url(self.environ)
        if config.is_embedded(url):
            return f"the query service on {config.display_urls(config.nats_url(self.environ))}"
        return config.display_url(url)

    def query(
        self, sql: str, params: Mapping[str, Any] | None = None, max_rows: int = QUERY_MAX_ROWS
    ) -> dict[str, Any]:
        """{"columns", "rows", ...} or {"error": ClickHouse's message}; raises BusUnreachable,
        QueryUnanswered (LookupError) or OSError when the history cannot be reached."""
        ch_url = config.clickhouse_url(self.environ)
        if not config.is_embedded(ch_url):
            return self._from_server(ch_url, sql, params, max_rows)
        from agentwatch.bus.query import request

        url = config.nats_url(self.environ)
        return asyncio.run(
            request(url, sql, params, max_rows=max_rows, timeout=self.timeout, environ=self.environ)
        )

    def _from_server(
        self, url: str, sql: str, params: Mapping[str, Any] | None, max_rows: int
    ) -> dict[str, Any]:
        import logging

        from agentwatch.store.client import connect_readonly
        from agentwatch.store.queries import run_query

        # clickhouse-connect logs a traceback for a server that does not answer; the message the
        # person reads is the one below.
        logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)
        try:
            client = connect_readonly(url)
        except Exception as exc:
            reason = " ".join(str(exc).split())[:300]
            raise ConnectionError(
                f"ClickHouse at {config.display_url(url)} does not answer: {reason}"
            ) from None
        try:
            return run_query(client, sql, params, max_rows)
        finally:
            client.close()


def dashboard_sources(environ: Mapping[str, str]) -> tuple[Any, History]:
    """The live source and history the dashboard runs on."""
    from agentwatch.bus.live import NatsLiveSource

    return NatsLiveSource(config.nats_url(environ), environ), History(environ, timeout=10)
