"""The hosts view (key m): the rows `agentwatch hosts --json` prints, from a source the dashboard
is handed, asked in a worker thread and again every few seconds; a source that fails is said on
the head line and asked again."""

from __future__ import annotations

import threading
import time
from typing import Any

from textual.widgets import DataTable

from agentwatch.tui.hosts_view import HostsScreen
from tests.tui.test_tui_app import make_app, until


def host(name: str, *, link: str = "up", backlog: int = 0, oldest: float | None = None) -> dict[str, Any]:
    """One row as cli/hosts.py host_rows makes it."""
    return {
        "host": name,
        "domain": name,
        "link": link,
        "last_contact_s": 1.5 if link == "up" else 95.0,
        "last_event": time.time() - 600,  # "10m ago" for the next minute
        "events_1h": 1234,
        "backlog": backlog,
        "backlog_measured": link == "up",
        "oldest_waiting_s": oldest,
        "spool_bytes": 2048,
        "version": "0.1.0",
        "nats_version": "2.15.1",
        "harnesses": "claude-code",
        "announced_at": time.time() - 2,
        "error": "",
    }


class FakeHosts:
    """Answers with `rows`, or raises `fail` once; counts its calls and the threads they ran on."""

    def __init__(self, rows: list[dict[str, Any]], fail: str = "") -> None:
        self.rows = rows
        self.fail = fail
        self.calls = 0
        self.threads: set[int] = set()

    def __call__(self) -> list[dict[str, Any]]:
        self.calls += 1
        self.threads.add(threading.get_ident())
        if self.fail:
            fail, self.fail = self.fail, ""
            raise RuntimeError(fail)
        return self.rows


def cells(screen: HostsScreen) -> dict[str, list[str]]:
    table = screen.query_one("#hosts-table", DataTable)
    rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
    return {row[0]: row for row in rows}


async def test_the_hosts_key_shows_each_host_and_its_backlog() -> None:
    source = FakeHosts([host("laptop-1", backlog=42, oldest=125.0), host("ci-7", link="cut", backlog=7)])
    app = make_app([])
    app.hosts = source
    async with app.run_test(size=(200, 40)) as pilot:
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, HostsScreen) and app.screen.rows)
        screen = app.screen
        assert isinstance(screen, HostsScreen)
        shown = cells(screen)
        assert set(shown) == {"laptop-1", "ci-7"}
        # host, link, last event, events 1h, backlog, oldest waiting, spool, versions
        assert shown["laptop-1"][1:] == [
            "up",
            "10m ago",
            "1,234",
            "42",
            "2m",
            "2.0 KiB",
            "agentwatch 0.1.0 claude-code",
        ]
        assert shown["ci-7"][1] == "cut 1m"
        assert shown["ci-7"][4] == ">=7"  # as of the last contact
        assert "2 in the fleet" in str(screen.head.render())
        assert "1 cut off" in str(screen.head.render())
        assert threading.get_ident() not in source.threads  # asked off the event loop
        await pilot.press("escape")
        assert not isinstance(app.screen, HostsScreen)


async def test_on_a_host_the_view_is_the_host_as_it_sees_itself() -> None:
    """On an agent host, its own row: cut off, with the backlog it counted itself (no `>=`), and
    no events in the last hour (no store there)."""
    own = {**host("laptop-1", link="cut", backlog=30), "seen_from": "this host", "events_1h": None}
    own["backlog_measured"] = True
    app = make_app([])
    app.hosts = FakeHosts([own])
    async with app.run_test(size=(200, 40)) as pilot:
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, HostsScreen) and app.screen.rows)
        screen = app.screen
        assert isinstance(screen, HostsScreen)
        assert cells(screen)["laptop-1"][1:5] == ["cut 1m", "10m ago", "-", "30"]
        head = str(screen.head.render())
        assert "this host, as it sees itself: the link to the hub cut" in head
        assert "30 events wait here for the hub" in head


async def test_a_failing_source_is_said_and_asked_again() -> None:
    source = FakeHosts([host("laptop-1", backlog=3)], fail="cannot read the fleet from the bus")
    app = make_app([])
    async with app.run_test(size=(200, 40)) as pilot:
        screen = HostsScreen(source, refresh_seconds=0.2)
        app.push_screen(screen)
        await until(pilot, lambda: screen.problem)
        assert "cannot read the fleet" in str(screen.head.render())
        # The timer asks again; the host is there once the source answers.
        await until(pilot, lambda: screen.rows)
        assert screen.problem == ""
        assert cells(screen)["laptop-1"][4] == "3"
        calls = source.calls
        await until(pilot, lambda: source.calls > calls)  # and keeps asking


async def test_no_fleet_source_says_so_and_no_hosts_says_how_to_join() -> None:
    app = make_app([])
    async with app.run_test(size=(200, 40)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        assert not isinstance(app.screen, HostsScreen)
        assert any("hosts view needs" in n.message for n in app._notifications)
        app.hosts = FakeHosts([])
        await pilot.press("m")
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, HostsScreen) and "agentwatch up --hub" in str(app.screen.head.render())
            ),
        )
