"""Claude Code's own OpenTelemetry export into the store, through `agentwatch up`'s OTLP/HTTP
receiver: every request of the shared fixtures (the real binary's, http/json and http/protobuf)
posted twice, the second time gzipped, is stored once; `hook_runs` and `api_requests` answer with
the figures of the fixtures' expected.json, and per session the requests' summed cost equals Claude
Code's own cost-state total. Malformed, truncated, oversized and wrong-content-type bodies, an
unknown path and a missing token each get their status code, and the fixtures posted right after
are all stored. The hook payloads of the same sessions link to the telemetry by session, prompt
and tool call.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agentwatch.consumers.otlp import OtlpReceiver
from agentwatch.demo.simulator import encode_event
from tests.conftest import HOOK_INBOX, SHARED, bus_login, clean_env, free_port
from tests.e2e.test_metrics import scrape, total
from tests.e2e.test_one_truth import sql, wait_sql
from tests.integration.test_store import Service

pytestmark = pytest.mark.timeout(300)

FIXTURES = SHARED / "claude-code-2.1.330-otel"
TOKEN = "otlp-test-token"  # noqa: S105 (the test's own receiver)
MAX_BYTES = 200_000  # the fixtures' bodies are at most 65 KB


def requests() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / "otlp-requests.jsonl").read_text().splitlines()]


def body_of(request: dict[str, Any]) -> bytes:
    if request["protocol"] == "json":
        return json.dumps(request["body_json"]).encode()
    return base64.b64decode(request["body_b64"])


def post(base: str, path: str, body: bytes, content_type: str, **headers: str) -> tuple[int, bytes]:
    sent = {"Content-Type": content_type, "Authorization": f"Bearer {TOKEN}", **headers}
    sent = {k: v for k, v in sent.items() if v}
    req = urllib.request.Request(base + path, data=body, method="POST", headers=sent)  # noqa: S310 (loopback)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 (the test's own loopback URL)
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def bad_input(base: str) -> int:
    """Each kind of bad input gets its status; returns how many should be dead letters (the 400s)."""
    json_type, proto_type = "application/json", "application/x-protobuf"
    protobuf = next(body_of(r) for r in requests() if r["protocol"] == "protobuf" and r["path"] == "/v1/logs")
    cases: list[tuple[str, bytes, str, dict[str, str], int, str]] = [
        ("/v1/logs", b'{"resourceLogs": [', json_type, {}, 400, "not JSON"),
        ("/v1/metrics", b'{"resourceMetrics": 5}', json_type, {}, 400, "not an OTLP metrics request"),
        ("/v1/logs", protobuf[: len(protobuf) // 2], proto_type, {}, 400, "not an OTLP logs protobuf"),
        ("/v1/traces", b"\x1f\x8b not gzip at all", json_type, {"Content-Encoding": "gzip"}, 400, "not gzip"),
        ("/v1/logs", b"x" * (MAX_BYTES + 1), json_type, {}, 413, "AGENTWATCH_OTLP_MAX_BYTES"),
        ("/v1/logs", gzip.compress(b" " * (MAX_BYTES * 4)), json_type, {"Content-Encoding": "gzip"}, 413,
         "once unzipped"),
        ("/v1/logs", b"{}", "text/plain", {}, 415, "Content-Type text/plain"),
        ("/v1/logs", b"{}", json_type, {"Content-Encoding": "br"}, 415, "Content-Encoding br"),
        ("/v1/profiles", b"{}", json_type, {}, 404, "no OTLP endpoint at /v1/profiles"),
        ("/v1/logs", b"{}", json_type, {"Authorization": "Bearer wrong"}, 401, "bearer token"),
    ]  # fmt: skip
    for path, body, content_type, headers, status, reason in cases:
        got, answer = post(base, path, body, content_type, **headers)
        assert (got, reason in json.loads(answer)["message"]) == (status, True), (path, got, answer)
    return sum(1 for case in cases if case[4] == 400)


def post_fixtures(base: str, zipped: bool) -> None:
    for request in requests():
        body = body_of(request)
        encoding = "gzip" if zipped else ""
        status, answer = post(base, request["path"], gzip.compress(body) if zipped else body,
                              request["content_type"], **{"Content-Encoding": encoding})  # fmt: skip
        assert status == 200, answer
        assert answer == (b"{}" if request["protocol"] == "json" else b"")


def publish_hooks(url: str) -> int:
    """The same sessions' hook payloads, published as the hook does."""
    import nats

    lines = [json.loads(line) for line in (FIXTURES / "hook-payloads.jsonl").read_text().splitlines()]
    messages = [m for r in lines for m in encode_event(r["payload"], r["env"], host="lab", now=r["t"])]

    async def publish() -> None:
        nc = await nats.connect(url, inbox_prefix=HOOK_INBOX)  # the hook's login takes acks there
        js = nc.jetstream()
        for subject, event_id, body in messages:
            await js.publish(subject, body, headers={"Nats-Msg-Id": event_id})
        await nc.close()

    asyncio.run(publish())
    return len(lines)


def counts(env: dict[str, str]) -> dict[str, int]:
    (row,) = sql(env, "SELECT (SELECT count() FROM otel_logs) AS logs, (SELECT count() FROM otel_metrics) AS "
                      "metrics, (SELECT count() FROM otel_spans) AS spans")  # fmt: skip
    return {k: int(v) for k, v in row.items()}


