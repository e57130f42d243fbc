"""/metrics: the collector's health and the store's figures in the Prometheus text format
(prometheus-client), on loopback by default (AGENTWATCH_METRICS_ADDR, `127.0.0.1:9464`; `off`
turns it off).

What the process knows it counts as it happens: envelopes received from the stream, rows the store
inserted (new ones only: a redelivery is not counted twice), dead letters, failed inserts, each
insert's duration (timed around the store's insert function, handed to the StoreWriter). What the
store knows is read at scrape time, at most every CACHE_SECONDS, from rollups and a recent window
(store/door_queries.py): open alerts by rule and severity, coverage, cost by team and model, the
hook's spool backlog per host. Label sets are bounded: at most METRIC_ROWS values each, the rest
summed as `other`. The consumer's pending and redelivered counts come from JetStream, asked on the
collector's event loop. Served from its own threads (the standard library's WSGI server with
prometheus-client's app, a read timeout and a cap on connections: consumers/http_doors.py); nothing
here blocks the loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from agentwatch import config
from agentwatch.consumers.http_doors import Bounded
from agentwatch.store import door_queries
from agentwatch.store.queries import Query

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

    from agentwatch.consumers.store import StoreStats, StoreWriter

log = logging.getLogger("agentwatch.metrics")

SETTING = "AGENTWATCH_METRICS_ADDR"
TOP_REPOS_SETTING = "AGENTWATCH_METRICS_TOP_REPOS"
DEFAULT_TOP_REPOS = 20
DEFAULT_ADDR = "127.0.0.1:9464"
CACHE_SECONDS = 5.0
METRIC_HOSTS = 500
OTHER = "other"
INSERT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def parse_addr(text: str) -> tuple[str, int] | None:
    """AGENTWATCH_METRICS_ADDR as (host, port); None for `off`."""
    return config.listen_address({SETTING: text}, SETTING, DEFAULT_ADDR)


def url_of(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/metrics"


def bounded(rows: Iterable[tuple[tuple[str, ...], float]], most: int) -> list[tuple[tuple[str, ...], float]]:
    """The first `most` label sets as they are, the rest summed into one whose labels are `other`."""
    kept: list[tuple[tuple[str, ...], float]] = []
    rest: float | None = None
    for labels, value in rows:
        if len(kept) < most:
            kept.append((labels, value))
        else:
            rest = (rest or 0.0) + value
    if rest is not None:
        width = len(kept[0][0]) if kept else 1
        kept.append(((OTHER,) * width, rest))
    return kept


class Metrics:
    """The collector's metrics and their HTTP endpoint."""

    def __init__(self, host: str, port: int, top_repos: int = DEFAULT_TOP_REPOS) -> None:
        self.host, self.port, self.top_repos = host, port, top_repos
        self.registry = CollectorRegistry()
        self.stored = Counter(
            "agentwatch_stored", "Rows the store inserted, new ones only", ["table"], registry=self.registry
        )
        self.insert_seconds = Histogram(
            "agentwatch_insert_seconds", "Duration of the store's inserts of events and messages",
            buckets=INSERT_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.otlp_requests = Counter(
            "agentwatch_otlp_requests", "OTLP/HTTP requests by signal and answer", ["signal", "code"],
            registry=self.registry,
        )  # fmt: skip
        self.otlp_records = Counter(
            "agentwatch_otlp_records", "OTLP log records, data points and spans stored", ["signal"],
            registry=self.registry,
        )  # fmt: skip
        for table in ("events", "messages"):
            self.stored.labels(table)
        # A fleet's hosts (bus/fleet.py HostSync.gauges): (host, backlog, seconds since contact, spool).
        self.hosts: Callable[[], list[tuple[str, float, float | None, int | None]]] = list
        self._stats: Callable[[], StoreStats] | None = None
        self._backlog: Callable[[], int] = lambda: 0
        self._consumer: Callable[[], Coroutine[Any, Any, Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._store: Client | None = None
        self._lock = threading.Lock()
        self._cache: tuple[float, list[Metric]] = (0.0, [])
        self._server: _Server | None = None
        self.registry.register(_Figures(self))

    @classmethod
    def from_settings(cls, environ: Mapping[str, str]) -> Metrics | None:
        where = parse_addr(environ.get(SETTING, ""))
        return (
            None
            if where is None
            else cls(*where, config.number(environ, TOP_REPOS_SETTING, DEFAULT_TOP_REPOS))
        )

    @property
    def url(self) -> str:
        return url_of(self.host, self.port)

    def timed(self, insert: Callable[[Client, Sequence[bytes], Sequence[bytes]], tuple[int, int]]) -> Any:
        """The store's insert function, timed and counted (run in the writer's worker thread)."""

        def run(client: Client, events: Sequence[bytes], messages: Sequence[bytes]) -> None:
            started = time.perf_counter()
            new_events, new_messages = insert(client, events, messages)
            self.insert_seconds.observe(time.perf_counter() - started)
            self.stored.labels("events").inc(new_events)
            self.stored.labels("messages").inc(new_messages)

        return run

    def listen(self) -> str:
        """Bind the endpoint (OSError when the address is taken); its URL."""
        self._server = make_server(self.host, self.port, make_wsgi_app(self.registry), _Server, _Handler)
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, name="agentwatch-metrics", daemon=True).start()
        return self.url

    def attach(self, writer: StoreWriter, consumer: Callable[[], Coroutine[Any, Any, Any]], url: str) -> None:
        """What a scrape reads: the writer's counts, the store's consumer (asked on the running loop)
        and the store at `url`, through a read-only client of the scrapes' own."""
        from agentwatch.store.client import connect_readonly

        self._stats, self._backlog, self._consumer = (
            (lambda: writer.stats),
            (lambda: writer.backlog),
            consumer,
        )
        self._store = connect_readonly(url)
        self._loop = asyncio.get_running_loop()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    # -- at scrape time --------------------------------------------------------------------------

    def process_figures(self) -> list[Metric]:
        stats = self._stats() if self._stats is not None else None
        out: list[Metric] = []
        if stats is not None:
            for name, doc, value in (
                ("agentwatch_received", "Envelopes received from the GENIE stream", stats.received),
                ("agentwatch_usage_stored", "Usage and cost-state records stored", stats.usage),
                ("agentwatch_dead_letters", "Messages kept in dead_letters", stats.dead_letters),
                ("agentwatch_insert_failures", "Inserts that failed and were retried", stats.insert_failures),
            ):
                out.append(CounterMetricFamily(name, doc, value=value))
        pending = GaugeMetricFamily(
            "agentwatch_pending", "Envelopes not stored yet, by where they wait", labels=["where"]
        )
        pending.add_metric(["writer"], self._backlog())
        info = self._consumer_info()
        if info is not None:
            pending.add_metric(["stream"], int(info.num_pending or 0))
            pending.add_metric(["unacked"], int(info.num_ack_pending or 0))
            redelivered = int(getattr(info, "num_redelivered", 0) or 0)
            doc = "Messages the store's consumer has had redelivered"
            out.append(GaugeMetricFamily("agentwatch_redelivered", doc, value=redelivered))
        out.append(pending)
        out.extend(self.host_figures())
        return out

    def host_figures(self) -> list[Metric]:
        """Per host of a fleet: its backlog not yet at the hub (as of the last contact), seconds
        since the hub last heard from it, and the hook's spool there."""
        backlog = GaugeMetricFamily(
            "agentwatch_host_backlog", "Messages of a host's stream not at the hub yet", labels=["host"]
        )
        silent = GaugeMetricFamily(
            "agentwatch_host_seconds_since_contact", "Seconds since the hub heard of a host", labels=["host"]
        )
        spool = GaugeMetricFamily(
            "agentwatch_host_spool_bytes", "Bytes in the hook's spool on a host", labels=["host"]
        )
        for host, lag, active, spooled in bounded_hosts(self.hosts()):
            backlog.add_metric([host], lag)
            if active is not None:
                silent.add_metric([host], active)
            if spooled is not None:
                spool.add_metric([host], spooled)
        return [backlog, silent, spool]

    def _consumer_info(self) -> Any:
        if self._consumer is None or self._loop is None or self._loop.is_closed():
            return None
        try:
            return asyncio.run_coroutine_threadsafe(self._consumer(), self._loop).result(2.0)
        except Exception:
            return None

    def store_figures(self) -> list[Metric]:
        """The store's figures, read at most every CACHE_SECONDS."""
        with self._lock:
            at, cached = self._cache
            if time.monotonic() - at < CACHE_SECONDS:
                return cached
            if self._store is None:
                return []
            up = GaugeMetricFamily("agentwatch_store_up", "1 when the store's figures could be read")
            try:
                figures = [*_read_store(self._store), *by_repository(self._store, self.top_repos)]
            except Exception as exc:
                log.warning("metrics: the store's figures could not be read: %s", str(exc)[:200])
                up.add_metric([], 0)
                return [up]
            up.add_metric([], 1)
            self._cache = (time.monotonic(), [up, *figures])
            return self._cache[1]


class _Server(Bounded, WSGIServer):
    door = "metrics"
    log = log


def bounded_hosts(
    rows: list[tuple[str, float, float | None, int | None]],
) -> list[tuple[str, float, float | None, int | None]]:
    """At most METRIC_HOSTS hosts, the most behind first: a label set of bounded size."""
    return sorted(rows, key=lambda r: -r[1])[:METRIC_HOSTS]


class _Handler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("metrics %s", format % args)


class _Figures:
    """The prometheus-client collector of what is read at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []  # names known only at scrape: nothing to check them against at registration

    def collect(self) -> Iterable[Metric]:
        yield from self.metrics.process_figures()
        yield from self.metrics.store_figures()


def _rows(client: Client, query: Query) -> list[Sequence[Any]]:
    return list(client.query(query.sql, parameters=query.params).result_rows)


def by_repository(client: Client, top: int) -> list[CounterMetricFamily]:
    """Counters per repository: the `top` repositories by events as they are, every other one's
    figures summed under `other` (so a fleet of many repositories keeps the series few)."""
    activity = _rows(client, door_queries.EVENTS_BY_REPO)
    kept = {str(row[0]) for row in activity[:top]}
    families: list[CounterMetricFamily] = [
        CounterMetricFamily(f"agentwatch_repo_{name}", doc, labels=["repo"])
        for name, doc in (
            ("events", "Events stored, by the session's repository ('' outside one)"),
            ("tool_calls", "Tool calls, by the session's repository"),
            ("tool_errors", "Failed tool calls, by the session's repository"),
            ("api_calls", "API calls read from transcripts, by the session's repository"),
            ("cost_usd", "Priced USD of API calls, by the session's repository"),
        )
    ]
    sums: list[dict[str, float]] = [{} for _ in families]
    rows = [(r, (e, t, x, 0, 0)) for r, e, t, x in activity]
    rows += [(r, (0, 0, 0, calls, usd or 0)) for r, usd, calls in _rows(client, door_queries.COST_BY_REPO)]
    for repo, values in rows:
        label = str(repo) if str(repo) in kept else OTHER
        for found, value in zip(sums, values, strict=True):
            found[label] = found.get(label, 0.0) + float(value)
    for family, found in zip(families, sums, strict=True):
        for label, value in found.items():
            family.add_metric([label], value)
    return families


def _read_store(client: Client) -> list[Metric]:
    most = door_queries.METRIC_ROWS
    alerts = GaugeMetricFamily("agentwatch_open_alerts", "Alerts firing now", labels=["rule", "severity"])
    for rule, severity, n in _rows(client, door_queries.OPEN_ALERTS):
        alerts.add_metric([str(rule), str(severity)], int(n))
    ((emitted, stored),) = _rows(client, door_queries.COVERAGE) or [(0, 0)]
    coverage = [
        GaugeMetricFamily("agentwatch_coverage_emitted", "Events hooks numbered", value=int(emitted or 0)),
        GaugeMetricFamily("agentwatch_coverage_stored", "Numbered events stored", value=int(stored or 0)),
        GaugeMetricFamily(
            "agentwatch_coverage_ratio", "Numbered events stored / emitted (1 when none were numbered)",
            value=(int(stored or 0) / int(emitted)) if emitted else 1.0,
        ),
    ]  # fmt: skip
    cost_rows = _rows(client, door_queries.COST_BY_TEAM_MODEL)
    usd = GaugeMetricFamily("agentwatch_cost_usd", "Priced USD of API calls", labels=["team", "model"])
    calls = GaugeMetricFamily(
        "agentwatch_api_calls", "API calls read from transcripts", labels=["team", "model"]
    )
    for (team, model), value in bounded((((t, m), float(u or 0)) for t, m, u, _ in cost_rows), most):
        usd.add_metric([team, model], value)
    for (team, model), value in bounded((((t, m), float(c)) for t, m, _, c in cost_rows), most):
        calls.add_metric([team, model], value)
    spool = GaugeMetricFamily(
        "agentwatch_spool_bytes",
        "The spool backlog each host's hook reported last (last day)",
        labels=["host"],
    )
    for (host,), value in bounded(
        (((str(h),), float(b)) for h, b in _rows(client, door_queries.SPOOL_BY_HOST)), most
    ):
        spool.add_metric([host], value)
    return [alerts, *coverage, usd, calls, spool]
