"""Secrets split across streamed pieces: found in the text the pieces make together.

An agent streams a message as deltas, and a model's tokens cut an email address or a key
into several (``"bob"``, ``"@exa"``, ``"mple.com"``): each delta alone holds nothing a rule
matches. Here the deltas of each message (and of each tool call's arguments, each thinking
span) are joined in the order they were recorded, the rules searched in the joined text,
and each place found is taken out of the deltas it spans: the replacement goes to the
delta where it starts, the rest of the place is cut from the others (a delta wholly inside
it becomes ``""``, which the protocol allows). The deltas then join to the redacted text,
so the messages a client folds from them read as one redacted at once.

Which deltas belong together: those naming the same message (or tool call); a chunk that
names none continues the last one named in its kind, as a client reads it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from recorder.redaction import Redactor
from recorder.redaction.engine import MESSAGES, TOOL_ARGS, replacement
from recorder.wire.jsontext import dump, parse

# The event types whose delta is a piece of a longer text: its kind (pieces join only
# within one), the field naming what it is part of, and the rules' kind of data.
PIECES: Mapping[str, tuple[str, str | None, str]] = {
    "TEXT_MESSAGE_CONTENT": ("text", "messageId", MESSAGES),
    "TEXT_MESSAGE_CHUNK": ("text", "messageId", MESSAGES),
    "REASONING_MESSAGE_CONTENT": ("reasoning", "messageId", MESSAGES),
    "REASONING_MESSAGE_CHUNK": ("reasoning", "messageId", MESSAGES),
    "THINKING_TEXT_MESSAGE_CONTENT": ("thinking", None, MESSAGES),
    "TOOL_CALL_ARGS": ("tool", "toolCallId", TOOL_ARGS),
    "TOOL_CALL_CHUNK": ("tool", "toolCallId", TOOL_ARGS),
}
# A thinking span has no id: each start begins a new one.
_THINKING_START = "THINKING_TEXT_MESSAGE_START"


@dataclass
class _Text:
    data_kind: str
    seqs: list[int] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)


@dataclass
class Split:
    """What redacting the joined pieces changed: the new payloads and the rules that fired
    in each, by seq."""

    payloads: dict[int, bytes] = field(default_factory=dict)
    rules: dict[int, set[str]] = field(default_factory=dict)

    @property
    def fired(self) -> set[str]:
        return set().union(*self.rules.values())


def split_secrets(events: Iterable[tuple[int, str | None, bytes]], redactor: Redactor) -> Split:
    """The pieces of ``events`` (seq, type, payload as stored) that hold part of something
    the rules match in the text they make together, redacted there."""
    texts: dict[tuple[str, Any], _Text] = {}
    current: dict[str, Any] = {}  # the last message (or call) named, by kind
    spans = 0
    for seq, kind, payload in events:
        if kind == _THINKING_START:
            spans += 1
            continue
        piece = PIECES.get(kind or "")
        if piece is None:
            continue
        family, id_field, data_kind = piece
        try:
            obj = parse(payload)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if id_field is None:
            owner: Any = spans
        else:
            owner = obj.get(id_field)
            if owner is None:
                owner = current.get(family)
            else:
                current[family] = owner
        delta = obj.get("delta")
        if owner is None or type(delta) is not str:
            continue
        text = texts.setdefault((family, owner), _Text(data_kind))
        text.seqs.append(seq)
        text.events.append(obj)
        text.pieces.append(delta)
    split = Split()
    for text in texts.values():
        if len(text.pieces) > 1:
            _redact(text, redactor, split)
    return split


def _redact(text: _Text, redactor: Redactor, split: Split) -> None:
    matcher = redactor.rules.matcher(text.data_kind)
    if matcher is None:
        return
    joined = "".join(text.pieces)
    hits = list(matcher.hits(joined))
    if not hits:
        return
    starts: list[int] = []
    at = 0
    for piece in text.pieces:
        starts.append(at)
        at += len(piece)
    out: list[list[str]] = [[] for _ in text.pieces]

    def keep(begin: int, end: int) -> None:
        """The text of ``joined[begin:end]`` back in the pieces it came from."""
        first = max(bisect.bisect_right(starts, begin) - 1, 0)
        for i in range(first, len(starts)):
            lo = max(begin, starts[i])
            hi = min(end, starts[i] + len(text.pieces[i]))
            if starts[i] >= end:
                break
            if hi > lo:
                out[i].append(joined[lo:hi])

    done = 0
    fired: list[set[str]] = [set() for _ in text.pieces]
    for start, end, name in hits:
        keep(done, start)
        first = bisect.bisect_right(starts, start) - 1
        out[first].append(replacement(name))
        for i in range(first, bisect.bisect_left(starts, end)):  # the pieces it spans
            fired[i].add(name)
        done = end
    keep(done, len(joined))
    for i, (seq, obj, old) in enumerate(zip(text.seqs, text.events, text.pieces, strict=True)):
        new = "".join(out[i])
        if new != old:
            split.payloads[seq] = dump({**obj, "delta": new}, exact=True)
            split.rules[seq] = fired[i]
