"""The wire layer: recorded frames, lenient decoding, event files.

A frame is the ``data`` of one SSE event, kept as the exact bytes received. Decoding is
lenient on purpose: the recorder must keep and report what it cannot parse, never drop it.
It reads what the reference client reads (``recorder.wire.jsontext``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import orjson

from recorder.errors import InputError
from recorder.wire.jsontext import JSONObject, parse, split_array
from recorder.wire.sse import FrameSplitter


def decode(data: bytes | str | Mapping[str, Any]) -> JSONObject | None:
    """The frame as a JSON object, or None when it is not one (the caller reports garbage)."""
    if type(data) is not bytes and isinstance(data, Mapping):  # (bytes first: the hot case)
        return dict(data)
    try:
        value = parse(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class RecordedEvent(NamedTuple):
    """One stored frame with its place in the log.

    A named tuple rather than a frozen dataclass: reads build one per row, and a frozen
    dataclass's ``__init__`` costs five times a tuple's (it dominated reading a long run).
    """

    position: int
    thread_id: str
    run_id: str
    seq: int
    type: str | None
    payload: bytes
    recorded_at: float
    origin: str


def read_event_file(text: bytes) -> list[bytes]:
    """Frames from a JSON array, JSONL, or a raw SSE capture, each as bytes."""
    stripped = text.lstrip()
    if not stripped:
        return []
    if stripped.startswith(b"[") and not _first_of_lines(stripped):
        try:
            return [orjson.dumps(item) for item in orjson.loads(stripped)]
        except (orjson.JSONDecodeError, TypeError):
            pass  # what orjson cannot read or write: each item's own text, as it stands
        try:
            items = split_array(stripped.decode("utf-8", "replace"))
        except ValueError as exc:
            raise InputError(f"not a JSON array of events: {exc}") from exc
        return [item.encode() for item in items]
    if stripped.startswith((b"data:", b":", b"id:", b"event:", b"retry:")):
        splitter = FrameSplitter()
        frames = [f.data for f in splitter.feed(text)]
        frames.extend(f.data for f in splitter.close())
        return frames
    return list(_jsonl(text))


def _first_of_lines(text: bytes) -> bool:
    """Whether ``text`` is JSON Lines that start with an array, not one JSON array."""
    first, _, rest = text.partition(b"\n")
    if not rest.strip():
        return False
    try:
        parse(first)
    except ValueError:
        return False
    return True


def _jsonl(text: bytes) -> Iterator[bytes]:
    for line in text.splitlines():
        if line.strip():
            yield line.strip()
