"""`agentwatch hooks install --otel`: Claude Code's telemetry variables go into the settings' env
beside the hooks, and uninstall takes out exactly those, leaving the user's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentwatch.emitter import telemetry
from agentwatch.emitter.settings import SettingsError, install, uninstall

COMMAND = "agentwatch-emit"
USERS = '{\n    "model": "opus",\n    "env": {\n        "FOO": "bar"\n    }\n}\n'


def test_install_sets_every_variable_and_uninstall_gives_the_file_back(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USERS)
    said = install(path, COMMAND, otel="http://collector:4318")
    assert "Claude Code's telemetry to http://collector:4318" in said
    env = json.loads(path.read_text())["env"]
    assert env == {"FOO": "bar", **telemetry.variables("http://collector:4318")}
    assert env["CLAUDE_CODE_ENABLE_TELEMETRY"] == "1" and env["OTEL_TRACES_EXPORTER"] == "otlp"
    assert "already installed" in install(path, COMMAND, otel="http://collector:4318")
    uninstall(path)
    assert path.read_text() == USERS


def test_a_new_file_goes_with_the_uninstall(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    install(path, COMMAND, otel=telemetry.DEFAULT_ENDPOINT)
    assert json.loads(path.read_text())["env"][telemetry.ENDPOINT] == "http://127.0.0.1:4318"
    uninstall(path)
    assert not path.exists()


def test_without_otel_the_env_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USERS)
    install(path, COMMAND)
    assert json.loads(path.read_text())["env"] == {"FOO": "bar"}
    install(path, COMMAND, otel=telemetry.DEFAULT_ENDPOINT)
    assert "removed Claude Code's telemetry settings" not in uninstall(path)
    assert path.read_text() == USERS


def test_a_variable_of_the_users_own_is_never_overwritten_nor_removed(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    own = {"env": {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "CLAUDE_CODE_ENABLE_TELEMETRY": "1"}}
    path.write_text(json.dumps(own))
    with pytest.raises(SettingsError, match=r"env\.OTEL_EXPORTER_OTLP_PROTOCOL.*http/json"):
        install(path, COMMAND, otel=telemetry.DEFAULT_ENDPOINT)
    assert json.loads(path.read_text()) == own, "left untouched"
    stripped = telemetry.strip(own)
    assert stripped["env"] == {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "only the values install writes"
