"""The live dashboard on a team's year: every question the dashboard asks at open and on refresh
(tui/truth.read, and the feed at open), the MCP `roster`, and every SQL block of docs/queries.md,
timed on a 20-person team's year of 1M and 10M events in embedded ClickHouse.

The history: 20 people, a host each, over 365 days; sessions of 300 events (a lead and two
subagents: a prompt, a task created and, once the session is over, completed, tool calls and their
results, a few failures, SubagentStart and SubagentStop, a message from a subagent to its lead),
one API message per 20 events; every session ended
(SessionEnd) but the newest 5, which are live (their last events a few seconds old). Session ids
are random, as Claude Code's are, so a session's rows lie anywhere in a rollup keyed by scope. The
store has no repository column yet: the history has none. 1M events are 3,333 sessions and 10,000
agents; 10M events 33,333 sessions and 100,000 agents.

    python benchmarks/team_year_bench.py [--sizes 1000000,10000000] [--runs 7] [--dir DIR] [--before SRC]
        [--only REGEX]

With --before SRC, the same questions as another checkout's `src` asks them (its store/queries.py,
read by a child process) are timed in the same run, on the same histories: the reference. With
--dir, a history built there before is timed again (after the schema's newer migrations); build
the 10M one once, it takes minutes. Every query runs --runs times after a warm-up, the sizes in
turn (history_bench's --interleave); the table gives the medians and the growth from 1M to 10M.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import clickhouse_connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from agentwatch.agents import LOST_AFTER_S
from agentwatch.store import agents_sql, live_roster, live_window, queries
from agentwatch.store.answer import decode
from agentwatch.store.migrations import apply_migrations
from agentwatch.tui import truth
from history_bench import documented, print_table, settle, time_interleaved

BLOCK = 1_000_000
EVENTS_PER_SESSION = 300
HOSTS = 20
LIVE = 5
YEAR_MS = 365 * 86_400_000

# Per event n: its session s and place k; the newest LIVE sessions end now, the others are spread
# over the year, 2 s between events (a session lasts 10 minutes). Each session creates a task at
# its start and, when it is over, completes it near its end.
_WHEN = """\
if(s >= {sessions} - {live},
   now64(3) - toIntervalMillisecond((({sessions} - 1 - s) * 300 + 299 - k) * 1000),
   now64(3) - toIntervalMillisecond({year_ms}) + toIntervalMillisecond(
       toUInt64(s * ({year_ms} - 3600000) / {sessions}) + k * 2000))"""
_SESSION = "lower(concat(hex(cityHash64(s, 1)), hex(cityHash64(s, 2))))"
_AGENT = "multiIf(k >= 100 AND k < 200, 'Explore', k >= 200 AND k < 280, 'Plan', 'main')"
# @WHEN@, @SESSION@, @AGENT@ and @HOST@ are the expressions above; then str.format fills the values.
_EVENTS = """\
INSERT INTO events (id, timestamp, event, kind, agent, session_id, agent_id, agent_type, parent_agent,
                    host, tool_name, tool_use_id, text, data, seq)
SELECT
    concat('t', leftPad(toString(n), 12, '0')) AS id,
    @WHEN@ AS timestamp,
    multiIf(k = 0, 'SessionStart', k = 1, 'UserPromptSubmit', k = 2, 'TaskCreated',
            k = 297 AND s < {sessions} - {live}, 'TaskCompleted', k = 100 OR k = 200, 'SubagentStart',
            k = 199 OR k = 279, 'SubagentStop', k = 299 AND s < {sessions} - {live}, 'SessionEnd',
            k % 2 = 1, 'PreToolUse', cityHash64(n) % 25 = 0, 'PostToolUseFailure', 'PostToolUse') AS event,
    multiIf(event = 'PreToolUse', 'tool_call', event = 'PostToolUse', 'tool_result',
            event = 'PostToolUseFailure', 'tool_error', event = 'UserPromptSubmit', 'prompt',
            event = 'TaskCreated', 'task_created', event = 'TaskCompleted', 'task_completed', 'agent')
        AS kind,
    @AGENT@ AS agent,
    @SESSION@ AS session_id,
    if(agent = 'main', '', lower(hex(cityHash64(s, agent)))) AS agent_id,
    if(agent = 'main', '', agent) AS agent_type,
    if(agent = 'main', '', 'main') AS parent_agent,
    @HOST@ AS host,
    if(kind IN ('tool_call', 'tool_result', 'tool_error'),
       ['Bash', 'Read', 'Edit', 'Grep', 'Glob', 'Write'][1 + cityHash64(s, intDiv(k - 1, 2)) % 6], '')
        AS tool_name,
    if(tool_name = '', '', concat('tu-', toString(s), '-', toString(intDiv(k - 1, 2)))) AS tool_use_id,
    concat('step ', toString(k)) AS text,
    multiIf(event = 'PostToolUse', concat('{{"duration_ms":', toString(cityHash64(n) % 4000), '}}'),
            kind IN ('task_created', 'task_completed'),
            concat('{{"task_id":"', toString(s), '","task_subject":"task of session ', toString(s), '"}}'),
            '{{}}') AS data,
    k + 1 AS seq