def matches_expected(env: dict[str, str]) -> None:
    expected = json.loads((FIXTURES / "expected.json").read_text())
    per_session = (
        "SELECT session_id, sum(runs) AS runs, sum(blocked) AS blocked FROM hook_runs GROUP BY session_id"
    )
    runs = {r["session_id"]: r for r in sql(env, per_session)}
    api = {r["session_id"]: r for r in sql(env, (
        "SELECT session_id, count() AS n, sum(cost_usd_micros) AS micros, round(sum(cost_usd), 6) AS usd, "
        "sum(input_tokens) AS input, sum(output_tokens) AS output, sum(cache_read_tokens) AS cache_read, "
        "sum(cache_write_5m_tokens) AS cache_write_5m, sum(cache_write_1h_tokens) AS cache_write_1h "
        "FROM api_requests GROUP BY session_id"))}  # fmt: skip
    metered = {r["session_id"]: r["usd"] for r in sql(env, (
        "SELECT session_id, round(sum(value), 6) AS usd FROM otel_metric_totals "
        "WHERE metric = 'claude_code.cost.usage' GROUP BY session_id"))}  # fmt: skip
    assert set(runs) == set(api) == set(expected)
    for session, want in expected.items():
        assert runs[session]["runs"] == want["hook_execution_complete_events"], session
        got = api[session]
        assert got["n"] == want["api_requests"], session
        assert {k: got[k] for k in want["tokens"]} == want["tokens"], session
        assert got["usd"] == round(want["cost_usd"], 6) == round(want["cost_state_total_usd"], 6), session
        assert got["micros"] == round(want["cost_state_total_usd"] * 1e6), session
        assert metered[session] == round(want["cost_state_total_usd"], 6), "the metric's deltas, summed"


def linked(env: dict[str, str]) -> None:
    """tool_decision records and PreToolUse hook events share session and tool_use_id; every
    api_request's prompt is a prompt the hook saw."""
    (row,) = sql(env, (
        "SELECT (SELECT count() FROM otel_logs AS l INNER JOIN events AS e ON e.session_id = l.session_id "
        "AND e.tool_use_id = l.tool_use_id WHERE l.event_name = 'tool_decision' AND e.event = 'PreToolUse') "
        "AS decisions, (SELECT count() FROM otel_logs WHERE event_name = 'tool_decision') AS all_decisions, "
        "(SELECT count() FROM api_requests WHERE prompt_id NOT IN (SELECT prompt_id FROM events "
        "WHERE event = 'UserPromptSubmit')) AS unknown_prompts"))  # fmt: skip
    assert row["decisions"] == row["all_decisions"] == 20 and row["unknown_prompts"] == 0, row


def test_claude_codes_telemetry_lands_in_the_store(tmp_path: Path) -> None:
    port = free_port()
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        AGENTWATCH_METRICS_ADDR=f"127.0.0.1:{free_port()}",
        AGENTWATCH_OTLP_ADDR=f"127.0.0.1:{port}",
        AGENTWATCH_OTLP_TOKEN=TOKEN,
        AGENTWATCH_OTLP_MAX_BYTES=str(MAX_BYTES),
        AGENTWATCH_ALERT_BELL="0",
    )
    base = f"http://127.0.0.1:{port}"
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        assert any(line.startswith(f"otlp:        {base} ") for line in up.lines), up.lines
        dead = bad_input(base)
        post_fixtures(base, zipped=False)
        once = counts(env)
        assert once == {"logs": 44 + 143 + 44 + 144, "metrics": 96, "spans": 2 + 42 + 2 + 42}
        post_fixtures(base, zipped=True)
        assert counts(env) == once, "posted twice, stored once"
        (letters,) = sql(env, "SELECT count() AS n FROM dead_letters WHERE subject LIKE 'otlp /v1/%'")
        assert letters["n"] == dead
        matches_expected(env)
        sent = publish_hooks(bus_login(env))
        wait_sql(env, "SELECT count() AS n FROM events", lambda r: r[0]["n"] >= sent, "hook payloads stored")
        linked(env)
        samples, _ = scrape(f"http://{env['AGENTWATCH_METRICS_ADDR']}/metrics")
        assert total(samples, "agentwatch_otlp_requests_total") == 2 * len(requests()) + 8
        assert total(samples, "agentwatch_otlp_records_total") == sum(once.values())
    finally:
        code, output = up.stop()
        assert code == 0, output


def test_beyond_loopback_the_receiver_needs_a_token() -> None:
    with pytest.raises(ValueError, match="beyond loopback: set AGENTWATCH_OTLP_TOKEN"):
        OtlpReceiver("0.0.0.0", 4318, "chdb:///nowhere")
    # A host name that starts like a loopback address is a name (its DNS may answer anything).
    with pytest.raises(ValueError, match="beyond loopback: set AGENTWATCH_OTLP_TOKEN"):
        OtlpReceiver("127.evil.example", 4318, "chdb:///nowhere")
    assert OtlpReceiver("127.0.0.9", 4318, "chdb:///nowhere").host == "127.0.0.9"
    assert OtlpReceiver("0.0.0.0", 4318, "chdb:///nowhere", token="t").host  # noqa: S106 == "0.0.0.0"
    assert OtlpReceiver.from_settings({"AGENTWATCH_OTLP_ADDR": "off"}, "chdb:///nowhere") is None
