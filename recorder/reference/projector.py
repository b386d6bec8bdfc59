"""The pure fold: recorded frames -> messages, state and pending interrupts.

It runs the reference client's pipeline (``@ag-ui/client`` 1.0 ``runAgent``, order in
``recorder.reference``) minus verification, ending in the default reducer
(``recorder.reference.reducer``), whose rules it reproduces quirks included:

- RUN_STARTED appends ``input.messages`` whose id is new and ignores ``input.state``;
- text and reasoning content is appended, never reset, and a string delta overwrites array
  content; messages are found by the FIRST message with the id (duplicates exist);
- TOOL_CALL_START is idempotent and attaches to an assistant message by the parent rules;
- TOOL_CALL_RESULT is inserted after its owner, past the tool messages already there, and
  never de-duplicated;
- state patches apply whole or not at all, with fast-json-patch's outcomes;
- MESSAGES_SNAPSHOT edit-merges in local order, with activity/reasoning authority; two local
  messages sharing a snapshot id become the *same* object, as in the reference;
- metadata merges shallowly into the entity the event builds (the tool call, for TOOL_CALL_*).

Where the reference would fail the stream or warn, the fold records a ``Problem``, drops the
offending event and goes on: it never raises on what it is fed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from recorder.errors import InputError
from recorder.reference import Frame, JSONObject, JSONValue
from recorder.reference.chunks import ChunkLanes
from recorder.reference.compat import Compatibility
from recorder.reference.inbound import Inbound
from recorder.reference.messages import MessageList
from recorder.reference.reducer import REDUCERS
from recorder.reference.state import StateDocument

_CHECKPOINT_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class Problem:
    """Why the reference would warn about, or fail on, the frame at ``index``."""

    index: int
    type: str | None
    message: str


@dataclass(frozen=True, slots=True)
class Projection:
    messages: list[JSONObject]
    state: JSONValue
    pending_interrupts: list[JSONObject]
    problems: tuple[Problem, ...]

    def to_json(self) -> JSONObject:
        return {
            "messages": self.messages,
            "state": self.state,
            "pendingInterrupts": self.pending_interrupts,
            "problems": [
                {"index": p.index, "type": p.type, "message": p.message} for p in self.problems
            ],
        }


class Projector(Inbound):
    """Folds one stream of frames; ``feed`` as they come, ``result`` at any point.

    ``messages``, ``state`` and ``interrupts`` are the reducer's working state.
    """

    __slots__ = ("interrupts", "messages", "problems", "state")

    def __init__(
        self,
        messages: Sequence[Mapping[str, Any]] | None = None,
        state: JSONValue = None,
        *,
        copy: bool = True,
    ) -> None:
        """Start from ``messages`` and ``state`` (None means ``{}``), which must be JSON:
        copied, or (``copy=False``) taken over by a caller that just decoded them and keeps no
        reference (it saves a pass over what can be a long conversation)."""
        super().__init__(REDUCERS)
        if copy:
            messages = orjson.loads(orjson.dumps([dict(m) for m in messages or ()]))
            state = None if state is None else orjson.loads(orjson.dumps(state))
        items = [m if type(m) is dict else dict(m) for m in messages or ()]
        self.messages = MessageList(items)
        self.state = StateDocument({} if state is None else state)
        self.interrupts: list[JSONObject] = []
        self.problems: list[Problem] = []

    def feed_many(self, frames: Iterable[Frame]) -> None:
        for frame in frames:
            self.feed(frame)

    def result(self) -> Projection:
        shown = [self.messages.items, self.state.value, self.interrupts]
        copied = orjson.loads(orjson.dumps(shown))
        return Projection(copied[0], copied[1], copied[2], tuple(self.problems))

    def take(self) -> Projection:
        """The result without a copy, for a caller done with this projector: feeding it
        afterwards would change the returned projection."""
        return Projection(
            self.messages.items, self.state.value, self.interrupts, tuple(self.problems)
        )

    def problem(self, index: int, kind: str | None, message: str) -> None:
        self.problems.append(Problem(index, kind, message))

    def _reject(self, index: int, kind: str | None, message: str) -> None:
        self.problem(index, kind, message)

    def _unrecognised(self, index: int, kind: str) -> None:
        self.problem(
            index,
            kind,
            f"Dropping unrecognised event '{kind}': no middleware translated it and the "
            "protocol does not describe it.",
        )

    def _taken(self, candidate: str) -> bool:
        return candidate in self.messages.by_id

    # -- checkpoints ----------------------------------------------------------------------------

    def checkpoint(self) -> bytes:
        return orjson.dumps(
            {
                "version": _CHECKPOINT_VERSION,
                "frames": self._frames,
                "messages": self.messages.items,
                "aliases": self.messages.alias_groups(),
                "state": self.state.value,
                "stateUndefined": self.state.undefined,
                "pendingInterrupts": self.interrupts,
                "lanes": self._lanes.to_json(),
                "compat": self._compat.to_json(),
                "problems": [[p.index, p.type, p.message] for p in self.problems],
            }
        )

    @classmethod
    def restore(cls, data: bytes) -> Projector:
        try:
            saved = orjson.loads(data)
            if saved["version"] != _CHECKPOINT_VERSION:
                raise ValueError(f"unknown checkpoint version {saved['version']!r}")
            return cls._from_checkpoint(saved)
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise InputError("not a projector checkpoint") from exc

    @classmethod
    def _from_checkpoint(cls, saved: JSONObject) -> Projector:
        made = cls(copy=False)
        items = saved["messages"]
        for group in saved["aliases"]:  # the same object, as the reference had it
            for position in group[1:]:
                items[position] = items[group[0]]
        made.messages = MessageList(items)
        made.state = StateDocument(saved["state"], undefined=bool(saved["stateUndefined"]))
        made.interrupts = saved["pendingInterrupts"]
        made._lanes = ChunkLanes.from_json(saved["lanes"])
        made._compat = Compatibility.from_json(saved["compat"])
        made.problems = [Problem(int(i), t, str(m)) for i, t, m in saved["problems"]]
        made._frames = int(saved["frames"])
        return made


def fold(
    frames: Iterable[Frame],
    *,
    messages: Sequence[Mapping[str, Any]] | None = None,
    state: JSONValue = None,
) -> Projection:
    """Fold ``frames`` from the given starting point (state None means ``{}``)."""
    projector = Projector(messages, state)
    projector.feed_many(frames)
    return projector.result()