FROM (SELECT number + {start} AS n, intDiv(n, 300) AS s, n % 300 AS k FROM numbers({count}))"""
_MESSAGES = """\
INSERT INTO message_envelopes (id, timestamp, v, event, kind, agent, team, peer, text, session_id, host,
                               data)
SELECT concat('tm', toString(s)), @WHEN@, 1, 'PostToolUse', 'message', 'Explore', '', 'main', 'found it',
    @SESSION@, @HOST@, '{{"from":"Explore","to":"main","summary":"found it","message":"ok"}}'
FROM (SELECT intDiv({start}, 300) + number AS s, 150 AS k FROM numbers(intDiv({count}, 300)))"""
_USAGE = """\
INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, agent_id, agent_type,
                      parent_agent, host, model, input_tokens, output_tokens, cache_read_tokens, cost_usd,
                      version)
SELECT @SESSION@, concat('tmsg-', toString(n)), concat('treq-', toString(n)), @WHEN@, @AGENT@ AS agent,
    if(agent = 'main', '', lower(hex(cityHash64(s, agent)))), if(agent = 'main', '', agent),
    if(agent = 'main', '', 'main'), @HOST@,
    ['claude-opus-4-1', 'claude-sonnet-4-5'][1 + n % 2], 1000 + n % 500, 200 + n % 300, 5000,
    0.01 + (n % 7) / 1000, 1
