"""A projector's checkpoint laid out so that an answer reads little of it.

A checkpoint (``Projector.checkpoint``, version 3) is three lines::

    [message,message,...]            the messages, the bytes a client is sent for them
    [{"o":1,"id":"m1"},...]          per message: where it starts in the first line and
                                     the ids the reducer finds it by (its own, its tool
                                     calls'); empty where no fold goes on from the
                                     checkpoint (a closed run's last event)
    {"version":3,"state":...}        the rest of what the projector works with

Compact JSON holds no raw newline, so the lines part unambiguously. The state at the
checkpoint sends the first line as it is, undecoded. The state some events later folds
those events over the messages they may touch only: the last ones, from the first whose id
one of the events names (found in the index's bytes, never decoded for it). The messages
before it are sent as they were stored. The events decide that from their own ids alone,
so those that act on the whole list or on ids they do not name (chunks, retired THINKING
events, which mint ids no message may hold, a RUN_STARTED carrying messages, a
MESSAGES_SNAPSHOT), and any frame orjson cannot read, take the whole list as a checkpoint
of version 2 always did.

A projector whose values orjson cannot write as a client reads them (Infinity, a lone
surrogate) or that holds one message at two positions keeps the older layout, one object
(version 2), read whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from recorder.reference import JSONObject
from recorder.reference.chunks import CHUNK_TYPES
from recorder.reference.compat import MINTING_TYPES
from recorder.wire.jsontext import dump

VERSION: Final = 3
_ENTRY: Final = b'{"o":'  # how every index entry starts (inside a string a quote is escaped)
_OFFSET: Final = re.compile(rb'\{"o":(\d+)')
_WHOLE_LIST: Final = frozenset(("MESSAGES_SNAPSHOT", *CHUNK_TYPES, *MINTING_TYPES))


@dataclass(frozen=True, slots=True)
class Layout:
    """A version 3 checkpoint's three lines (the first a view: it runs to megabytes)."""

    messages: memoryview
    index: bytes
    rest: bytes

    def count(self) -> int:
        return self.index.count(_ENTRY)


def lay_out(
    messages: list[Any],
    rest: JSONObject,
    *,
    indexed: bool = True,
    since: tuple[Layout, int] | None = None,
) -> bytes | None:
    """The checkpoint of ``messages`` and ``rest`` (its index line empty unless ``indexed``:
    then no fold goes on from it); None where orjson cannot write a message.

    ``since``: an earlier checkpoint of the same fold and where in its messages the first
    one the frames fed after it may touch starts (``first_touched``): the messages before
    it are taken as written there, not written again."""
    kept = _kept(since, len(messages)) if since is not None else None
    try:
        if kept is None:
            if not indexed:
                return b"".join((orjson.dumps(messages), b"\n\n", dump(rest, exact=True)))
            first, line, listed, comma = 0, memoryview(b"["), b"[", b""
        else:
            (first, line, listed), comma = kept, b","
        parts = [orjson.dumps(m) for m in messages[first:]]
        entries = []
        if indexed:
            at = len(line) + len(comma)  # where the first message written here starts
            for message, part in zip(messages[first:], parts, strict=True):
                entries.append(_entry(message, at))
                at += len(part) + 1  # and its comma
            written = orjson.dumps(entries)[1:-1]
    except TypeError:
        return None
    pieces: list[bytes | memoryview] = [line]
    if parts:
        pieces += [comma, b",".join(parts)]
    pieces.append(b"]\n")
    if indexed:
        pieces.append(listed)
        if entries:
            pieces += [comma, written]
        pieces.append(b"]")
    pieces += [b"\n", dump(rest, exact=True)]
    return b"".join(pieces)


def _kept(since: tuple[Layout, int], count: int) -> tuple[int, memoryview, bytes] | None:
    """How many messages of the earlier checkpoint ``since`` names stand as they were, and
    its messages' and index's lines up to the last of them (without their closing bracket
    or the comma after); None where it keeps no index or there is nothing to keep."""
    previous, cut = since
    index, messages = previous.index, previous.messages
    if not index:
        return None
    if cut >= len(messages) - 1:  # no message touched since: every one kept
        kept, line, listed = previous.count(), messages[:-1], index[:-1]
    else:
        at = _entry_at(index, cut)
        if at is None or at < 2:
            return None
        kept, line, listed = index.count(_ENTRY, 0, at), messages[: cut - 1], index[: at - 1]
    if kept == 0 or kept > count:
        return None
    return kept, line, listed


