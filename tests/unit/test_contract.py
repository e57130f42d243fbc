"""The wire contract as pure functions (no NATS): subjects, ids, identity, summaries, envelopes.

Expected values are written out from DESIGN.md ("The wire contract") and from what the captured
Claude Code payloads say, not computed with the contract module's own helpers.
"""

from __future__ import annotations

import hashlib
import json
import string
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentwatch import contract
from agentwatch.contract import (
    DEFAULT_MAX_PAYLOAD,
    HOOK_EVENTS,
    MAX_PARSE_BYTES,
    EnvelopeError,
    decode_envelope,
    encode_envelope,
    envelopes_from_stdin,
    event_id_time,
    event_subject,
    identify,
    main_agent_name,
    message_envelope,
    new_event_id,
    subject_token,
)
from agentwatch.jsonfast import loads as real_loads
from agentwatch.summaries import summarize
from tests.conftest import CAPTURES, DESIGN_SUBJECTS, PUBLIC, all_fixtures, load_fixture_file

Json = dict[str, Any]

FIXTURES = all_fixtures()
CAPTURED: list[Json] = [rec["payload"] for rec in load_fixture_file(CAPTURES)]

TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
CROCKFORD = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
TRUNCATION_MARK = "[agentwatch: truncated"

# Every other hook event: genie.agent.{agent}.event.{snake_case}.
GENERIC_SNAKE = {
    "Setup": "setup",
    "InstructionsLoaded": "instructions_loaded",
    "UserPromptExpansion": "user_prompt_expansion",
    "MessageDisplay": "message_display",
    "PostToolBatch": "post_tool_batch",
    "Notification": "notification",
    "ConfigChange": "config_change",
    "CwdChanged": "cwd_changed",
    "DirectoryAdded": "directory_added",
    "FileChanged": "file_changed",
    "WorktreeCreate": "worktree_create",
    "WorktreeRemove": "worktree_remove",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "Elicitation": "elicitation",
    "ElicitationResult": "elicitation_result",
    "PreModelSwitch": "pre_model_switch",
    "PostModelSwitch": "post_model_switch",
}


def expected_subject(event: str, agent: str) -> str:
    if event in DESIGN_SUBJECTS:
        return DESIGN_SUBJECTS[event].format(agent=agent)
    return f"genie.agent.{agent}.event.{GENERIC_SNAKE[event]}"


def assert_token(token: str) -> None:
    assert token, "empty subject token"
    assert len(token) <= 64, f"token of {len(token)} chars: {token!r}"
    assert set(token) <= TOKEN_CHARS, f"bad characters in {token!r}"


def assert_subject(subject: str, tokens: int) -> None:
    parts = subject.split(".")
    assert len(parts) == tokens, subject
    for part in parts:
        assert_token(part)


def captured(event: str, **fields: object) -> Json:
    """The first captured payload of `event` whose fields have the given values."""
    for payload in CAPTURED:
        if payload.get("hook_event_name") == event and all(payload.get(k) == v for k, v in fields.items()):
            return dict(payload)
    raise AssertionError(f"no captured {event} with {fields}")


def run(payload: Json, environ: dict[str, str] | None = None) -> list[tuple[str, Json]]:
    return envelopes_from_stdin(json.dumps(payload).encode(), environ or {})


def is_one_line(text: str) -> bool:
    return len(text.splitlines()) <= 1 and all(ch.isprintable() for ch in text)


# --- subjects ---------------------------------------------------------------------------------


def test_subject_table_covers_every_hook_event() -> None:
    assert set(DESIGN_SUBJECTS) <= set(HOOK_EVENTS)
    assert set(HOOK_EVENTS) == set(DESIGN_SUBJECTS) | set(GENERIC_SNAKE)


@pytest.mark.parametrize("event", HOOK_EVENTS)
@pytest.mark.parametrize("agent", ["alice", "general-purpose-fd10a9f3"])
def test_event_subject_of_every_hook_event(event: str, agent: str) -> None:
    subject, kind, direction = event_subject(event, agent)
    assert subject == expected_subject(event, agent)
    assert_token(kind)
    assert direction in ("", "in", "out")


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ("QuantumLeap2027", "genie.agent.alice.event.quantum_leap2027"),
        ("TeamDisbanded", "genie.agent.alice.event.team_disbanded"),
        ("Reflect", "genie.agent.alice.event.reflect"),
    ],
)
def test_future_events_get_the_generic_subject(event: str, expected: str) -> None:
    assert event_subject(event, "alice")[0] == expected


@pytest.mark.parametrize("event", ["", "a.b*c>", "genie.>", "Pre Tool\tUse", "*", "\x00", "事件", "x" * 500])
def test_hostile_event_names_still_give_a_five_token_subject(event: str) -> None:
    subject, kind, _ = event_subject(event, "alice")
    assert subject.startswith("genie.agent.alice.event.")
    assert_subject(subject, 5)
    assert_token(kind)


def test_hostile_agent_name_cannot_add_tokens_or_wildcards() -> None:
    subject, _, _ = event_subject("PreToolUse", "evil.agent.>")
    assert subject.startswith("genie.tool.") and subject.endswith(".call")
    assert_subject(subject, 4)
    subject, _, _ = event_subject("Stop", "*")
    assert_subject(subject, 4)


