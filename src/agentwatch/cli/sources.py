"""The read side's one source: where the history is, chosen from configuration, asked over one
connection kept for the source's life.

The history of a ClickHouse server is read directly (its own read-only user, one client); an
embedded store belongs to the process that runs it, so its history is asked of that process's
query service on the bus (one NATS connection). Every answer is decoded in one place
(store/answer.py) into an `Answer`; every failure is a `HistoryError`. The dashboard, the
commands and the MCP server all use this class.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentwatch import config
from agentwatch.store.answer import Answer, HistoryUnreachable, decode
from agentwatch.store.queries import QUERY_MAX_ROWS, QUERY_MAX_SECONDS

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

    from agentwatch.bus.query import QueryClient


class History:
    """Read-only SQL over the event history, wherever it is (the dashboard's HistorySource)."""

    def __init__(
        self, environ: Mapping[str, str] = os.environ, timeout: float = QUERY_MAX_SECONDS + 5.0
    ) -> None:
        self.environ = environ
        self.timeout = timeout
        self._url = config.clickhouse_url(environ)
        self._bus: QueryClient | None = None
        self._client: Client | None = None
        self._lock = threading.Lock()  # one question at a time on the server client

    @property
    def where(self) -> str:
        """The history's place, masked, for messages."""
        if config.is_embedded(self._url):
            return f"the query service on {config.display_urls(config.nats_url(self.environ))}"
        return config.display_url(self._url)

    @property
    def connections(self) -> int:
        """Connections opened over this source's life (a test counts them)."""
        if self._bus is not None:
            return self._bus.connections
        return 1 if self._client is not None else 0

    def query(
        self, sql: str, params: Mapping[str, Any] | None = None, max_rows: int = QUERY_MAX_ROWS
    ) -> Answer:
        """The answer to `sql`; raises QueryFailed (ClickHouse's message) or HistoryUnreachable."""
        if not config.is_embedded(self._url):
            return decode(self._from_server(sql, params, max_rows))
        return decode(self._from_bus(sql, params, max_rows))

    def _from_bus(self, sql: str, params: Mapping[str, Any] | None, max_rows: int) -> dict[str, Any]:
        from agentwatch.bus.connect import BusUnreachable
        from agentwatch.bus.query import QueryClient, QueryUnanswered

        if self._bus is None:
            self._bus = QueryClient(config.nats_url(self.environ), self.environ)
        try:
            return self._bus.request(sql, params, max_rows=max_rows, timeout=self.timeout)
        except BusUnreachable as exc:
            raise HistoryUnreachable(str(exc)) from None
        except QueryUnanswered as exc:
            raise HistoryUnreachable(str(exc)) from None

    def _from_server(self, sql: str, params: Mapping[str, Any] | None, max_rows: int) -> dict[str, Any]:
        from agentwatch.store.client import connect_readonly, is_unreachable, server_problem
        from agentwatch.store.queries import run_query

        def unusable(exc: Exception) -> None:
            if is_unreachable(exc):
                raise HistoryUnreachable(server_problem(self._url, exc)) from None

        # clickhouse-connect logs a traceback for a server that does not answer; the message the
        # person reads is the one raised below.
        logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)
        with self._lock:
            if self._client is None:
                try:
                    self._client = connect_readonly(self._url, self.environ)
                except Exception as exc:
                    raise HistoryUnreachable(server_problem(self._url, exc)) from None
            return run_query(self._client, sql, params, max_rows, on_error=unusable)

    def close(self) -> None:
        """End the connection (the next question opens another)."""
        if self._bus is not None:
            self._bus.close()
            self._bus = None
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def dashboard_sources(environ: Mapping[str, str]) -> tuple[Any, History]:
    """The live source and history the dashboard runs on."""
    from agentwatch.bus.live import NatsLiveSource

    return NatsLiveSource(config.nats_url(environ), environ), History(environ, timeout=10)
