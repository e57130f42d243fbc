"""What one API message cost, from genai-prices: a maintained table of model prices with their
history, bundled in the package (its snapshot: no network at run time).

The price is the one valid at the message's time. A 1-hour cache write is priced at the model's
own 1-hour rate, or at 2x its base input price where the table has no separate rate (Anthropic's
rule). A model the table does not know is not priced: its cost is None (stored as NULL and shown
as "unpriced", never as $0).

The only module that imports genai-prices (an import-linter contract says so); it is imported on
the first price asked, not with the store.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

PROVIDER = "anthropic"
# Anthropic's rule for 1-hour cache writes: 2x the base input price.
CACHE_1H_INPUT_MULTIPLE = Decimal(2)
_MTOK = Decimal(1_000_000)


class Tokens(NamedTuple):
    """One API message's tokens, as Anthropic reports them: `input` excludes the cache's."""

    input: int
    output: int
    cache_read: int
    cache_5m: int
    cache_1h: int


class Priced(NamedTuple):
    cost_usd: float | None  # None: the price table does not know the model
    model: str  # the price table's id of the model priced ('' when not priced)


def price(model: str, when: dt.datetime, tokens: Tokens, speed: str = "") -> Priced:
    """The cost in USD of `tokens` of `model` at `when` (timezone-aware)."""
    if not model:
        return Priced(None, "")
    from genai_prices import Usage, calc_price

    ref = _model_ref(model)
    context = {"speed": speed} if speed == "fast" else None
    has_1h_rate = _has_1h_rate(ref, when.date())
    if has_1h_rate is None:
        return Priced(None, "")
    cache_1h = tokens.cache_1h if has_1h_rate else 0
    usage = Usage(
        input_tokens=tokens.input + tokens.cache_read + tokens.cache_5m + cache_1h,
        output_tokens=tokens.output,
        cache_read_tokens=tokens.cache_read,
        cache_write_tokens=tokens.cache_5m + cache_1h,
        cache_write_5m_tokens=tokens.cache_5m,
        cache_write_1h_tokens=cache_1h,
    )
    calc = calc_price(
        usage, ref, provider_id=_provider(ref), genai_request_timestamp=when, price_context=context
    )
    total = Decimal(calc.total_price)
    if not has_1h_rate and tokens.cache_1h:
        total += tokens.cache_1h * CACHE_1H_INPUT_MULTIPLE * _base(calc.model_price.input_mtok) / _MTOK
    return Priced(float(total), str(calc.model.id))


def _model_ref(model: str) -> str:
    """A Bedrock-style id (`us.anthropic.claude-sonnet-4-5-20250929-v1:0`) as the model's own."""
    ref = model.split("anthropic.", 1)[1] if "anthropic." in model else model
    head, sep, tail = ref.rpartition("-v")
    if sep and ":" in tail and tail.replace(":", "").isdigit():
        ref = head
    return ref


@lru_cache(maxsize=512)
def _provider(ref: str) -> str | None:
    """Anthropic where it knows the model, else whichever provider genai-prices finds."""
    from genai_prices import Usage, calc_price

    try:
        calc_price(Usage(input_tokens=0), ref, provider_id=PROVIDER)
    except LookupError:
        return None
    return PROVIDER


@lru_cache(maxsize=4096)
def _has_1h_rate(ref: str, day: dt.date) -> bool | None:
    """Whether the table has a 1-hour cache write rate for `ref` on `day`; None for a model it
    does not know."""
    from genai_prices import Usage, calc_price

    when = dt.datetime(day.year, day.month, day.day, 12, tzinfo=dt.UTC)
    try:
        calc = calc_price(
            Usage(input_tokens=0), ref, provider_id=_provider(ref), genai_request_timestamp=when
        )
    except LookupError:
        return None
    return calc.model_price.cache_write_1h_mtok is not None


def _base(value: Any) -> Decimal:
    """A price per million tokens; the first tier's for a tiered price."""
    if value is None:
        return Decimal(0)
    return Decimal(getattr(value, "base", value))