NASTY: list[object] = [
    "", " ", "\t\n\r", ".", "..", "*", ">", "a.b", "a b", "a*b>c", "genie.>", "\x00", "\x00abc\x7f",
    "ab\x1bc", "é", "💥", "名前", "a" * 1000, "_" * 100, "-" * 100, "a\u2028b", "\u200b",
    "ｒｅｓｅａｒｃｈｅｒ", "researcher\n", " researcher ", "x" * 63 + ".y" * 10, "$(rm -rf /)",
    "../../etc/passwd", "\ud800", "a\ud800b", "\ufeffname", "tab\tname", "line\r\nbreak", "a\x85b",
    None, 0, 12345, -1.5, True, ["a", "b"], {"k": "v"},
]  # fmt: skip


class Picks:
    """Deterministic pseudo-random choices (a fixed seed, so every run tests the same inputs)."""

    def __init__(self, seed: str) -> None:
        self._values = self._stream(seed)

    @staticmethod
    def _stream(seed: str) -> Iterator[int]:
        counter = 0
        while True:
            digest = hashlib.blake2b(f"{seed}:{counter}".encode()).digest()
            for i in range(0, len(digest), 2):
                yield digest[i] << 8 | digest[i + 1]
            counter += 1

    def below(self, n: int) -> int:
        return next(self._values) % n

    def choice(self, seq: str) -> str:
        return seq[self.below(len(seq))]

    def text(self, alphabet: str, max_len: int) -> str:
        return "".join(self.choice(alphabet) for _ in range(self.below(max_len + 1)))


def _random_strings(count: int) -> list[str]:
    picks = Picks("subject-token")
    alphabet = (
        string.printable + "\x00\x01\x1b\x7f\x85\xa0\u2028\u2029\u200b\ufeff" + "éüßçñ" + "名前研究者"
        + "😀🚀" + "\ud800\udfff" + ".*>" * 5
    )  # fmt: skip
    return [picks.text(alphabet, 90) for _ in range(count)]


def test_subject_token_is_always_one_safe_bounded_token() -> None:
    for value in [*NASTY, *_random_strings(3000)]:
        token = subject_token(value)
        assert_token(token)
        assert not any(ch in token for ch in ".*> \t\r\n"), (value, token)
        assert subject_token(value) == token, "not stable"


def test_valid_tokens_pass_through_unchanged() -> None:
    picks = Picks("valid-token")
    for _ in range(500):
        # Starting and ending with an alphanumeric character: nothing to trim.
        name = picks.choice(string.ascii_letters) + picks.text(string.ascii_letters + string.digits + "-", 40)
        name += picks.choice(string.digits)
        assert subject_token(name) == name
    assert subject_token("general-purpose-fd10a9f3") == "general-purpose-fd10a9f3"
    assert subject_token("researcher") == "researcher"


def test_distinct_all_non_ascii_names_map_to_distinct_tokens() -> None:
    names = [
        "研究者",
        "レビュアー",
        "исследователь",
        "рецензент",
        "مراجع",
        "😀",
        "😃",
        "é",
        "è",
        "名前",
        "前名",
    ]
    tokens = [subject_token(n) for n in names]
    for token in tokens:
        assert_token(token)
    assert len(set(tokens)) == len(names), dict(zip(names, tokens, strict=True))


@pytest.mark.parametrize(
    ("first", "second"),
    [("tester-α", "tester-β"), ("調査-1", "実装-1"), ("café", "cafè"), ("naïve", "naîve")],
)
def test_distinct_partly_non_ascii_names_map_to_distinct_tokens(first: str, second: str) -> None:
    # Two teammates named "tester-α" and "tester-β" must not publish as one agent.
    a, b = subject_token(first), subject_token(second)
    assert_token(a)
    assert_token(b)
    assert a != b, f"{first!r} and {second!r} both map to {a!r}"


# --- ids ----------------------------------------------------------------------------------------


