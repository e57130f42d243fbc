"""A query's values in JSON form: what `queries.run_query` puts in its reply.

Most of a reply's columns are strings and integers, which JSON takes as they are; only the others
are converted, value by value. A 2,000-row feed has 32,000 values: converting each through one
chain of type tests was most of the time the dashboard spent on an answer that ClickHouse gave in
a third of it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import ipaddress
import math
import re
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

# ClickHouse types whose values clickhouse-connect gives as str, int or bool (or None, when
# Nullable): JSON takes them unchanged.
_AS_THEY_ARE = re.compile(r"(?:String|U?Int(?:8|16|32|64|128|256)|Bool|Enum(?:8|16)\(.*\))")
_WRAPPER = re.compile(r"^(?:LowCardinality|Nullable)\((.*)\)$")


def plain(value: Any) -> Any:
    """A JSON-friendly form of one value ClickHouse returned."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return (
                value.isoformat(timespec="milliseconds") + "Z"
                if value.microsecond
                else value.isoformat() + "Z"
            )
        return value.isoformat()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (uuid.UUID, ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):  # NaN has no JSON form
        return None
    return value


def as_they_are(type_name: str) -> bool:
    """Whether JSON takes the values of a column of this ClickHouse type unchanged."""
    while found := _WRAPPER.match(type_name):
        type_name = found.group(1)
    return _AS_THEY_ARE.fullmatch(type_name) is not None


def plain_rows(rows: Sequence[Sequence[Any]], type_names: Sequence[str]) -> list[list[Any]]:
    """Rows in JSON form, columns of a type JSON takes as it is left alone."""
    convert = [i for i, name in enumerate(type_names) if not as_they_are(name)]
    if not convert:
        return [list(row) for row in rows]
    out = []
    for row in rows:
        values = list(row)
        for i in convert:
            values[i] = plain(values[i])
        out.append(values)
    return out
