"""Read-side speed at any size of history: the dashboard's queries and docs/queries.md, timed on
synthetic histories of 1M and 10M events (30M with --sizes) in embedded ClickHouse.

Each size gets a database of its own with the project's schema (apply_migrations), filled straight
from `numbers()` with INSERT ... SELECT into `events`, `message_envelopes` and `usage_in`, in blocks
of at most 1M rows: the rollups' materialized views fill as they would live. The history: 300
agents over 30 days, sessions of 200 events (a prompt, tool calls and their results, a few
failures, a Stop), 12 tools, one message per 100 events between agents of a team, one API message
per 20 events.

With --same-rate, the largest size spans the 30 days and each smaller one as many days as it
holds at the same rate (1M events: 3 days): a window of the last hour or day then holds the same
events at every size, and its growth with the size is what the rest of the history costs it.

Every query runs --runs times (after one warm-up); the table gives the median per size and the
growth from the smallest size to each larger one. Besides the dashboard's queries and every SQL
block of docs/queries.md: what a person writes against the documented views for a window (the
last hour or day of `tool_calls`, `events`, `messages`, `usage`; the newest 200 `session_costs`).

    python benchmarks/history_bench.py [--sizes 1000000,10000000] [--same-rate] [--runs 5] [--dir DIR]
        [--only REGEX] [--interleave] [--fresh-parts N]

With --interleave, every size is built (or opened) first, then each query's runs are taken in turn
over the sizes, so that a change of a shared machine's load during the run moves every size alike
and the growth from one size to the next is measured at one load.

With --fresh-parts N, the history is then left as a live store has it: N small parts of new API
messages (40 each, to sessions of the history) that the engine has not merged, their merges
stopped, so that a question folding rows at read time (FINAL) is timed with what it folds live.

With --dir, a history built there before (same size and span) is timed again as it is, after the
schema's newer migrations (whose backfills fill their rollups from it). Its times are relative to
when it was built: the last hour of a history built an hour ago is empty.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import clickhouse_connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentwatch.store import queries, session_queries  # noqa: E402
from agentwatch.store.migrations import apply_migrations  # noqa: E402

BLOCK = 1_000_000
DAYS = 30
# A word that occurs in one event of the history (its text), for the search (015_search.sql).
NEEDLE = "QUOKKA_7731"
# Bytes of disk one event takes in the engine, with its rollups, rounded up (measured at 1M).
BYTES_PER_EVENT = 120

_EVENTS = """\
INSERT INTO events (id, timestamp, event, kind, agent, team, session_id, agent_id, host, tool_name,
                    tool_use_id, text, data, seq)
SELECT
    concat('h', leftPad(toString(n), 12, '0')) AS id,
    toDateTime64(now64(3) - toIntervalMillisecond(toUInt64(({total} - n) * {span_ms} / {total})), 3, 'UTC'),
    multiIf(k = 0, 'UserPromptSubmit', k = 199, 'Stop', k % 2 = 1, 'PreToolUse',
            cityHash64(n) % 25 = 0, 'PostToolUseFailure', 'PostToolUse') AS event,
    multiIf(k = 0, 'prompt', k = 199, 'response', k % 2 = 1, 'tool_call',
            event = 'PostToolUseFailure', 'tool_error', 'tool_result') AS kind,
    concat('agent-', toString(s % 300)) AS agent,
    concat('team-', toString(s % 300 % 30)) AS team,
    concat('session-', toString(s)) AS session_id,
    '' AS agent_id,
    concat('host-', toString(s % 300 % 10)) AS host,
    if(k = 0 OR k = 199, '', ['Bash', 'Read', 'Edit', 'Grep', 'Glob', 'Write', 'WebFetch', 'Agent',
        'SendMessage', 'TodoWrite', 'MultiEdit', 'NotebookEdit'][1 + cityHash64(s, intDiv(k - 1, 2)) % 12])
        AS tool_name,
    if(k = 0 OR k = 199, '', concat('tu-', toString(s), '-', toString(intDiv(k - 1, 2)))) AS tool_use_id,
    if(n = {needle_at}, 'pytest failed: {needle} in test_refund',
       concat(['$ git status', 'Read src/app.py', 'Edit tests/test_api.py', '$ pytest -q', 'Grep retry',
               'WebFetch https://docs.example.com/page'][1 + cityHash64(n) % 6], ' #',
              toString(cityHash64(n, 2) % 100000))) AS text,
    multiIf(event = 'PostToolUseFailure', '{{"error":"Exit code 1","is_interrupt":false,"duration_ms":40}}',
            event = 'PostToolUse',
            concat('{{"duration_ms":', toString(cityHash64(n) % 4000), ',"tool_response":{{"stdout":"ok ',
                   toString(cityHash64(n, 3) % 1000000), '"}}}}'),
            '{{}}') AS data,
    k + 1 AS seq