def test_new_event_id_is_crockford_ulid_and_unique() -> None:
    ids = [new_event_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    for event_id in ids:
        assert len(event_id) == 26
        assert set(event_id) <= CROCKFORD, event_id
        assert event_id[0] <= "7", "128 bits in 26 base32 digits leave the first digit below 8"


def test_ids_sort_in_time_order() -> None:
    picks = Picks("id-order")
    steps = [1, 1, 2, 7, 999, 1000, 86_400_000]
    ms = 1_700_000_000_000
    stamps = []
    for _ in range(2000):
        ms += steps[picks.below(len(steps))]
        stamps.append(ms)
    ids = [new_event_id(m / 1000) for m in stamps]
    shuffled = sorted(ids, key=lambda i: hashlib.blake2b(i.encode()).digest())
    assert shuffled != ids
    assert sorted(shuffled) == ids
    # Across a change in the number of significant digits as well.
    assert new_event_id(0.999) < new_event_id(1.0) < new_event_id(1_000_000.0) < new_event_id(4_000_000_000.0)


@pytest.mark.parametrize("ms", [0, 1, 999, 1000, 1_700_000_000_123, 1_893_456_000_000, 2**48 - 1])
def test_event_id_time_round_trips_the_millisecond(ms: int) -> None:
    for _ in range(20):  # the random part must not leak into the time
        assert event_id_time(new_event_id(ms / 1000)) == ms / 1000


def test_event_id_time_keeps_the_millisecond_of_a_finer_time() -> None:
    assert round(event_id_time(new_event_id(1_700_000_000.1237)) * 1000) == 1_700_000_000_123
    before = time.time()
    event_id = new_event_id()
    after = time.time()
    assert before - 0.001 <= event_id_time(event_id) <= after


# --- identity -----------------------------------------------------------------------------------

SESSION = "2421d2e0-a515-4c00-8e95-d6612e57aa0f"


def test_main_thread_is_main_and_session_prefix() -> None:
    payload = captured("SessionStart", session_id="f9797a4c-c032-41fd-a79b-4af2fcfb7e1a")
    assert main_agent_name(payload, {}) == "main-f9797a4c"
    assert identify(payload, {}) == ("main-f9797a4c", "session-f9797a4c", "")
    assert main_agent_name({"hook_event_name": "Stop"}, {}) == "main"


def test_genie_agent_name_wins_on_the_main_thread() -> None:
    payload = captured("PreToolUse", tool_name="Bash", session_id=SESSION)
    environ = {"GENIE_AGENT_NAME": "lead"}
    assert main_agent_name(payload, environ) == "lead"
    assert identify(payload, environ)[0] == "lead"
    # Even over an --agent name, and made a safe token.
    agent_payload = dict(payload, agent_type="code-reviewer")
    assert identify(agent_payload, environ)[0] == "lead"
    assert identify(payload, {"GENIE_AGENT_NAME": " team.lead "})[0] == "team_lead"
    # Blank does not count.
    assert identify(payload, {"GENIE_AGENT_NAME": "   "})[0] == "main-2421d2e0"


def test_agent_flag_name_on_the_main_thread() -> None:
    # `claude --agent code-reviewer`: agent_type without agent_id.
    payload = dict(captured("PreToolUse", tool_name="Bash", session_id=SESSION), agent_type="code-reviewer")
    assert main_agent_name(payload, {}) == "code-reviewer"
    assert identify(payload, {}) == ("code-reviewer", "session-2421d2e0", "")


def test_teammate_is_named_by_its_type_with_the_lead_as_parent() -> None:
    payload = captured("PreToolUse", agent_id="aresearcher-4f6960afa371e571")
    assert payload["agent_type"] == "researcher"
    assert identify(payload, {}) == ("researcher", "session-96f21a61", "main-96f21a61")
    assert identify(payload, {"GENIE_AGENT_NAME": "lead"}) == ("researcher", "session-96f21a61", "lead")
    _, env = run(payload)[0]
    assert env["agent"] == "researcher"
    assert env["parent_agent"] == "main-96f21a61"
    assert env["agent_id"] == "aresearcher-4f6960afa371e571"


def test_teammate_idle_uses_teammate_name() -> None:
    payload = captured("TeammateIdle")
    assert payload["teammate_name"] == "researcher"
    assert identify(payload, {}) == ("researcher", "session-96f21a61", "main-96f21a61")
    # teammate_name wins over agent_type when they differ.
    renamed = dict(
        payload, teammate_name="qa-lead", agent_type="tester", agent_id="aqa-lead-0123456789abcdef"
    )
    assert identify(renamed, {})[0] == "qa-lead"


def test_plain_subagent_is_type_and_eight_chars_of_its_id() -> None:
    payload = captured("SubagentStart", agent_id="afd10a9f34e53e617")
    assert payload["agent_type"] == "general-purpose"
    assert identify(payload, {}) == ("general-purpose-fd10a9f3", "session-2421d2e0", "main-2421d2e0")
    # Its tool calls are its own, on its own subject.
    tool_call = captured("PreToolUse", agent_id="afd10a9f34e53e617")
    subject, env = run(tool_call)[0]
    assert subject == "genie.tool.general-purpose-fd10a9f3.call"
    assert env["parent_agent"] == "main-2421d2e0"


def test_subagent_without_type_is_subagent_and_id() -> None:
    payload = captured("SubagentStop", agent_id="a8e80e8d6468db669")
    assert payload["agent_type"] == ""
    agent, team, parent = identify(payload, {})
    assert agent == "subagent-8e80e8d6"
    assert (team, parent) == ("session-07af755f", "main-07af755f")
    subject, env = run(payload)[0]
    assert subject == "genie.agent.subagent-8e80e8d6.subagent.stop"
    assert env["text"] == "subagent stopped: Done."


def test_team_from_environment_then_payload_then_session() -> None:
    payload = captured("TeammateIdle")
    assert payload["team_name"] == "session-96f21a61"
    assert identify(dict(payload, team_name="payments"), {})[1] == "payments"
    assert identify(dict(payload, team_name="payments"), {"GENIE_TEAM": "platform"})[1] == "platform"
    without = {k: v for k, v in payload.items() if k != "team_name"}
    assert identify(without, {})[1] == "session-96f21a61"
    assert identify(without, {"GENIE_TEAM": "  "})[1] == "session-96f21a61"
    assert identify(dict(without, team_name="red team.*"), {})[1] == "red_team"
    assert identify({"hook_event_name": "Stop"}, {})[1] == ""


# --- summaries ----------------------------------------------------------------------------------


def test_bash_summary() -> None:
    payload = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "git status"}}
    assert summarize("PreToolUse", payload) == "$ git status"
    assert run(payload)[0][1]["text"] == "$ git status"