def _entry_at(index: bytes, offset: int) -> int | None:
    """Where the index's entry of the message starting at ``offset`` begins."""
    wanted = b'{"o":%d' % offset
    at = index.find(wanted)
    while at >= 0 and index[at + len(wanted) : at + len(wanted) + 1] not in (b",", b"}"):
        at = index.find(wanted, at + 1)
    return at if at >= 0 else None


def laid_out(data: bytes) -> bool:
    """Whether ``data`` is a checkpoint of version 3 (or not a checkpoint at all)."""
    return data.startswith(b"[")


def split(data: bytes) -> Layout | None:
    """The lines of a version 3 checkpoint; None for an older one (a JSON object)."""
    if not laid_out(data):
        return None
    last = data.rfind(b"\n")
    middle = data.rfind(b"\n", 0, last)
    if middle < 0 or data.endswith(b"\n"):
        raise ValueError("not a projector checkpoint")
    return Layout(memoryview(data)[:middle], data[middle + 1 : last], data[last + 1 :])


def first_touched(layout: Layout, frames: Iterable[bytes]) -> int | None:
    """Where, in the messages' line, the first message that folding ``frames`` may read or
    change starts (the closing bracket's offset if none); None if they may touch any, or
    the checkpoint keeps no index."""
    found = touched(layout, frames)
    return None if found is None else found[0]


def touched(layout: Layout, frames: Iterable[bytes]) -> tuple[int, list[dict[str, Any]]] | None:
    """``first_touched``, with the frames' JSON objects (``orjson``) it decoded for it, for
    a fold to take rather than decode them again."""
    if not layout.index:
        return None
    events: list[dict[str, Any]] = []
    names: set[str] = set()
    for frame in frames:
        try:
            event = orjson.loads(frame)
        except orjson.JSONDecodeError:
            return None
        if type(event) is not dict:
            return None
        events.append(event)
        kind = event.get("type")
        if kind in _WHOLE_LIST:
            return None
        if kind == "RUN_STARTED" and event.get("input") is not None:
            return None
        names.update(
            value
            for key, value in event.items()
            if type(value) is str and (key.endswith("Id") or key == "id")
        )
    index = layout.index
    first = len(layout.messages) - 1
    for name in names:
        try:
            # A name's JSON string, found anywhere in the index: at worst in another entry
            # than its own, before it (the answer then decodes a message more than it needed).
            at = index.find(orjson.dumps(name))
        except TypeError:
            return None
        if at >= 0:
            entry = _OFFSET.match(index, index.rfind(_ENTRY, 0, at))
            if entry is None:
                raise ValueError("not a projector checkpoint")
            first = min(first, int(entry[1]))
    return first, events


def tail(layout: Layout, cut: int) -> list[Any]:
    """The messages from offset ``cut`` (``first_touched``) on, decoded."""
    value = orjson.loads(b"".join((b"[", layout.messages[cut:-1], b"]")))
    if type(value) is not list:
        raise ValueError("not a projector checkpoint")
    return value


def pieces(layout: Layout, cut: int, items: list[Any]) -> list[bytes | memoryview]:
    """The messages' array, in pieces to join: those before offset ``cut`` as stored, then
    ``items``; TypeError where orjson cannot write one of them."""
    messages = layout.messages
    kept = messages[1 : cut - 1] if cut > 1 and messages[cut - 1] == ord(",") else messages[1:cut]
    written = orjson.dumps(items)
    if not kept:
        return [written]
    if written == b"[]":
        return [b"[", kept, b"]"]
    return [b"[", kept, b",", memoryview(written)[1:]]


def _entry(message: Any, offset: int) -> JSONObject:
    entry: JSONObject = {"o": offset}
    if type(message) is not dict:
        return entry
    if type(message.get("id")) is str:
        entry["id"] = message["id"]
    calls = message.get("toolCalls")
    if type(calls) is list:
        ids = [c["id"] for c in calls if type(c) is dict and type(c.get("id")) is str]
        if ids:
            entry["c"] = ids
    return entry
