"""`agentwatch mcp` driven by the MCP SDK's own stdio client against a running pipeline: it lists
six short tools, and every tool answers what `agentwatch sql` says over the same rows; a write
through the SQL tool is refused and changes nothing, and its rows are capped.

The pipeline holds two demo runs, the shared transcripts' usage (for cost) and a killed session
whose repeated failures fire alerts.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agentwatch.ask import tools
from tests.conftest import PROJECTS, ROOT, bus_login, clean_env, free_port, run_cli, tool
from tests.e2e.test_one_truth import KILLED, killed_session, sql, wait_sql
from tests.integration.test_store import Service

pytestmark = pytest.mark.timeout(300)

Call = Callable[[str, dict[str, Any]], Any]


def settled(env: dict[str, str]) -> None:
    """Until the store's counts stop moving (the demo and the import are written)."""
    query = "SELECT (SELECT count() FROM events) + (SELECT count() FROM messages) AS n"
    last, deadline = -1, time.monotonic() + 60
    while time.monotonic() < deadline:
        (row,) = sql(env, query)
        if row["n"] == last:
            return
        last = row["n"]
        time.sleep(1.0)
    raise AssertionError("the store kept changing")


def agrees(
    call: Call, name: str, args: dict[str, Any], want: Callable[[Any], bool], timeout: float = 30
) -> Any:
    """The tool's answer once `want` holds for it (a watchdog's timer may change alerts meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        got = call(name, args)
        if want(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def keyed(rows: list[dict[str, Any]], *columns: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in rows)


def check_roster(env: dict[str, str], call: Call) -> tuple[str, str, str]:
    answer = call("roster", {"limit": 300})
    columns = ", ".join(tools.ROSTER_COLUMNS)
    rows = sql(env, f"SELECT {columns} FROM agents")  # noqa: S608 (constants)
    assert keyed(answer["agents"], *tools.ROSTER_COLUMNS) == keyed(rows, *tools.ROSTER_COLUMNS)
    (total,) = sql(env, "SELECT count() AS agents, sum(events) AS events FROM agents")
    assert answer["total"] == total
    done = [a["state"] in ("lost", "stopped") for a in answer["agents"]]
    assert done == sorted(done) and any(done) and not all(done), "the live ones first"
    busiest = max(answer["agents"], key=lambda a: (a["events"], a["agent"]))
    return busiest["host"], busiest["scope"], busiest["agent"]


def check_timeline(env: dict[str, str], call: Call, key: tuple[str, str, str]) -> None:
    host, scope, agent = key
    answer = call("timeline", {"agent": agent, "scope": scope, "limit": 500})
    assert (answer["host"], answer["scope"], answer["agent"]) == key
    stored = sql(
        env,
        f"SELECT id FROM events WHERE agent = '{agent}' AND host = '{host}' AND session_id = '{scope}' "  # noqa: S608
        f"UNION ALL SELECT id FROM messages WHERE from_agent = '{agent}' AND session_id = '{scope}'",
    )
    assert sorted(e["id"] for e in answer["events"]) == sorted(r["id"] for r in stored)
    times = [e["timestamp"] for e in answer["events"]]
    assert times == sorted(times), "oldest first"
    whole = call("timeline", {"scope": scope, "limit": 500})
    everyone = sql(env, f"SELECT count() AS n FROM events WHERE session_id = '{scope}'")  # noqa: S608
    messages = sql(env, f"SELECT count() AS n FROM messages WHERE session_id = '{scope}'")  # noqa: S608
    assert len(whole["events"]) == everyone[0]["n"] + messages[0]["n"] > len(answer["events"])
    refused = call("timeline", {"agent": "nobody-at-all"})
    assert refused == "no agent 'nobody-at-all': see roster"


def check_cost(env: dict[str, str], call: Call) -> None:
    answer = call("cost", {"by": "model"})
    usage = sql(env, "SELECT model, count() AS api_calls, sum(input_tokens) AS input_tokens, "
                     "sum(output_tokens) AS output_tokens, round(sum(cost_usd), 6) AS cost_usd "
                     "FROM usage FINAL GROUP BY model")  # fmt: skip
    got = [{**r, "cost_usd": round(r["cost_usd"], 6)} for r in answer["rows"]]
    columns = ("model", "api_calls", "input_tokens", "output_tokens", "cost_usd")
    assert keyed(got, *columns) == keyed(usage, *columns) and usage
    (claude,) = sql(env, "SELECT round(sum(total_cost_usd), 6) AS usd FROM cost_states FINAL")
    assert round(answer["total"]["claude_cost_usd"], 6) == claude["usd"] > 0
    recent = call("cost", {"by": "model", "hours": 1})
    last_hour = (
        "SELECT count() AS n FROM usage FINAL WHERE timestamp >= toStartOfHour(now() - INTERVAL 1 HOUR)"
    )
    (hour,) = sql(env, last_hour)
    assert recent["total"]["api_calls"] == hour["n"]
    by_session = call("cost", {"by": "session"})
    # Sessions with an API message: the cost list leaves out those that made none, as its total does.
    sessions = sql(env, "SELECT session_id, api_calls FROM session_costs WHERE api_calls > 0")
    assert keyed(by_session["rows"], "session_id", "api_calls") == keyed(sessions, "session_id", "api_calls")
    assert call("cost", {"by": "planet"}).startswith("by must be one of session, agent")


def check_alerts(env: dict[str, str], call: Call) -> None:
    def same(answer: Any) -> bool:
        rows = sql(env, "SELECT id, rule, severity, state, agent FROM open_alerts")
        return keyed(answer["alerts"], "id", "rule", "severity", "state", "agent") == keyed(
            rows, "id", "rule", "severity", "state", "agent"
        )

    answer = agrees(call, "alerts", {}, same)
    assert same(answer) and answer["alerts"], answer
    assert any(a["session_id"] == KILLED for a in answer["alerts"])
    changes = call("alerts", {"all": True})
    assert len(changes["alerts"]) >= len(answer["alerts"])


def check_coverage(env: dict[str, str], call: Call) -> None:
    answer = call("coverage", {"all": True})
    rows = sql(env, "SELECT session_id, max_seq, stored, missing FROM coverage")
    columns = ("session_id", "max_seq", "stored", "missing")
    listed = {r["session_id"] for r in answer["sessions"]}
    rows = [r for r in rows if r["session_id"] in listed]
    assert keyed(answer["sessions"], *columns) == keyed(rows, *columns)
    (total,) = sql(env, "SELECT count() AS sessions, sum(max_seq) AS total_emitted FROM coverage")
    assert answer["total"]["sessions"] == total["sessions"] > 0
    assert answer["total"]["total_emitted"] == total["total_emitted"]


def check_sql(env: dict[str, str], call: Call) -> None:
    query = "SELECT event, count() AS n FROM events GROUP BY event ORDER BY event"
    answer = call("sql", {"query": query})
    assert answer == {"rows": sql(env, query), "truncated": False}
    (before,) = sql(env, "SELECT count() AS n FROM events")
    target = Path(env["AGENTWATCH_DATA_DIR"]).parent / "written-by-mcp.txt"
    for write in ("INSERT INTO events (id) VALUES ('from-mcp')", "DROP TABLE events",
                  "ALTER TABLE events DELETE WHERE 1", "KILL QUERY WHERE 1",
                  f"SELECT 'x' AS x INTO OUTFILE '{target}' APPEND",
                  f"SELECT 1 FORMAT CSV INTO OUTFILE '{target}'"):  # fmt: skip
        refused = call("sql", {"query": write})
        assert isinstance(refused, str) and "refused:" in refused and "Traceback" not in refused, refused
    assert not target.exists()
    assert sql(env, "SELECT count() AS n FROM events") == [before]
    capped = call("sql", {"query": "SELECT number FROM system.numbers LIMIT 5000", "max_rows": 10})
    assert len(capped["rows"]) == 10 and capped["truncated"]
    most = call("sql", {"query": "SELECT number FROM system.numbers LIMIT 5000", "max_rows": 100000})
    assert len(most["rows"]) == tools.SQL_MAX_ROWS and most["truncated"]


async def drive(env: dict[str, str]) -> None:
    server = StdioServerParameters(command=tool("agentwatch"), args=["mcp"], env=env)
    async with Client(server) as client:
        listed = await client.list_tools()
        wire = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
        assert wire == tools.tool_list(), "the schemas as written, nothing added"
        size = tools.schema_bytes(wire)
        assert len(wire) <= 6 and size / 4 < 1000, size
        readme = (ROOT / "README.md").read_text()
        assert f"{size:,} bytes" in readme and f"about {size // 4} tokens" in readme, size
        loop = asyncio.get_running_loop()

        def call(name: str, args: dict[str, Any]) -> Any:
            result = asyncio.run_coroutine_threadsafe(client.call_tool(name, args), loop).result(60)
            text = result.content[0].text  # type: ignore[union-attr]
            return text if result.is_error else json.loads(text)

        def checks() -> None:
            key = check_roster(env, call)
            check_timeline(env, call, key)
            check_cost(env, call)
            check_alerts(env, call)
            check_coverage(env, call)
            check_sql(env, call)

        await asyncio.to_thread(checks)


def test_agents_ask_the_store_through_mcp(tmp_path: Path) -> None:
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        AGENTWATCH_ALERT_BELL="0",
    )
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        imported = run_cli("import", str(PROJECTS), env=env, timeout=120)
        assert imported.returncode == 0, imported.stderr
        for seed in ("21", "22"):
            demo = run_cli("demo", "--rate", "0", "--count", "300", "--seed", seed, "--agents", "3", env=env)
            assert demo.returncode == 0, demo.stderr
        sent = killed_session(bus_login(env))
        stored = f"SELECT count() AS n FROM events WHERE session_id = '{KILLED}'"  # noqa: S608 (a constant)
        wait_sql(env, stored, lambda r: r[0]["n"] >= sent - 1, "the killed session stored")
        wait_sql(env, "SELECT count() AS n FROM open_alerts", lambda r: r[0]["n"] >= 1, "alerts fired")
        wait_sql(env, "SELECT count() AS n FROM session_costs", lambda r: r[0]["n"] > 0, "usage stored")
        settled(env)
        asyncio.run(drive(env))
    finally:
        code, output = up.stop()
        assert code == 0, output