def test_edit_summary_is_relative_to_cwd() -> None:
    payload = {
        "hook_event_name": "PreToolUse", "cwd": "/repo", "tool_name": "Edit",
        "tool_input": {"file_path": "/repo/src/app.py", "old_string": "a", "new_string": "b"},
    }  # fmt: skip
    assert summarize("PreToolUse", payload) == "Edit src/app.py"
    assert summarize("PreToolUse", dict(payload, cwd="/repo/")) == "Edit src/app.py"
    # A sibling directory sharing the prefix is not inside cwd.
    sibling = dict(payload, tool_input={"file_path": "/repository/x.py"})
    assert summarize("PreToolUse", sibling) == "Edit /repository/x.py"
    outside = dict(payload, tool_input={"file_path": "/etc/hosts"})
    assert summarize("PreToolUse", outside) == "Edit /etc/hosts"


def test_edit_summary_from_capture() -> None:
    payload = captured("PreToolUse", tool_name="Edit")
    assert payload["cwd"] == "/home/dev/proj"
    assert payload["tool_input"]["file_path"] == "/home/dev/proj/sub/notes.txt"
    assert run(payload)[0][1]["text"] == "Edit sub/notes.txt"


def test_send_message_summary() -> None:
    payload = captured("PreToolUse", tool_name="SendMessage", agent_id="aresearcher-4f6960afa371e571")
    assert summarize("PreToolUse", payload) == "→ main: Findings ready"
    lead = {
        "hook_event_name": "PreToolUse", "tool_name": "SendMessage",
        "tool_input": {"to": "researcher", "summary": "Findings ready", "message": "Please write them up."},
    }  # fmt: skip
    assert run(lead)[0][1]["text"] == "→ researcher: Findings ready"


def test_prompt_summary_is_first_non_empty_line() -> None:
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "prompt": "\n\n   Fix the flaky test  \nin tests/x.py\n",
    }
    assert summarize("UserPromptSubmit", payload) == "Fix the flaky test"
    assert run(payload)[0][1]["text"] == "Fix the flaky test"
    assert summarize("UserPromptSubmit", {"prompt": "\n \n"}) != ""


def test_stop_summary_is_last_assistant_message() -> None:
    payload = captured("Stop")
    assert payload["last_assistant_message"].startswith("Hello from the mock")
    assert run(payload)[0][1]["text"] == payload["last_assistant_message"]
    multi = dict(payload, last_assistant_message="All 12 tests pass.\n\nDetails:\n- fixed x")
    assert summarize("Stop", multi) == "All 12 tests pass."


def test_tool_failure_summary_has_the_first_line_of_the_error() -> None:
    payload = captured("PostToolUseFailure", tool_name="Bash")
    first, second = payload["error"].splitlines()[:2]
    text = run(payload)[0][1]["text"]
    assert "ls /definitely/missing/path" in text
    assert first in text
    assert second not in text
    assert is_one_line(text)


def test_long_summary_is_cut_to_200_chars() -> None:
    payload = {
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "echo " + "x" * 5000},
    }
    text = run(payload)[0][1]["text"]
    assert len(text) == 200
    assert text.startswith("$ echo xxx")
    controls = {"hook_event_name": "UserPromptSubmit", "prompt": "a\x1b[31mred\x07\tb\u2028second line"}
    text = run(controls)[0][1]["text"]
    assert is_one_line(text)
    assert "second line" not in text


@pytest.mark.parametrize(("name", "payload", "hook_environ"), FIXTURES, ids=[f[0] for f in FIXTURES])
def test_every_fixture_text_is_one_short_line(name: str, payload: Json, hook_environ: dict[str, str]) -> None:
    for _, env in run(payload, hook_environ):
        text = env["text"]
        assert isinstance(text, str)
        assert text
        assert len(text) <= 200, (name, len(text))
        assert is_one_line(text), (name, text)


# --- SendMessage companions ---------------------------------------------------------------------


def send_message(tool_input: Json, *, teammate: bool = True, response: object = None) -> Json:
    """A PostToolUse of SendMessage, from teammate "researcher" or from the lead."""
    payload: Json = {
        "session_id": "96f21a61-e7c0-4640-bc4e-b99cff541b11",
        "transcript_path": "/home/dev/.claude/projects/-home-dev-proj/96f21a61.jsonl",
        "cwd": "/home/dev/proj",
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "SendMessage",
        "tool_input": tool_input,
        "tool_response": {"success": True, "message": "Message queued."} if response is None else response,
        "tool_use_id": "toolu_01Send0001",
        "duration_ms": 4,
    }
    if teammate:
        payload["agent_id"] = "aresearcher-4f6960afa371e571"
        payload["agent_type"] = "researcher"
    return payload


def event_and_message(payload: Json, environ: dict[str, str] | None = None) -> tuple[Json, str, Json]:
    out = run(payload, environ)
    assert len(out) == 2, [s for s, _ in out]
    (_, event), (subject, message) = out
    return event, subject, message


def test_companion_of_current_send_message() -> None:
    payload = captured(
        "PostToolUse", tool_name="SendMessage", session_id="3486086f-217c-4485-891e-618bafac84bf"
    )
    assert payload["tool_input"]["to"] == "researcher"
    event, subject, message = event_and_message(payload)
    assert subject == "genie.msg.researcher"
    assert message["kind"] == "message"
    assert message["text"] == "→ researcher: Kickoff note"
    data = message["data"]
    assert data["from"] == event["agent"] == "main-3486086f"
    assert data["to"] == "researcher"
    assert data["summary"] == "Kickoff note"
    assert data["message"] == payload["tool_input"]["message"]
    # The background agent it reached, pinned by the tool's response.
    assert data["to_agent_id"] == "a3b2a1188c0ad1223"


