"""The `agentwatch` command (placeholder until the CLI lands)."""

from __future__ import annotations


def main() -> None:
    raise SystemExit("agentwatch: not yet")
