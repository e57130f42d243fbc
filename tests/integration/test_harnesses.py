"""Codex CLI's and Gemini CLI's captured hook payloads through the hook as `agentwatch hooks install
--harness codex|gemini` registers it, run the way each CLI runs it (the registered command, by a
shell, with the environment the hook saw): each run exits 0, prints nothing and ends well within
its timeout; every payload reaches the bus once with its harness, its own event name, the
normalised event, its agent and subject, Gemini's tool calls paired and its sub-agent attributed;
stored, each session's token usage equals the CLI's own totals (expected-usage.json), priced.
No value of a secret variable (Gemini passes GEMINI_API_KEY to its hooks) reaches the bus or the
store.

Expected values are written out from the reference (codex-and-gemini-hooks.md, section 3) and the
fixtures' own files, not computed with the contract's helpers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from agentwatch.store.migrations import apply_migrations
from agentwatch.store.queries import EPOCH, cost
from agentwatch.store.session_queries import session_harnesses
from agentwatch.store.usage import insert_usage, usage_rows
from agentwatch.store.writes import insert_batch
from tests.conftest import (
    CODEX_LOGS,
    CODEX_REVIEW,
    DESIGN_SUBJECTS,
    GEMINI_LOGS,
    clean_env,
    harness_payloads,
    run_cli,
)
from tests.services import Collector, NatsServer

Json = dict[str, Any]
# What Gemini passes its hooks as GEMINI_API_KEY (redacted in the fixtures): of no known key format,
# so that only its being the value of a secret variable can find it.
FAKE_KEY = "q7Hf0zX2-agentwatch-3kdLp9Vw"
HARNESS = {"codex": "codex", "gemini": "gemini-cli"}
# Gemini's own event -> the normalised one (the reference's section 3).
GEMINI_EVENTS = {
    "SessionStart": "SessionStart", "BeforeAgent": "UserPromptSubmit", "PreCompress": "PreCompress",
    "BeforeModel": "PreModelRequest", "BeforeToolSelection": "BeforeToolSelection",
    "BeforeTool": "PreToolUse", "AfterTool": "PostToolUse", "AfterAgent": "Stop", "SessionEnd": "SessionEnd",
}  # fmt: skip
GENERIC = {
    "PreModelRequest": "pre_model_request", "PostModelRequest": "post_model_request",
    "ModelResponseChunk": "model_response_chunk", "BeforeToolSelection": "before_tool_selection",
    "PreCompress": "pre_compress",
}  # fmt: skip


def expected_event(harness: str, rec: Json) -> str:
    payload = rec["payload"]
    if harness == "codex":
        failed = rec["event"] == "PostModelRequest" and payload["status"] == "failed"
        return "StopFailure" if failed else rec["event"]
    if rec["event"] == "AfterModel":
        return "PostModelRequest" if "usageMetadata" in payload["llm_response"] else "ModelResponseChunk"
    return GEMINI_EVENTS[rec["event"]]


def expected_subject(event: str, agent: str) -> str:
    if event in DESIGN_SUBJECTS:
        return DESIGN_SUBJECTS[event].format(agent=agent)
    return f"genie.agent.{agent}.event.{GENERIC[event]}"


def gemini_subagent(session: str, tool_input: Json) -> str:
    """The name the reference's best effort gives a Gemini sub-agent: its name and a hash of its
    session, name and task."""
    key = f"{session}|{tool_input['agent_name']}|{tool_input['prompt']}".encode()
    return f"{tool_input['agent_name']}-{hashlib.sha1(key, usedforsecurity=False).hexdigest()[:8]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Json:
    """Both CLIs' homes with their logs, and the hooks `hooks install` registered in them (no
    `codex` on PATH: the install says the hooks are not trusted yet, and how to trust them)."""
    root = tmp_path_factory.mktemp("harnesses")
    shutil.copytree(CODEX_LOGS, root / "codex")
    shutil.copytree(GEMINI_LOGS, root / "gemini-home" / ".gemini")
    env = clean_env(
        HOME=str(root / "home"),
        CODEX_HOME=str(root / "codex"),
        GEMINI_CLI_HOME=str(root / "gemini-home"),
        PATH="/usr/bin:/bin",
    )
    result = run_cli("hooks", "install", "--harness", "codex", env=env)
    assert result.returncode == 0, result.stderr
    assert "Codex CLI: installed agentwatch hooks for 14 events" in result.stdout
    assert "NOT TRUSTED YET: no `codex` on PATH" in result.stdout and "/hooks" in result.stdout
    result = run_cli("hooks", "install", "--harness", "gemini", env=env)
    assert result.returncode == 0, result.stderr
    assert "Gemini CLI: installed agentwatch hooks for 11 events" in result.stdout
    codex = json.loads((root / "codex" / "hooks.json").read_text())["hooks"]
    gemini = json.loads((root / "gemini-home" / ".gemini" / "settings.json").read_text())["hooks"]
    return {
        "codex": {"home": root / "codex", "hooks": codex},
        "gemini": {"home": root / "gemini-home" / ".gemini", "hooks": gemini},
    }


def run_installed(
    handler: Json, payload: Json, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """The registered command run as the CLIs run it: by a shell, the payload on stdin."""
    started = time.monotonic()
    result = subprocess.run(
        ["/bin/sh", "-c", handler["command"]],
        input=json.dumps(payload, ensure_ascii=False).encode(),
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )
    return result, time.monotonic() - started


def play(
    installed: Json, harness: str, bus: NatsServer, data: Path, mutate: Callable[[Json], None] | None = None
) -> list[Json]:
    """Every capture of `harness` through its installed hook; the capture lines played."""
    records = harness_payloads(harness, installed[harness]["home"])
    for rec in records:
        if mutate is not None:
            mutate(rec)
        (group,) = installed[harness]["hooks"][rec["event"]]
        (handler,) = group["hooks"]
        environ = {k: (FAKE_KEY if v == "<redacted>" else v) for k, v in rec["env"].items()}
        env = clean_env(**environ, AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=bus.url)
        result, took = run_installed(handler, rec["payload"], env)
        timeout_s = handler["timeout"] / (1000 if harness == "gemini" else 1)
        assert result.returncode == 0, result.stderr
        assert result.stdout == b"", "the hook must never print: both CLIs read what it prints"
        assert took < timeout_s, f"{rec['event']} took {took:.2f}s of its {timeout_s}s"
    return records


def collected(collector: Collector, want: int) -> list[Json]:
    collector.wait_for(want, timeout=30)
    return [{"subject": m.subject, "body": m.data, **json.loads(m.data)} for m in collector.settle(0.5)]


@pytest.fixture(scope="module")
def bus(tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = NatsServer(tmp_path_factory.mktemp("bus")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def played(installed: Json, bus: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Json:
    """Both captures played, each through its own installed hook; what the bus got."""
    collector = Collector(bus.url)
    try:
        out: Json = {}
        for harness in ("codex", "gemini"):
            records = play(installed, harness, bus, tmp_path_factory.mktemp(f"data-{harness}"))
            out[harness] = records
        # Every payload, Gemini's sub-agent's start and stop, and the usage read at the ends of turns.
        out["messages"] = collected(collector, len(out["codex"]) + len(out["gemini"]) + 2)
    finally:
        collector.close()
    return out


def events_of(played: Json, harness: str) -> list[Json]:
    return [m for m in played["messages"] if m.get("harness") == HARNESS[harness] and m["kind"] != "usage"]


@pytest.mark.parametrize("harness", ["codex", "gemini"])
def test_every_payload_arrives_once_as_its_harness_and_normalised_event(played: Json, harness: str) -> None:
    records = played[harness]
    events = [m for m in events_of(played, harness) if m["source"] == "hook"]
    assert len(events) == len(records), "one envelope per payload"
    assert len({e["id"] for e in events}) == len(events)
    by_key = {(e["session_id"], e["harness_event"], e["timestamp"], e["id"]): e for e in events}
    assert len(by_key) == len(events)
    want = Counter((r["payload"]["session_id"], r["event"], expected_event(harness, r)) for r in records)
    got = Counter((e["session_id"], e["harness_event"], e["event"]) for e in events)
    assert got == want
    for e in events:
        assert e["harness"] == HARNESS[harness]
        assert e["subject"] == expected_subject(e["event"], e["agent"])


def test_codex_agents_are_the_session_and_its_subagent_by_agent_id(played: Json) -> None:
    events = events_of(played, "codex")
    for rec in played["codex"]:
        payload = rec["payload"]
        sub_id = payload.get("agent_id")
        name = f"default-{sub_id[-8:]}" if sub_id else f"main-{payload['session_id'][-8:]}"
        mine = [e for e in events if e["agent"] == name and e["harness_event"] == rec["event"]]
        assert mine, (rec["event"], name)
    sub = [e for e in events if e["agent_id"]]
    wanted = {"SubagentStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "SubagentStop"}
    assert {e["event"] for e in sub} >= wanted
    assert {e["parent_agent"] for e in sub} == {"main-3ab8f6ab"}


def test_gemini_tool_calls_are_paired_and_the_subagent_is_its_nesting(played: Json) -> None:
    events = events_of(played, "gemini")
    calls: dict[str, list[Json]] = defaultdict(list)
    for e in events:
        if e["event"] in ("PreToolUse", "PostToolUse"):
            assert e["tool_use_id"], e["text"]
            calls[e["tool_use_id"]].append(e)
    assert calls, "the captures have tool calls"
    for pair in calls.values():
        assert [e["event"] for e in pair] == ["PreToolUse", "PostToolUse"]
        assert pair[0]["tool_name"] == pair[1]["tool_name"] and pair[0]["agent"] == pair[1]["agent"]
    invoke = next(r for r in played["gemini"] if r["payload"].get("tool_name") == "invoke_agent")
    sub = gemini_subagent(invoke["payload"]["session_id"], invoke["payload"]["tool_input"])
    own = [e for e in events if e["agent"] == sub]
    own_tools = {e["tool_name"] for e in own if e["event"] == "PreToolUse"}
    assert own_tools == {"run_shell_command", "complete_task"}
    derived = [e for e in own if e["source"] == "derived"]
    assert [e["event"] for e in derived] == ["SubagentStart", "SubagentStop"]
    assert all(e["parent_agent"] == "main-5734d14e" for e in own)
    lead = [e for e in events if e["tool_name"] == "invoke_agent"]
    assert {e["agent"] for e in lead} == {"main-5734d14e"} and len(lead) == 2


def test_one_model_response_is_one_row_with_its_usage(played: Json) -> None:
    """Gemini fires AfterModel per streamed chunk: the last is the response a person sees, with
    the text of all its chunks and its tokens; the others are quiet chunks, still sent."""
    events = events_of(played, "gemini")
    hello = [e for e in events if e["session_id"].startswith("f64cc15c")]
    responses = [e for e in hello if e["event"] == "PostModelRequest"]
    chunks = [e for e in hello if e["event"] == "ModelResponseChunk"]
    assert len(responses) == 1 and len(chunks) == 1
    assert responses[0]["text"] == "gemini-2.5-pro: Hello from the mock — résumé ✓ (1,037 in, 73 out)"
    assert responses[0]["model"] == "gemini-2.5-pro"


def store(client: Client, messages: list[Json]) -> None:
    apply_migrations(client)
    events = [m["body"] for m in messages if m["kind"] not in ("usage", "cost_state", "message")]
    insert_batch(client, events, [])
    rows = usage_rows([m["body"] for m in messages if m["kind"] == "usage"])
    assert not rows.bad
    insert_usage(client, rows)


def test_stored_with_the_harness_and_the_clis_own_token_totals(played: Json, chdb_database: Client) -> None:
    store(chdb_database, played["messages"])
    by_harness_sql = "SELECT harness, count() FROM events FINAL GROUP BY harness"
    counts = {str(h): int(n) for h, n in chdb_database.query(by_harness_sql).result_rows}
    assert counts == {"codex": len(played["codex"]), "gemini-cli": len(played["gemini"]) + 2}
    usage = {
        str(r[0]): r[1:]
        for r in chdb_database.query(
            "SELECT session_id, any(harness), sum(input_tokens + cache_read_tokens), sum(cache_read_tokens), "
            "sum(output_tokens), sum(reasoning_tokens), countIf(cost_usd IS NULL), count() "
            "FROM usage FINAL GROUP BY session_id"
        ).result_rows
    }
    for harness, logs in (("codex", CODEX_LOGS), ("gemini", GEMINI_LOGS)):
        expected = json.loads((logs / "expected-usage.json").read_text())["sessions"]
        for session, want in expected.items():
            tokens = want["session_log"]["tokens"]
            if harness == "codex":
                totals = (tokens["input_tokens"], tokens["cached_input_tokens"], tokens["output_tokens"],
                          tokens["reasoning_output_tokens"])  # fmt: skip
            else:  # Gemini's thoughts are billed as output: output_tokens holds them
                output = tokens["output"] + tokens["thoughts"]
                totals = (tokens["input"], tokens["cached"], output, tokens["thoughts"])
            if not any(totals):
                assert session not in usage, want["scenario"]
                continue
            got = usage[session]
            assert got[0] == HARNESS[harness]
            assert tuple(int(v) for v in got[1:5]) == totals, (harness, want["scenario"])
            assert got[5] == 0, "gpt-5.5 and gemini-2.5-pro are in the price table"
    by_harness = chdb_database.query(cost("harness").sql, parameters=cost("harness").params).named_results()
    assert {r["harness"] for r in by_harness} == {"codex", "gemini-cli"}
    assert all(r["cost_usd"] > 0 for r in by_harness)
    # The sessions view's harness column: each capture's sessions as its CLI's, and only its.
    sessions = {str(m["session_id"]): str(m["harness"]) for m in events_of(played, "codex")}
    sessions |= {str(m["session_id"]): str(m["harness"]) for m in events_of(played, "gemini")}
    asked = session_harnesses(sorted(sessions), EPOCH)
    shown = chdb_database.query(asked.sql, parameters=asked.params).named_results()
    of_session = {str(r["session_id"]): list(r["harnesses"]) for r in shown}
    assert of_session == {s: [h] for s, h in sessions.items()}


def test_every_envelope_carries_person_repository_and_branch(played: Json) -> None:
    """The captures' cwd is no repository on this machine: every envelope (events, derived ones,
    usage) says so with an empty repository and branch, and names a person."""
    assert played["messages"]
    for m in played["messages"]:
        assert (m["repo"], m["branch"]) == ("", ""), m["subject"]
        assert isinstance(m["person"], str) and m["person"], m["subject"]


@pytest.mark.parametrize("harness", ["codex", "gemini"])
def test_a_session_in_a_repository_is_attributed_from_its_cwd(
    harness: str, installed: Json, bus: NatsServer, tmp_path: Path
) -> None:
    """The same captures with their cwd in a git repository made here: every envelope names its
    remote (without the credential), branch and git's user.email."""
    repo = tmp_path / "proj"
    git = ["git", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(repo)], check=True)
    subprocess.run([*git, "config", "user.email", "cli@example.com"], check=True)
    remote = "https://x:tok3n-zz@gitlab.example.com/g/proj"
    subprocess.run([*git, "remote", "add", "origin", remote], check=True)

    def into_repo(rec: Json) -> None:
        rec["payload"]["cwd"] = str(repo)

    collector = Collector(bus.url)
    try:
        records = play(installed, harness, bus, tmp_path / "data", into_repo)
        messages = collected(collector, len(records))
    finally:
        collector.close()
    assert len(messages) >= len(records)
    owners = {(m["person"], m["repo"], m["branch"]) for m in messages}
    assert owners == {("cli@example.com", "gitlab.example.com/g/proj", "trunk")}
    assert not [m for m in messages if b"tok3n-zz" in m["body"]]