def test_companion_of_legacy_send_message() -> None:
    payload = send_message(
        {"type": "message", "recipient": "reviewer", "content": "LGTM, merging."}, teammate=False
    )
    _, subject, message = event_and_message(payload)
    assert subject == "genie.msg.reviewer"
    assert message["data"]["to"] == "reviewer"
    assert message["data"]["message"] == "LGTM, merging."
    assert message["data"]["message_type"] == "message"
    assert message["text"] == "→ reviewer: LGTM, merging."


def test_companion_of_structured_message() -> None:
    tool_input = {"to": "researcher", "message": {"type": "shutdown_request", "reason": "work complete"}}
    _, subject, message = event_and_message(send_message(tool_input, teammate=False))
    assert subject == "genie.msg.researcher"
    assert message["data"]["message_type"] == "shutdown_request"
    assert message["data"]["message"] == {"type": "shutdown_request", "reason": "work complete"}
    assert "shutdown_request" in message["text"]
    assert "work complete" in message["text"]


@pytest.mark.parametrize(
    "tool_input",
    [
        {"type": "broadcast", "content": "Stop all work: main is red."},
        {"to": "*", "summary": "Main is red", "message": "Stop all work: main is red."},
        {"to": " * ", "message": "Stop all work: main is red."},
    ],
    ids=["legacy-broadcast", "star", "star-padded"],
)
def test_broadcast_goes_to_genie_msg_broadcast(tool_input: Json) -> None:
    _, subject, message = event_and_message(send_message(tool_input, teammate=False))
    assert subject == "genie.msg.broadcast"
    assert message["data"]["to"] == "broadcast"
    assert message["peer"] == "broadcast"


def test_message_to_main_goes_to_the_leads_name() -> None:
    payload = captured("PostToolUse", tool_name="SendMessage", agent_id="aresearcher-4f6960afa371e571")
    assert payload["tool_input"]["to"] == "main"
    event, subject, message = event_and_message(payload)
    assert event["agent"] == "researcher"
    assert subject == "genie.msg.main-96f21a61"
    assert message["data"]["to"] == event["parent_agent"] == "main-96f21a61"
    assert message["data"]["to_raw"] == "main"
    _, subject, message = event_and_message(payload, {"GENIE_AGENT_NAME": "lead"})
    assert subject == "genie.msg.lead"
    assert message["data"]["to"] == "lead"


def test_cross_session_address_keeps_the_name() -> None:
    _, subject, _ = event_and_message(
        send_message({"to": "reviewer [7f3a9c]", "message": "done"}, teammate=False)
    )
    assert subject == "genie.msg.reviewer"


def test_pre_tool_use_send_message_has_no_companion() -> None:
    for payload in (
        captured("PreToolUse", tool_name="SendMessage", agent_id="aresearcher-4f6960afa371e571"),
        captured("PreToolUse", tool_name="SendMessage", session_id="3486086f-217c-4485-891e-618bafac84bf"),
    ):
        out = run(payload)
        assert [s.split(".")[1] for s, _ in out] == ["tool"]


def test_failed_send_has_no_companion() -> None:
    failed = send_message(
        {"to": "ghost", "message": "hello?"}, response={"success": False, "message": "no such agent"}
    )
    out = run(failed)
    assert len(out) == 1
    assert out[0][0] == "genie.tool.researcher.result"
    assert message_envelope(out[0][1], {}) is None
    # A response without a success flag (older versions: a string) is a delivery.
    assert len(run(send_message({"to": "reviewer", "message": "hi"}, response="Message sent"))) == 2


def test_only_send_message_post_tool_use_has_a_companion() -> None:
    for payload in CAPTURED:
        out = run(payload)
        delivery = (
            payload.get("hook_event_name") == "PostToolUse" and payload.get("tool_name") == "SendMessage"
        )
        assert len(out) == (2 if delivery else 1), payload.get("hook_event_name")


def test_companion_is_one_message_row_pointing_at_the_event() -> None:
    event, subject, message = event_and_message(send_message({"to": "reviewer", "message": "PR #12 ready"}))
    assert message["id"] != event["id"]
    assert len(message["id"]) == 26
    assert set(message["id"]) <= CROCKFORD
    assert event["kind"] == "tool_result"
    assert message["kind"] == "message"
    assert message["data"]["event_id"] == event["id"]
    # It repeats the headline, not the payload.
    assert message["tool_use_id"] == event["tool_use_id"] == "toolu_01Send0001"
    assert "tool_response" not in message["data"]
    assert message["data"]["from"] == "researcher"
    # The event itself is untouched by building its companion.
    assert event["data"]["tool_input"] == {"to": "reviewer", "message": "PR #12 ready"}
    for env in (event, message):
        assert decode_envelope(encode_envelope(env)) == env
    assert subject == "genie.msg.reviewer"


def test_companion_text_is_one_short_line() -> None:
    # The companion's text is a feed line like every other: at most 200 characters.
    tool_input = {
        "to": "researcher-with-a-long-name",
        "summary": "Findings: " + "detail " * 60,
        "message": "x",
    }
    event, _, message = event_and_message(send_message(tool_input, teammate=False))
    assert len(event["text"]) <= 200
    assert is_one_line(message["text"])
    assert len(message["text"]) <= 200, len(message["text"])


