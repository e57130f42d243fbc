"""The rules as typed objects: each rule's limits a dataclass of named, typed fields, read from
the rules file with the type its default has."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from agentwatch.consumers.rulebook import DEFAULTS, NAMES, Rules, RulesError, default_file_text, parse_rules


def test_every_rule_is_in_the_registry_once_by_its_own_name() -> None:
    assert list(DEFAULTS) == list(NAMES) and len(set(NAMES)) == len(NAMES) == 9
    assert all(DEFAULTS[name].name == name for name in NAMES)
    with pytest.raises(KeyError):
        DEFAULTS["nope"]


def test_the_default_file_gives_every_limit_its_default_and_its_type() -> None:
    # Every commented default switched on: the file says what the defaults are.
    parsed = parse_rules(re.sub(r"(?m)^# (\w+ = )", r"\1", default_file_text()))
    assert parsed == DEFAULTS
    for name in NAMES:
        for f in fields(parsed[name].limits):
            value = getattr(parsed[name].limits, f.name)
            assert type(value) is type(getattr(DEFAULTS[name].limits, f.name)), (name, f.name)
    assert parsed.hook_health.limits.spool_bytes == 1_000_000  # written `1e+06`, read as a whole number


def test_a_limit_is_read_with_its_type() -> None:
    rules = parse_rules("[loop]\nrepeats = 3.0\n[stuck_tool]\nfloor_s = 5\nhistory = 20\n")
    assert rules.loop.limits.repeats == 3 and type(rules.loop.limits.repeats) is int
    assert rules.stuck_tool.limits.floor_s == 5.0 and type(rules.stuck_tool.limits.floor_s) is float
    assert rules.stuck_tool.limits.history == 20 and rules.stuck_tool["history"] == 20
    assert rules.failure_burst == DEFAULTS.failure_burst  # a rule not in the file keeps its defaults
    assert rules["loop"] is rules.loop


def test_a_fraction_where_a_count_is_asked_names_its_line() -> None:
    with pytest.raises(RulesError, match=r"alerts\.toml, line 3: \[loop\] repeats must be a whole number"):
        parse_rules("[loop]\nenabled = true\nrepeats = 2.5\n", "alerts.toml")


def test_enabled_names_the_rules_switched_on() -> None:
    rules = parse_rules("[budget]\nenabled = false\n[loop]\nenabled = false\n")
    assert rules.enabled() == frozenset(NAMES) - {"budget", "loop"}
    assert isinstance(rules, Rules) and not rules.budget.enabled


def test_a_budget_limit_by_scope() -> None:
    budget = parse_rules("[budget]\nteam_usd = 5\n").budget.limits
    assert (budget.limit("team"), budget.limit("session"), budget.limit("host")) == (5.0, 50.0, None)
