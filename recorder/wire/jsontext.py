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
deltas split is read back as one character. Infinity is written as ``null``, as
``JSON.stringify`` writes it.
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


def parse(data: bytes | str) -> JSONValue:
    """The value ``JSON.parse`` reads from ``data``; ValueError where it throws."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return parse_fallback(data)


def parse_fallback(data: bytes | str) -> JSONValue:
    """``parse`` for what orjson refused: slower, and as ``JSON.parse`` reads it."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return _DECODER.decode(text)


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


def _integer(digits: str) -> int | float:
    # Like orjson, past 64 bits a number is read as a double; a float also spares Python's
    # limit on converting very long digit strings.
    return int(digits) if len(digits) < 20 else float(digits)


_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_integer)


def dump(value: JSONValue, *, indent: bool = False) -> bytes:
    """``value`` as JSON text (UTF-8), written as ``JSON.stringify`` would."""
    try:
        return orjson.dumps(value, option=_INDENT if indent else None)
    except TypeError:
        pass  # a lone surrogate, or an integer past 64 bits
    text = json.dumps(
        _finite(value),
        ensure_ascii=False,
        allow_nan=False,
        indent=2 if indent else None,
        separators=None if indent else (",", ":"),
    )
    return _LONE_SURROGATE.sub(_escape, text).encode()


def printable(text: str) -> str:
    """``text`` with each lone surrogate spelled as its escape, so that it can be written."""
    return _LONE_SURROGATE.sub(_escape, text) if _LONE_SURROGATE.search(text) else text


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _finite(value: JSONValue) -> JSONValue:
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {k: _finite(v) for k, v in value.items()}
    if kind is list:
        return [_finite(v) for v in value]
    return value
