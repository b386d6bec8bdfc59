"""The reference client's checks on a recorded stream, in its order.

The client takes every frame through its compatibility boundary, enforcement, chunk
expansion and only then the lifecycle verifier (reference 3.1), so a check that skipped
the first three would both miss rejections (an invalid field, a chunk error) and report
false ones (a TEXT_MESSAGE_CHUNK pair is valid). ``StreamCheck`` runs all four.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from recorder.reference.chunks import CHUNK_TYPES, ChunkError, ChunkLanes
from recorder.reference.compat import TRANSLATED_TYPES, Compatibility
from recorder.reference.enforce import InvalidEvent, enforce
from recorder.reference.verify import Verifier, Violation

NOT_JSON = "Invalid event: the frame is not a JSON object."
NO_TYPE = "Invalid event: the frame carries no event type."


class StreamCheck:
    """Feed frames in order; each answer is the first problem that frame causes, if any."""

    __slots__ = ("_compat", "_count", "_lanes", "_verifier", "violations")

    def __init__(self) -> None:
        self._compat = Compatibility()
        self._lanes = ChunkLanes()
        self._verifier = Verifier()
        self._count = 0
        self.violations: list[Violation] = []

    def feed(self, frame: bytes | Mapping[str, Any]) -> Violation | None:
        index = self._count
        self._count += 1
        if isinstance(frame, Mapping):
            event: Any = dict(frame)
        else:
            try:
                event = orjson.loads(frame)
            except orjson.JSONDecodeError:
                return self._violation(index, None, NOT_JSON)
        if not isinstance(event, dict):
            return self._violation(index, None, NOT_JSON)
        kind = event.get("type")
        if not isinstance(kind, str) or not kind:
            return self._violation(index, None, NO_TYPE)
        return self._check(index, kind, event)

    def _check(self, index: int, kind: str, event: dict[str, Any]) -> Violation | None:
        try:
            if kind in TRANSLATED_TYPES or "rawEvent" in event:
                event = self._compat.translate(event, lambda _id: False)
            if not enforce(event):
                return None  # the client drops unknown event types with a warning
            expanded = (
                self._lanes.expand(event) if self._lanes.lanes or kind in CHUNK_TYPES else [event]
            )
        except InvalidEvent as exc:
            return self._violation(index, kind, f"Invalid {kind} event: {exc}")
        except ChunkError as exc:
            return self._violation(index, kind, str(exc))
        for item in expanded:
            found = self._verifier.feed(item)
            if found is not None:
                return self._violation(index, kind, found.message)
        return None

    def _violation(self, index: int, kind: str | None, message: str) -> Violation:
        found = Violation(index, kind, message)
        self.violations.append(found)
        return found


def verify_frames(frames: Iterable[bytes | Mapping[str, Any]]) -> list[Violation]:
    check = StreamCheck()
    for frame in frames:
        check.feed(frame)
    return check.violations
