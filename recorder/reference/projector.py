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

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from recorder.errors import InputError
from recorder.reference import Frame, JSONObject, JSONValue, layout
from recorder.reference.chunks import ChunkLanes
from recorder.reference.compat import Compatibility
from recorder.reference.inbound import Inbound
from recorder.reference.jsvalues import doubles, may_hold_long_integers
from recorder.reference.messages import MessageList
from recorder.reference.reducer import REDUCERS
from recorder.reference.state import StateDocument
from recorder.wire.jsontext import dump, parse, printable

_CHECKPOINT_VERSION: Final = 2
_INPUT_PROBLEM: Final = (
    "Invalid input: {what}, which no client posts (the reference client's run fails on it); "
    "the fold goes on without it"
)


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
        messages: JSONValue = None,
        state: JSONValue = None,
        *,
        copy: bool = True,
    ) -> None:
        """Start from ``messages`` and ``state`` (None means ``{}``), as a client held them:
        copied, or (``copy=False``) taken over by a caller that just decoded them and keeps no
        reference (it saves a pass over what can be a long conversation).

        What no client could have held is reported (index -1) and the fold goes on: messages
        that are not a list count as none, an entry that is not an object stays in place."""
        super().__init__(REDUCERS)
        self.problems: list[Problem] = []
        items = self._starting_messages(messages)
        start = [items, {} if state is None else state]
        if copy:
            written = dump(start, exact=True)
            start = parse(written)
            settle = may_hold_long_integers(written) or b"1e400" in written
        else:
            # Writing is a C pass, walking a Python one: walk only what may need it.
            try:
                settle = may_hold_long_integers(orjson.dumps(start))
            except TypeError:  # Infinity, half a surrogate pair, an integer past 64 bits
                settle = True
        if settle:
            self._slow = _settled(start) or self._slow
        self.messages = MessageList(start[0])
        self.state = StateDocument(start[1])
        self.interrupts: list[JSONObject] = []

    def _starting_messages(self, messages: Any) -> list[Any]:
        if messages is None:
            return []
        if type(messages) not in (list, tuple):
            self.problem(-1, None, _INPUT_PROBLEM.format(what="messages is not an array"))
            return []
        items = list(messages)
        for position, message in enumerate(items):
            if type(message) is dict:
                continue
            if isinstance(message, Mapping):
                items[position] = dict(message)
            else:
                what = f"messages[{position}] is not an object"
                self.problem(-1, None, _INPUT_PROBLEM.format(what=what))
        return items

    def feed_many(self, frames: Iterable[Frame]) -> None:
        for frame in frames:
            self.feed(frame)

    def result(self) -> Projection:
        """A copy of what a frontend shows, as JSON (Infinity is null)."""
        shown = [self.messages.items, self.state.value, self.interrupts]
        copied = parse(dump(shown))
        return Projection(copied[0], copied[1], copied[2], tuple(self.problems))

    def take(self) -> Projection:
        """The result without a copy, for a caller done with this projector: feeding it
        afterwards would change the returned projection."""
        return Projection(
            self.messages.items, self.state.value, self.interrupts, tuple(self.problems)
        )

    def problem(self, index: int, kind: str | None, message: str) -> None:
        self.problems.append(Problem(index, kind, printable(message)))

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

    def doubled(self, value: JSONValue) -> JSONValue:
        """A value the reducer keeps, as a frontend holds it: integers past 2**53 become
        doubles (in place). Only a frame with 16 digits in a row can hold one."""
        frame = self._frame
        if type(frame) is bytes and not may_hold_long_integers(frame):
            return value
        return doubles(value)

    def plain(self) -> bool:
        """Whether what the reducer holds may be taken to hold no Infinity (see ``Inbound``)."""
        return not self._slow

    # -- checkpoints ----------------------------------------------------------------------------

    def checkpoint(
        self, *, indexed: bool = True, after: tuple[bytes, list[bytes]] | None = None
    ) -> bytes:
        """What ``restore`` picks up from; ``indexed=False`` for a point no fold goes on
        from (a closed run's last event): answers there need no index of the messages, and
        the checkpoint costs what changed since its run's parent's, nearly. ``after``: an
        earlier checkpoint of this projector and the frames fed since, which the messages
        they leave be are taken from as written there (``layout.lay_out``)."""
        rest: JSONObject = {
            "frames": self._frames,
            "state": self.state.value,
            "stateUndefined": self.state.undefined,
            "stateCyclic": self.state.cyclic,
            "slow": self._slow,
            "pendingInterrupts": self.interrupts,
            "lanes": self._lanes.to_json(),
            "compat": self._compat.to_json(),
            "problems": [[p.index, p.type, p.message] for p in self.problems],
        }
        if not self._slow and not self.messages.aliased:
            laid = layout.lay_out(
                self.messages.items,
                {"version": layout.VERSION, **rest},
                indexed=indexed,
                since=_since(after),
            )
            if laid is not None:
                return laid
        aliases = self.messages.alias_groups()
        whole = {"version": _CHECKPOINT_VERSION, "messages": self.messages.items, **rest}
        return dump({**whole, "aliases": aliases}, exact=True)

    @classmethod
    def restore(cls, data: bytes) -> Projector:
        saved = cls._saved(data)
        try:
            return cls._from_checkpoint(saved)
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise InputError("not a projector checkpoint") from exc

    @classmethod
    def resumed(cls, rest: bytes, messages: list[Any]) -> Projector:
        """A projector from a laid-out checkpoint's ``rest`` (``layout.Layout``) holding only
        ``messages``, the last of the checkpoint's (``layout.tail``): for events that touch
        no other (``layout.first_touched``)."""
        try:
            saved = _laid_rest(rest)
            return cls._from_checkpoint({**saved, "messages": messages, "aliases": []})
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise InputError("not a projector checkpoint") from exc

    @classmethod
    def projection_of(cls, data: bytes) -> Projection:
        """What ``restore(data).take()`` gives, without the index of messages that only
        feeding more events would need: the cheap way to answer at a checkpoint."""
        saved = cls._saved(data)
        try:
            items = saved["messages"]
            for group in saved["aliases"]:  # the same object, as the reference had it
                for position in group[1:]:
                    items[position] = items[group[0]]
            return Projection(items, *cls._shown(saved))
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise InputError("not a projector checkpoint") from exc

    @classmethod
    def shown_at(cls, rest: bytes) -> tuple[JSONValue, list[JSONObject], tuple[Problem, ...]]:
        """State, pending interrupts and problems from a laid-out checkpoint's ``rest``."""
        try:
            return cls._shown(_laid_rest(rest))
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise InputError("not a projector checkpoint") from exc

    @staticmethod
    def _shown(saved: JSONObject) -> tuple[JSONValue, list[JSONObject], tuple[Problem, ...]]:
        state = StateDocument(
            saved["state"],
            undefined=bool(saved["stateUndefined"]),
            cyclic=bool(saved["stateCyclic"]),
        )
        problems = tuple(Problem(int(i), t, str(m)) for i, t, m in saved["problems"])
        return state.value, saved["pendingInterrupts"], problems

    @staticmethod
    def _saved(data: bytes) -> JSONObject:
        """A checkpoint of either layout as one object (version 2's)."""
        try:
            laid = layout.split(data)
            if laid is not None:
                saved = _laid_rest(laid.rest)
                return {**saved, "messages": _parsed(laid.messages), "aliases": []}
            return _versioned(parse(data), _CHECKPOINT_VERSION)
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
        made.state = StateDocument(
            saved["state"],
            undefined=bool(saved["stateUndefined"]),
            cyclic=bool(saved["stateCyclic"]),
        )
        made._slow = bool(saved["slow"])
        made.interrupts = saved["pendingInterrupts"]
        made._lanes = ChunkLanes.from_json(saved["lanes"])
        made._compat = Compatibility.from_json(saved["compat"])
        made.problems = [Problem(int(i), t, str(m)) for i, t, m in saved["problems"]]
        made._frames = int(saved["frames"])
        return made


