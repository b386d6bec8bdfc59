"""The wire layer: recorded frames, lenient decoding, event files.

A frame is the ``data`` of one SSE event, kept as the exact bytes received. Decoding is
lenient on purpose: the recorder must keep and report what it cannot parse, never drop it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import orjson

from recorder.errors import InputError

JSONObject = dict[str, Any]


def decode(data: bytes | str | Mapping[str, Any]) -> JSONObject | None:
    """The frame as a JSON object, or None when it is not one (the caller reports garbage)."""
    if isinstance(data, Mapping):
        return dict(data)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def event_type(data: bytes | str) -> str | None:
    """The ``type`` of a frame, or None for garbage frames and frames without a string type."""
    obj = decode(data)
    if obj is None:
        return None
    kind = obj.get("type")
    return kind if isinstance(kind, str) and kind else None


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
    if stripped.startswith(b"["):
        try:
            items = orjson.loads(stripped)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"not a JSON array of events: {exc}") from exc
        return [orjson.dumps(item) for item in items]
    if stripped.startswith((b"data:", b":", b"id:", b"event:", b"retry:")):
        from recorder.wire.sse import FrameSplitter

        splitter = FrameSplitter()
        frames = [f.data for f in splitter.feed(text)]
        frames.extend(f.data for f in splitter.close())
        return frames
    return list(_jsonl(text))


def _jsonl(text: bytes) -> Iterator[bytes]:
    for line in text.splitlines():
        if line.strip():
            yield line.strip()
