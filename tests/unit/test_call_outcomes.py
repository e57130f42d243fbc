"""A tool call's outcome names, written once (agents.CALL_OUTCOMES) and generated into the
store's tool_calls views (store/calls_sql.py -> 022_call_outcomes.sql)."""

from __future__ import annotations

from pathlib import Path

from agentwatch import agents
from agentwatch.store import calls_sql
from agentwatch.store.migrations import SCHEMA_DIR
from agentwatch.tui import model


def test_the_generated_sql_is_current() -> None:
    written = SCHEMA_DIR.joinpath(Path(calls_sql.OUTPUT).name).read_text(encoding="utf-8")
    assert written == calls_sql.render(), f"regenerate it: {calls_sql.COMMAND}"


def test_the_views_name_each_outcome_by_its_number_from_the_table() -> None:
    text = calls_sql.render()
    names = "['running', 'ok', 'error', 'interrupted', 'denied']"
    assert calls_sql.status_sql("outcome") == f"{names}[outcome + 1]"
    assert text.count(names) == 5 and "'orphan'" in text  # every status of both views
    assert "@" not in text.replace("{since:", "")  # every placeholder filled


def test_the_screen_says_a_failed_call_failed_interrupted_or_not() -> None:
    assert (
        agents.shown_outcome(agents.CALL_ERROR) == agents.shown_outcome(agents.CALL_INTERRUPTED) == "failed"
    )
    assert (model.RUNNING, model.OK, model.FAILED_CALL, model.DENIED) == ("running", "ok", "failed", "denied")
    assert set(agents.CALL_ENDS.values()) <= set(agents.CALL_OUTCOMES)