FROM (SELECT number + {start} AS n, intDiv(n, 200) AS s, n % 200 AS k FROM numbers({count}))"""

_MESSAGES = """\
INSERT INTO message_envelopes (id, timestamp, v, event, kind, agent, team, peer, text, session_id, data)
SELECT
    concat('m', leftPad(toString(n), 12, '0')),
    toDateTime64(now64(3) - toIntervalMillisecond(toUInt64(({total} - n) * {span_ms} / {total})), 3, 'UTC'),
    1, 'PostToolUse', 'message', concat('agent-', toString(n % 300)), concat('team-', toString(n % 300 % 30)),
    concat('agent-', toString((n + 30) % 300)), 'hi', concat('session-', toString(intDiv(n, 2))),
    concat('{{"from":"agent-', toString(n % 300), '","to":"agent-', toString((n + 30) % 300),
           '","summary":"status ', toString(n), '","message":"ok"}}')
FROM (SELECT number * 100 + {start} AS n FROM numbers({count}))"""

_USAGE = """\
INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, team, model, input_tokens,
                   output_tokens, cache_read_tokens, cost_usd, version)
SELECT
    concat('session-', toString(intDiv(n, 200))), concat('msg-', toString(n)), concat('req-', toString(n)),
    toDateTime64(now64(3) - toIntervalMillisecond(toUInt64(({total} - n) * {span_ms} / {total})), 3, 'UTC'),
    concat('agent-', toString(intDiv(n, 200) % 300)), concat('team-', toString(intDiv(n, 200) % 300 % 30)),
    ['claude-opus-4-1', 'claude-sonnet-4-5'][1 + n % 2], 1000 + n % 500, 200 + n % 300, 5000,
    0.01 + (n % 7) / 1000, 1
