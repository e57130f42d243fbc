"""Rewrite a JSON text to hold a new value, changing the bytes of only what changed.

`agentwatch hooks` edits settings files that people format by hand. Serialising the new value
afresh would re-indent the whole file, expand arrays written on one line and rewrite numbers (`1.50`
as `1.5`, and `1e400` as `Infinity`, which is not JSON). So `rewrite` keeps the exact text of every
value that did not change (same keys, in the same order), and a changed object or array keeps its
brackets, the whitespace inside them and the separators between its members; array items are
matched up old to new as a diff would, so removing one item leaves its neighbours' text alone.

Only new values are rendered, in the style `detect_style` reads from the text: the indentation of
the top-level object's members (any number of spaces, a tab, or none for a file on one line), the
separators (`": "`, `":"`, `", "`, `","`), the line ending, and whether non-ASCII characters are
written as `\\u` escapes. What goes into an object or array written on one line (`["a", "b"]`)
stays on that line. Whatever surrounds the top-level value, a final newline included, is kept.

So a text in the style json.dumps writes (indent 2, 4 or a tab, or one line) comes back byte for
byte once a change is undone: what install added and uninstall removes are exactly the bytes of
the members added, with one separator each. The one exception: a changed object in which a key is
repeated is written afresh, as json.loads read it (the last value of the key wins); `agentwatch
hooks` refuses such a file, untouched (settings.read_settings), so it never meets it.

Standard library only, and written here for that reason: the standard library has no JSON
editor that keeps a text's formatting, and the bare install (every agent host) carries no
dependency.
"""

from __future__ import annotations

import difflib
import itertools
import json
import re
from dataclasses import dataclass, replace
from typing import Any

_WS = " \t\r\n"
_DECODER = json.JSONDecoder()
# A \uXXXX escape: preceded by an even number of backslashes, so not itself an escaped backslash.
_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u([0-9a-fA-F]{4})")


@dataclass(frozen=True)
class Member:
    """Where one member of an object (with `key`) or array (key None) lies in a JSON text."""

    key: str | None
    start: int
    key_end: int
    value_start: int
    value_end: int


@dataclass(frozen=True)
class Style:
    """How a JSON text is laid out; `indent` is one level, None when the text is on one line."""

    indent: str | None = "  "
    newline: str = "\n"
    key_separator: str = ": "
    item_separator: str = ", "
    ensure_ascii: bool = False

    def render(self, value: Any, depth: int) -> str:
        """`value` as JSON in this style, for a place `depth` levels deep."""
        item = "," if self.indent is not None else self.item_separator
        text = json.dumps(
            value, indent=self.indent, separators=(item, self.key_separator), ensure_ascii=self.ensure_ascii
        )
        if self.indent is None:
            return text
        return text.replace("\n", self.newline + self.indent * depth)

    def member(self, key: str, value: Any, depth: int) -> str:
        """`"key": value` for an object `depth` levels deep."""
        key_text = json.dumps(key, ensure_ascii=self.ensure_ascii)
        return key_text + self.key_separator + self.render(value, depth + 1)

    def opening(self, depth: int) -> str:
        """What follows the opening bracket of a container `depth` levels deep."""
        return "" if self.indent is None else self.newline + self.indent * (depth + 1)

    def gap(self, depth: int) -> str:
        """What separates two members of a container `depth` levels deep."""
        return self.item_separator if self.indent is None else "," + self.opening(depth)

    def closing(self, depth: int) -> str:
        """What precedes the closing bracket of a container `depth` levels deep."""
        return "" if self.indent is None else self.newline + self.indent * depth


DEFAULT_STYLE = Style()


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WS:
        index += 1
    return index


def members(text: str, start: int) -> list[Member]:
    """The members of the (valid) object or array whose opening bracket is at `start`."""
    is_object = text[start] == "{"
    closing = "}" if is_object else "]"
    found: list[Member] = []
    index = _skip(text, start + 1)
    if text[index] == closing:
        return found
    while True:
        begin = key_end = index
        key: str | None = None
        if is_object:
            key, key_end = _DECODER.raw_decode(text, index)
            index = _skip(text, _skip(text, key_end) + 1)
        _, end = _DECODER.raw_decode(text, index)
        found.append(Member(key, begin, key_end, index, end))
        index = _skip(text, end)
        if text[index] == closing:
            return found
        index = _skip(text, index + 1)


def _escapes_non_ascii(text: str) -> bool:
    if not text.isascii():
        return False
    return any(int(match[1], 16) >= 0x80 for match in _ESCAPE.finditer(text))


