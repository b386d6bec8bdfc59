"""JSON text as the reference client reads and writes it (``JSON.parse``, ``JSON.stringify``).

A frontend parses every frame with ``JSON.parse``. orjson reads almost all of them the same
way, and fast; what it refuses, ``JSON.parse`` still reads:

- a lone surrogate escape (``"\\ud83d"``): half of a pair, which a stream may split across
  two deltas (the reference joins them back into the emoji when it appends);
- a number beyond a double (``1e400``): Infinity;
- bytes that are not UTF-8: the reference decodes a stream with replacement characters
  (a non-fatal ``TextDecoder``) before it parses.

``parse`` tries orjson and falls back to the standard library, tuned to refuse what
``JSON.parse`` refuses (``NaN``, ``Infinity``). Integers stay exact, as the log's bytes do;
the projection rounds them to doubles where a frontend would (``recorder.reference``).

Strings hold code points, so half a pair is a lone surrogate, which UTF-8 cannot carry:
``dump`` writes it as a ``\\uXXXX`` escape, as ``JSON.stringify`` does, and a pair that two
deltas split is read back as one character. Infinity is read as an ``Infinite`` float and
written as ``null``, as ``JSON.stringify`` writes it (or, for our own copies, as ``1e400``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

import orjson

JSONValue = Any
"""Any JSON value: None, bool, int, float, str, list or dict (``JSONObject``)."""
JSONObject = dict[str, Any]
"""A JSON object: an event, a message, a RunAgentInput, a state."""

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_INDENT: Final = orjson.OPT_INDENT_2
_UTC_Z: Final = orjson.OPT_UTC_Z


class Infinite(float):
    """Infinity or -Infinity, as ``JSON.parse`` reads ``1e400``: a float type of its own,
    which orjson refuses to write, so that ``dump`` notices it and writes what it should."""

    __slots__ = ()


def parse(data: bytes | str) -> JSONValue:
    """The value ``JSON.parse`` reads from ``data``; ``orjson.JSONDecodeError`` (a
    ValueError) where it throws, whichever reader found the fault."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return parse_fallback(data)


def parse_fallback(data: bytes | str) -> JSONValue:
    """``parse`` for what orjson refused: slower, and as ``JSON.parse`` reads it."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    try:
        return _DECODER.decode(text)
    except ValueError as exc:  # the standard library's JSONDecodeError, or a refused NaN
        message = getattr(exc, "msg", str(exc))
        raise orjson.JSONDecodeError(message, text, getattr(exc, "pos", 0)) from None
    except RecursionError:  # past orjson's 1024 levels, the standard library's recursion
        raise orjson.JSONDecodeError("nested too deeply", text, 0) from None


MAX_DEPTH: Final = 254  # levels of nesting orjson writes; the recorder's code handles them


def nested_too_deeply(data: bytes, value: JSONValue) -> bool:
    """Whether ``value`` (parsed from ``data``) nests arrays and objects past ``MAX_DEPTH``
    levels: deeper than the recorder can fold, copy or answer without running out of
    recursion. The walk is orjson's own writer, which stops at that depth: a fifth of the
    time parsing took (counting brackets in ``data`` first took longer than the walk)."""
    if len(data) < 2 * MAX_DEPTH:
        return False  # too short to open that many brackets
    try:
        orjson.dumps(value)
    except TypeError as exc:
        return "Recursion limit" in str(exc)
    return False


def split_array(text: str) -> list[str]:
    """The text of each item of the JSON array ``text``; ValueError where ``JSON.parse`` throws."""
    if type(parse(text)) is not list:
        raise ValueError("not a JSON array")
    items: list[str] = []
    at = _skip_space(text, text.index("[") + 1)
    while text[at] != "]":
        end = _DECODER.raw_decode(text, at)[1]
        items.append(text[at:end])
        at = _skip_space(text, end)
        if text[at] == ",":
            at = _skip_space(text, at + 1)
    return items


def _skip_space(text: str, at: int) -> int:
    while text[at] in " \t\r\n":
        at += 1
    return at


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _number(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else Infinite(value)


def _integer(digits: str) -> int | float:
    # Like orjson, past 64 bits a number is read as a double; a float also spares Python's
    # limit on converting very long digit strings.
    return int(digits) if len(digits) < 20 else _number(digits)


_DECODER: Final = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_float=_number, parse_int=_integer
)


def dump(value: JSONValue, *, indent: bool = False, exact: bool = False) -> bytes:
    """``value`` as JSON text (UTF-8), as ``JSON.stringify`` writes it: Infinity as ``null``.

    ``exact`` keeps what this module's ``parse`` reads back as it was, Infinity included
    (written as ``1e400``): for copies and checkpoints, never for a client. Whatever else
    orjson writes (an answer's datetimes, in UTC as ``...Z``) is written as orjson does.
    """
    try:
        return orjson.dumps(value, option=_INDENT | _UTC_Z if indent else _UTC_Z)
    except TypeError:
        pass  # a lone surrogate, an integer past 64 bits, or Infinity
    return _written(value, exact, "\n" if indent else None).encode()


def printable(text: str) -> str:
    """``text`` with each lone surrogate spelled as its escape, so that it can be written."""
    return _LONE_SURROGATE.sub(_escape, text) if _LONE_SURROGATE.search(text) else text


def well_formed(text: str) -> str:
    """``text.toWellFormed()``: halves of a pair joined, lone ones made U+FFFD (for stores,
    which take UTF-8 only)."""
    if not _LONE_SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _written(value: JSONValue, exact: bool, newline: str | None) -> str:
    """What orjson would write, and what it cannot: the slow way, for the rare value."""
    kind = type(value)
    inner = None if newline is None else newline + "  "
    if kind is dict:
        if not value:
            return "{}"
        colon = ":" if newline is None else ": "
        items = [_string(k) + colon + _written(v, exact, inner) for k, v in value.items()]
        return _joined("{", items, "}", newline)
    if kind is list:
        if not value:
            return "[]"
        return _joined("[", [_written(v, exact, inner) for v in value], "]", newline)
    if kind is str:
        return _string(value)
    if isinstance(value, float) and not math.isfinite(value):
        return ("1e400" if value > 0 else "-1e400") if exact else "null"
    try:
        return orjson.dumps(value, option=_UTC_Z).decode()
    except TypeError:
        return json.dumps(value)  # an integer past 64 bits


def _joined(opening: str, items: list[str], closing: str, newline: str | None) -> str:
    if newline is None:
        return opening + ",".join(items) + closing
    inner = newline + "  "
    return opening + inner + ("," + inner).join(items) + newline + closing


def _string(text: str) -> str:
    return printable(json.dumps(text, ensure_ascii=False))
