"""The read side's answer: what a query gives back, decoded once, here, for every caller.

A query runs on a ClickHouse server (clickhouse-connect), or in the store's process whose query
service answers over the bus (bus/query.py): either way its reply is the JSON-friendly dict of
`queries.run_query`. `decode` turns that into an `Answer` (columns, ClickHouse's types, and rows
whose times are aware UTC datetimes, whose dates are dates), or raises `QueryFailed` with the
engine's message. Reaching the history at all fails with `HistoryUnreachable`. Both are a
`HistoryError`: the one exception a caller of the read side handles.

Standard library only: the dashboard, the commands and the MCP server import it without a client.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentwatch.format import utc_datetime


class HistoryError(Exception):
    """The history could not answer: the message says why and what to do."""


class QueryFailed(HistoryError):
    """ClickHouse refused or failed the query: its own message."""


class HistoryUnreachable(HistoryError):
    """The history cannot be reached (the bus, the query service or the ClickHouse server)."""


@dataclass(frozen=True)
class Answer:
    """A query's rows, typed: DateTime columns hold aware UTC datetimes, Date columns dates."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    truncated: bool = False
    elapsed_ms: float = 0.0
    note: str = ""

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)

    def dicts(self) -> list[dict[str, Any]]:
        """The rows as {column: value}."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def first(self) -> dict[str, Any]:
        """The first row as {column: value}; {} when there is none."""
        return dict(zip(self.columns, self.rows[0], strict=True)) if self.rows else {}

    def column(self, name: str) -> list[Any]:
        """The values of one column; [] for an answer without rows (chDB names no columns then)."""
        if not self.rows:
            return []
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    def scalar(self) -> Any:
        """The first column of the first row (None when there is no row)."""
        return self.rows[0][0] if self.rows else None


def _base(type_name: str) -> str:
    """`Nullable(DateTime64(3, 'UTC'))` -> `DateTime64`; `LowCardinality(String)` -> `String`."""
    name = type_name
    for wrapper in ("Nullable(", "LowCardinality("):
        while name.startswith(wrapper):
            name = name[len(wrapper) : -1]
    return name.split("(", 1)[0]


def _date(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, str) and value:
        try:
            return dt.date.fromisoformat(value[:10])
        except ValueError:
            return value
    return value


def _decoder(type_name: str) -> Any:
    base = _base(type_name)
    if base in ("DateTime", "DateTime64"):
        return lambda v: v if v is None else (utc_datetime(v) or v)
    if base in ("Date", "Date32"):
        return _date
    return None


def decode(reply: Mapping[str, Any]) -> Answer:
    """The Answer of a run_query reply; QueryFailed when it carries an error."""
    if "error" in reply:
        if reply.get("refused"):  # agentwatch's own refusal of a statement that does not only read
            raise QueryFailed(str(reply["error"]))
        raise QueryFailed(f"ClickHouse: {reply['error']}")
    columns = tuple(str(c) for c in reply.get("columns") or ())
    types = tuple(str(t) for t in reply.get("types") or ("",) * len(columns))
    decoders = [(i, d) for i, t in enumerate(types) if (d := _decoder(t)) is not None]
    rows: list[tuple[Any, ...]] = []
    for raw in reply.get("rows") or ():
        if decoders:
            row = list(raw)
            for i, decoder in decoders:
                row[i] = decoder(row[i])
            rows.append(tuple(row))
        else:
            rows.append(tuple(raw))
    return Answer(
        columns=columns,
        types=types,
        rows=rows,
        truncated=bool(reply.get("truncated")),
        elapsed_ms=float(reply.get("elapsed_ms") or 0.0),
        note=str(reply.get("note") or ""),
    )


def from_rows(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]]) -> Answer:
    """The Answer of rows a ClickHouse client gave back in the store's own process (the watchdog
    beside it asks the store directly), decoded as `decode` decodes a query service's reply."""
    return decode({"columns": list(columns), "types": list(types), "rows": rows})


def seconds(value: Any) -> float:
    """A time of an answer (or None) as Unix seconds; 0.0 for none."""
    if isinstance(value, dt.datetime):
        return value.timestamp()
    when = utc_datetime(value)
    return when.timestamp() if when is not None else 0.0


def plain_rows(answer: Answer) -> list[list[Any]]:
    """The rows with times back in ISO text (UTC, `Z`), for JSON and CSV output."""
    out = []
    for row in answer.rows:
        out.append([_iso(v) for v in row])
    return out


def _iso(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        text = (
            value.astimezone(dt.UTC)
            .replace(tzinfo=None)
            .isoformat(timespec="milliseconds" if value.microsecond else "seconds")
        )
        return text + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_iso(v) for v in value]
    return value


def params_of(values: Sequence[Any]) -> list[Any]:
    """Values as query parameters (times as ClickHouse's DateTime64 text)."""
    return [
        v.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if isinstance(v, dt.datetime) else v
        for v in values
    ]