def fold(
    frames: Iterable[Frame], *, messages: JSONValue = None, state: JSONValue = None
) -> Projection:
    """Fold ``frames`` from the given starting point (state None means ``{}``)."""
    projector = Projector(messages, state)
    projector.feed_many(frames)
    return projector.result()


Parts = list[bytes | memoryview]  # a document in pieces, to be sent or joined in order


def parts_after(checkpoint: bytes, frames: list[bytes], head: JSONObject) -> Parts | None:
    """``{**head, **restore(checkpoint)`` fed ``frames`` ``.take().to_json()}`` written, in
    pieces (the messages kept as stored are a view of ``checkpoint``, never copied here):
    the messages folded from those the frames may touch only, the others as stored
    (``recorder.reference.layout``). None where the checkpoint is not laid out for it, the
    frames may touch any message, or what they make is not plain JSON: ``restore`` answers
    then."""
    try:
        laid = layout.split(checkpoint)
        if laid is None:
            return None
        if not frames:
            state, interrupts, problems = Projector.shown_at(laid.rest)
            return _parts(head, [laid.messages], state, interrupts, problems)
        found = layout.touched(laid, frames)  # (each frame decoded there, once)
        if found is None:
            return None
        cut, events = found
        items = layout.tail(laid, cut)
    except (LookupError, TypeError, ValueError, InputError):
        return None  # not a checkpoint it can read: ``restore`` says so
    projector = Projector.resumed(laid.rest, items)
    if projector._lanes.lanes:  # a chunk's message still open: the next event may end it
        return None
    for frame, event in zip(frames, events, strict=True):
        projector.feed_decoded(frame, event)
    if not projector.plain():
        return None
    at = projector.take()
    try:
        messages = layout.pieces(laid, cut, at.messages)
    except TypeError:  # a lone surrogate, say: ``dump`` writes it the slow way
        return None
    return _parts(head, messages, at.state, at.pending_interrupts, at.problems)


