"""The dashboard's model: roster states and nesting, feed filters, bounded buffers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentwatch.agents import FAILED, IDLE, LOST, STOPPED, THINKING, WAITING, WORKING
from agentwatch.contract import envelopes_from_stdin
from agentwatch.tui.model import (
    TIMELINE_MAX,
    Feed,
    FeedFilter,
    FeedLine,
    conversation,
    errors,
    sparkline,
    tool_calls,
)
from agentwatch.tui.roster import Agent, Roster, Unconfirmed, idle_teammates
from agentwatch.tui.team import Team
from tests.conftest import CAPTURES, load_fixture_file

Env = dict[str, Any]
BASE = 1_795_000_000.0


def envs(payload: dict[str, Any], at: float, environ: dict[str, str] | None = None) -> list[Env]:
    return [env for _, env in envelopes_from_stdin(json.dumps(payload).encode(), environ or {}, now=at)]


def one(payload: dict[str, Any], at: float) -> Env:
    return envs(payload, at)[0]


def named(roster: Roster, name: str) -> Agent:
    """The one agent of that name (these tests have one of each)."""
    (agent,) = roster.named(name)
    return agent


def call(event: str, tool: str = "Bash", tool_use_id: str = "toolu_1", **extra: Any) -> dict[str, Any]:
    return {"hook_event_name": event, "session_id": "5e55105e-0000", "tool_name": tool,
            "tool_input": {"command": "pytest -q"}, "tool_use_id": tool_use_id, **extra}  # fmt: skip


def test_state_follows_the_agents_turn() -> None:
    roster = Roster()
    seen = []
    steps = [
        ({"hook_event_name": "UserPromptSubmit", "session_id": "5e55105e-0000", "prompt": "go"}, THINKING),
        (call("PreToolUse"), WORKING),
        (call("PermissionRequest"), WAITING),
        (call("PostToolUse", duration_ms=12), THINKING),
        (call("PreToolUse", tool_use_id="toolu_2"), WORKING),
        (call("PostToolUseFailure", tool_use_id="toolu_2", error="Exit code 1"), THINKING),
        ({"hook_event_name": "Stop", "session_id": "5e55105e-0000"}, IDLE),
        ({"hook_event_name": "StopFailure", "session_id": "5e55105e-0000", "error": "rate_limit"}, FAILED),
        ({"hook_event_name": "SessionEnd", "session_id": "5e55105e-0000", "reason": "other"}, STOPPED),
    ]
    for i, (payload, _) in enumerate(steps):
        agent = roster.apply(one(payload, BASE + i))
        assert agent is not None
        seen.append(agent.state)
    assert seen == [state for _, state in steps]
    agent = named(roster, "main-5e55105e")
    assert (agent.tool_calls, agent.errors, agent.events) == (2, 2, len(steps))


def test_waiting_for_permission_shows_the_tool_and_how_long() -> None:
    roster = Roster()
    roster.apply(one(call("PreToolUse", tool="WebFetch"), BASE))
    agent = roster.apply(one(call("PermissionRequest", tool="WebFetch"), BASE + 2))
    assert agent is not None and agent.state == WAITING and agent.tool == "WebFetch"
    assert agent.tool_running_for(BASE + 10) == 8.0, "waiting since the request (agents.TRANSITIONS)"


def test_subagents_and_teammates_nest_under_their_lead() -> None:
    roster = Roster()
    for i, rec in enumerate(load_fixture_file(CAPTURES)):
        for env in envs(rec["payload"], BASE + i, rec.get("hook_env", {})):
            roster.apply(env)
    rows = roster.ordered("name")
    names = [(depth, agent.name) for depth, agent in rows]
    lead = names.index((0, "main-2421d2e0"))
    assert names[lead + 1] == (1, "general-purpose-fd10a9f3")
    teammate = next(a for _, a in rows if a.name == "researcher")
    assert teammate.parent == "main-96f21a61" and teammate.state == IDLE
    assert (1, "researcher") in names
    assert teammate.messages == 1
    assert len(rows) == len(roster), "every agent appears exactly once"


def test_roster_filter_and_sort() -> None:
    roster = Roster()
    roster.apply(one({**call("PreToolUse"), "session_id": "aaaaaaaa-1"}, BASE))
    roster.apply(one({"hook_event_name": "StopFailure", "session_id": "bbbbbbbb-1"}, BASE + 1))
    roster.apply(one({"hook_event_name": "Stop", "session_id": "cccccccc-1"}, BASE + 2))
    assert [a.name for _, a in roster.ordered("state")] == ["main-bbbbbbbb", "main-aaaaaaaa", "main-cccccccc"]
    assert [a.name for _, a in roster.ordered("recent")] == [
        "main-cccccccc",
        "main-bbbbbbbb",
        "main-aaaaaaaa",
    ]
    assert [a.name for _, a in roster.ordered(text="bash")] == ["main-aaaaaaaa"]


def test_feed_is_bounded_and_filters() -> None:
    feed = Feed(maxlen=100)
    for i in range(250):
        tool = "Bash" if i % 2 else "Read"
        payload = call("PreToolUse", tool=tool, tool_use_id=f"toolu_{i}", session_id=f"{i % 3}aaaaaaa-x")
        payload["tool_input"] = {"command": f"echo {i}", "file_path": f"/p/f{i}.py"}
        feed.add(one(payload, BASE + i))
    assert len(feed) == 100 and feed.total == 250
    assert feed.lines()[0].text == "Read /p/f150.py"
    assert {line.tool for line in feed.lines(FeedFilter(tool="Bash"))} == {"Bash"}
    assert [line.text for line in feed.lines(FeedFilter(text="echo 249"))] == ["$ echo 249"]
    assert {line.agent for line in feed.lines(FeedFilter(agent="main-1aaaaaaa"))} == {"main-1aaaaaaa"}
    assert len(feed.lines(FeedFilter(event="tool_call"), last=5)) == 5


@dataclass(frozen=True)
class CountingFilter(FeedFilter):
    calls: list[FeedLine] = field(default_factory=list, compare=False)

    def matches(self, line: FeedLine) -> bool:
        self.calls.append(line)
        return super().matches(line)


def test_feed_asked_again_matches_only_what_came_since() -> None:
    """The filtered lines kept between two questions are the ones a fresh match over the feed
    gives: lines added since matched, lines gone from the feed dropped, a new filter starts over."""
    feed = Feed(maxlen=50)
    bash, read = FeedFilter(tool="Bash"), FeedFilter(tool="Read")

    def fresh(flt: FeedFilter) -> list[FeedLine]:
        return [line for line in feed.lines() if flt.matches(line)]

    for i in range(400):
        tool = "Bash" if i % 3 else "Read"
        payload = call("PreToolUse", tool=tool, tool_use_id=f"toolu_{i}", session_id="1aaaaaaa-x")
        feed.add(one(payload, BASE + i))
        if i % 7 == 0:  # asked after 1 to 7 new lines; sometimes after the whole feed turned over
            assert feed.lines(bash) == fresh(bash)
        if i % 120 == 0:
            assert feed.lines(read) == fresh(read)
    assert feed.lines(bash) == fresh(bash) and len(feed.lines(bash)) == 33
    assert feed.lines(read, last=3) == fresh(read)[-3:]
    counting = CountingFilter(tool="Read")
    feed.lines(counting)
    feed.add(one(call("PreToolUse", tool="Read", tool_use_id="toolu_x", session_id="1aaaaaaa-x"), BASE))
    counting.calls.clear()
    assert feed.lines(counting)[-1].tool_use_id == "toolu_x"
    assert len(counting.calls) == 1  # the same filter again: only the new line was matched


def test_activity_sparkline() -> None:
    roster = Roster()
    for i in range(40):
        roster.apply(one({"hook_event_name": "Notification", "session_id": "5e55105e-0000"}, BASE + i * 0.5))
    agent = named(roster, "main-5e55105e")
    line = sparkline(agent.activity)
    assert len(line) == 30 and line[-1] != " " and line[0] == " "
    assert sparkline([0, 0]) == "  " and sparkline([1, 8]) == "▁█"


# --- agent detail and team --------------------------------------------------------------------

TEAM_SESSION = "96f21a61-e7c0-4640-bc4e-b99cff541b11"
RESEARCHER = {"agent_id": "aresearcher-4f6960afa371e571", "agent_type": "researcher"}


def team_payloads() -> list[dict[str, Any]]:
    """A lead, a teammate: messages both ways, two tasks (one completed), the teammate going idle."""
    send = {"hook_event_name": "PostToolUse", "tool_name": "SendMessage", "tool_response": {"success": True}}
    steps: list[dict[str, Any]] = [
        {**send, "tool_input": {"to": "researcher", "summary": "Kickoff", "message": "Look at hooks"}},
        {"hook_event_name": "TaskCreated", "task_id": "1", "task_subject": "Collect payloads"},
        {"hook_event_name": "TaskCreated", "task_id": "2", "task_subject": "Review the store"},
        {**send, **RESEARCHER, "tool_input": {"to": "main", "summary": "Findings ready", "message": "3"}},
        {**RESEARCHER, "hook_event_name": "TaskCompleted", "task_id": "1",
         "task_subject": "Collect payloads"},
        {**send, **RESEARCHER, "tool_input": {"to": "main", "summary": "Second pass done", "message": "ok"}},
        {**RESEARCHER, "hook_event_name": "TeammateIdle", "teammate_name": "researcher",
         "team_name": "session-96f21a61"},
    ]  # fmt: skip
    return [{"session_id": TEAM_SESSION, "cwd": "/repo", **step} for step in steps]


def team_envelopes() -> list[Env]:
    out: list[Env] = []
    for i, payload in enumerate(team_payloads()):
        out += envs(payload, BASE + i)
    return out


def test_team_edges_count_messages_and_keep_the_latest_summary() -> None:
    team = Team()
    for env in team_envelopes():
        team.apply(env)
    edges = {(e.sender, e.recipient): e for e in team.edges()}
    assert {e.team for e in team.edges()} == {"session-96f21a61"}
    assert set(edges) == {("main-96f21a61", "researcher"), ("researcher", "main-96f21a61")}
    back = edges[("researcher", "main-96f21a61")]
    assert back.count == 2 and back.summary == "Second pass done" and back.last_at == BASE + 5
    assert team.edges()[0] is back, "busiest edge first"
    assert edges[("main-96f21a61", "researcher")].summary == "Kickoff"


def test_team_tasks_created_and_completed() -> None:
    team = Team()
    for env in team_envelopes():
        team.apply(env)
    tasks = team.tasks()
    assert [(t.task_id, t.subject, t.done) for t in tasks] == [
        ("2", "Review the store", False),
        ("1", "Collect payloads", True),
    ], "open tasks first"
    done = tasks[1]
    assert done.created_by == "main-96f21a61" and done.completed_by == "researcher"


def test_tasks_from_history_rows_use_the_extracted_columns() -> None:
    team = Team()
    row = {"kind": "task_created", "agent": "lead", "team": "t", "task_id": "7", "task_subject": "Ship it",
           "timestamp": "2026-11-22T10:00:00.000Z"}  # fmt: skip
    team.apply(row)
    team.apply({**row, "kind": "task_completed", "agent": "dev"})
    assert [(t.task_id, t.subject, t.done, t.completed_by) for t in team.tasks()] == [
        ("7", "Ship it", True, "dev")
    ]


def test_team_buffers_are_bounded() -> None:
    team = Team(max_edges=10, max_tasks=5)
    for i in range(100):
        team.apply({"kind": "message", "agent": f"a{i}", "peer": "b", "text": "→ b: hi",
                    "timestamp": f"2026-11-22T10:00:{i % 60:02d}.000Z"})  # fmt: skip
        team.apply(
            {"kind": "task_created", "agent": "a", "team": "t", "task_id": str(i), "task_subject": "x"}
        )
    assert len(team.edges()) == 10 and len(team.tasks()) == 5


def test_idle_teammates_are_team_agents_whose_turn_is_over() -> None:
    roster = Roster()
    roster.apply_all(team_envelopes())
    assert [a.name for a in idle_teammates(roster)] == ["researcher"]
    assert roster.children(named(roster, "main-96f21a61").key)[0].name == "researcher"


def test_tool_calls_pair_by_id_and_time_each_call() -> None:
    feed = Feed()
    steps = [
        (call("PreToolUse", "Bash", "t1"), 0.0),
        (call("PreToolUse", "Read", "t2"), 1.0),
        (call("PostToolUse", "Read", "t2"), 1.25),
        (call("PostToolUseFailure", "Bash", "t1", error="Exit code 1"), 4.0),
        (call("PreToolUse", "WebFetch", "t3"), 5.0),
        (call("PermissionDenied", "WebFetch", "t3", reason="no"), 5.5),
        (call("PreToolUse", "Grep", "t4"), 6.0),
        (call("PostToolUse", "Edit", "t-unknown"), 6.5),
    ]
    for payload, dt in steps:
        feed.add(one(payload, BASE + dt))
    calls = tool_calls(feed.lines())
    assert [(c.tool, c.status, c.duration(BASE + 10)) for c in calls] == [
        ("Bash", "failed", 4.0),
        ("Read", "ok", 0.25),
        ("WebFetch", "denied", 0.5),
        ("Grep", "running", 4.0),
    ]
    assert "Exit code 1" in calls[0].error
    assert [line.event for line in errors(feed.lines())] == ["PostToolUseFailure", "PermissionDenied"]


def test_the_agent_timeline_is_bounded_and_feeds_its_conversation() -> None:
    roster = Roster()
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "5e55105e-0000", "prompt": "go"}
    stop = {"hook_event_name": "Stop", "session_id": "5e55105e-0000", "last_assistant_message": "done"}
    for i in range(TIMELINE_MAX + 50):
        roster.apply(one(prompt if i % 2 == 0 else stop, BASE + i))
    agent = named(roster, "main-5e55105e")
    assert len(agent.timeline) == TIMELINE_MAX
    said = conversation(agent.timeline)
    assert [line.kind for line in said[-2:]] == ["prompt", "response"] and said[-1].text == "done"


def test_the_roster_forgets_the_longest_finished_agents_first() -> None:
    roster = Roster(max_agents=3)
    session = "5e55105e-0000"
    roster.apply(one({"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": "go"}, BASE))
    for i, kind in enumerate(("Explore", "Plan")):
        sub = {"session_id": session, "agent_id": f"a{i}000000000000000", "agent_type": kind}
        roster.apply(one({**sub, "hook_event_name": "SubagentStart"}, BASE + 1 + i))
        roster.apply(one({**sub, "hook_event_name": "SubagentStop"}, BASE + 2 + i))
    assert len(roster) == 3 and roster.evicted == 0
    newcomer = {"session_id": session, "agent_id": "a2000000000000000", "agent_type": "Review"}
    roster.apply(one({**newcomer, "hook_event_name": "SubagentStart"}, BASE + 10))
    names = {a.name for a in roster.agents()}
    assert len(roster) == 3 and roster.evicted == 1
    assert "main-5e55105e" in names, "the lead, still thinking, is kept"
    assert "Explore-0000000" not in {n[:15] for n in names}, "the agent idle the longest went first"


def test_agent_timelines_keep_headlines_not_payloads() -> None:
    roster = Roster()
    env = one(call("PreToolUse", "Bash", "t1"), BASE)
    roster.apply(env)
    agent = named(roster, env["agent"])
    kept = agent.timeline[-1].envelope
    assert "data" not in kept and kept["id"] == env["id"] and kept["tool_use_id"] == "t1"
    assert "data" in env, "the live envelope itself is untouched"


def test_a_line_from_raw_json_keeps_bytes_and_plain_values_out_of_the_collectors_way() -> None:
    import gc

    from agentwatch.contract import encode_envelope
    from agentwatch.tui.model import FeedLine

    env = one(call("PreToolUse", "Bash", "t1"), BASE)
    raw = encode_envelope(env)
    line = FeedLine.of(json.loads(raw), raw)
    assert not gc.is_tracked(line.envelope), "the headline holds plain values only"
    assert "data" not in line.envelope and line.envelope["tool_use_id"] == "t1"
    assert line.full()["data"]["tool_input"] == {"command": "pytest -q"}, "the payload, when asked"
    assert line.headline().envelope is line.envelope, "nothing copied for the agent's timeline"
    hostile = FeedLine.of({**json.loads(raw), "text": {"not": "a string"}}, raw)
    assert not gc.is_tracked(hostile.envelope) and hostile.envelope["text"] == "{'not': 'a string'}"


def test_a_tool_calls_duration_is_claude_codes_own_where_it_said() -> None:
    """The agent view shows what the feed shows: Claude Code's duration_ms, not the time between
    two hook runs (which includes their start-up)."""
    call = {"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash",
            "tool_input": {"command": "make"}, "tool_use_id": "toolu_d1"}  # fmt: skip
    done = dict(call, hook_event_name="PostToolUse", tool_response={"stdout": ""}, duration_ms=1234)
    (_, pre), *_ = envelopes_from_stdin(json.dumps(call).encode(), {}, now=1000.0)
    (_, post), *_ = envelopes_from_stdin(json.dumps(done).encode(), {}, now=1005.0)
    assert post["duration_ms"] == 1234
    decoded = [FeedLine.of(pre), FeedLine.of(post)]
    raw = [FeedLine.of(json.loads(json.dumps(e)), json.dumps(e).encode()) for e in (pre, post)]
    for lines in (decoded, raw):
        (made,) = tool_calls(lines)
        assert made.duration(now=2000.0) == 1.234
    older = dict(post)
    del older["duration_ms"]  # an envelope from a hook before the column: the payload's
    (made,) = tool_calls([FeedLine.of(pre), FeedLine.of(older)])
    assert made.duration(now=2000.0) == 1.234
    untimed = dict(done)
    del untimed["duration_ms"]
    (_, post2), *_ = envelopes_from_stdin(json.dumps(untimed).encode(), {}, now=1005.0)
    (made,) = tool_calls([FeedLine.of(pre), FeedLine.of(post2)])
    assert made.duration(now=2000.0) == 5.0, "no duration_ms: the hooks' own times"


def test_the_roster_is_the_stores_answer_plus_the_live_events_after_it() -> None:
    """Counts and states come from the store's rows; a live event is counted on top, and its state
    taken only when it is newer than the state event the store's answer knows."""
    import datetime as dt

    def at(text: str) -> dt.datetime:
        return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)

    day1, day2 = at("2026-01-01 00:00:00"), at("2026-01-02 00:00:00")
    stored = [
        {"agent": "quiet", "host": "h", "scope": "s1", "team": "session-s1", "last_seen": day1,
         "events": 900, "tool_calls": 300, "errors": 2, "messages_sent": 4, "state_event": "Stop",
         "state_since": day1, "state_id": "01A", "scope_last_seen": day2},
        {"agent": "busy", "host": "h", "scope": "s1", "team": "session-s1", "last_seen": day2,
         "events": 50, "tool_calls": 10, "errors": 0, "messages_sent": 0, "state_event": "PreToolUse",
         "current_tool": "Bash", "state_since": at("2026-01-02 00:00:00"), "state_id": "01B",
         "scope_last_seen": at("2026-01-02 00:00:00")},
    ]  # fmt: skip
    roster = Roster(max_agents=10)
    roster.seed(stored, total=2)
    busy = roster.get(("h", "s1", "busy"))
    assert busy is not None and busy.state == WORKING and busy.tool == "Bash"
    live = {
        "agent": "busy",
        "host": "h",
        "team": "session-s1",
        "session_id": "s1",
        "event": "Stop",
        "id": "01C",
    }
    roster.apply({**live, "timestamp": "2026-01-02T00:00:01.000Z"})
    older = {
        **live,
        "event": "PreToolUse",
        "id": "01A",
        "tool_name": "Read",
        "timestamp": "2026-01-01T00:00:00.000Z",
    }
    roster.apply(older)
    quiet = roster.get(("h", "s1", "quiet"))
    assert quiet is not None and quiet.state == IDLE and quiet.events == 900 and quiet.messages == 4
    assert busy is not None and busy.state == IDLE, "the newer live Stop counts, the older call does not"
    assert (busy.events, busy.tool_calls) == (52, 11), "both live events are counted on the store's"
    roster.settle(dt.datetime(2026, 1, 2, 1, 0, tzinfo=dt.UTC).timestamp())
    assert {a.state for a in roster.agents()} == {LOST}, "an hour of silence in their session"
    small = Roster(max_agents=1)
    small.seed(stored[1:], total=2)
    assert small.total == 2 and len(small) == 1


