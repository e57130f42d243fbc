"""The alert rules without a bus: the rules file, the lifecycle and the cooldown."""

from __future__ import annotations

import pytest

from agentwatch.consumers.rules import Engine, RulesError, default_file_text, iso, parse_rules


def env(event: str, t: float, **fields: object) -> dict[str, object]:
    base: dict[str, object] = {"id": f"{event}{t}{fields}", "timestamp": iso(t), "event": event}
    return {**base, "agent": "a", "session_id": "s", "host": "h", **fields}


def test_the_default_file_parses_to_the_defaults() -> None:
    rules = parse_rules(default_file_text())
    assert rules["loop"]["repeats"] == 8 and rules["failure_burst"]["failures"] == 8
    assert rules["failure_burst"]["window_s"] == 300


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[loop]\nrepeats = 3\n[failure_burst\n", "line 3"),
        ("[loop]\nrepeats = 3\n\n[nope]\n", "line 4: unknown rule [nope]"),
        ("[loop]\n\nrepaets = 3\n", "line 3: [loop] repaets: unknown key"),
        ("[loop]\nseverity = 'loud'\n", "line 2: [loop] severity must be one of"),
        ("[loop]\nrepeats = -1\n", "line 2: [loop] repeats must be a number"),
    ],
)
def test_a_bad_file_names_its_line(text: str, expected: str) -> None:
    with pytest.raises(RulesError, match=r"alerts\.toml") as caught:
        parse_rules(text, "alerts.toml")
    assert expected in str(caught.value)


def test_loop_fires_once_resolves_and_cools_down() -> None:
    engine = Engine(parse_rules("[loop]\nrepeats = 3\ncooldown_s = 100\n"))
    for i in range(5):
        engine.observe(env("PreToolUse", 10 + i, tool_name="Bash", tool_use_id=f"u{i}", data={}))
    fired = engine.tick(15)
    assert [(a["rule"], a["state"]) for a in fired] == [("loop", "firing")]
    assert engine.tick(16) == []
    engine.observe(env("PreToolUse", 17, tool_name="Read", tool_use_id="r", data={}))
    assert [a["state"] for a in engine.tick(17)] == ["resolved"]
    for i in range(3):
        engine.observe(env("PreToolUse", 18 + i, tool_name="Read", tool_use_id=f"r{i}", data={}))
    assert engine.tick(25) == []  # within the cooldown of the same agent's loop
    assert [a["state"] for a in engine.tick(200)] == ["firing"]


def test_the_same_condition_has_the_same_id_after_a_restart() -> None:
    events = [env("PreToolUse", 1, tool_name="Bash", tool_use_id="u", data={})]
    ids = []
    for _ in range(2):
        engine = Engine(parse_rules("[stuck_tool]\nfloor_s = 5\n"))
        for e in events:
            engine.observe(e)
        ids.append([a["id"] for a in engine.tick(100)])
    assert ids[0] == ids[1] and len(ids[0]) == 1


def test_the_event_that_completes_a_loop_or_a_burst_fires_it_once() -> None:
    engine = Engine(parse_rules("[loop]\nrepeats = 3\n[failure_burst]\nfailures = 3\nmin_share = 0.5\n"))
    now = 1000.0
    fired = []
    for i in range(4):
        call = {"tool_name": "Bash", "tool_use_id": f"u{i}", "data": {"tool_input": {"command": "make"}}}
        fired.append([a["rule"] for a in engine.take(env("PreToolUse", now + i, **call), now + i)])
        failed = env("PostToolUseFailure", now + i + 0.5, **call)
        fired.append([a["rule"] for a in engine.take(failed, now + i + 0.5)])
        worked = env("PostToolUse", now + i + 0.6, tool_name="Read", tool_use_id=f"r{i}", data={})
        fired.append([a["rule"] for a in engine.take(worked, now + i + 0.6)])
    # The third call completes the loop, the third failure the burst; nothing else fires them.
    assert fired == [[], [], [], [], [], [], ["loop"], ["failure_burst"], [], [], [], []]
    assert engine.tick(now + 5) == []  # already firing: the tick has nothing new to say
    # A replayed event (long before now) is left to the tick, whatever it completes.
    late = Engine(parse_rules("[loop]\nrepeats = 1\n"))
    old = env("PreToolUse", now - 600, tool_name="Bash", tool_use_id="x", data={"tool_input": {}})
    assert late.take(old, now) == []
    assert [a["rule"] for a in late.tick(now)] == ["loop"]