def _parts(
    head: JSONObject,
    messages: Parts,
    state: JSONValue,
    interrupts: list[JSONObject],
    problems: tuple[Problem, ...],
) -> Parts:
    """``{**head, "messages": ..., state, pendingInterrupts, problems}`` in pieces."""
    opened = dump(head)[:-1] + (b',"messages":' if head else b'"messages":')
    rest = Projection([], state, interrupts, problems).to_json()
    del rest["messages"]
    return [opened, *messages, b",", dump(rest)[1:]]


def _since(after: tuple[bytes, list[bytes]] | None) -> tuple[layout.Layout, int] | None:
    """An earlier checkpoint laid out, and where the first message the frames fed since
    may touch starts in it; None where it cannot say."""
    if after is None:
        return None
    try:
        laid = layout.split(after[0])
        cut = None if laid is None else layout.first_touched(laid, after[1])
    except ValueError:
        return None
    return None if laid is None or cut is None else (laid, cut)


def _laid_rest(rest: bytes) -> JSONObject:
    """A laid-out checkpoint's last line, read; ValueError for another version."""
    return _versioned(parse(rest), layout.VERSION)


def _versioned(saved: JSONValue, version: int) -> JSONObject:
    if type(saved) is not dict or saved.get("version") != version:
        found = saved.get("version") if type(saved) is dict else None
        raise ValueError(f"unknown checkpoint version {found!r}")
    return saved


def _parsed(data: memoryview) -> JSONValue:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return parse(data.tobytes())


def _settled(start: list[Any]) -> bool:
    """Integers past 2**53 in the starting point made doubles; whether it holds Infinity."""
    doubles(start)
    stack: list[Any] = [start]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            return True
    return False
