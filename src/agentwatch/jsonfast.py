"""JSON through CPython's C accelerator (`_json`) without importing the `json` package.

`json` imports `re`, and `re` imports enum, collections and functools: together they cost the
hook more than everything else it does. The C scanner and encoder are what `json` itself calls;
this module drives them with the same settings as `json.loads` and compact `json.dumps`.
Where `_json` is missing (not CPython), it falls back to the `json` package.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, ClassVar

_json: Any
try:
    import _json as _cjson

    _json = _cjson
except ImportError:  # pragma: no cover - CPython always has it
    _json = None


class JSONError(ValueError):
    """Text that is not one JSON document."""


def _constant(name: str) -> float:
    return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


def _unserializable(obj: object) -> object:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


class _Context:
    """The attributes `_json.make_scanner` reads from a `json.JSONDecoder`."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)
    memo: ClassVar[dict[str, str]] = {}


_scanners: dict[str, Callable[[str, int], tuple[Any, int]]] = {}
_encoders: dict[bool, Callable[[object, int], Any]] = {}
_markers: dict[int, object] = {}  # the encoders' record of the containers they are inside
_WS = " \t\n\r"


def loads(text: str) -> Any:
    """Like json.loads(text); raises JSONError (a ValueError) on anything but one JSON value."""
    if _json is None:
        import json

        try:
            return json.loads(text)
        except ValueError as exc:
            raise JSONError(str(exc)) from None
    scan = _scanners.get("scan")
    if scan is None:
        scan = _scanners["scan"] = _json.make_scanner(_Context())
    start = len(text) - len(text.lstrip(_WS))
    try:
        value, end = scan(text, start)
    except StopIteration as stop:
        raise JSONError(f"expecting a value at char {stop.value}") from None
    except (ValueError, SystemError):
        # The scanner builds its error from json.decoder, which this module does not load: on
        # this (rare) path, let the json package parse again and say what is wrong.
        import json

        try:
            json.loads(text)
        except ValueError as exc:
            raise JSONError(str(exc)) from None
        raise JSONError("invalid JSON") from None
    finally:
        _Context.memo.clear()
    if text[end:].strip(_WS):
        raise JSONError(f"extra data at char {end}")
    return value


def dumps(obj: object, ascii_only: bool = False) -> str:
    """Like json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))."""
    if _json is None:
        import json

        return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))
    encode = _encoders.get(ascii_only)
    if encode is None:
        escape = _json.encode_basestring_ascii if ascii_only else _json.encode_basestring
        encode = _encoders[ascii_only] = _json.make_encoder(
            _markers, _unserializable, escape, None, ":", ",", False, False, True
        )
    try:
        return "".join(encode(obj, 0))
    except BaseException:
        # An encode that stopped part-way (a RecursionError on a value nested too deep) leaves
        # the containers it had entered marked: the next encode of them would be "circular".
        _markers.clear()
        raise


def dumpb(obj: object) -> bytes:
    """Compact UTF-8 JSON bytes; strings with lone surrogates are written as escapes, so the
    output is always valid UTF-8."""
    try:
        return dumps(obj).encode("utf-8")
    except UnicodeEncodeError:
        return dumps(obj, ascii_only=True).encode("ascii")
