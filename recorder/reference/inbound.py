"""The stages a frame passes before the reducer or the verifier sees it, for one stream.

The order and the names are stated in ``recorder.reference``. ``Inbound`` parses each frame,
takes it through the compatibility boundary, enforcement and chunk expansion, and hands every
event that comes out to its consumer's handler for that event's type (the reducer, in
``Projector``; the verifier, in ``StreamCheck``). Where the reference fails the stream (a
frame that is no event, an invalid field, a chunk error), the consumer's ``_reject`` is
told why, and the frame goes no further.

This runs once per streamed token, so each stage is skipped when it has nothing to do, and
a consumer's handlers sit in a table rather than behind a method of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from recorder.reference import Frame, JSONObject
from recorder.reference.chunks import CHUNK_TYPES, ChunkError, ChunkLanes
from recorder.reference.compat import TRANSLATED_TYPES, Compatibility
from recorder.reference.enforce import InvalidEvent, enforce
from recorder.wire.jsontext import parse_fallback

NOT_JSON: Final = "Invalid event: the frame is not a JSON object."
NO_TYPE: Final = "Invalid event: the frame carries no event type."

Handler = Callable[[Any, int, JSONObject], object]
"""What a consumer does with one event: (consumer, index of its frame, event)."""


class Inbound:
    """Parse, compat, enforce and chunks for one stream; the consumer supplies the rest."""

    __slots__ = ("_compat", "_frame", "_frames", "_handlers", "_lanes", "_slow")

    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self._handlers = handlers  # by event type, for every type enforcement knows
        self._compat = Compatibility()
        self._lanes = ChunkLanes()
        self._frames = 0  # frames fed so far: the next frame's index
        self._frame: Frame = b""  # the frame being fed
        # Some frame needed more than orjson to read, so values may hold Infinity; a frame
        # given already parsed is taken to hold none.
        self._slow = False

    def feed(self, frame: Frame) -> None:
        """Take one frame (its JSON text, or the object parsed from it) through the stages."""
        index = self._frames
        self._frames += 1
        self._frame = frame
        event: Any
        if type(frame) is dict:  # (the proxy's case: a frame it parsed already)
            event = frame
        elif type(frame) is not bytes and isinstance(frame, Mapping):
            event = dict(frame)
        else:
            try:
                event = orjson.loads(frame)
            except orjson.JSONDecodeError:
                try:
                    event = parse_fallback(frame)
                except ValueError:
                    self._reject(index, None, NOT_JSON)
                    return
                self._slow = True
        self._apply(index, event)

    def feed_decoded(self, frame: bytes, event: dict[str, Any]) -> None:
        """Take ``frame`` whose JSON ``event`` the caller decoded already with ``orjson``
        (so it holds no Infinity) through the stages, as ``feed(frame)`` would."""
        index = self._frames
        self._frames += 1
        self._frame = frame
        self._apply(index, event)

    def _apply(self, index: int, event: Any) -> None:
        kind = event.get("type") if type(event) is dict else None
        if type(kind) is not str or not kind:
            self._reject(index, None, NO_TYPE if type(event) is dict else NOT_JSON)
            return
        try:
            if kind in TRANSLATED_TYPES or "rawEvent" in event:
                event = self._compat.translate(event, self._taken)
            if not enforce(event):
                self._unrecognised(index, kind)
            elif self._lanes.lanes or kind in CHUNK_TYPES:
                for expanded in self._lanes.expand(event):
                    self._handlers[expanded["type"]](self, index, expanded)
            else:
                self._handlers[event["type"]](self, index, event)
        except InvalidEvent as exc:
            self._reject(index, kind, f"Invalid {kind} event: {exc}")
        except ChunkError as exc:
            self._reject(index, kind, str(exc))
        except Exception as exc:
            # Events are validated, so only shapes in what the consumer started from get
            # here (the reference throws on those too). Report, never raise.
            self._reject(index, kind, f"Cannot apply {kind}: {type(exc).__name__}: {exc}")

    def _reject(self, index: int, kind: str | None, message: str) -> None:
        """The reference fails the stream at frame ``index``, with ``message``."""
        raise NotImplementedError

    def _unrecognised(self, index: int, kind: str) -> None:
        """The reference drops an event of a type it does not know, with a warning."""

    def _taken(self, candidate: str) -> bool:
        """Whether an id the compatibility boundary would mint is already in use."""
        return False