def test_no_secret_variable_reaches_the_bus_or_the_store(
    installed: Json, bus: NatsServer, tmp_path: Path, chdb_database: Client
) -> None:
    """Gemini's hooks get GEMINI_API_KEY in their environment: played with a real-looking key, and
    once with the key in a tool's output (a model that ran `env`), it is nowhere on the bus or in
    the store."""

    def leak(rec: Json) -> None:
        payload = rec["payload"]
        if rec["event"] == "AfterTool":
            payload["tool_response"]["llmContent"] += f"\nthe key: {FAKE_KEY}\n"
        if rec["event"] == "BeforeAgent":
            payload["prompt"] += f" (my key is {FAKE_KEY})"

    collector = Collector(bus.url)
    try:
        records = play(installed, "gemini", bus, tmp_path / "data", leak)
        messages = collected(collector, len(records) + 2)
    finally:
        collector.close()
    assert len(messages) >= len(records)
    assert not [m["subject"] for m in messages if FAKE_KEY.encode() in m["body"]]
    marked = [m for m in messages if b"[REDACTED:env:GEMINI_API_KEY]" in m["body"]]
    assert marked, "the leaks were there to find"
    store(chdb_database, messages)
    found = chdb_database.query(
        "SELECT count() FROM events WHERE position(data, {k:String}) > 0 OR position(text, {k:String}) > 0",
        parameters={"k": FAKE_KEY},
    ).result_rows[0][0]
    assert found == 0