FROM (SELECT number * 20 + {start} AS n FROM numbers({count}))"""


def build(client: Any, total: int, days: float) -> float:
    """Fill the history; returns the seconds it took."""
    started = time.perf_counter()
    span_ms = int(days * 86_400_000)
    for start in range(0, total, BLOCK):
        count = min(BLOCK, total - start)
        values = {"start": start, "count": count, "total": total, "span_ms": span_ms,
                  "needle_at": total // 3, "needle": NEEDLE}  # fmt: skip
        client.command(_EVENTS.format(**values))
        client.command(_MESSAGES.format(**{**values, "count": count // 100}))
        client.command(_USAGE.format(**{**values, "count": count // 20}))
    return time.perf_counter() - started


def stored(client: Any) -> int:
    return int(client.query("SELECT count() FROM events").result_rows[0][0])


def documented(path: Path = ROOT / "docs" / "queries.md") -> list[tuple[str, str]]:
    """(title, sql) of every ```sql block of docs/queries.md (or another tree's, at `path`)."""
    found: list[tuple[str, str]] = []
    title = ""
    text = path.read_text(encoding="utf-8")
    for match in re.finditer(r"^## ([^\n]+)$|^```sql\n(.*?)^```", text, re.M | re.S):
        if match.group(1):
            title = match.group(1).strip()
        else:
            name = f"docs: {title}"[:44]
            seen = sum(1 for t, _ in found if t.startswith(name))
            found.append((name + (f" ({seen + 1})" if seen else ""), match.group(2).strip().rstrip(";")))
    return found


# What a person writes against the documented views for a window (docs/queries.md's table), and
# the newest sessions' ids picked from session_cost first (what docs/queries.md asked before 019).
_WINDOW_TOOLS = (
    "SELECT tool, count() AS calls, quantiles(0.5, 0.95)(duration_ms) AS p50_p95 FROM tool_calls "
    "WHERE started >= now64(3) - INTERVAL {interval} GROUP BY tool"
)
_NEWEST_COSTS = (
    "SELECT * FROM session_costs WHERE session_id IN (SELECT session_id FROM session_cost "
    "GROUP BY session_id ORDER BY max(last_at) DESC LIMIT 200) ORDER BY last_at DESC"
)


def view_before_019(name: str) -> str:
    """The SELECT of the view `name` as 009_rollups.sql defines it (before 019 replaced it): the
    reference a run times beside the view as it is now."""
    text = (ROOT / "src" / "agentwatch" / "store" / "schema" / "009_rollups.sql").read_text(encoding="utf-8")
    head = f"CREATE OR REPLACE VIEW {name} AS\n"
    body = text[text.index(head) + len(head) :]
    return body[: body.index(";\n")]


def windows() -> list[tuple[str, queries.Query | SessionsTwoStep]]:
    asked = [
        ("tool_calls 1h, per tool p50 p95", _WINDOW_TOOLS.format(interval="1 HOUR")),
        ("tool_calls 1d, per tool p50 p95", _WINDOW_TOOLS.format(interval="1 DAY")),
        (
            "tool_calls 1d, slowest 100",
            "SELECT * FROM tool_calls WHERE started >= now64(3) - INTERVAL 1 DAY "
            "ORDER BY duration_ms DESC LIMIT 100",
        ),
        (
            "tool_calls 1h, failed",
            "SELECT * FROM tool_calls WHERE started >= now64(3) - INTERVAL 1 HOUR AND status != 'ok'",
        ),
        (
            "events 1h, newest 100",
            "SELECT * FROM events FINAL WHERE timestamp >= now64(3) - INTERVAL 1 HOUR "
            "ORDER BY timestamp DESC LIMIT 100",
        ),
        (
            "events 1d, per agent",
            "SELECT agent, count() AS events, countIf(event = 'PostToolUseFailure') AS failures "
            "FROM events FINAL WHERE timestamp >= now64(3) - INTERVAL 1 DAY GROUP BY agent",
        ),
        (
            "messages 1d, per pair",
            "SELECT from_agent, to_agent, count() AS messages FROM messages FINAL "
            "WHERE timestamp >= now64(3) - INTERVAL 1 DAY GROUP BY from_agent, to_agent",
        ),
        (
            "usage 1h, per model",
            "SELECT model, count() AS api_calls, sum(cost_usd) AS usd FROM usage FINAL "
            "WHERE timestamp >= now64(3) - INTERVAL 1 HOUR GROUP BY model",
        ),
        (
            "usage 1d, per model",
            "SELECT model, count() AS api_calls, sum(cost_usd) AS usd FROM usage FINAL "
            "WHERE timestamp >= now64(3) - INTERVAL 1 DAY GROUP BY model",
        ),
        ("session_costs newest 200 (ids first)", _NEWEST_COSTS),
        (
            "session_costs newest 200 (ORDER BY)",
            "SELECT * FROM session_costs ORDER BY last_at DESC LIMIT 200",
        ),
        (
            "session_costs newest 200 (ORDER BY), 009's view",
            f"SELECT * FROM ({view_before_019('session_costs')}) ORDER BY last_at DESC LIMIT 200",  # noqa: S608 - the schema's own text
        ),
    ]
    return [(title, queries.Query(sql)) for title, sql in asked]


# Per-call questions of a window (the engine's time: a few rows come back, not every call).
_SLOWEST = (
    "SELECT * FROM tool_calls_since(since = now64(3) - INTERVAL {interval}) "
    "ORDER BY duration_ms DESC LIMIT 100"
)
_BY_STATUS = (
    "SELECT tool, status, count() AS calls FROM tool_calls_since(since = now64(3) - INTERVAL {interval}) "
    "GROUP BY tool, status"
)


class SessionsTwoStep:
    """The dashboard's sessions table: the newest ids, then their rows (two questions, as the
    dashboard asks them)."""

    def __init__(self, window_s: int | None) -> None:
        self.window_s = window_s

    def __call__(self, client: Any) -> None:
        newest = queries.newest_sessions(self.window_s)
        ids = [row[0] for row in client.query(newest.sql, parameters=newest.params).result_rows]
        details = queries.session_details(ids)
        client.query(details.sql, parameters=details.params)


def dashboard() -> list[tuple[str, queries.Query | SessionsTwoStep]]:
    return [
        ("roster (agents rollup)", queries.roster()),
        ("recent events (feed)", queries.recent_events(2000)),
        ("tools, 1h", queries.tool_stats(3600)),
        ("tools, 1d", queries.tool_stats(86_400)),
        ("tools, all", queries.tool_stats(None)),
        ("sessions newest 200, 1h", SessionsTwoStep(3600)),
        ("sessions newest 200, all", SessionsTwoStep(None)),
        ("team edges, 1d", queries.team_edges(86_400)),
        ("team edges, all", queries.team_edges(None)),
        ("dashboard costs", queries.DASHBOARD_COSTS),
        ("cost per agent", queries.cost("agent")),
        ("cost per day", queries.cost("day")),
        ("tool_stats view, all", queries.Query("SELECT * FROM tool_stats WHERE window = 'all'")),
        ("agents view", queries.Query("SELECT * FROM agents")),
        ("tool_calls_since 1h, slowest 100", queries.Query(_SLOWEST.format(interval="1 HOUR"))),
        ("tool_calls_since 1d, slowest 100", queries.Query(_SLOWEST.format(interval="1 DAY"))),
        ("tool_calls_since 1d, per tool, status", queries.Query(_BY_STATUS.format(interval="1 DAY"))),
        ("cost per team", queries.cost("team")),
        ("cost total", queries.cost_total()),
        ("session_costs view", queries.Query("SELECT * FROM session_costs")),
        ("agent_costs view", queries.Query("SELECT * FROM agent_costs")),
        ("cost_daily view", queries.Query("SELECT * FROM cost_daily")),
        # `agentwatch search`: a word in one event, through the text indexes; the same question
        # without them (a scan) is the reference. Without the query condition cache, which would
        # remember which granules matched the run before: each run is a first search.
        ("search, a rare word", _settings(session_queries.search(NEEDLE), "use_query_condition_cache = 0")),
        (
            "search, a rare word, no index (scan)",
            _settings(session_queries.search(NEEDLE), "use_query_condition_cache = 0, use_skip_indexes = 0"),
        ),
    ]


def _settings(query: queries.Query, settings: str) -> queries.Query:
    return queries.Query(f"{query.sql}\nSETTINGS {settings}", query.params)


def ask(client: Any, work: queries.Query | SessionsTwoStep) -> float:
    """One run of `work`: its seconds."""
    started = time.perf_counter()
    if isinstance(work, queries.Query):
        client.query(work.sql, parameters=work.params)
    else:
        work(client)
    return time.perf_counter() - started


def time_query(client: Any, work: queries.Query | SessionsTwoStep, runs: int) -> float | str:
    try:
        ask(client, work)
    except Exception as exc:
        return f"error: {str(exc).splitlines()[0][:60]}"
    return statistics.median(ask(client, work) for _ in range(runs)) * 1000


def time_interleaved(
    clients: dict[int, Any], work: queries.Query | SessionsTwoStep, runs: int
) -> dict[int, float | str]:
    """The median ms of `work` per size, its runs taken in turn over the sizes (a warm-up each
    first), so that a change of the machine's load in between moves every size alike."""
    medians: dict[int, float | str] = {}
    times: dict[int, list[float]] = {}
    for size, client in clients.items():
        try:
            ask(client, work)
            times[size] = []
        except Exception as exc:
            medians[size] = f"error: {str(exc).splitlines()[0][:60]}"
    for _ in range(runs):
        for size, taken in times.items():
            taken.append(ask(clients[size], work))
    return {**medians, **{size: statistics.median(t) * 1000 for size, t in times.items()}}


# A live store's newest API messages: 40 of sessions of the history (picked by `seed`), now.
_FRESH = """\
INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, team, model, output_tokens,
                      cost_usd, version)
SELECT session_id, concat('fresh-{seed}-', session_id), 'r', now64(3), 'agent-0', 'team-0', 'claude-opus-4-1',
       100, 0.01, 1
FROM (SELECT DISTINCT session_id FROM session_cost ORDER BY cityHash64(session_id, {seed}) LIMIT 40)"""
# The cost rollups a fresh message lands in that the session questions read.
_FRESH_TABLES = ("session_cost", "session_totals")


def fresh_parts(client: Any, parts: int) -> None:
    """Leave the history as a live store has it: its newest messages in `parts` small parts the
    engine has not merged yet (the merges of the session cost rollups stopped, then `parts`
    inserts of 40 messages each). A question that folds rows at read (FINAL) folds those."""
    held = {
        row[0]
        for row in client.query(
            "SELECT name FROM system.tables WHERE database = currentDatabase()"
        ).result_rows
    }
    for table in _FRESH_TABLES:
        if table in held:
            client.command(f"SYSTEM STOP MERGES {table}")
    for seed in range(parts):
        client.command(_FRESH.format(seed=seed))


def settle(client: Any, limit_s: float = 600) -> float:
    """Wait until the engine's background merges of the fresh history are done, and the
    migrations' mutations (an index or projection built for the rows stored before): a live
    store's parts are merged as they come, and timing during the merges measures the merges.
    Returns the seconds waited."""
    started = time.perf_counter()
    busy = (
        "SELECT (SELECT count() FROM system.merges) + "
        "(SELECT count() FROM system.mutations WHERE database = currentDatabase() AND NOT is_done)"
    )
    while time.perf_counter() - started < limit_s:
        if not client.query(busy).result_rows[0][0]:
            break
        time.sleep(1)
    return time.perf_counter() - started


def open_history(base: Path, root: Any, size: int, days: float, reuse: bool) -> Any:
    """A client on the history of `size` events over `days` days in `base`: migrated and reused
    when it is there (with --dir), else built."""
    name = f"history_{size}" if days == DAYS else f"history_{size}_{days:g}d"
    root.command(f"CREATE DATABASE IF NOT EXISTS {name}")
    client = clickhouse_connect.get_client(dsn=f"chdb://{base}", database=name)
    started = time.perf_counter()
    applied = apply_migrations(client)
    held = stored(client)
    if reuse and held == size:
        # A history this script built before in --dir: timed again as it is, after the
        # migrations added since (their backfills) if any.
        took = time.perf_counter() - started
        migrated = f", after {', '.join(applied)} ({took:.0f} s)" if applied else ""
        age = client.query("SELECT dateDiff('minute', max(timestamp), now64(3)) FROM events").result_rows[0][
            0
        ]
        print(f"reusing the {size:,} events in {base / name}{migrated}; its newest is {age} minutes old")
        return client
    if held:
        raise SystemExit(f"{base / name} holds {held:,} events, not {size:,}: give another --dir")
    seconds = build(client, size, days)
    print(
        f"built {size:,} events over {days:g} days in {seconds:.0f} s ({size / seconds:,.0f} events/s, "
        "rollups included)"
    )
    return client


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the engine's data goes (a temporary dir)"
    )
    parser.add_argument("--only", default="", help="time only the queries whose title matches this regex")
    parser.add_argument(
        "--same-rate", action="store_true", help="every size at the largest's rate (it spans the 30 days)"
    )
    parser.add_argument(
        "--fresh-parts",
        type=int,
        default=0,
        help="after the merges settle, add this many small unmerged parts of new API messages "
        "(a live store's newest; changes a --dir history)",
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="build or open every size first, then take each query's runs in turn over the sizes",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    base = args.dir or Path(tempfile.mkdtemp(prefix="history-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(base).free
    root = clickhouse_connect.get_client(dsn=f"chdb://{base}")
    work: list[tuple[str, queries.Query | SessionsTwoStep]] = [
        *windows(),
        *dashboard(),
        *((t, queries.Query(sql)) for t, sql in documented()),
    ]
    results: dict[str, dict[int, float | str]] = {name: {} for name, _ in work}
    kept: list[int] = []
    clients: dict[int, Any] = {}
    for size in sizes:
        if size * BYTES_PER_EVENT * 2 > free:
            print(f"skipping {size:,} events: about {size * BYTES_PER_EVENT * 2 / 1e9:.1f} GB needed, "
                  f"{free / 1e9:.1f} GB free")  # fmt: skip
            continue
        days = DAYS * size / max(sizes) if args.same_rate else DAYS
        client = open_history(base, root, size, days, reuse=args.dir is not None)
        kept.append(size)
        print(f"background merges settled after {settle(client):.0f} s")
        if args.fresh_parts:
            fresh_parts(client, args.fresh_parts)
            print(f"{args.fresh_parts} fresh parts of 40 API messages each, their merges stopped")
        search = session_queries.search(NEEDLE)
        found = len(client.query(search.sql, parameters=search.params).result_rows)
        print(f"search {NEEDLE!r}: {found} event(s) found (1 expected)")
        if args.interleave:
            clients[size] = client
            continue
        for title, query in work:
            if args.only and not re.search(args.only, title):
                continue
            results[title][size] = time_query(client, query, args.runs)
        client.close()
        print_table(results, kept)  # after each size: a long run still leaves its figures so far
    if clients:
        for title, query in work:
            if not args.only or re.search(args.only, title):
                results[title] = time_interleaved(clients, query, args.runs)
        for client in clients.values():
            client.close()
        print_table(results, kept)
    root.close()
    if args.dir is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def print_table(results: dict[str, dict[int, float | str]], sizes: list[int]) -> None:
    heads = [f"{s / 1e6:g}M" if s >= 1_000_000 else f"{s / 1e3:g}k" for s in sizes]
    growth = [f"x {h}/{heads[0]}" for h in heads[1:]]
    print()
    print(
        "| query | "
        + " | ".join(f"{h} (ms)" for h in heads)
        + (" | " + " | ".join(growth) if growth else "")
        + " |"
    )
    print("|---" * (1 + len(heads) + len(growth)) + "|")
    for title, by_size in results.items():
        cells = []
        for size in sizes:
            value = by_size.get(size, "")
            cells.append(f"{value:.1f}" if isinstance(value, float) else str(value))
        ratios = []
        first = by_size.get(sizes[0]) if sizes else None
        for size in sizes[1:]:
            later = by_size.get(size)
            ok = isinstance(later, float) and isinstance(first, float) and first > 0
            ratios.append(f"{later / first:.2f}" if ok else "")  # type: ignore[operator]
        print(f"| {title} | " + " | ".join(cells + ratios) + " |")


if __name__ == "__main__":
    raise SystemExit(main())
