"""The team's tasks as the store answers them (queries.window_tasks): keyed as agents are, so a
lead's TaskCreated and its teammate's TaskCompleted are one task whatever team name each carries;
the figures are those of plain SQL over the stored events."""

from __future__ import annotations

from typing import Any

from clickhouse_connect.driver.client import Client

from agentwatch.contract import encode_envelope
from agentwatch.store import live_roster, queries
from agentwatch.store.answer import Answer, from_rows
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.writes import insert_batch
from tests.team_tasks import team_envelopes

OTHER = "0b1e5a7c-3d2f-4e8a-9c6b-5d4e3f2a1b0c"


def ask(client: Client, query: queries.Query) -> list[dict[str, Any]]:
    result = client.query(query.sql, parameters=query.params)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def stored_team(client: Client) -> None:
    """Two sessions named `demo` by GENIE_TEAM: three tasks (two done) and two (both done)."""
    apply_migrations(client)
    envelopes = team_envelopes(3, 2, environ={"GENIE_TEAM": "demo"})
    envelopes += team_envelopes(2, 2, environ={"GENIE_TEAM": "demo"}, session=OTHER)
    insert_batch(client, [encode_envelope(env) for env in envelopes], [])


def test_a_completion_meets_its_creation_and_the_counts_are_the_stores(chdb_database: Client) -> None:
    stored_team(chdb_database)
    tasks = ask(chdb_database, queries.window_tasks())
    assert {(t["tasks_total"], t["open_total"]) for t in tasks} == {(5, 1)}
    shown = [(t["scope"][:8], t["task_id"], t["created_by"], t["completed_by"]) for t in tasks]
    assert shown[0] == ("96f21a61", "3", "main-96f21a61", ""), "the open one first"
    assert sorted(shown[1:]) == [
        ("0b1e5a7c", "1", "main-0b1e5a7c", "researcher"),
        ("0b1e5a7c", "2", "main-0b1e5a7c", "researcher"),
        ("96f21a61", "1", "main-96f21a61", "researcher"),
        ("96f21a61", "2", "main-96f21a61", "researcher"),
    ]
    assert {t["team"] for t in tasks} == {"demo"}
    # Plain SQL over the raw events: tasks created per session, and those never completed.
    plain = ask(
        chdb_database,
        queries.Query(
            "SELECT session_id, JSONExtractString(data, 'task_id') AS task, "
            "countIf(kind = 'task_completed') = 0 AS open FROM events "
            "WHERE kind IN ('task_created', 'task_completed') GROUP BY session_id, task",
            {},
        ),
    )
    assert len(plain) == len(tasks) and sum(p["open"] for p in plain) == tasks[0]["open_total"]


async def test_the_team_view_counts_the_stores_tasks_and_names_their_sessions(chdb_database: Client) -> None:
    """The team view's tasks are the store's (not the live events this dashboard happened to see):
    its head says the store's count and the open ones, each row its session."""
    from textual.widgets import DataTable, Static

    from agentwatch.tui.views import TeamScreen
    from tests.tui.test_tui_sessions import cells, dashboard, until

    stored_team(chdb_database)
    store = ask(chdb_database, queries.window_tasks())
    app = dashboard(chdb_database)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.state.truth_in_once, "the store's answer")
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TeamScreen), "team view")
        screen = app.screen
        table = screen.query_one("#team-tasks", DataTable)
        await until(pilot, lambda: table.row_count == len(store), "tasks")
        head = str(screen.query_one(Static).render())
        rows = cells(table)
    assert f"{store[0]['tasks_total']} tasks ({store[0]['open_total']} open)" in head, head
    assert sorted((r[0], r[1], r[2]) for r in rows) == sorted(
        (t["scope"][:8], t["task_id"], "done" if t["completed"] else "open") for t in store
    )


def test_the_dashboards_tasks_from_the_windows_scopes_equal_the_one_question(chdb_database: Client) -> None:
    """live_roster.tasks asks with the window's scopes and its agents' first time (read already):
    the rows of queries.window_tasks, for a window of both sessions and of the newest alone."""
    stored_team(chdb_database)

    def ask_one(query: queries.Query) -> Answer:
        result = chdb_database.query(query.sql, parameters=query.params)
        return from_rows(result.column_names, [t.name for t in result.column_types], result.result_rows)

    sizes = set()
    for limit in (1, 300):
        window = live_roster.read(ask_one, limit, 0)
        got = live_roster.tasks(ask_one, window, 2000)
        assert got == ask_one(queries.window_tasks(2000, limit, 0)).dicts()
        sizes.add(len(got))
    assert sizes in ({5, 3}, {5, 2}), sizes  # one session's tasks, then both sessions'
