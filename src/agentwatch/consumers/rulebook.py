"""The watchdog's rules as data: one small typed object per rule, read from the rules file.

Each rule is a `Rule` whose `limits` is its own frozen dataclass (`StuckTool`, `Loop`, ...): every
threshold a named, typed field with its default, so the engine reads `rules.loop.limits.repeats`
(an int) and a typo is a type error, not a missing key. `Rules` holds one of each, by name: the
registry the engine evaluates, the rules file is checked against and its default text written from.
No bus, no store: consumers/rules.py evaluates them over the event envelopes.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Generic, TypeVar

SEVERITIES = ("info", "warning", "critical")
_COMMON = ("enabled", "severity", "cooldown_s")


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file and line."""


# -- each rule's limits ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StuckTool:
    """A tool call open longer than `floor_s`, or `p95_factor` times its tool's p95 duration over
    the last `history` calls of that tool, whichever is longer."""

    floor_s: float = 600.0
    p95_factor: float = 5.0
    history: int = 200


@dataclass(frozen=True)
class SilentAgent:
    """An agent in a turn, in no tool call and waiting for nobody, silent for `after_s`."""

    after_s: float = 600.0


@dataclass(frozen=True)
class Loop:
    """The same call (tool and input) `repeats` times in a row."""

    repeats: int = 8


@dataclass(frozen=True)
class FailureBurst:
    """`failures` failed calls within `window_s` that are at least `min_share` of its results."""

    failures: int = 8
    window_s: float = 300.0
    min_share: float = 0.5


@dataclass(frozen=True)
class WaitingForUser:
    """A permission or an answer asked for and not given for `after_s`."""

    after_s: float = 300.0


@dataclass(frozen=True)
class IdleWithOpenTasks:
    """A teammate idle for `after_s` while its team has open tasks."""

    after_s: float = 600.0


@dataclass(frozen=True)
class Budget:
    """A session's, an agent's or a team's cost over its limit in USD."""

    session_usd: float = 50.0
    agent_usd: float = 50.0
    team_usd: float = 200.0

    def limit(self, scope: str) -> float | None:
        """The limit of a cost scope (session, agent, team); None for another."""
        return {"session": self.session_usd, "agent": self.agent_usd, "team": self.team_usd}.get(scope)


@dataclass(frozen=True)
class HookHealth:
    """A host whose hook holds `spool_bytes` or more unsent."""

    spool_bytes: int = 1_000_000


LimitsT = TypeVar("LimitsT")


@dataclass(frozen=True)
class Rule(Generic[LimitsT]):
    """One rule as configured: on or off, its severity, its cooldown (seconds before a resolved
    alert may fire again for the same subject) and its typed limits."""

    name: str
    severity: str
    limits: LimitsT
    enabled: bool = True
    cooldown_s: float = 60.0

    def __getitem__(self, key: str) -> float:
        """A limit by its key in the rules file (`rule["repeats"]`)."""
        if key not in limit_keys(self.limits):
            raise KeyError(key)
        value: float = getattr(self.limits, key)
        return value


def limit_keys(limits: object) -> tuple[str, ...]:
    """The keys of a rule's limits, as the rules file names them."""
    return tuple(f.name for f in fields(limits))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Rules(Mapping[str, Rule[Any]]):
    """Every rule, one field each: the registry. A mapping by name too (`rules["loop"]`)."""

    stuck_tool: Rule[StuckTool] = Rule("stuck_tool", "warning", StuckTool())
    silent_agent: Rule[SilentAgent] = Rule("silent_agent", "warning", SilentAgent())
    loop: Rule[Loop] = Rule("loop", "warning", Loop())
    failure_burst: Rule[FailureBurst] = Rule("failure_burst", "warning", FailureBurst())
    waiting_for_user: Rule[WaitingForUser] = Rule("waiting_for_user", "info", WaitingForUser())
    idle_with_open_tasks: Rule[IdleWithOpenTasks] = Rule("idle_with_open_tasks", "info", IdleWithOpenTasks())
    budget: Rule[Budget] = Rule("budget", "critical", Budget())
    hook_health: Rule[HookHealth] = Rule("hook_health", "warning", HookHealth())

    def __getitem__(self, name: str) -> Rule[Any]:
        if name not in NAMES:
            raise KeyError(name)
        rule: Rule[Any] = getattr(self, name)
        return rule

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)

    def enabled(self) -> frozenset[str]:
        return frozenset(name for name in NAMES if self[name].enabled)


NAMES: tuple[str, ...] = tuple(f.name for f in fields(Rules))
DEFAULTS = Rules()


def default_file_text() -> str:
    """The commented rules file written on first start."""
    lines = [
        "# agentwatch alert rules: one table per rule. Every key is optional; a missing one keeps",
        "# its default (shown here). Common keys: enabled, severity (info|warning|critical),",
        "# cooldown_s (seconds before a resolved alert may fire again for the same subject).",
        "",
    ]
    for name, rule in DEFAULTS.items():
        lines += [f"[{name}]", "# enabled = true", f'# severity = "{rule.severity}"', "# cooldown_s = 60"]
        lines += [f"# {key} = {rule[key]:g}" for key in limit_keys(rule.limits)]
        lines.append("")
    return "\n".join(lines)


def _line_of(text: str, table: str, key: str = "") -> int:
    """The line where `[table]` (or its `key`) is written, for error messages; 0 when not found."""
    in_table = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("["):
            in_table = line.strip("[] ") == table
            if in_table and not key:
                return number
        elif in_table and key and line.split("=", 1)[0].strip() == key:
            return number
    return 0


def parse_rules(text: str, source: str = "rules file") -> Rules:
    """Rules from TOML text over the defaults; RulesError names the line of the first problem."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{source}: {exc}") from None
    rules = DEFAULTS
    for name, table in doc.items():
        if name not in NAMES:
            raise RulesError(
                f"{source}, line {_line_of(text, name)}: unknown rule [{name}] (known: {', '.join(NAMES)})"
            )
        if not isinstance(table, dict):
            raise RulesError(f"{source}: {name} must be a table ([{name}])")
        rules = replace(rules, **{name: _rule(rules[name], table, text, source)})
    return rules


def _rule(rule: Rule[Any], table: Mapping[str, Any], text: str, source: str) -> Rule[Any]:
    limits: dict[str, float] = {}
    keys = limit_keys(rule.limits)
    for key, value in table.items():
        where = f"{source}, line {_line_of(text, rule.name, key)}: [{rule.name}] {key}"
        if key == "enabled":
            if not isinstance(value, bool):
                raise RulesError(f"{where} must be true or false")
            rule = replace(rule, enabled=value)
        elif key == "severity":
            if value not in SEVERITIES:
                raise RulesError(f"{where} must be one of {', '.join(SEVERITIES)}")
            rule = replace(rule, severity=value)
        elif key == "cooldown_s":
            rule = replace(rule, cooldown_s=float(_number(value, where)))
        elif key in keys:
            number = _number(value, where)
            if isinstance(getattr(rule.limits, key), int):
                if number != int(number):
                    raise RulesError(f"{where} must be a whole number, 0 or more")
                limits[key] = int(number)
            else:
                limits[key] = float(number)
        else:
            known = ", ".join(sorted({*_COMMON, *keys}))
            raise RulesError(f"{where}: unknown key (known: {known})")
    return replace(rule, limits=replace(rule.limits, **limits))


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise RulesError(f"{where} must be a number, 0 or more")
    return value
