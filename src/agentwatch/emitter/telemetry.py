"""Claude Code's OpenTelemetry settings in its `env` (`agentwatch hooks install --otel`): the
variables that make Claude Code export its log events, metrics and spans over OTLP/HTTP to the
collector's receiver (consumers/otlp.py), and how uninstall takes them out again.

Install sets each variable; one the settings already hold with another value is the user's, and
install stops rather than overwrite it. Uninstall removes each variable whose value is the one
install writes (one the user had set to that very value too), and the endpoint when all the others
were install's: so install then uninstall leaves `env` as it was (an `env` left empty goes too),
and a variable the user set to a value of their own is kept.

Standard library only: the bare install (every agent host) runs `agentwatch hooks`.
"""

from __future__ import annotations

import copy
from typing import Any

Json = dict[str, Any]

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
# Every signal, over http/protobuf (the smaller encoding), gzipped; spans need the beta switch.
FIXED: dict[str, str] = {
    "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
    "OTEL_METRICS_EXPORTER": "otlp",
    "OTEL_LOGS_EXPORTER": "otlp",
    "OTEL_TRACES_EXPORTER": "otlp",
    "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
}


class TelemetryConflict(ValueError):
    """A telemetry variable the settings hold already with a value of their own."""


def variables(endpoint: str = DEFAULT_ENDPOINT) -> dict[str, str]:
    """What `--otel` puts into `env`."""
    return {**FIXED, ENDPOINT: endpoint}


def add(settings: Json, endpoint: str = DEFAULT_ENDPOINT) -> Json:
    """A copy of `settings` whose `env` holds the telemetry variables."""
    result = copy.deepcopy(settings)
    env = result.setdefault("env", {})
    if not isinstance(env, dict):
        raise TelemetryConflict('"env" is not an object')
    for name, value in variables(endpoint).items():
        if name in env and env[name] != value:
            raise TelemetryConflict(
                f'"env.{name}" is {env[name]!r} already, not {value!r}: remove it, or install without --otel'
            )
        env[name] = value
    return result


def strip(settings: Json) -> Json:
    """A copy of `settings` without the telemetry variables `add` wrote."""
    result = copy.deepcopy(settings)
    env = result.get("env")
    if not isinstance(env, dict):
        return result
    ours = [name for name, value in FIXED.items() if env.get(name) == value]
    if len(ours) == len(FIXED) and isinstance(env.get(ENDPOINT), str):
        ours.append(ENDPOINT)
    for name in ours:
        del env[name]
    if ours and not env:
        del result["env"]
    return result
