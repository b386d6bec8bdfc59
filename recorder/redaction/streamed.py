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

Joined as stored (record time: each delta was redacted alone first), a delta that held
enough of a secret to match alone ends with its replacement, and the secret's rest begins
the next delta: what a detector would have taken on there is cut (``_CONTINUES``). Given
the originals (an import, ``recorder redact``), the whole is found instead.
"""

from __future__ import annotations

import bisect
import contextlib
import re
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
# What may follow a detector's match and still be part of what it matched (a key's next
# characters, an address's domain). Redacted at record time, a delta that held the start
# of a secret ends with its replacement, and the rest of the secret begins the next
# delta, which no rule matches alone: this is cut from it.
_CONTINUES: Mapping[str, re.Pattern[str]] = {
    "email": re.compile(r"(?:[A-Za-z0-9-]|\.(?=[A-Za-z0-9]))+"),
    "token": re.compile(r"(?:[A-Za-z0-9_-]|\.(?=[A-Za-z0-9_-]))+"),
    "ip": re.compile(r"(?:[0-9A-Fa-f:]|\.(?=[0-9]))+"),
    "card": re.compile(r"[0-9]+"),
    "phone": re.compile(r"[0-9]+"),
}
_ENDS_REDACTED = re.compile(r"\[REDACTED:([^\]]+)\]$")


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


def split_secrets(
    events: Iterable[tuple[int, str | None, bytes]],
    redactor: Redactor,
    stored: Mapping[int, bytes] | None = None,
) -> Split:
    """The pieces of ``events`` (seq, type, payload) that hold part of something the rules
    match in the text they make together, redacted there.

    ``stored``: where the events are the originals (an import, ``recorder redact``), the
    payloads each-event redaction made of some of them. Their deltas are replaced by those
    of the joined text (which saw the whole secret, where a delta alone saw part of it and
    left the rest in the next), the rest of them kept."""
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
            if not isinstance(owner, str):  # none (a chunk continuing), or not an id
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
            _redact(text, redactor, split, stored or {})
    return split


def _redact(text: _Text, redactor: Redactor, split: Split, stored: Mapping[int, bytes]) -> None:
    matcher = redactor.rules.matcher(text.data_kind)
    if matcher is None:
        return
    joined = "".join(text.pieces)
    starts: list[int] = []
    at = 0
    for piece in text.pieces:
        starts.append(at)
        at += len(piece)
    hits = [(start, end, name, False) for start, end, name in matcher.hits(joined)]
    detectors = {r.name: r.detector for r in redactor.rules.rules if r.detector is not None}
    hits += _continued(text.pieces, starts, joined, detectors)
    if not hits:
        return
    hits = _apart(hits)
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
    for start, end, name, cut in hits:
        keep(done, start)
        first = bisect.bisect_right(starts, start) - 1
        if not cut:  # (cut: the rest of a secret whose replacement is in a delta before)
            out[first].append(replacement(name))
        for i in range(first, bisect.bisect_left(starts, end)):  # the pieces it spans
            fired[i].add(name)
        done = end
    keep(done, len(joined))
    for i, (seq, obj, old) in enumerate(zip(text.seqs, text.events, text.pieces, strict=True)):
        new = "".join(out[i])
        if new != old:
            base = obj
            if seq in stored:
                with contextlib.suppress(ValueError):
                    redacted = parse(stored[seq])
                    base = redacted if isinstance(redacted, dict) else obj
            split.payloads[seq] = dump({**base, "delta": new}, exact=True)
            split.rules[seq] = fired[i]


def _continued(
    pieces: list[str], starts: list[int], joined: str, detectors: Mapping[str, str]
) -> list[tuple[int, int, str, bool]]:
    """Where a delta ends with the replacement of a detector's rule (``detectors``: by the
    rule's name), what of the next deltas continues the secret it replaced
    (``_CONTINUES``): cut, with no replacement of its own."""
    found: list[tuple[int, int, str, bool]] = []
    for i, piece in enumerate(pieces[:-1]):
        marker = _ENDS_REDACTED.search(piece)
        detector = detectors.get(marker.group(1)) if marker is not None else None
        if marker is None or detector is None:
            continue
        continues = _CONTINUES.get(detector)
        after = starts[i] + len(piece)
        rest = continues.match(joined, after) if continues is not None else None
        if rest is not None:
            found.append((after, rest.end(), marker.group(1), True))
    return found


def _apart(hits: list[tuple[int, int, str, bool]]) -> list[tuple[int, int, str, bool]]:
    """The places in order, none overlapping one before it."""
    kept: list[tuple[int, int, str, bool]] = []
    for hit in sorted(hits, key=lambda h: (h[0], -h[1])):
        if not kept or hit[0] >= kept[-1][1]:
            kept.append(hit)
    return kept
