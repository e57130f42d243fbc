"""The live view's model (tui/live.py) without Textual: stored events then live ones, each event
once, whatever the order they arrive in; the figures the store's answer plus the live events it
does not hold."""

from __future__ import annotations

import datetime as dt
import itertools
import subprocess
import sys
from typing import Any

import orjson
import pytest

from agentwatch.tui.live import LiveState, StoredFirst
from agentwatch.tui.model import FeedLine
from agentwatch.tui.truth import STORED_CHECK_MARGIN_SECONDS, Same, Truth

BASE = 1_795_000_000.0
LEAD = ("h", "s1", "lead")
MARGIN = STORED_CHECK_MARGIN_SECONDS


def event(n: int, name: str = "PreToolUse", agent: str = "lead") -> dict[str, Any]:
    """The nth event of the run, n seconds after BASE."""
    at = dt.datetime.fromtimestamp(BASE + n, dt.UTC).isoformat().replace("+00:00", "Z")
    return {"id": f"e{n}", "timestamp": at, "event": name, "kind": "tool_start", "agent": agent, "host": "h",
            "team": "t", "session_id": "s1", "tool_name": "Bash", "text": f"call {n}"}  # fmt: skip


def ids(lines: list[FeedLine]) -> list[str]:
    return [str(line.envelope["id"]) for line in lines]


def answer(stored: set[str], events: int) -> Truth:
    """The store's answer: the lead with `events` events, holding the live ids `stored`."""
    row = {"agent": "lead", "host": "h", "scope": "s1", "team": "t", "events": events, "tool_calls": events}
    return Truth(roster=[row], agents_total=1, events_total=events, stored=stored)


STORED = [event(n) for n in (1, 2, 3)]
LIVE = [event(n) for n in (2, 3, 4, 5)]  # two of them the history holds too
EVERY_ONE = ["e1", "e2", "e3", "e4", "e5"]


def arrivals() -> list[tuple[int, bool, bool]]:
    """(live events delivered before the history, the history late, each live event twice)."""
    return list(itertools.product(range(len(LIVE) + 1), (False, True), (False, True)))


@pytest.mark.parametrize(("before", "late", "twice"), arrivals())
def test_the_feed_is_the_history_then_the_live_events_each_once(before: int, late: bool, twice: bool) -> None:
    """Live events before the history (held, or shown when it is late), after it, held by it too:
    the feed is the stored events then the live ones, each once, oldest first."""
    state = LiveState(stored=True)
    if late:
        state.stop_waiting_for_history()  # the store was slow: live events are shown meanwhile
    delivered = [env for env in LIVE for _ in range(2 if twice and env["id"] in ("e2", "e3") else 1)]
    split = sum(1 for env in delivered if int(env["id"][1:]) < 2 + before)
    for env in delivered[:split]:
        state.deliver(dict(env))
        state.drain()
    # The history is asked once the store's first answer is in: its roster has the lead.
    state.roster.seed([{"host": LEAD[0], "scope": LEAD[1], "agent": LEAD[2]}])
    state.take_history([dict(env) for env in STORED])
    state.drain()
    for env in delivered[split:]:
        state.deliver(dict(env))
        state.drain()
    assert ids(state.feed.lines()) == EVERY_ONE
    lead = state.roster.get(LEAD)
    assert lead is not None and (late or ids(list(lead.timeline)) == EVERY_ONE)


def test_live_events_wait_while_paused_and_come_in_order() -> None:
    state = LiveState(stored=False)
    state.paused = True
    for env in LIVE:
        state.deliver(env)
    assert (state.drain(), state.waiting, state.feed.total) == (0, 4, 0)
    state.paused = False
    assert (state.drain(), state.waiting) == (4, 0)
    assert ids(state.feed.lines()) == ["e2", "e3", "e4", "e5"] and state.events_total == 4


