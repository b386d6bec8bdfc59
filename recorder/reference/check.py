"""The reference client's checks on a recorded stream, in its order.

The client takes every frame through its compatibility boundary, enforcement, chunk
expansion and only then the lifecycle verifier (``recorder.reference``), so a check that
skipped the first three would both miss rejections (an invalid field, a chunk error) and
report false ones (a TEXT_MESSAGE_CHUNK pair is valid). ``StreamCheck`` runs them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from recorder.reference import Frame, JSONObject
from recorder.reference.enforce import KNOWN_TYPES
from recorder.reference.inbound import Handler, Inbound
from recorder.reference.verify import Verifier, Violation


class StreamCheck(Inbound):
    """Feed frames in order; each answer is the first problem that frame causes, if any."""

    __slots__ = ("_failed", "_verifier", "violations")

    def __init__(self) -> None:
        super().__init__(_CHECKS)
        self._verifier = Verifier()
        self._failed = -1  # the last frame that failed: the reference stops reading it there
        self.violations: list[Violation] = []

    def feed(self, frame: Frame) -> Violation | None:  # type: ignore[override]
        found = len(self.violations)
        super().feed(frame)
        return self.violations[found] if len(self.violations) > found else None

    def _verify(self, index: int, event: JSONObject) -> None:
        if self._failed == index:
            return
        found = self._verifier.feed(event)
        if found is not None:
            self._reject(index, found.type, found.message)

    def _reject(self, index: int, kind: str | None, message: str) -> None:
        self._failed = index
        self.violations.append(Violation(index, kind, message))


_CHECKS: Final[dict[str, Handler]] = dict.fromkeys(KNOWN_TYPES, StreamCheck._verify)


def verify_frames(frames: Iterable[Frame]) -> list[Violation]:
    check = StreamCheck()
    for frame in frames:
        check.feed(frame)
    return check.violations
