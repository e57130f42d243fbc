"""`agentwatch demo`: the simulator, and its traffic on a real nats-server through the contract code."""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import itertools
import json
import re
import signal
import subprocess
import sys
from typing import Any

import pytest
from nats.aio.msg import Msg

from agentwatch.cli.demo import register
from agentwatch.contract import MSG_ID_HEADER, decode_envelope
from agentwatch.demo import DEMO_HOST, TeamSimulator, encode_event, run_demo
from tests.conftest import clean_env, free_port
from tests.services import Collector, NatsServer

SEED = 7
HEX16 = re.compile(r"^a[0-9a-f]{16}$")


def demo_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentwatch", "demo", *args]


def first_events(seed: int, n: int, teammates: int = 4) -> list[tuple[float, dict[str, Any]]]:
    return list(itertools.islice(TeamSimulator(seed, teammates).events(), n))


def parse_ts(value: str) -> float:
    return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def split(messages: list[Msg]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(hook event envelopes, genie.msg.* companions), each decoded and in arrival order."""
    events: list[dict[str, Any]] = []
    companions: list[dict[str, Any]] = []
    for msg in messages:
        env = decode_envelope(msg.data)
        assert msg.headers is not None
        assert msg.headers[MSG_ID_HEADER] == env["id"]
        if msg.subject.endswith(".usage"):
            continue  # the demo's token usage: see test_the_first_minute_costs
        (companions if msg.subject.startswith("genie.msg.") else events).append(env)
    return events, companions


def delivered_sends(payloads: list[dict[str, Any]]) -> int:
    return sum(
        1
        for p in payloads
        if p["hook_event_name"] == "PostToolUse"
        and p["tool_name"] == "SendMessage"
        and p["tool_response"].get("success") is not False
    )


# --- the simulator --------------------------------------------------------------------------------


def test_simulator_is_deterministic_for_a_seed() -> None:
    a = first_events(SEED, 3000)
    b = first_events(SEED, 3000)
    assert json.dumps(a) == json.dumps(b)
    assert json.dumps(first_events(SEED + 1, 3000)) != json.dumps(a)
    times = [t for t, _ in a]
    assert times == sorted(times)
    # Each call to events() starts over.
    sim = TeamSimulator(SEED)
    assert json.dumps(list(itertools.islice(sim.events(), 50))) == json.dumps(a[:50])


def test_simulated_team_looks_like_claude_code() -> None:
    events = first_events(SEED, 1500)
    payloads = [p for _, p in events]
    names = collections.Counter(p["hook_event_name"] for p in payloads)
    for event in (
        "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
        "PermissionRequest", "PostToolBatch", "SubagentStart", "SubagentStop", "TeammateIdle",
        "TaskCreated", "TaskCompleted", "Stop", "Notification",
    ):  # fmt: skip
        assert names[event], f"no {event} in the first 1500 events"

    lead_session = payloads[0]["session_id"]
    cwd = payloads[0]["cwd"]
    teammates = {p["agent_type"]: p["agent_id"] for p in payloads if p["hook_event_name"] == "TeammateIdle"}
    assert set(teammates) == {"researcher", "implementer", "reviewer", "tester"}
    for name, agent_id in teammates.items():
        assert re.fullmatch(rf"a{name}-[0-9a-f]{{16}}", agent_id)
    for p in payloads:
        if p.get("agent_id") in teammates.values():
            assert p["session_id"] == lead_session
    subagents = [p for p in payloads if p["hook_event_name"] == "SubagentStart"]
    assert subagents
    assert {p["agent_type"] for p in subagents} <= {"Explore", "general-purpose"}
    assert all(HEX16.match(p["agent_id"]) for p in subagents)
    stopped = {p["agent_id"] for p in payloads if p["hook_event_name"] == "SubagentStop"}
    assert {p["agent_id"] for p in subagents} & stopped

    # Pre and Post of a call share a tool_use_id; the Post comes later by (at least) its duration.
    pre: dict[str, float] = {}
    post: dict[str, tuple[float, dict[str, Any]]] = {}
    for t, p in events:
        if p["hook_event_name"] == "PreToolUse":
            assert p["tool_use_id"].startswith("toolu_")
            pre[p["tool_use_id"]] = t
        elif p["hook_event_name"] in ("PostToolUse", "PostToolUseFailure"):
            post[p["tool_use_id"]] = (t, p)
    assert post and set(post) <= set(pre)
    for tool_use_id, (t, p) in post.items():
        assert t - pre[tool_use_id] >= p["duration_ms"] / 1000 - 0.001
    assert max(t - pre[k] for k, (t, _) in post.items()) > 20, "no long-running call"
    assert set(pre) - set(post), "no call left without a result (a denied permission)"

    failures = [p for p in payloads if p["hook_event_name"] == "PostToolUseFailure"]
    assert any(p["error"].startswith("Exit code ") for p in failures)
    for p in payloads:
        if p.get("tool_name") in ("Read", "Edit", "Write") and "tool_input" in p:
            assert p["tool_input"]["file_path"].startswith(cwd + "/")

    sends = [p for p in payloads if p["hook_event_name"] == "PostToolUse" and p["tool_name"] == "SendMessage"]
    assert set(sends[0]["tool_input"]) == {"to", "summary", "message"}
    assert all(p["tool_response"]["success"] is True for p in sends)
    assert any(p.get("agent_type") in teammates and p["tool_input"]["to"] == "main" for p in sends)
    assert any(p.get("agent_type") in teammates and p["tool_input"]["to"] in teammates for p in sends)
    assert any("agent_id" not in p and p["tool_input"]["to"] in teammates for p in sends)
    assert any(p["prompt"].startswith("<agent-message from=") for p in payloads if "prompt" in p)
    assert all(p["last_assistant_message"] for p in payloads if p["hook_event_name"] == "Stop")

    # TaskCreated fires inside its TaskCreate call.
    order = [(p["hook_event_name"], p.get("tool_name")) for p in payloads]
    i = order.index(("TaskCreated", None))
    assert ("PreToolUse", "TaskCreate") in order[:i]


def test_agents_option_sets_the_team_size() -> None:
    payloads = [p for _, p in first_events(3, 2000, teammates=2)]
    assert {p["agent_type"] for p in payloads if p["hook_event_name"] == "TeammateIdle"} == {
        "researcher",
        "implementer",
    }
    solo = [p for _, p in first_events(3, 300, teammates=0)]
    assert not any(p["hook_event_name"] == "TeammateIdle" for p in solo)
    with pytest.raises(ValueError, match="teammates"):
        TeamSimulator(1, teammates=99)


def test_encode_event_is_what_the_hook_publishes() -> None:
    sim = TeamSimulator(SEED)
    payloads = [p for _, p in itertools.islice(sim.events(), 400)]
    send = next(
        p for p in payloads if p["hook_event_name"] == "PostToolUse" and p["tool_name"] == "SendMessage"
    )
    (subject, msg_id, body), (msg_subject, _, msg_body) = encode_event(send, sim.environ)
    env = decode_envelope(body)
    assert subject.startswith("genie.tool.") and subject.endswith(".result")
    assert env["id"] == msg_id and env["team"] == "demo" and env["host"] == DEMO_HOST
    companion = decode_envelope(msg_body)
    assert msg_subject.startswith("genie.msg.")
    assert companion["kind"] == "message" and companion["data"]["event_id"] == env["id"]
    # Without a team, the envelopes get the lead session's implicit team, as the hook's would.
    start = decode_envelope(encode_event(payloads[0], {})[0][2])
    assert start["team"] == TeamSimulator(SEED, team=None).team_name == f"session-{send['session_id'][:8]}"
    # A secret in a simulated command is redacted like any other.
    curl = next(
        p
        for _, p in itertools.islice(sim.events(), 50000)
        if p["hook_event_name"] == "PreToolUse" and "Bearer" in p["tool_input"].get("command", "")
    )
    token = curl["tool_input"]["command"].split("Bearer ")[1].split("'")[0]
    [(_, _, curl_body)] = encode_event(curl, sim.environ)
    assert decode_envelope(curl_body)["redacted"] >= 1 and token.encode() not in curl_body
    flat = list(itertools.islice(sim.messages(), 200))
    assert all(isinstance(b, bytes) and s.startswith("genie.") for s, _, b in flat)


# --- on the bus -----------------------------------------------------------------------------------


async def test_run_publishes_exactly_count_events_and_their_companions(
    shared_nats: NatsServer, collector_for: Any
) -> None:
    n = 1200
    payloads = [p for _, p in first_events(SEED, n)]
    expected_subjects = [s for p in payloads for s, _, _ in encode_event(p, {"GENIE_TEAM": "demo"})]
    companions_expected = delivered_sends(payloads)
    assert companions_expected > 10
    collector = collector_for(shared_nats.url)

    sent = await run_demo(shared_nats.url, rate=0, count=n, seed=SEED)

    assert sent == n
    collector.wait_for(n + companions_expected)
    messages = collector.settle(0.3)
    events, companions = split(messages)
    assert len(events) == n
    assert len(companions) == companions_expected
    assert [m.subject for m in messages if not m.subject.endswith(".usage")] == expected_subjects

    assert {e["team"] for e in events + companions} == {"demo"}
    assert {e["host"] for e in events} == {DEMO_HOST}
    agents = {e["agent"] for e in events}
    assert {"researcher", "implementer", "reviewer", "tester"} <= agents
    lead = events[0]["agent"]
    assert lead.startswith("main-") and events[0]["parent_agent"] == ""
    assert any(e["agent"] == "researcher" and e["parent_agent"] == lead for e in events)
    assert any(HEX16.match(e["agent_id"]) and e["parent_agent"] == lead for e in events)
    kinds = collections.Counter(e["kind"] for e in events)
    for kind in ("prompt", "tool_call", "tool_result", "tool_error", "permission", "response", "idle"):
        assert kinds[kind], f"no {kind} envelope"

    # Time order: timestamps are publication times, Pre before Post.
    stamps = [parse_ts(e["timestamp"]) for e in events]
    assert stamps == sorted(stamps)
    seen_pre: dict[str, int] = {}
    for i, e in enumerate(events):
        if e["event"] == "PreToolUse":
            seen_pre[e["tool_use_id"]] = i
        elif e["event"] in ("PostToolUse", "PostToolUseFailure"):
            assert seen_pre[e["tool_use_id"]] < i

    ids = {e["id"] for e in events}
    recipients = set()
    for c in companions:
        assert c["data"]["event_id"] in ids
        recipients.add(c["peer"])
    assert lead in recipients and "implementer" in recipients


async def test_duration_limits_the_run(shared_nats: NatsServer) -> None:
    sent = await run_demo(shared_nats.url, rate=200, duration=0.5, seed=1)
    assert 60 <= sent <= 110


def test_rate_2000_is_sustained(shared_nats: NatsServer, collector_for: Any) -> None:
    collector: Collector = collector_for(shared_nats.url)
    env = clean_env(AGENTWATCH_NATS_URL=shared_nats.url)
    proc = subprocess.run(
        demo_cmd("--rate", "2000", "--count", "4000", "--seed", "11"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    events, companions = split(collector.settle(0.3))
    assert len(events) == 4000
    assert len(companions) == delivered_sends([p for _, p in first_events(11, 4000)])
    stamps = [parse_ts(e["timestamp"]) for e in events]
    measured = (len(stamps) - 1) / max(stamps[-1] - stamps[0], 1e-3)
    reported = re.search(r"done: 4,000 events \+ [\d,]+ messages in [\d.]+s, ([\d,]+) events/s", proc.stdout)
    assert reported, proc.stdout
    print(f"measured {measured:,.0f} events/s; the demo reports {reported.group(1)}/s")
    assert measured >= 1500
    assert int(reported.group(1).replace(",", "")) >= 1500
    assert measured <= 2200, "faster than asked: pacing is broken"


def test_ctrl_c_flushes_and_exits_0(shared_nats: NatsServer, collector_for: Any) -> None:
    collector: Collector = collector_for(shared_nats.url)
    env = clean_env(AGENTWATCH_NATS_URL=shared_nats.url)
    proc = subprocess.Popen(
        demo_cmd("--rate", "300", "--seed", "5"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert len(collector.wait_for(100, timeout=15)) >= 100
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert out.startswith("agentwatch demo: publishing to nats://127.0.0.1:")
    done = re.search(r"done: ([\d,]+) events \+ ([\d,]+) messages", out)
    assert done, out
    events, companions = split(collector.settle(0.3))
    assert len(events) == int(done.group(1).replace(",", ""))
    assert len(companions) == int(done.group(2).replace(",", ""))


def test_bus_down_is_one_line_and_exit_2() -> None:
    env = clean_env(AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}")
    proc = subprocess.run(
        demo_cmd("--count", "5"), env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "agentwatch up" in lines[0] and "AGENTWATCH_NATS_URL" in lines[0]
    assert proc.stdout == ""


def test_register_adds_the_demo_command() -> None:
    parser = argparse.ArgumentParser(prog="agentwatch")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["demo"])
    assert (args.rate, args.count, args.duration, args.seed, args.agents, args.team) == (
        20.0,
        None,
        None,
        None,
        4,
        "demo",
    )
    assert callable(args.func)
    args = parser.parse_args(["demo", "--rate", "2000", "--count", "10", "--seed", "3", "--agents", "2"])
    assert (args.rate, args.count, args.seed, args.agents) == (2000.0, 10, 3, 2)
    for bad in (["--agents", "99"], ["--count", "0"], ["--rate", "-1"], ["--duration", "0"]):
        with pytest.raises(SystemExit):
            parser.parse_args(["demo", *bad])


def test_the_first_minute_costs() -> None:
    """The demo's model steps carry token usage with priced models: the store's own pricing puts a
    cost on the first simulated minute, and every usage envelope names an agent of the hook events."""
    from agentwatch.demo.usage import usage_messages
    from agentwatch.store.usage import USAGE_COLUMNS, usage_rows

    events = [(t, p) for t, p in first_events(SEED, 20_000) if t <= 60]
    bodies, agents = [], set()
    for _, payload in events:
        for _, _, body in encode_event(payload, {"GENIE_TEAM": "demo"}):
            agents.add(decode_envelope(body)["agent"])
        bodies += [body for _, _, body in usage_messages(payload, {"GENIE_TEAM": "demo"}, host=DEMO_HOST)]
    assert len(bodies) >= 10
    found = usage_rows(bodies)
    assert not found.bad
    cost_at = [name for name, _ in USAGE_COLUMNS].index("cost_usd")
    costs = [row[cost_at] for row in found.usage]
    assert all(c is not None and c > 0 for c in costs)
    assert sum(costs) > 0.05
    assert {decode_envelope(b)["agent"] for b in bodies} <= agents
    # The same seed, the same usage.
    again = [b for _, p in events for _, _, b in usage_messages(p, {"GENIE_TEAM": "demo"}, host=DEMO_HOST)]
    assert [decode_envelope(b)["input_tokens"] for b in again] == [
        decode_envelope(b)["input_tokens"] for b in bodies
    ]