# --- round trip ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "payload", "hook_environ"), FIXTURES, ids=[f[0] for f in FIXTURES])
def test_fixture_round_trip(name: str, payload: Json, hook_environ: dict[str, str]) -> None:
    out = envelopes_from_stdin(json.dumps(payload).encode(), hook_environ)
    assert out
    for subject, env in out:
        body = encode_envelope(env)
        assert len(body) <= DEFAULT_MAX_PAYLOAD
        decoded = decode_envelope(body)
        assert decoded == env, name
        assert decoded["v"] == 1
        assert subject.startswith("genie.")
        for token in subject.split("."):
            assert_token(token)
    _, event = out[0]
    if event["redacted"] == 0:
        assert event["data"] == payload, "a payload with nothing to redact is kept whole"
    else:
        assert set(event["data"]) == set(payload), "redaction keeps the payload's structure"
    assert event["event"] == payload.get("hook_event_name")
    assert event["session_id"] == payload.get("session_id", "")
    assert event["tool_use_id"] == payload.get("tool_use_id", "")


# --- size fitting -------------------------------------------------------------------------------


def assert_fits_and_marked(body: bytes, env: Json, max_payload: int) -> Json:
    assert len(body) <= max_payload
    decoded = json.loads(body)
    assert decoded["truncated"] is True
    assert TRUNCATION_MARK in body.decode()
    assert decode_envelope(body)["id"] == env["id"]
    for key in ("event", "agent", "session_id", "tool_use_id", "tool_name", "text"):
        assert decoded[key] == env[key], key
    return decoded  # type: ignore[no-any-return]


def public_big_payload() -> Json:
    if not PUBLIC.exists():
        pytest.skip(f"public fixtures absent: {PUBLIC}")
    for rec in load_fixture_file(PUBLIC):
        if len(json.dumps(rec["payload"])) > 500_000:
            return rec["payload"]  # type: ignore[no-any-return]
    raise AssertionError("no public fixture over 500,000 bytes")


@pytest.mark.parametrize("max_payload", [65_536, 256 * 1024])
def test_big_public_fixture_fits_a_small_max_payload(max_payload: int) -> None:
    payload = public_big_payload()
    _, env = run(payload)[0]
    decoded = assert_fits_and_marked(encode_envelope(env, max_payload), env, max_payload)
    assert decoded["data"]["tool_input"] == payload["tool_input"]


def test_big_public_fixture_is_whole_under_the_default_max_payload() -> None:
    payload = public_big_payload()
    _, env = run(payload)[0]
    body = encode_envelope(env)
    assert len(body) <= DEFAULT_MAX_PAYLOAD
    assert decode_envelope(body) == env
    assert env["truncated"] is False


@pytest.mark.parametrize("max_payload", [65_536, DEFAULT_MAX_PAYLOAD])
def test_three_megabyte_tool_response_fits(max_payload: int) -> None:
    payload = {
        "session_id": "9f2c4e1a-1111-4000-8000-000000000001", "cwd": "/repo",
        "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "cat build.log"},
        "tool_response": {
            "stdout": "[build] compiling module ✓\n" * 115_000, "stderr": "", "interrupted": False,
        },
        "tool_use_id": "toolu_01Big", "duration_ms": 820,
    }  # fmt: skip
    assert len(json.dumps(payload)) > 3_000_000
    _, env = run(payload)[0]
    decoded = assert_fits_and_marked(encode_envelope(env, max_payload), env, max_payload)
    stdout = decoded["data"]["tool_response"]["stdout"]
    assert stdout.startswith("[build] compiling module ✓\n")
    assert TRUNCATION_MARK in stdout
    assert decoded["data"]["tool_input"] == {"command": "cat build.log"}


@pytest.mark.parametrize("max_payload", [65_536, DEFAULT_MAX_PAYLOAD])
def test_two_hundred_thousand_list_items_fit(max_payload: int) -> None:
    files = [f"src/m{i:06d}.py" for i in range(200_000)]
    payload = {
        "session_id": "9f2c4e1a-1111-4000-8000-000000000001", "hook_event_name": "PostToolUse",
        "tool_name": "Glob",
        "tool_input": {"pattern": "**/*.py"}, "tool_response": {"filenames": files, "numFiles": len(files)},
        "tool_use_id": "toolu_01Glob",
    }  # fmt: skip
    _, env = run(payload)[0]
    decoded = assert_fits_and_marked(encode_envelope(env, max_payload), env, max_payload)
    kept = decoded["data"]["tool_response"]["filenames"]
    assert kept[0] == "src/m000000.py"
    assert len(kept) < len(files)
    assert TRUNCATION_MARK in kept[-1]
    assert "200000" in kept[-1]


def test_many_keys_fit_and_are_marked() -> None:
    payload = {"hook_event_name": "PostToolUse", "tool_name": "mcp__db__dump", "tool_response": {
        f"row_{i}": {"id": i, "name": f"user {i}"} for i in range(100_000)}}  # fmt: skip
    _, env = run(payload)[0]
    body = encode_envelope(env, 65_536)
    assert len(body) <= 65_536
    assert json.loads(body)["truncated"] is True
    assert b"agentwatch_truncated" in body


def test_small_envelope_is_unchanged() -> None:
    payload = captured("PostToolUse", tool_name="Bash", session_id=SESSION)
    _, env = run(payload)[0]
    for max_payload in (8192, 65_536, DEFAULT_MAX_PAYLOAD):
        decoded = decode_envelope(encode_envelope(env, max_payload))
        assert decoded == env
        assert decoded["truncated"] is False
        assert TRUNCATION_MARK not in json.dumps(decoded)


