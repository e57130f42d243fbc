"""The dashboard's import boundary: it builds queries (store/queries.py) and words numbers
(format.py), but loads none of the collector, the bus code or a ClickHouse client; the command
that opens it hands it its sources."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("agentwatch.cli", "agentwatch.consumers", "agentwatch.bus", "faststream", "chdb",
             "clickhouse_connect")  # fmt: skip


def test_the_dashboard_imports_no_collector_bus_or_clickhouse_client() -> None:
    code = (
        "import json, sys\n"
        "import agentwatch.tui.app, agentwatch.tui.help, agentwatch.tui.tools_view\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = json.loads(out.stdout)
    assert "agentwatch.store.queries" in loaded and "agentwatch.format" in loaded
    assert [m for m in loaded if m.startswith(FORBIDDEN)] == []