@pytest.mark.parametrize(("harness", "logs"), [("codex", CODEX_LOGS), ("gemini", GEMINI_LOGS)])
def test_import_reads_each_clis_logs_as_the_hook_does(
    harness: str, logs: Path, bus: NatsServer, tmp_path: Path
) -> None:
    """`agentwatch import` on a folder of Codex rollouts or Gemini chats: each session's tokens, as
    the CLI counts them, under the names the hook gives its agents."""
    collector = Collector(bus.url)
    try:
        env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path), AGENTWATCH_NATS_URL=bus.url)
        result = run_cli("import", str(logs), env=env)
        assert result.returncode == 0, result.stderr
        messages = collector.settle(1.0)
    finally:
        collector.close()
    usage = [json.loads(m.data) for m in messages]
    assert (
        usage
        and {u["kind"] for u in usage} == {"usage"}
        and {u["harness"] for u in usage} == {HARNESS[harness]}
    )
    totals: dict[str, Counter[str]] = defaultdict(Counter)
    for u in usage:
        totals[u["session_id"]]["input"] += u["input_tokens"] + u["cache_read_input_tokens"]
        totals[u["session_id"]]["output"] += u["output_tokens"]
    expected = json.loads((logs / "expected-usage.json").read_text())["sessions"]
    for session, want in expected.items():
        tokens = want["session_log"]["tokens"]
        if harness == "codex":
            assert (totals[session]["input"], totals[session]["output"]) == (
                tokens["input_tokens"], tokens["output_tokens"]
            ), want["scenario"]  # fmt: skip
        else:
            assert (totals[session]["input"], totals[session]["output"]) == (
                tokens["input"], tokens["output"] + tokens["thoughts"]
            ), want["scenario"]  # fmt: skip
    agents = {u["agent"] for u in usage}
    if harness == "codex":
        assert {"main-3ab8f6ab", "default-763e6a6b"} <= agents
    else:
        invoke = next(
            r for r in harness_payloads("gemini") if r["payload"].get("tool_name") == "invoke_agent"
        )
        assert gemini_subagent(invoke["payload"]["session_id"], invoke["payload"]["tool_input"]) in agents