def test_fits_even_when_a_headline_field_is_huge() -> None:
    # encode_envelope promises bytes that fit max_payload whatever the envelope holds; a hostile or
    # broken payload can put megabytes in a field that is copied to the envelope's headline.
    payload = {"session_id": "9f2c4e1a-x", "hook_event_name": "Stop", "cwd": "/deep" * 400_000}
    _, env = run(payload)[0]
    body = encode_envelope(env, 65_536)
    assert len(body) <= 65_536, f"{len(body)} bytes for max_payload 65536"
    assert json.loads(body)["truncated"] is True


# --- decode errors ------------------------------------------------------------------------------


def good_envelope() -> Json:
    return run(captured("Stop"))[0][1]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json at all", "not JSON"),
        (b"", "not JSON"),
        (b"\xff\xfe\x00", "not JSON"),
        (b"[1, 2, 3]", "not a JSON object"),
        (b'"a string"', "not a JSON object"),
        (b"{}", "missing field"),
    ],
)
def test_decode_rejects_non_envelopes(body: bytes, reason: str) -> None:
    with pytest.raises(EnvelopeError, match=reason):
        decode_envelope(body)


@pytest.mark.parametrize("field", ["v", "id", "timestamp", "event", "kind", "agent"])
def test_decode_rejects_missing_required_field(field: str) -> None:
    env = good_envelope()
    del env[field]
    with pytest.raises(EnvelopeError, match=f"missing field.*{field}"):
        decode_envelope(json.dumps(env))


def test_decode_rejects_future_schema_version() -> None:
    env = good_envelope()
    env["v"] = 2
    with pytest.raises(EnvelopeError, match="schema version 2"):
        decode_envelope(json.dumps(env).encode())
    env["v"] = "1"
    with pytest.raises(EnvelopeError, match="schema version"):
        decode_envelope(json.dumps(env).encode())


@pytest.mark.parametrize(("field", "value"), [("id", ""), ("id", None), ("agent", ""), ("event", 7)])
def test_decode_rejects_empty_or_non_string_ids(field: str, value: object) -> None:
    env = good_envelope()
    env[field] = value
    with pytest.raises(EnvelopeError, match=f"'{field}'"):
        decode_envelope(json.dumps(env).encode())


def test_decode_accepts_str_and_bytes() -> None:
    env = good_envelope()
    assert decode_envelope(json.dumps(env)) == env
    assert decode_envelope(json.dumps(env).encode()) == env
    assert issubclass(EnvelopeError, ValueError)


# --- invalid and oversized stdin ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "empty input"),
        (b"  \n", "empty input"),
        (b"{", "not JSON"),
        (b'{"hook_event_name": "Stop",}', "not JSON"),
        (b'\xff\xfe{"hook_event_name": "Stop"}', "not UTF-8"),
        (b'[{"hook_event_name": "Stop"}]', "list"),
        (b"42", "int"),
    ],
)
def test_invalid_stdin_becomes_one_invalid_payload_envelope(raw: bytes, reason: str) -> None:
    out = envelopes_from_stdin(raw, {})
    assert len(out) == 1
    subject, env = out[0]
    assert env["event"] == "InvalidPayload"
    assert subject == "genie.agent.unknown.event.invalid_payload", "no session: not a made-up `main`"
    assert env["agent"] == "unknown"
    assert reason in env["data"]["error"]
    assert reason in env["text"]
    assert env["data"]["raw"] == raw.decode("utf-8", "replace")
    assert decode_envelope(encode_envelope(env)) == env


def test_invalid_stdin_that_names_its_session_belongs_to_its_main_agent() -> None:
    raw = b'{"session_id": "2421d2e0-a515", "cwd": "/repo", "hook_event_name": "Stop", "x": '
    (subject, env), *rest = envelopes_from_stdin(raw, {})
    assert not rest
    assert (env["event"], env["agent"], env["session_id"], env["cwd"]) == (
        "InvalidPayload",
        "main-2421d2e0",
        "2421d2e0-a515",
        "/repo",
    )
    assert subject == "genie.agent.main-2421d2e0.event.invalid_payload"
    assert "not JSON" in env["data"]["error"], "the reason is kept"
    (_, named), *_ = envelopes_from_stdin(b"{", {"GENIE_AGENT_NAME": "lead"})
    assert named["agent"] == "lead"


def test_invalid_stdin_raw_text_is_redacted() -> None:
    secret = "sk-ant-api03-" + "Zq8" * 30
    raw = (
        '{"hook_event_name": "PreToolUse", "tool_input": {"command": "export ANTHROPIC_API_KEY=' + secret
    ).encode()
    (_, env) = envelopes_from_stdin(raw, {})[0]
    assert env["event"] == "InvalidPayload"
    assert secret not in encode_envelope(env).decode()
    assert "[REDACTED:anthropic_key]" in env["data"]["raw"]
    assert env["redacted"] >= 1


def test_payload_without_event_name_is_kept_and_noted() -> None:
    (subject, env), *rest = envelopes_from_stdin(b'{"session_id": "abcdef0123"}', {})
    assert not rest
    assert env["event"] == "Unknown"
    assert env["data"]["session_id"] == "abcdef0123"
    assert "hook_event_name" in env["data"]["agentwatch_note"]
    assert subject == "genie.agent.main-abcdef01.event.unknown"


