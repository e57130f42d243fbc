"""Small things a person reads on the command line: numbers, progress, help pages."""

from __future__ import annotations

import io

import pytest

from agentwatch.cli import build_parser
from agentwatch.cli.export import Progress
from agentwatch.cli.sql import render
from agentwatch.store import session_queries
from agentwatch.store.answer import Answer


def test_sql_prints_no_float_noise() -> None:
    row = (0.0023057800000000003, [0.1 + 0.2, 1.0])
    answer = Answer(("cost", "costs"), ("Float64", "Array(Float64)"), [row])
    for fmt in ("table", "csv", "json", "jsonl"):
        out = io.StringIO()
        render(answer, fmt, out)
        assert "0.00230578" in out.getvalue() and "0.30000000000000004" not in out.getvalue(), fmt
        assert "0.0023057800000000003" not in out.getvalue(), fmt


def test_export_progress_never_passes_its_total() -> None:
    out = io.StringIO()
    progress = Progress(6510, out)
    progress.done = 6531  # events stored late, from before the export began
    progress.started -= 5  # an export that took a while shows its progress
    progress.finish()
    assert "6,531 of 6,531 events (100%)" in out.getvalue()


def test_an_export_ends_at_the_newest_event_it_counted() -> None:
    count = session_queries.export_count(since="2026-11-01 00:00:00.000")
    assert "max(timestamp) AS until" in count.sql
    page = session_queries.export_page(since="2026-11-01 00:00:00.000", until="2026-11-27 10:00:00.000")
    assert "timestamp <= {until:DateTime64(3, 'UTC')}" in page.sql
    assert page.params is not None and page.params["until"] == "2026-11-27 10:00:00.000"


def _commands(parser: object) -> list[tuple[str, object]]:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    found: list[tuple[str, object]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((f"{parser.prog} {name}".removeprefix("agentwatch "), sub))
                found += _commands(sub)
    return found


@pytest.mark.parametrize("name", [name for name, _ in _commands(build_parser())])
def test_every_command_help_has_a_description(name: str) -> None:
    sub = dict(_commands(build_parser()))[name]
    description = getattr(sub, "description", None)
    assert description and len(description) > 20, f"`agentwatch {name} --help` has no description"


def test_the_top_level_help_says_what_agentwatch_is_now() -> None:
    text = build_parser().format_help()
    assert "Claude Code hooks on NATS" not in text
    for harness in ("Claude Code", "Codex", "Gemini CLI"):
        assert harness in text
