"""/metrics scraped while the demo runs, parsed with prometheus-client's own parser: the counters
only grow, and once the store has flushed, the event counters equal the store's counts, and the
store's figures (alerts, coverage, cost, spool backlog) equal what `agentwatch sql` says. The
Grafana dashboard in deploy/ uses only metrics the endpoint exposes.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentwatch.consumers.metrics import bounded, parse_addr
from tests.conftest import PROJECTS, ROOT, bus_login, clean_env, free_port, run_cli, run_emit, tool
from tests.e2e.test_mcp import settled
from tests.e2e.test_one_truth import killed_session, sql, wait_sql
from tests.integration.test_store import Service

pytestmark = pytest.mark.timeout(300)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> tuple[Samples, set[str]]:
    """The samples by (name, labels), and the names of the families exposed."""
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 (a loopback URL of the test's own)
        text = resp.read().decode()
    samples: Samples = {}
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, names


def total(samples: Samples, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def hooked_session(env: dict[str, str]) -> None:
    """Three events through the real hook: numbered (seq), with the spool's backlog (coverage)."""
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        payload = {"hook_event_name": event, "session_id": "metrics-1", "cwd": "/repo", "prompt": "go"}
        result = run_emit(json.dumps(payload).encode(), env)
        assert result.returncode == 0 and not result.stdout


def test_metrics_while_the_demo_runs(tmp_path: Path) -> None:
    port = free_port()
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        AGENTWATCH_ALERT_BELL="0",
        AGENTWATCH_METRICS_ADDR=f"127.0.0.1:{port}",
    )
    url = f"http://127.0.0.1:{port}/metrics"
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        assert f"metrics:     {url} (Prometheus)\n" in up.lines, up.lines
        assert run_cli("import", str(PROJECTS), env=env).returncode == 0
        hooked_session(env)
        killed_session(bus_login(env))
        demo = subprocess.Popen(
            [tool("agentwatch"), "demo", "--rate", "300", "--duration", "5", "--seed", "8", "--agents", "3"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        received: list[float] = []
        while demo.poll() is None:
            samples, _ = scrape(url)
            received.append(total(samples, "agentwatch_received_total"))
            time.sleep(0.5)
        _, errors = demo.communicate(timeout=30)
        assert demo.returncode == 0, errors
        assert len(received) >= 4 and received == sorted(received) and received[-1] > received[0], received
        wait_sql(env, "SELECT count() AS n FROM open_alerts", lambda r: r[0]["n"] >= 1, "alerts fired")
        settled(env)
        time.sleep(5.5)  # the store's figures are read at most every 5 s
        agrees_with_the_store(env, url)
    finally:
        code, output = up.stop()
        assert code == 0, output


def agrees_with_the_store(env: dict[str, str], url: str) -> None:
    samples, names = scrape(url)
    counted = (
        "SELECT (SELECT count() FROM events) AS events, (SELECT count() FROM messages) AS messages, "
        "(SELECT count() FROM dead_letters) AS dead, (SELECT count() FROM usage FINAL) AS usage"
    )
    (counts,) = sql(env, counted)
    assert samples[("agentwatch_stored_total", (("table", "events"),))] == counts["events"] > 0
    assert samples[("agentwatch_stored_total", (("table", "messages"),))] == counts["messages"] > 0
    assert samples[("agentwatch_dead_letters_total", ())] == counts["dead"]
    assert (
        samples[("agentwatch_received_total", ())] >= counts["events"] + counts["messages"] + counts["usage"]
    )
    assert samples[("agentwatch_insert_seconds_count", ())] >= 1
    assert total(samples, "agentwatch_pending") == 0
    assert samples[("agentwatch_store_up", ())] == 1
    open_alerts = sql(env, "SELECT rule, severity, count() AS n FROM open_alerts GROUP BY rule, severity")
    assert {(k[1], v) for k, v in samples.items() if k[0] == "agentwatch_open_alerts"} == {
        ((("rule", r["rule"]), ("severity", r["severity"])), r["n"]) for r in open_alerts
    }
    (cov,) = sql(env, "SELECT sum(max_seq) AS emitted, sum(stored) AS stored FROM coverage")
    assert samples[("agentwatch_coverage_emitted", ())] == cov["emitted"] == 3
    assert samples[("agentwatch_coverage_stored", ())] == cov["stored"]
    (cost,) = sql(env, "SELECT round(sum(cost_usd), 6) AS usd, count() AS calls FROM usage FINAL")
    assert round(total(samples, "agentwatch_cost_usd"), 6) == cost["usd"] > 0
    assert total(samples, "agentwatch_api_calls") == cost["calls"]
    spool = sql(
        env, "SELECT host, argMax(spool_bytes, (timestamp, id)) AS b FROM events WHERE seq > 0 GROUP BY host"
    )
    assert {k[1][0][1]: v for k, v in samples.items() if k[0] == "agentwatch_spool_bytes"} == {
        r["host"]: r["b"] for r in spool
    }
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "agentwatch.json").read_text())
    used = {
        re.sub(r"_(total|bucket)$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"agentwatch_\w+", target["expr"])
    }
    assert used and used <= names, used - names


def test_the_address_setting_and_bounded_labels() -> None:
    assert parse_addr("") == ("127.0.0.1", 9464)
    assert parse_addr("[::1]:9999") == ("::1", 9999)
    assert parse_addr(":9464") == ("0.0.0.0", 9464)
    assert parse_addr("off") is None
    with pytest.raises(ValueError, match="AGENTWATCH_METRICS_ADDR"):
        parse_addr("localhost")
    rows: list[tuple[tuple[str, ...], float]] = [((f"team{i}", "m"), float(i)) for i in range(60)]
    kept = bounded(rows, 50)
    assert len(kept) == 51 and kept[-1] == (("other", "other"), float(sum(range(50, 60))))
    assert bounded(rows[:3], 50) == rows[:3]