# --- Codex's approval reviewer: a helper with a rollout of its own and no hook event -------------------


def review_run() -> Json:
    run: Json = json.loads((CODEX_REVIEW / "expected-usage.json").read_text())
    return run


def review_totals(usage: list[Json]) -> tuple[int, int, int, int]:
    """(input with cached, cached, output with reasoning, reasoning) of usage envelopes, in
    Codex's terms."""
    return (
        sum(u["input_tokens"] + u["cache_read_input_tokens"] for u in usage),
        sum(u["cache_read_input_tokens"] for u in usage),
        sum(u["output_tokens"] for u in usage),
        sum(u["reasoning_tokens"] for u in usage),
    )


def codex_terms(tokens: Json) -> tuple[int, int, int, int]:
    return (tokens["input_tokens"], tokens["cached_input_tokens"], tokens["output_tokens"],
            tokens["reasoning_output_tokens"])  # fmt: skip


def test_the_approval_reviewers_tokens_count_in_its_session(
    bus: NatsServer, tmp_path: Path, chdb_database: Client
) -> None:
    """The real run's 11 payloads through the installed hook: every model response of the session
    reaches the bus once, the reviewer's (in its own rollout, announced by no hook event) as a
    sub-agent of the session's main agent, and the stored session's tokens are those of all its
    rollouts."""
    run = review_run()
    home = tmp_path / "codex"
    shutil.copytree(CODEX_REVIEW / "sessions", home / "sessions")
    env = clean_env(HOME=str(tmp_path / "home"), CODEX_HOME=str(home), PATH="/usr/bin:/bin")
    result = run_cli("hooks", "install", "--harness", "codex", env=env)
    assert result.returncode == 0, result.stderr
    hooks = json.loads((home / "hooks.json").read_text())["hooks"]
    text = (CODEX_REVIEW / "captures.jsonl").read_text().replace("/home/dev/lab/home/.codex", str(home))
    records = [json.loads(line) for line in text.splitlines()]
    assert len(records) == 11
    collector = Collector(bus.url)
    try:
        for rec in records:
            ((handler,),) = [g["hooks"] for g in hooks[rec["event"]]]
            env = clean_env(CODEX_HOME=str(home), AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
                            AGENTWATCH_NATS_URL=bus.url)  # fmt: skip
            ran, _ = run_installed(handler, rec["payload"], env)
            assert ran.returncode == 0 and ran.stdout == b"", ran.stderr
        messages = collected(collector, len(records) + 3)
    finally:
        collector.close()
    usage = [m for m in messages if m["kind"] == "usage"]
    responses = [r for rollout in run["rollouts"] for r in rollout["responses"]]
    assert sorted(u["message_id"] for u in usage) == sorted(responses) == ["resp_1", "resp_2", "resp_3"]
    session = run["session_id"]
    reviewer = next(r for r in run["rollouts"] if r["thread"] != session)
    assert reviewer["source"] == {"subagent": {"other": "guardian"}}
    (review,) = [u for u in usage if u["message_id"] in reviewer["responses"]]
    assert (review["agent"], review["agent_type"], review["agent_id"]) == (
        f"guardian-{reviewer['thread'][-8:]}",
        "guardian",
        reviewer["thread"],
    )
    assert (review["parent_agent"], review["session_id"]) == (f"main-{session[-8:]}", session)
    assert review_totals(usage) == codex_terms(run["session_tokens"])
    store(chdb_database, messages)
    stored = chdb_database.query(
        "SELECT sum(input_tokens + cache_read_tokens), sum(cache_read_tokens), sum(output_tokens), "
        "sum(reasoning_tokens), uniqExact(agent) FROM usage FINAL WHERE session_id = {s:String}",
        parameters={"s": session},
    ).result_rows[0]
    assert tuple(int(v) for v in stored) == (*codex_terms(run["session_tokens"]), 2)


def test_import_counts_the_approval_reviewers_rollout(bus: NatsServer, tmp_path: Path) -> None:
    """`agentwatch import` of the same run's rollouts: the reviewer's under the name the hook gives it."""
    run = review_run()
    collector = Collector(bus.url)
    try:
        env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path), AGENTWATCH_NATS_URL=bus.url)
        result = run_cli("import", str(CODEX_REVIEW / "sessions"), env=env)
        assert result.returncode == 0, result.stderr
        usage = [json.loads(m.data) for m in collector.settle(1.0)]
    finally:
        collector.close()
    assert review_totals(usage) == codex_terms(run["session_tokens"])
    reviewer = next(r for r in run["rollouts"] if r["thread"] != run["session_id"])
    assert {u["agent"] for u in usage} == {
        f"main-{run['session_id'][-8:]}",
        f"guardian-{reviewer['thread'][-8:]}",
    }
