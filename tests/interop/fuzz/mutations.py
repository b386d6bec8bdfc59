"""Mutations of valid streams, and how a stream is written to a file (JSON array, JSONL, SSE).

Mutations break streams the ways producers and networks do: drop, duplicate, swap and
truncate events, retype one, null or spoil a field, slip in a frame that is no event, and
write literals Python's json cannot (``1e400``, lone surrogates, bytes that are not UTF-8).
"""

from __future__ import annotations

import json
import random
from typing import Any

from tests.interop.fuzz.streams import Case
from tests.interop.fuzz.values import BEYOND_DOUBLE, BIG_INTEGERS, HALVES, Raw

TYPES = [
    "RUN_STARTED",
    "RUN_FINISHED",
    "RUN_ERROR",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_END",
    "STATE_DELTA",
    "STEP_FINISHED",
    "REASONING_START",
    "THINKING_END",
    "THINKING_TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_CHUNK",
    "FUTURE_EVENT",
]
ODD: list[Any] = [None, 1, True, [], {}, "", "odd", Raw("1e400"), 2**53 + 1, "\ud800"]
GARBAGE = [Raw("{not json"), Raw("[1,2]"), Raw('"text"'), Raw("null"), Raw('{"delta":"x"}')]
NOT_UTF8 = b"\xff\xfe"


class NotUTF8:
    """A string whose bytes are not UTF-8: ``text`` with two invalid bytes in the middle."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def mutate(case: Case, rng: random.Random) -> None:
    """Break ``case`` in one to three ways, noting each in its features."""
    for _ in range(rng.randint(1, 3)):
        if not case.events:
            return
        name, action = rng.choice(_MUTATIONS)
        action(case.events, rng)
        case.features.add(f"mutation:{name}")


def _drop(events: list[Any], rng: random.Random) -> None:
    del events[rng.randrange(len(events))]


def _duplicate(events: list[Any], rng: random.Random) -> None:
    at = rng.randrange(len(events))
    events.insert(at, _copy(events[at]))


def _swap(events: list[Any], rng: random.Random) -> None:
    if len(events) > 1:
        at = rng.randrange(len(events) - 1)
        events[at], events[at + 1] = events[at + 1], events[at]


def _truncate(events: list[Any], rng: random.Random) -> None:
    del events[rng.randint(1, len(events)) :]


def _retype(events: list[Any], rng: random.Random) -> None:
    at = rng.randrange(len(events))
    if isinstance(events[at], dict):
        events[at] = {**events[at], "type": rng.choice(TYPES)}


def _null_field(events: list[Any], rng: random.Random) -> None:
    _set_field(events, rng, None)


def _spoil_field(events: list[Any], rng: random.Random) -> None:
    _set_field(events, rng, rng.choice(ODD))


def _set_field(events: list[Any], rng: random.Random, value: Any) -> None:
    at = rng.randrange(len(events))
    event = events[at]
    if isinstance(event, dict) and len(event) > 1:
        name = rng.choice(sorted(set(event) - {"type"}))
        events[at] = {**event, name: value}


def _garbage(events: list[Any], rng: random.Random) -> None:
    events.insert(rng.randrange(len(events) + 1), rng.choice(GARBAGE))


def _literal(events: list[Any], rng: random.Random) -> None:
    """A string or number somewhere in an event replaced by what Python's json cannot write."""
    at = rng.randrange(len(events))
    if isinstance(events[at], dict):
        events[at] = _replace_leaf(events[at], rng)


def _replace_leaf(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = sorted(k for k in value if k != "type")
        if not keys:
            return value
        key = rng.choice(keys)
        return {**value, key: _replace_leaf(value[key], rng)}
    if isinstance(value, list) and value:
        at = rng.randrange(len(value))
        return [*value[:at], _replace_leaf(value[at], rng), *value[at + 1 :]]
    if isinstance(value, str):
        return rng.choice([*HALVES, NotUTF8(value), value + "\udbff"])
    if isinstance(value, int | float) and not isinstance(value, bool):
        return rng.choice([*BEYOND_DOUBLE, *BIG_INTEGERS])
    return value


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


_MUTATIONS = [
    ("drop", _drop),
    ("duplicate", _duplicate),
    ("swap", _swap),
    ("truncate", _truncate),
    ("retype", _retype),
    ("null", _null_field),
    ("spoil", _spoil_field),
    ("garbage", _garbage),
    ("literal", _literal),
    ("literal", _literal),
]


# -- writing ----------------------------------------------------------------------------------


def write(value: Any, ascii_only: bool = True) -> bytes:
    """JSON text for ``value``, with Raw written as it stands and lone surrogates escaped."""
    if isinstance(value, Raw):
        return value.text.encode()
    if isinstance(value, NotUTF8):
        middle = len(value.text) // 2
        left, right = write(value.text[:middle])[:-1], write(value.text[middle:])[1:]
        return left + NOT_UTF8 + right
    if isinstance(value, dict):
        items = [write(str(k)) + b":" + write(v, ascii_only) for k, v in value.items()]
        return b"{" + b",".join(items) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(write(v, ascii_only) for v in value) + b"]"
    if isinstance(value, str):
        if ascii_only or any("\ud800" <= ch <= "\udfff" for ch in value):
            return json.dumps(value).encode()
        return json.dumps(value, ensure_ascii=False).encode()
    return json.dumps(value).encode()


def encode(case: Case, rng: random.Random) -> bytes:
    """The file ``recorder fold`` would read: a JSON array, JSONL or an SSE capture."""
    ascii_only = rng.random() < 0.5
    frames = [write(event, ascii_only) for event in case.events]
    if case.format == "array":
        # A frame that is no JSON would make the whole file unreadable: keep that rare.
        frames = [f for f in frames if f != b"{not json" or rng.random() < 0.1]
        return b"[" + b",\n".join(frames) + b"]"
    if case.format == "jsonl":
        return b"".join(frame + b"\n" for frame in frames)
    out = []
    for number, frame in enumerate(frames):
        if rng.random() < 0.05:
            out.append(b": keep-alive\n\n")
        head = b"id: %d\n" % number if rng.random() < 0.2 else b""
        if rng.random() < 0.05 and frame.startswith(b"{") and b"," in frame:
            frame = frame.replace(b",", b",\n", 1)  # JSON across two data lines
        body = b"".join(b"data: " + line + b"\n" for line in frame.split(b"\n"))
        out.append(head + body + b"\n")
    return b"".join(out)