def test_two_agents_of_one_name_in_two_sessions_are_two_rows() -> None:
    roster = Roster()
    for session in ("aaaaaaaa-1", "bbbbbbbb-2"):
        payload = {**RESEARCHER, "session_id": session, "hook_event_name": "SubagentStart"}
        roster.apply(one(payload, BASE))
    rows = roster.named("researcher")
    assert len(rows) == 2 and {a.scope for a in rows} == {"aaaaaaaa-1", "bbbbbbbb-2"}


def test_unconfirmed_events_leave_once_the_store_holds_them() -> None:
    pending = Unconfirmed(max_items=3)
    for i in range(5):
        pending.add({"id": f"e{i}", "event": "Notification", "data": {"notification_type": "idle_prompt"}})
    pending.add({"event": "Stop"})  # no id: it cannot be confirmed, so it is not kept
    assert pending.ids(10) == ["e2", "e3", "e4"] and pending.dropped == 2
    pending.confirm({"e3", "other"})
    assert [e["id"] for e in pending.envelopes()] == ["e2", "e4"]
    assert pending.envelopes()[0]["data"] == {"notification_type": "idle_prompt"}, "what the state needs"


def test_the_watermark_starts_at_the_earliest_unconfirmed_time_or_nowhere() -> None:
    pending = Unconfirmed()
    pending.add({"id": "a", "event": "Stop", "timestamp": "2026-11-29T06:00:01.000Z"})
    pending.add({"id": "b", "event": "Stop", "timestamp": "2026-11-29T06:00:00.500Z"})
    pending.add({"id": "c", "event": "Stop"})
    assert pending.earliest(["a", "b"]) == 1_795_932_000.5
    assert pending.earliest(["a", "c"]) is None, "one without a time: event_ids is asked"
    assert pending.earliest([]) is None


