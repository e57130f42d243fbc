"""The read side's queries, without ClickHouse: text with `{name:Type}` placeholders and a dict of
values (no value is ever formatted into the SQL), statements split outside quotes and comments,
errors cleaned of what the user did not type. Run against the real schema in tests/tui."""

from __future__ import annotations

import re

import pytest

from agentwatch.store import queries
from agentwatch.store.guard import statements
from agentwatch.store.queries import SESSIONS_LIMIT, TOOL_SORTS, TOOLS_LIMIT

# Numbers no query would contain on its own: if one shows up in the SQL, it was formatted in.
ODD_WINDOW = 987_654
ODD_LIMIT = 4_321


def placeholders(sql: str) -> set[str]:
    return set(re.findall(r"\{(\w+):\w+\}", sql))


@pytest.mark.parametrize("sort", TOOL_SORTS)
def test_tool_stats_binds_its_window_and_limit(sort: str) -> None:
    query = queries.tool_stats(ODD_WINDOW, sort, limit=ODD_LIMIT)
    assert query.params == {"window_s": ODD_WINDOW, "limit": ODD_LIMIT}
    assert placeholders(query.sql) == {"window_s", "limit"}
    assert str(ODD_WINDOW) not in query.sql and str(ODD_LIMIT) not in query.sql
    assert "toIntervalSecond({window_s:UInt32})" in query.sql
    assert query.sql.rstrip().endswith("LIMIT {limit:UInt32}")
    assert f"ORDER BY {TOOL_SORTS[sort]}\n" in query.sql, "the sort is the fixed clause of its name"


def test_active_sessions_binds_its_window_and_limit() -> None:
    query = queries.active_sessions(ODD_WINDOW, limit=ODD_LIMIT)
    assert query.params == {"window_s": ODD_WINDOW, "limit": ODD_LIMIT}
    assert placeholders(query.sql) == {"window_s", "limit"}
    assert str(ODD_WINDOW) not in query.sql and str(ODD_LIMIT) not in query.sql


def test_all_time_has_no_window_and_the_default_limits() -> None:
    tools = queries.tool_stats(None)
    sessions = queries.active_sessions(None)
    assert tools.params == {"limit": TOOLS_LIMIT}
    assert sessions.params == {"limit": SESSIONS_LIMIT}
    for query in (tools, sessions):
        assert placeholders(query.sql) == {"limit"}
        assert "toIntervalSecond" not in query.sql, "all time: no time condition"


def test_the_same_question_is_the_same_text() -> None:
    """Only the values differ between windows: ClickHouse can reuse what it made of the text."""
    assert queries.tool_stats(900).sql == queries.tool_stats(86_400).sql
    assert queries.active_sessions(900).sql == queries.active_sessions(3600, limit=5).sql


def test_unknown_sorts_and_empty_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown sort"):
        queries.tool_stats(3600, "tool; DROP TABLE events --")
    for window in (0, -60):
        with pytest.raises(ValueError, match="positive number of seconds"):
            queries.tool_stats(window)
        with pytest.raises(ValueError, match="positive number of seconds"):
            queries.active_sessions(window)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1;", ["SELECT 1"]),
        ("SELECT 1; DROP TABLE events", ["SELECT 1", "DROP TABLE events"]),
        ("SELECT 1; SELECT 2", ["SELECT 1", "SELECT 2"]),
        ("SELECT 'a;b', \"c;d\", `e;f`", ["SELECT 'a;b', \"c;d\", `e;f`"]),
        ("SELECT 'it\\'s; fine'", ["SELECT 'it\\'s; fine'"]),
        ("SELECT 1 -- a; comment\n", ["SELECT 1 -- a; comment"]),
        ("SELECT 1 /* ; */", ["SELECT 1 /* ; */"]),
        ("SELECT 1; -- trailing comment", ["SELECT 1"]),
        ("  ;  ; ", []),
        ("", []),
    ],
)
def test_statements_split_only_outside_quotes_and_comments(sql: str, expected: list[str]) -> None:
    assert statements(sql) == expected


class FakeClient:
    """Records what would reach ClickHouse; nothing should for a refused request."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def query(self, sql: str, parameters: object = None) -> object:  # noqa: ARG002
        self.sent.append(sql)
        raise RuntimeError(
            "Code: 62. DB::Exception: Syntax error: failed at position 7 (1): 1 FORMAT Native. Expected"
        )

    def raw_query(self, sql: str, parameters: object = None) -> bytes:
        """The guard's parse (EXPLAIN AST): the same engine, the same error."""
        return self.query(sql, parameters)  # type: ignore[return-value]


@pytest.mark.parametrize("sql", ["SELECT 1; DROP TABLE events", "SELECT 1; SELECT 2"])
def test_more_than_one_statement_is_refused_before_it_reaches_clickhouse(sql: str) -> None:
    client = FakeClient()
    reply = queries.run_query(client, sql)  # type: ignore[arg-type]
    assert reply == {"error": "one statement at a time: this has 2; run them one by one"}
    assert client.sent == []


def test_errors_never_quote_the_format_clause_the_user_did_not_type() -> None:
    reply = queries.run_query(FakeClient(), "SELEC 1")  # type: ignore[arg-type]
    assert "Syntax error" in reply["error"] and "FORMAT" not in reply["error"]