def detect_style(text: str) -> Style:
    """The style of `text`, a valid JSON text; DEFAULT_STYLE for what it does not show."""
    style = replace(DEFAULT_STYLE, ensure_ascii=_escapes_non_ascii(text))
    start = _skip(text, 0)
    if start == len(text) or text[start] not in "{[":
        return style
    found = members(text, start)
    if not found:
        return style
    first = found[0]
    if first.key is not None:
        separator = text[first.key_end : first.value_start]
        if "\n" not in separator and "\r" not in separator:
            style = replace(style, key_separator=separator)
    opening = text[start + 1 : first.start]
    if "\n" in opening:
        newline = "\r\n" if "\r\n" in opening else "\n"
        return replace(style, indent=opening[opening.rindex("\n") + 1 :], newline=newline)
    style = replace(style, indent=None)
    if len(found) > 1:
        gap = text[first.value_end : found[1].start]
        if "\n" not in gap and "\r" not in gap:
            return replace(style, item_separator=gap)
    elif style.key_separator == ":":
        return replace(style, item_separator=",")
    return style


def _dump(value: Any) -> str:
    """A form in which key order and the difference between 1, 1.0 and true count."""
    return json.dumps(value)


def rewrite(text: str, old: Any, new: Any, style: Style | None = None) -> str:
    """`text`, a valid JSON text whose value is `old`, changed to hold `new` (see the module's doc)."""
    start = _skip(text, 0)
    _, end = _DECODER.raw_decode(text, start)
    patched = _patch(text, start, end, old, new, 0, style or detect_style(text))
    return text[:start] + patched + text[end:]


def _patch(text: str, start: int, end: int, old: Any, new: Any, depth: int, style: Style) -> str:
    """The text for `new` in place of `text[start:end]`, which holds `old`."""
    if _dump(old) == _dump(new):
        return text[start:end]
    if _on_one_line(text, start, end, old) and style.indent is not None:
        style = replace(style, indent=None)  # so what goes into `[1, 2]` is written on that line too
    if isinstance(old, dict) and isinstance(new, dict):
        found = members(text, start)
        if len(found) != len(old):  # a repeated key, of which json kept the last: no safe splice
            return style.render(new, depth)
        pieces = _object_pieces(text, found, old, new, depth, style)
    elif isinstance(old, list) and isinstance(new, list):
        found = members(text, start)
        pieces = _array_pieces(text, found, old, new, depth, style)
    else:
        return style.render(new, depth)
    return _join(text, start, end, found, pieces, depth, style)


def _on_one_line(text: str, start: int, end: int, old: Any) -> bool:
    """True for a non-empty object or array written on one line, as `{"a": 1}`."""
    return isinstance(old, dict | list) and bool(old) and "\n" not in text[start:end]


def _object_pieces(
    text: str, found: list[Member], old: dict[str, Any], new: dict[str, Any], depth: int, style: Style
) -> list[str]:
    at = {member.key: member for member in found}
    pieces: list[str] = []
    for key, value in new.items():
        member = at.get(key)
        if member is None:
            pieces.append(style.member(key, value, depth))
        else:
            head = text[member.start : member.value_start]
            body = _patch(text, member.value_start, member.value_end, old[key], value, depth + 1, style)
            pieces.append(head + body)
    return pieces


def _array_pieces(
    text: str, found: list[Member], old: list[Any], new: list[Any], depth: int, style: Style
) -> list[str]:
    """New items in the old items' places: kept, patched where one replaces another, or rendered."""
    matcher = difflib.SequenceMatcher(None, [_dump(v) for v in old], [_dump(v) for v in new], autojunk=False)
    pieces: list[str] = []
    for tag, old_from, old_to, new_from, new_to in matcher.get_opcodes():
        for offset in range(new_to - new_from):
            value = new[new_from + offset]
            if tag in ("equal", "replace") and old_from + offset < old_to:
                member = found[old_from + offset]
                previous = old[old_from + offset]
                pieces.append(
                    _patch(text, member.value_start, member.value_end, previous, value, depth + 1, style)
                )
            else:
                pieces.append(style.render(value, depth + 1))
    return pieces


def _join(
    text: str, start: int, end: int, found: list[Member], pieces: list[str], depth: int, style: Style
) -> str:
    """`pieces` as the members of the container at `text[start:end]`, laid out as it was."""
    left, right = text[start], text[end - 1]
    if not pieces:
        return left + right
    if not found:
        return left + style.opening(depth) + style.gap(depth).join(pieces) + style.closing(depth) + right
    opening = text[start + 1 : found[0].start]
    closing = text[found[-1].value_end : end - 1]
    gaps = [text[a.value_end : b.start] for a, b in itertools.pairwise(found)]
    if not gaps:
        gaps = ["," + opening if "\n" in opening else style.item_separator]
    out = [left, opening, pieces[0]]
    for index, piece in enumerate(pieces[1:]):
        out += [gaps[min(index, len(gaps) - 1)], piece]
    out += [closing, right]
    return "".join(out)
