"""The reference client's checks on a recorded stream, in its order.

The client takes every frame through its compatibility boundary, enforcement, chunk
expansion and only then the lifecycle verifier (``recorder.reference``), so a check that
skipped the first three would both miss rejections (an invalid field, a chunk error) and
report false ones (a TEXT_MESSAGE_CHUNK pair is valid). ``StreamCheck`` runs them all.

Its reducer can fail the run too, on state patches whose result it cannot clone (a function)
or a state it cannot copy (a cycle): ``StreamCheck`` keeps the state (``recorder.reference
.state``) to find those. The rest of the reducer only warns, and is the fold's business.

Only a patch that moves the root or reads a prototype member can lead there, so the state is
brought up to date when one comes: the patches before it wait (a snapshot drops them), up to
a bound, which keeps a stream of ordinary patches nearly free to check.

Most of a stream is text deltas, one after another, of one message. Such a delta (exactly
``type``, ``messageId`` and ``delta``, both strings) changes nothing the checks keep, and
its verdict depends only on its message id and on that state: once one was accepted, the
next with the same id is accepted too, unless another frame came between (any other frame
takes the whole way again, and so does the delta after it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Final

from recorder.reference import Frame, JSONObject, JSONValue
from recorder.reference.enforce import KNOWN_TYPES
from recorder.reference.inbound import Handler, Inbound
from recorder.reference.jsprototypes import CONSTRUCTORS, PROTOTYPES, JSFunction
from recorder.reference.patch import PatchError, UnclonableResult
from recorder.reference.state import RunFails, StateDocument
from recorder.reference.verify import Verifier, Violation
from recorder.wire.jsontext import printable


class StreamCheck(Inbound):
    """Feed frames in order; each answer is the first problem that frame causes, if any.

    ``state`` is where the client started (a run's posted input); None means ``{}``.
    """

    __slots__ = ("_failed", "_state", "_streaming", "_verifier", "violations")

    def __init__(self, state: JSONValue = None) -> None:
        super().__init__(_CHECKS)
        self._state = _DeferredState({} if state is None else state)
        self._verifier = Verifier()
        self._failed = -1  # the last frame that failed: the reference stops reading it there
        # The message of the last frame, when it was a plain text delta that was accepted
        # with no chunk stream open: the next such delta of it is accepted as it was.
        self._streaming: str | None = None
        self.violations: list[Violation] = []

    def feed(self, frame: Frame) -> Violation | None:  # type: ignore[override]
        # A plain text delta: parsed already, holding exactly ``type``, ``messageId`` and
        # ``delta``, both strings. (Inline: this runs once per streamed token.)
        if type(frame) is dict and len(frame) == 3 and frame.get("type") == _DELTA:
            message = frame.get("messageId")
            if type(message) is not str or type(frame.get("delta")) is not str:
                message = None
        else:
            message = None
        if message is not None and message == self._streaming:
            self._frame = frame
            self._frames += 1
            self._verifier.seen()
            return None
        self._streaming = None
        found = len(self.violations)
        super().feed(frame)
        if len(self.violations) > found:
            return self.violations[found]
        if message is not None and not self._lanes.lanes:
            self._streaming = message
        return None

    def _verify(self, index: int, event: JSONObject) -> bool:
        if self._failed == index:
            return False
        found = self._verifier.feed(event)
        if found is not None:
            self._reject(index, found.type, found.message)
        return found is None

    def _state_snapshot(self, index: int, event: JSONObject) -> None:
        if self._verify(index, event):
            self._state.snapshot(event["snapshot"])

    def _state_delta(self, index: int, event: JSONObject) -> None:
        if not self._verify(index, event):
            return
        try:
            self._state.delta(event["delta"], plain=not self._slow)
        except (PatchError, UnclonableResult):
            pass  # discarded with a warning, or kept cyclic: the run goes on
        except RunFails as exc:
            kind = event["type"]
            self._reject(
                index, kind, f"Cannot apply {kind}: the reference client's run fails: {exc}"
            )

    def _taken(self, candidate: str) -> bool:
        return self._verifier.knows(candidate)

    def _reject(self, index: int, kind: str | None, message: str) -> None:
        # Half a surrogate pair in an id would make the text unwritable: it is escaped.
        self._failed = index
        self.violations.append(Violation(index, kind, printable(message)))


class _DeferredState:
    """A StateDocument whose ordinary patches wait until one that could fail the run comes."""

    __slots__ = ("document", "waiting")

    def __init__(self, value: JSONValue) -> None:
        self.document = StateDocument(value)
        self.waiting: list[JSONValue] = []

    def snapshot(self, value: JSONValue) -> None:
        self.document.snapshot(value)
        self.waiting.clear()

    def delta(self, patch: JSONValue, *, plain: bool) -> None:
        """StateDocument.delta's outcome; RunFails only ever from the patch given."""
        if not self.document.cyclic and not _exotic(patch):
            self.waiting.append(patch)
            if len(self.waiting) < _WAITING:
                return
            patch = self.waiting.pop()
        for waiting in self.waiting:  # none of them can fail the run
            with contextlib.suppress(PatchError):
                self.document.delta(waiting, plain=plain)
        self.waiting.clear()
        self.document.delta(patch, plain=plain)


_WAITING: Final = 64
_DELTA: Final = "TEXT_MESSAGE_CONTENT"
_FUNCTION_NAMES: Final = frozenset(
    name
    for members in (*PROTOTYPES.values(), *(c.members for c in CONSTRUCTORS.values()))
    for name, value in members.items()
    if type(value) is JSFunction
)


def _exotic(patch: JSONValue) -> bool:
    """Whether ``patch`` moves the root or reads through a prototype member (a function)."""
    for op in patch if type(patch) is list else ():
        source = op.get("from") if type(op) is dict and op.get("op") in ("move", "copy") else None
        if type(source) is str and (
            source == "" or any(key in _FUNCTION_NAMES for key in source.split("/"))
        ):
            return True
    return False


_CHECKS: Final[dict[str, Handler]] = {
    **dict.fromkeys(KNOWN_TYPES, StreamCheck._verify),
    "STATE_SNAPSHOT": StreamCheck._state_snapshot,
    "STATE_DELTA": StreamCheck._state_delta,
}


def verify_frames(frames: Iterable[Frame], *, state: JSONValue = None) -> list[Violation]:
    check = StreamCheck(state)
    for frame in frames:
        check.feed(frame)
    return check.violations