def test_the_feed_filter_takes_a_harness_and_keeps_quiet_events_out_of_sight() -> None:
    """`harness:codex` (or gemini, claude) narrows the feed; a model request's start, a streamed
    chunk and Gemini's automatic PreCompress are shown only to a filter that names them."""
    base = {"agent": "main-1", "timestamp": "2026-11-23T23:44:52.968Z", "text": "x"}
    codex = FeedLine.of({**base, "event": "PreToolUse", "kind": "tool_call", "harness": "codex"})
    claude = FeedLine.of({**base, "event": "PreToolUse", "kind": "tool_call"})
    chunk = FeedLine.of({**base, "event": "ModelResponseChunk", "kind": "model_response_chunk",
                         "harness": "gemini-cli", "harness_event": "AfterModel"})  # fmt: skip
    response = FeedLine.of({**base, "event": "PostModelRequest", "kind": "post_model_request",
                            "harness": "gemini-cli", "harness_event": "AfterModel"})  # fmt: skip
    feed = Feed()
    for line in (codex, claude, chunk, response):
        feed.add(line)
    assert feed.lines(FeedFilter()) == [codex, claude, response]
    assert feed.lines(FeedFilter(harness="codex")) == [codex]
    assert feed.lines(FeedFilter(harness="claude")) == [claude]
    assert feed.lines(FeedFilter(harness="gemini")) == [response]
    assert feed.lines(FeedFilter(event="ModelResponseChunk")) == [chunk]
    assert feed.lines(FeedFilter(event="AfterModel")) == [chunk, response]


def test_bookkeeping_is_folded_out_of_the_feed_unless_asked_for() -> None:
    feed = Feed()
    for event in ("PreToolUse", "PostToolBatch", "InstructionsLoaded", "Stop"):
        feed.add({"event": event, "agent": "lead", "text": event})
    assert [ln.event for ln in feed.lines(FeedFilter())] == ["PreToolUse", "Stop"]
    assert len(feed.lines(FeedFilter(bookkeeping=True))) == 4
    assert [ln.event for ln in feed.lines(FeedFilter(event="PostToolBatch"))] == ["PostToolBatch"]
    parsed = FeedFilter.parse("agent:lead tool:Bash event:Stop make test", bookkeeping=True)
    assert parsed == FeedFilter("lead", "Stop", "Bash", "make test", bookkeeping=True)