FROM (SELECT number * 20 + {start} AS n, intDiv(n, 300) AS s, n % 300 AS k
      FROM numbers(intDiv({count}, 20)))"""


def _insert(template: str) -> str:
    return (
        template.replace("@WHEN@", _WHEN)
        .replace("@SESSION@", _SESSION)
        .replace("@AGENT@", _AGENT)
        .replace("@HOST@", f"concat('host-', toString(s % {HOSTS}))")
    )


def build(client: Any, total: int) -> float:
    started = time.perf_counter()
    sessions = total // EVENTS_PER_SESSION
    for start in range(0, total, BLOCK):
        values = {"start": start, "count": min(BLOCK, total - start), "sessions": sessions, "live": LIVE,
                  "year_ms": YEAR_MS}  # fmt: skip
        for sql in (_EVENTS, _MESSAGES, _USAGE):
            client.command(_insert(sql).format(**values))
    return time.perf_counter() - started


def open_history(base: Path, root: Any, size: int) -> Any:
    name = f"team_year_{size}"
    root.command(f"CREATE DATABASE IF NOT EXISTS {name}")
    client = clickhouse_connect.get_client(dsn=f"chdb://{base}", database=name)
    applied = apply_migrations(client)
    held = int(client.query("SELECT count() FROM events").result_rows[0][0])
    tasks = int(client.query("SELECT count() FROM events WHERE kind = 'task_created'").result_rows[0][0])
    if held == size and not tasks:  # a year stored before its sessions had tasks: made again
        print(f"{name} holds no tasks: making it again")
        root.command(f"DROP DATABASE {name}")
        return open_history(base, root, size)
    if held == size:
        print(f"reusing the {size:,} events of {name}" + (f", after {', '.join(applied)}" if applied else ""))
        return client
    if held:
        raise SystemExit(f"{base / name} holds {held:,} events, not {size:,}: give another --dir")
    print(f"built {size:,} events in {build(client, size):.0f} s")
    return client


def stored_ids(client: Any) -> queries.Query:
    """The watermark: which of the 2,000 newest event ids the store holds (a dashboard counting
    live events on top of its answer asks about those it counted, from the oldest one's time less
    tui/truth's margin on)."""
    rows = client.query(
        "SELECT id, toUnixTimestamp64Milli(timestamp) / 1000 FROM events ORDER BY timestamp DESC LIMIT 2000"
    ).result_rows
    oldest = min(float(t) for _, t in rows) - truth.STORED_CHECK_MARGIN_SECONDS
    return queries.stored_ids([str(i) for i, _ in rows], oldest)


def asker(client: Any) -> live_roster.Ask:
    """The dashboard's reader over this client: run_query's checks and reply, decoded."""
    return lambda q: decode(queries.run_query(client, q.sql, q.params))


class WindowQuestion:
    """One of the live window's questions that take its scopes (store/live_roster.py): the scopes
    asked once per history, untimed; the question itself timed."""

    def __init__(self, make: Any) -> None:
        self.make = make
        self.scopes: dict[int, list[tuple[str, str]]] = {}

    def __call__(self, client: Any) -> None:
        if id(client) not in self.scopes:
            found = asker(client)(live_roster.scopes_query(300, LOST_AFTER_S))
            self.scopes[id(client)] = [(str(h), str(s)) for h, s in found.rows]
        query = self.make(self.scopes[id(client)])
        client.query(query.sql, parameters=query.params)


class WindowTasks:
    """The team tasks as the dashboard asks them (live_roster.tasks): the window read once per
    history, untimed; the tasks question, with its scopes and first time, timed."""

    def __init__(self) -> None:
        self.windows: dict[int, live_roster.Window] = {}

    def __call__(self, client: Any) -> None:
        if id(client) not in self.windows:
            self.windows[id(client)] = live_roster.read(asker(client), 300, LOST_AFTER_S)
        query = live_roster.tasks_query(
            self.windows[id(client)].scopes, self.windows[id(client)].first_seen, 2000
        )
        client.query(query.sql, parameters=query.params)


class WholeWindow:
    """The live window as the dashboard reads it: its questions through run_query, then the fold."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def __call__(self, client: Any) -> None:
        live_roster.read(asker(client), self.limit, LOST_AFTER_S)


class Feed:
    """The feed at open as the dashboard asks it (live_roster.newest_events: the last day first)."""

    def __call__(self, client: Any) -> None:
        live_roster.newest_events(asker(client), 2000)


class OpenDashboard:
    """`agentwatch` opened on the history: from the app's start to a roster on screen, the store's
    first answer and the feed's history in (the app reads this client as it reads the query
    service, the bus left out)."""

    def __call__(self, client: Any) -> None:
        import asyncio

        from agentwatch.tui.app import AgentwatchApp

        class Quiet:
            async def run(self, deliver: Any, status: Any) -> None:
                del deliver
                status(True, "bus: none")
                await asyncio.Event().wait()

        class Direct:
            def query(self, sql: str, params: Any = None) -> Any:
                return asker(client)(queries.Query(sql, params))

        app = AgentwatchApp(Quiet(), Direct(), refresh_seconds=3600.0)
        app.state.show_folded = True  # a history's finished agents are folded: show them too

        async def until_shown() -> None:
            deadline = time.monotonic() + 60
            async with app.run_test(size=(160, 48)) as pilot:
                while not (app.state.truth_in_once and app.state.history_done and app._roster_rows):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no roster on screen in 60 s: {app.state.store_text}")
                    await pilot.pause(0.01)

        asyncio.run(until_shown())


def dashboard() -> list[tuple[str, Any]]:
    """What the dashboard asks at open and every refresh (tui/truth.read), the feed at open, the
    MCP roster: as this tree asks them; the whole read and the dashboard's open; and the roster as
    one question, the reference the fold is checked against."""
    return [
        ("store mark (every refresh)", queries.STORE_MARK),
        ("window: scopes", live_roster.scopes_query(300, LOST_AFTER_S)),
        ("window: agents", WindowQuestion(live_roster.agents_query)),
        ("window: costs", WindowQuestion(live_roster.costs_query)),
        ("window: the hour's cost", live_roster.HOUR),
        ("team edges", queries.window_edges(2000, 300)),
        ("team tasks", WindowTasks()),
        ("team tasks, the one question", queries.window_tasks(2000, 300)),
        ("open alerts", queries.alerts(open_only=True, limit=10_000)),
        ("recent alerts", queries.alerts(limit=200)),
        ("feed at open (2,000 events)", Feed()),
        ("feed at open, the whole history asked", queries.recent_events(2000)),
        ("whole window (4 questions + fold)", WholeWindow(300)),
        ("MCP roster (50)", WholeWindow(50)),
        ("reference: roster in one question", queries.roster(300)),
        ("reference: costs in one question", queries.DASHBOARD_COSTS),
        ("dashboard open to first screen", OpenDashboard()),
    ]


LAYERED_VIEW = "agents_since_layered"


def layered(clients: dict[int, Any], docs: list[tuple[str, str]]) -> list[tuple[str, queries.Query]]:
    """The docs' blocks over agents_since, asked of the view as 020 made it (four layers; 026 made
    it two), made beside it in each history: the reference, on the same store in the same run."""
    view = agents_sql.agents_select_layered(live_window._SINCE_SCOPES_020)
    for client in clients.values():
        client.command(f"CREATE OR REPLACE VIEW {LAYERED_VIEW} AS {view}")
    return [
        (
            f"reference: {title[6:]} (020)"[:44],
            queries.Query(sql.replace("agents_since(", f"{LAYERED_VIEW}(")),
        )
        for title, sql in docs
        if "agents_since(" in sql
    ]


# What the child prints: the same questions as another tree's queries.py asks them.
_BEFORE = """\
import json
from agentwatch.store import queries
edges = getattr(queries, "window_edges", None)
asked = {
    "roster (300)": queries.roster(300),
    "team edges": edges(2000, 300) if edges else queries.team_edges(None, 2000),
    "dashboard costs": queries.DASHBOARD_COSTS,
    "MCP roster (50)": queries.roster(50),
}
print(json.dumps({title: [q.sql, q.params] for title, q in asked.items()}))
"""


def before(src: Path) -> list[tuple[str, queries.Query]]:
    """The questions of another tree (its src directory) that this tree asks differently, and its
    docs/queries.md blocks."""
    out = subprocess.run(
        [sys.executable, "-c", _BEFORE],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(src)},
    ).stdout
    asked = [(f"before: {t}", queries.Query(sql, params)) for t, (sql, params) in json.loads(out).items()]
    docs = documented(src.parent / "docs" / "queries.md")
    return asked + [(f"before: {t}", queries.Query(sql)) for t, sql in docs]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the histories are kept (a temporary dir)"
    )
    parser.add_argument("--before", type=Path, default=None, metavar="SRC", help="another checkout's src")
    parser.add_argument("--only", default="", help="time only the questions whose title matches this regex")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    base = args.dir or Path(tempfile.mkdtemp(prefix="team-year-"))
    base.mkdir(parents=True, exist_ok=True)
    root = clickhouse_connect.get_client(dsn=f"chdb://{base}")
    clients = {}
    for size in sizes:
        clients[size] = open_history(base, root, size)
        print(f"background merges settled after {settle(clients[size]):.0f} s")
    work = [
        *dashboard(),
        *((t, queries.Query(sql)) for t, sql in documented()),
        *layered(clients, documented()),
    ]
    if args.before:
        work += before(args.before.resolve())
    results: dict[str, dict[int, float | str]] = {}
    for title, query in work:
        if not args.only or re.search(args.only, title):
            results[title] = time_interleaved(clients, query, args.runs)
    results["watermark (2,000 ids)"] = {
        size: time_interleaved({size: client}, stored_ids(client), args.runs)[size]
        for size, client in clients.items()
    }
    print_table(results, sizes)
    for client in clients.values():
        client.close()
    root.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
