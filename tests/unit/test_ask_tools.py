"""The MCP server's tools as data: few, short, read-only; arguments checked before any query."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import pytest

from agentwatch.ask import tools
from agentwatch.store.answer import Answer


class Reader:
    """Answers every query with one fixed answer, and remembers what it was asked."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.asked: list[tuple[str, dict[str, Any], int]] = []

    def query(self, sql: str, params: Mapping[str, Any] | None = None, max_rows: int = 10_000) -> Answer:
        self.asked.append((sql, dict(params or {}), max_rows))
        return self.answer


WHEN = dt.datetime(2026, 11, 24, 9, 30, tzinfo=dt.UTC)


def test_six_tools_at_most_with_short_schemas() -> None:
    listed = tools.tool_list()
    assert len(listed) <= 6
    assert tools.schema_bytes() / 4 < 1000
    for tool in listed:
        assert tool["inputSchema"]["type"] == "object" and tool["annotations"] == {"readOnlyHint": True}
    assert set(tools.ANSWERS) == set(tools.TOOLS)


def test_answers_are_json_rows_with_iso_times() -> None:
    types = ("String", "UInt64", "DateTime64(3, 'UTC')")
    reader = Reader(Answer(("event", "n", "at"), types, [("Stop", 2, WHEN)]))
    text = tools.answer(reader, "sql", {"query": "SELECT 1", "max_rows": 5})
    row = {"event": "Stop", "n": 2, "at": "2026-11-24T09:30:00Z"}
    assert json.loads(text) == {"rows": [row], "truncated": False}
    assert reader.asked == [("SELECT 1", {}, 5)]


def test_the_row_cap_has_a_ceiling() -> None:
    reader = Reader(Answer(("n",), ("UInt8",), []))
    tools.answer(reader, "sql", {"query": "SELECT 1", "max_rows": 10**9})
    assert reader.asked[0][2] == tools.SQL_MAX_ROWS


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("sql", {}, "query is required"),
        ("sql", {"query": "SELECT 1", "max_rows": 0}, "max_rows must be a whole number"),
        ("cost", {"by": "planet"}, "by must be one of"),
        ("cost", {"hours": "soon"}, "hours must be a whole number"),
        ("alerts", {"all": "yes"}, "all must be true or false"),
        ("timeline", {}, "name an agent, a scope"),
        ("nothing", {}, "no tool 'nothing'"),
    ],
)
def test_arguments_that_do_not_fit_are_refused_before_any_query(
    name: str, args: dict[str, Any], message: str
) -> None:
    reader = Reader(Answer((), ()))
    with pytest.raises(tools.ToolInputError, match=message):
        tools.answer(reader, name, args)
    assert reader.asked == []


def test_a_cost_window_starts_at_the_hour() -> None:
    reader = Reader(Answer(("api_calls",), ("UInt64",), [(3,)]))
    answer = json.loads(tools.answer(reader, "cost", {"by": "team", "hours": 2}))
    since = reader.asked[0][1]["since"]
    assert since.endswith(":00:00.000") and answer["since"] == since[:19] + "Z"


@pytest.mark.parametrize("by", ["person", "repo", "branch"])
def test_cost_by_person_repository_or_branch_reads_their_rollup(by: str) -> None:
    reader = Reader(Answer(("api_calls",), ("UInt64",), [(3,)]))
    answer = json.loads(tools.answer(reader, "cost", {"by": by}))
    assert answer["by"] == by
    sql = reader.asked[0][0]
    assert "FROM cost_by_owner" in sql and f"GROUP BY {by}" in sql
