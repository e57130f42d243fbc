"""The store's usage path: usage envelopes (genie.agent.{agent}.usage) into `usage` and
`cost_states`, each API message priced on the way (store/pricing.py).

Unlike events, usage envelopes are decoded in Python: there are few of them (one per API call, not
per tool call) and each needs its price. Rows go in with one typed insert per table and batch.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING, Any, NamedTuple

from agentwatch.contract import COST_STATE_KIND, USAGE_KIND, EnvelopeError, decode_envelope, dumps
from agentwatch.format import utc_datetime
from agentwatch.harnesses import CLAUDE_CODE
from agentwatch.store.pricing import Tokens, price

if TYPE_CHECKING:
    from collections.abc import Sequence

    from clickhouse_connect.driver.client import Client

log = logging.getLogger("agentwatch.store")

USAGE_TABLE = "usage"
# What the store inserts API messages into (009_rollups.sql): a Null table whose views store each
# added row in `usage` and keep `cost_hourly`, the cost rollup, up to date.
USAGE_IN_TABLE = "usage_in"
_KEY = slice(0, 3)  # session_id, message_id, request_id: the key of `usage`
_TIME = 3  # the index of `timestamp` in USAGE_COLUMNS
_VERSION = 23  # the index of `version` in USAGE_COLUMNS
_LOOKUP_CHUNK = 2000
COST_STATES_TABLE = "cost_states"
# The first column of usage's order (018_time_windows.sql): the UTC hour of a message's first
# stored copy, which a copy replacing it keeps. Not in USAGE_COLUMNS (a usage row's own fields).
HOUR_COLUMN = ("hour", "DateTime('UTC')")

USAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("session_id", "String"),
    ("message_id", "String"),
    ("request_id", "String"),
    ("timestamp", "DateTime64(3, 'UTC')"),
    ("agent", "LowCardinality(String)"),
    ("team", "LowCardinality(String)"),
    ("parent_agent", "LowCardinality(String)"),
    ("agent_id", "String"),
    ("agent_type", "LowCardinality(String)"),
    ("subagent_id", "String"),
    ("subagent_type", "LowCardinality(String)"),
    ("host", "LowCardinality(String)"),
    ("model", "LowCardinality(String)"),
    ("input_tokens", "UInt64"),
    ("output_tokens", "UInt64"),
    ("cache_read_tokens", "UInt64"),
    ("cache_write_tokens", "UInt64"),
    ("cache_write_5m_tokens", "UInt64"),
    ("cache_write_1h_tokens", "UInt64"),
    ("cost_usd", "Nullable(Float64)"),
    ("price_model", "LowCardinality(String)"),
    ("sidechain", "Bool"),
    ("envelope_id", "String"),
    ("version", "UInt64"),
    ("harness", "LowCardinality(String)"),
    ("reasoning_tokens", "UInt64"),
    ("person", "LowCardinality(String)"),
    ("repo", "LowCardinality(String)"),
    ("branch", "LowCardinality(String)"),
)
COST_STATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("session_id", "String"),
    ("timestamp", "DateTime64(3, 'UTC')"),
    ("agent", "LowCardinality(String)"),
    ("team", "LowCardinality(String)"),
    ("host", "LowCardinality(String)"),
    ("total_cost_usd", "Float64"),
    ("input_tokens", "UInt64"),
    ("output_tokens", "UInt64"),
    ("cache_read_tokens", "UInt64"),
    ("cache_write_5m_tokens", "UInt64"),
    ("cache_write_1h_tokens", "UInt64"),
    ("model_usage", "String"),
    ("envelope_id", "String"),
    ("version", "UInt64"),
)


class UsageRows(NamedTuple):
    """Rows of one batch of usage envelopes, and the envelopes that are not usable (index, why)."""

    usage: list[list[Any]]
    cost_states: list[list[Any]]
    bad: list[tuple[int, str]]


def _str(env: dict[str, Any], key: str) -> str:
    value = env.get(key)
    return value if isinstance(value, str) else ""


def _count(env: dict[str, Any], key: str) -> int:
    value = env.get(key)
    if type(value) is not int or value < 0:
        raise EnvelopeError(f"field {key!r} must be a count of tokens, not {value!r}")
    return value


def _optional_count(env: dict[str, Any], key: str) -> int:
    """A count an older emitter did not send (0 then)."""
    return 0 if env.get(key) is None else _count(env, key)


def _when(env: dict[str, Any]) -> dt.datetime:
    text = _str(env, "timestamp")
    when = utc_datetime(text)
    if when is None:
        raise EnvelopeError(f"field 'timestamp' is not an ISO-8601 time: {text!r}")
    return when


def usage_row(env: dict[str, Any]) -> list[Any]:
    """The `usage` row of one usage envelope, priced."""
    tokens = Tokens(
        _count(env, "input_tokens"),
        _count(env, "output_tokens"),
        _count(env, "cache_read_input_tokens"),
        _count(env, "cache_creation_5m_input_tokens"),
        _count(env, "cache_creation_1h_input_tokens"),
    )
    cache_write = _count(env, "cache_creation_input_tokens")
    when = _when(env)
    model = _str(env, "model")
    try:
        cost, price_model = price(model, when, tokens, _str(env, "speed"))
    except Exception:  # the price table refused these figures: tokens without a price, never a lost row
        log.warning("no price for %s at %s (%s): stored unpriced", model, when, tokens, exc_info=True)
        cost, price_model = None, ""
    sidechain = env.get("sidechain") is True
    total = tokens.input + tokens.output + tokens.cache_read + cache_write
    return [
        _str(env, "session_id"), _str(env, "message_id"), _str(env, "request_id"), when,
        _str(env, "agent"), _str(env, "team"), _str(env, "parent_agent"), _str(env, "agent_id"),
        _str(env, "agent_type"), _str(env, "subagent_id"), _str(env, "subagent_type"), _str(env, "host"),
        model, tokens.input, tokens.output, tokens.cache_read, cache_write, tokens.cache_5m,
        tokens.cache_1h, cost, price_model, sidechain, _str(env, "id"), 2 * total + (not sidechain),
        _str(env, "harness") or CLAUDE_CODE, _optional_count(env, "reasoning_tokens"),
        _str(env, "person"), _str(env, "repo"), _str(env, "branch"),
    ]  # fmt: skip


def cost_state_row(env: dict[str, Any]) -> list[Any]:
    """The `cost_states` row of one cost-state envelope."""
    data = env.get("data")
    model_usage = data.get("modelUsage") if isinstance(data, dict) else None
    if not isinstance(model_usage, dict):
        raise EnvelopeError("a cost-state envelope's data must hold modelUsage")
    cost = env.get("total_cost_usd")
    if not isinstance(cost, (int, float)) or isinstance(cost, bool):
        raise EnvelopeError(f"field 'total_cost_usd' must be a number, not {cost!r}")
    keys = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationEphemeral5mInputTokens",
            "cacheCreationEphemeral1hInputTokens")  # fmt: skip
    sums = [0] * len(keys)
    for usage in model_usage.values():
        if isinstance(usage, dict):
            for i, key in enumerate(keys):
                value = usage.get(key)
                sums[i] += value if type(value) is int and value > 0 else 0
    return [
        _str(env, "session_id"), _when(env), _str(env, "agent"), _str(env, "team"), _str(env, "host"),
        float(cost), *sums, dumps(model_usage).decode(), _str(env, "id"), sum(sums),
    ]  # fmt: skip


def usage_rows(bodies: Sequence[bytes]) -> UsageRows:
    """Decode, check and price a batch of usage envelope bodies."""
    out = UsageRows([], [], [])
    for i, body in enumerate(bodies):
        try:
            env = decode_envelope(body)
            if env["kind"] == USAGE_KIND:
                out.usage.append(usage_row(env))
            elif env["kind"] == COST_STATE_KIND:
                out.cost_states.append(cost_state_row(env))
            else:
                raise EnvelopeError(f"kind {env['kind']!r} on a usage subject (usage or cost_state expected)")
        except EnvelopeError as exc:
            out.bad.append((i, f"not a usage envelope: {exc}"))
    return out


def insert_usage(client: Client, rows: UsageRows) -> None:
    """Insert the rows of one batch: one insert per table that has some. API messages go through
    `usage_in` (`changed_usage`), so a copy read again or sent again is never counted twice by the
    cost rollup."""
    usage = changed_usage(client, rows.usage)
    for table, columns, data in (
        (USAGE_IN_TABLE, (*USAGE_COLUMNS, HOUR_COLUMN, ("sign", "Int8")), usage),
        (COST_STATES_TABLE, COST_STATE_COLUMNS, rows.cost_states),
    ):
        if data:
            client.insert(
                table,
                data,
                column_names=[name for name, _ in columns],
                column_type_names=[kind for _, kind in columns],
            )


def changed_usage(client: Client, rows: Sequence[list[Any]]) -> list[list[Any]]:
    """The `usage_in` rows (USAGE_COLUMNS, hour, sign) of a batch of `usage` rows: per message
    (session, message and request id), its copy with the largest version, when that is larger than
    the stored one's, with sign 1; and for each stored copy it replaces, that copy with sign -1,
    which takes its figures back out of the cost rollup. Copies no larger than the stored one are
    left out: `usage` would keep the stored one anyway. A new message's hour is its time's, a
    replacing copy's the stored one's: `usage` is ordered by hour, then that key, so the two meet.
    One lookup per batch (the stored copies, by usage's bloom filter on the session)."""
    best: dict[tuple[str, str, str], list[Any]] = {}
    for row in rows:
        key = (row[0], row[1], row[2])
        if key not in best or row[_VERSION] > best[key][_VERSION]:
            best[key] = row
    if not best:
        return []
    stored: dict[tuple[str, str, str], list[Any]] = {}
    keys = sorted(best)
    columns = ", ".join(name for name, _ in (*USAGE_COLUMNS, HOUR_COLUMN))
    for at in range(0, len(keys), _LOOKUP_CHUNK):
        chunk = keys[at : at + _LOOKUP_CHUNK]
        found = client.query(
            f"SELECT {columns} FROM {USAGE_TABLE} FINAL "  # noqa: S608 - constant names
            "WHERE session_id IN {sessions:Array(String)} AND message_id IN {messages:Array(String)}",
            parameters={"sessions": sorted({k[0] for k in chunk}), "messages": sorted({k[1] for k in chunk})},
        ).result_rows
        for hit in found:
            stored[(hit[0], hit[1], hit[2])] = list(hit)
    out: list[list[Any]] = []
    for key in keys:
        row, old = best[key], stored.get(key)
        if old is None:
            out.append([*row, _hour(row[_TIME]), 1])
            continue
        if row[_VERSION] <= old[_VERSION]:
            continue
        out.append([*old, -1])
        out.append([*row, old[-1], 1])
    return out


def _hour(when: dt.datetime) -> dt.datetime:
    return when.replace(minute=0, second=0, microsecond=0)