def test_oversized_stdin_is_read_from_head_and_tail_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "ghp_" + "R4nd0mT0k3n" * 4
    head = json.dumps({
        "session_id": "9f2c4e1a-0000-4000-8000-000000000001", "transcript_path": "/t.jsonl", "cwd": "/repo",
        "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": f"GITHUB_TOKEN={token} ./dump.sh"},
    })[:-1]  # fmt: skip
    body = "INSERT INTO t VALUES (1, 'x');\\n" * 300_000
    raw = (
        head + ', "tool_response": {"stdout": "' + body + '", "stderr": ""}, "tool_use_id": "toolu_01Tail"}'
    ).encode()
    assert len(raw) > MAX_PARSE_BYTES
    assert json.loads(raw)["tool_use_id"] == "toolu_01Tail"  # the test input itself is valid JSON

    parsed: list[int] = []

    def spy(text: str) -> Any:
        parsed.append(len(text))
        return real_loads(text)

    monkeypatch.setattr(contract, "loads", spy)
    out = envelopes_from_stdin(raw, {})
    assert max(parsed, default=0) < 100_000, "the oversized payload was parsed whole"
    assert len(out) == 1
    subject, env = out[0]
    assert subject == "genie.tool.main-9f2c4e1a.result"
    assert env["truncated"] is True
    assert env["session_id"] == "9f2c4e1a-0000-4000-8000-000000000001"
    assert env["tool_use_id"] == "toolu_01Tail"
    assert env["event"] == "PostToolUse"
    assert env["tool_name"] == "Bash"
    assert env["cwd"] == "/repo"
    assert env["data"]["agentwatch_truncated"]["original_bytes"] == len(raw)
    monkeypatch.undo()
    encoded = encode_envelope(env)
    assert len(encoded) <= DEFAULT_MAX_PAYLOAD
    assert token not in encoded.decode()
    assert env["redacted"] >= 1


# --- usage subjects and stable ids ----------------------------------------------------------------


def test_usage_subjects_are_told_from_a_hook_event_named_usage() -> None:
    assert contract.usage_subject("lead.one") == "genie.agent.lead_one.usage"
    assert contract.is_usage_subject("genie.agent.lead.usage")
    assert not contract.is_usage_subject("genie.agent.lead.event.usage")
    assert not contract.is_usage_subject(event_subject("Usage", "lead")[0])
    assert not contract.is_usage_subject("genie.tool.lead.usage")
    assert not contract.is_usage_subject("genie.msg.usage")


def test_stable_ids_are_ulids_of_the_given_time_and_key() -> None:
    one = contract.stable_event_id(1795345293424, "usage|s|m|r")
    assert one == contract.stable_event_id(1795345293424, "usage|s|m|r")
    assert one != contract.stable_event_id(1795345293424, "usage|s|m|r2")
    assert len(one) == 26 and set(one) <= set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
    assert event_id_time(one) == 1795345293.424
    digest = hashlib.sha1(b"usage|s|m|r", usedforsecurity=False).digest()
    assert contract.sha1_digest(b"usage|s|m|r") == digest


def test_every_bookkeeping_event_reads_as_a_sentence() -> None:
    batch = {"tool_calls": [{"tool_name": "Bash"}, {"tool_name": "Read"}, {"tool_name": "Bash"}]}
    assert summarize("PostToolBatch", batch) == "3 tool calls done: Bash ×2, Read"
    assert summarize("PostToolBatch", {}) == "0 tool calls done"
    assert summarize("InstructionsLoaded", {"file_path": "/p/CLAUDE.md", "load_reason": "session_start"}) == (
        "instructions loaded: /p/CLAUDE.md (session_start)"
    )
    assert summarize("CwdChanged", {"old_cwd": "/p", "new_cwd": "/p/sub"}) == "cd /p/sub"
    assert summarize("FileChanged", {"file_path": "/p/a.txt"}) == "file changed: /p/a.txt"
    assert (
        summarize("ConfigChange", {"file_path": "/h/settings.json"}) == "settings changed: /h/settings.json"
    )
    assert summarize("Setup", {"trigger": "init"}) == "setup (init)"
    assert summarize("PreCompact", {"trigger": "auto"}) == "compacting the context (auto)"
    assert summarize("PostCompact", {"trigger": "manual"}) == "context compacted (manual)"
    for event in HOOK_EVENTS:
        assert summarize(event, {}) != event, event  # a sentence, not the bare name


def test_an_encode_stopped_by_depth_leaves_the_encoder_usable() -> None:
    """A value nested too deep to encode raised RecursionError part-way, and left the encoder's
    record of the containers it was inside: encoding any of them again said "circular"."""
    from agentwatch.jsonfast import dumps

    inner: dict[str, object] = {"k": 1}
    deep: dict[str, object] = inner
    for _ in range(100_000):
        deep = {"a": deep}
    with pytest.raises(RecursionError):
        dumps({"x": inner, "deep": deep})
    assert dumps({"x": inner}) == '{"x":{"k":1}}'


def test_a_payload_deeper_than_the_parser_is_an_event_that_says_so() -> None:
    raw = b'{"session_id":"s1","hook_event_name":"Stop","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    [(subject, env)] = contract.envelopes_from_stdin(raw, {}, host="h")
    assert env["event"] == "Stop" and env["session_id"] == "s1" and env["truncated"] is True
    assert env["data"]["agentwatch_truncated"] == {"original_bytes": len(raw), "reason": contract.TOO_DEEP}
    assert subject.startswith("genie.agent.")
