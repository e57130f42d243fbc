"""Hook input that names no event (not JSON, not an object, no hook_event_name) is kept as an
event with its reason, and is no agent: not on the dashboard's roster, not in the watchdog's rules."""

from __future__ import annotations

import pytest

from agentwatch.agents import is_invalid_input
from agentwatch.consumers.rules import Engine, parse_rules
from agentwatch.contract import envelopes_from_stdin
from agentwatch.tui.roster import Roster

INVALID = [b"not json", b"", b"[1, 2]", b"{}", b'{"session_id": "0b5e55ed-0000-4000-8000-00000000f00d"}']


@pytest.mark.parametrize("raw", INVALID)
def test_invalid_input_is_an_event_with_its_reason_and_no_agent(raw: bytes) -> None:
    ((_, env),) = envelopes_from_stdin(raw, {}, host="lab")
    assert is_invalid_input(env)
    assert env["text"].startswith("invalid hook input: ")
    roster = Roster()
    assert roster.apply(env) is None
    assert not roster.agents()
    engine = Engine(parse_rules("[silent_agent]\nafter_s = 0\n"))
    engine.observe(env, 1.0)
    assert not engine.agents


def test_a_payload_of_an_agent_still_makes_it() -> None:
    raw = b'{"hook_event_name": "UserPromptSubmit", "session_id": "0b5e55ed-0000-4000-8000-00000000f00d"}'
    ((_, env),) = envelopes_from_stdin(raw, {}, host="lab")
    assert not is_invalid_input(env)
    roster = Roster()
    assert roster.apply(env) is not None
    engine = Engine(parse_rules("[silent_agent]\nafter_s = 0\n"))
    engine.observe(env, 1.0)
    assert len(engine.agents) == 1