def test_raw_and_unreadable_envelopes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes off the bus are decoded; what is no envelope is passed over, what the model cannot
    take is skipped and counted (and said), and neither stops the next event."""
    said: list[Exception] = []
    state = LiveState(stored=False, skipped=said.append)
    state.deliver(orjson.dumps(event(1)))
    state.deliver(b"not json")
    state.deliver(b"[1, 2]")

    def odd(env: Any, count: bool = True) -> None:
        raise ValueError(env["id"])

    with monkeypatch.context() as patch:
        patch.setattr(state.team, "apply", odd)
        state.deliver(event(2))
    state.deliver(event(3))
    assert ids(state.feed.lines()) == ["e1", "e2", "e3"] and state.feed.total == 3
    assert state.unreadable == 1 and [str(e) for e in said] == ["e2"]


@pytest.mark.parametrize("order", list(itertools.permutations(["live", "answer", "again"])))
def test_the_figures_are_the_stores_answer_plus_the_live_ones_it_lacks(order: tuple[str, ...]) -> None:
    """Events 1-3 stored (the store says so of 2 and 3 when asked), 4 and 5 live only, 2 and 4
    delivered twice: once the answer and every live event are in, each event counts once."""
    state = LiveState(stored=True)
    state.take_history([])
    for step in order:
        if step == "live":
            for n in (2, 2, 3, 4, 4, 5):
                state.deliver(event(n))
            state.drain()
        else:
            question = state.ask_truth()
            assert question is not None and state.ask_truth() is None, "one question out at a time"
            state.take_truth(answer({"e2", "e3"} & set(question[0]), 3))
    state.take_truth(answer({"e2", "e3"}, 3))  # the next refresh
    lead = state.roster.get(LEAD)
    assert lead is not None and lead.events == 5 and lead.tool_calls == 5
    assert state.events_total + state.unconfirmed.events == 5
    assert sorted(e["id"] for e in state.unconfirmed.envelopes()) == ["e4", "e5"]


def test_an_event_stored_before_the_mark_and_delivered_after_the_question_counts_once() -> None:
    """e3 is stored before the store's mark is read, so its answer counts it; the dashboard gets it
    live only after it sent that question (it did not ask about e3). The mark then stays: the next
    refreshes ask about e3 alone, once, and it leaves the live count; e4, which the store never
    holds, is asked once at that mark, not at every refresh."""
    state = LiveState(stored=True)
    state.take_history([])
    assert state.ask_truth() == ([], None, None)
    state.take_truth(Truth(**{**answer(set(), 3).__dict__, "mark": (3, 0, 0, 0)}))
    for n in (3, 4):
        state.deliver(event(n))
    state.drain()
    lead = state.roster.get(LEAD)
    assert lead is not None and lead.events == 5 and state.events_total + state.unconfirmed.events == 5
    assert state.ask_truth() == (["e3", "e4"], (3, 0, 0, 0), BASE + 3 - MARGIN), "the mark only, the ids"
    assert state.truth_same(Same(["e3", "e4"], {"e3"})) is True
    lead = state.roster.get(LEAD)
    assert lead is not None and lead.events == 4 and lead.tool_calls == 4
    assert state.events_total + state.unconfirmed.events == 4
    assert state.ask_truth() == ([], (3, 0, 0, 0), None), "e4 was asked at this mark already"
    assert state.truth_same(Same()) is False
    state.take_truth(Truth(**{**answer(set(), 4).__dict__, "mark": (4, 0, 0, 0)}))
    assert state.ask_truth() == (["e4"], (4, 0, 0, 0), BASE + 4 - MARGIN), "a new mark: asked again"


def test_a_store_that_does_not_answer_is_asked_again_soon_before_its_first_answer() -> None:
    state = LiveState(stored=True)
    state.ask_truth()
    assert state.truth_failed("down") is True and not state.store_ok and state.history_done
    assert state.ask_truth() == ([], None, None) and state.take_truth(answer(set(), 0)) is True
    state.ask_truth()
    assert state.truth_failed("down") is False, "after an answer: at the next refresh"


@pytest.mark.parametrize("stored", [[], STORED, [event(n) for n in range(1, 8)]])
def test_an_agents_lines_are_its_stored_events_then_its_live_ones_each_once(stored: list[Any]) -> None:
    state = LiveState(stored=False)
    for env in LIVE:
        state.deliver(env)
    lines = [FeedLine.of(env) for env in stored]
    want = sorted({*ids(lines), "e2", "e3", "e4", "e5"}, key=lambda i: int(i[1:]))
    assert ids(state.lines_of(LEAD, lines)) == want
    assert state.lines_of(("h", "s1", "nobody"), lines) == lines


def test_stored_first_keeps_the_stores_copy_and_remembers_it() -> None:
    merge = StoredFirst()
    stored, live = [FeedLine.of(event(1))], [FeedLine.of(event(1)), FeedLine.of(event(2))]
    merged = merge.merged(stored, live)
    assert merged == [stored[0], live[1]] and merged[0] is stored[0]
    assert merge.holds(event(1)) and not merge.holds(event(2))


def test_the_live_view_model_imports_no_textual() -> None:
    code = "import sys, agentwatch.tui.live; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_the_history_notes_the_roster_agents_and_makes_none() -> None:
    """A stored event is the store's: it goes into the timeline of an agent the store's answer
    has, a stored message (which names no host) into its sender's by scope and name; an agent the
    answer does not have (beyond the window) is not made from the history."""
    state = LiveState(stored=True)
    state.take_truth(answer(set(), 3))
    message = {**event(4, "PostToolUse"), "id": "m4", "kind": "message", "host": "", "peer": "sub"}
    stranger = {**event(5), "id": "x5", "session_id": "an-old-session"}
    state.take_history([*(dict(env) for env in STORED), message, stranger])
    assert [a.key for a in state.roster.agents()] == [LEAD]
    lead = state.roster.get(LEAD)
    assert lead is not None and ids(list(lead.timeline)) == ["e1", "e2", "e3", "m4"]
    assert ids(state.feed.lines()) == ["e1", "e2", "e3", "m4", "x5"], "the feed shows them all"
