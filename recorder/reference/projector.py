"""The pure fold: recorded frames -> messages, state and pending interrupts.

It runs the reference client's pipeline (``@ag-ui/client`` 1.0 ``runAgent``) minus
verification: compatibility boundary (``recorder.reference.compat``), enforcement
(``recorder.reference.enforce``), chunk expansion (``recorder.reference.chunks``), then the
default reducer (``defaultApplyEvents``), whose rules it reproduces quirks included:

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
from recorder.reference.chunks import CHUNK_TYPES, ChunkError, ChunkLanes
from recorder.reference.compat import TRANSLATED_TYPES, Compatibility
from recorder.reference.enforce import InvalidEvent, enforce
from recorder.reference.patch import UNDEFINED, PatchError, apply_patch, deep_clone

Message = dict[str, Any]
Frame = bytes | str | Mapping[str, Any]
_CHECKPOINT_VERSION: Final = 1
_NOT_AN_EVENT: Final = {
    False: "Invalid event: the frame is not a JSON object.",
    True: "Invalid event: the frame carries no event type.",
}


@dataclass(frozen=True, slots=True)
class Problem:
    index: int
    type: str | None
    message: str


@dataclass(frozen=True, slots=True)
class Projection:
    messages: list[dict[str, Any]]
    state: Any
    pending_interrupts: list[dict[str, Any]]
    problems: tuple[Problem, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "state": self.state,
            "pendingInterrupts": self.pending_interrupts,
            "problems": [
                {"index": p.index, "type": p.type, "message": p.message} for p in self.problems
            ],
        }


class Projector:
    """Folds one stream of frames; ``feed`` as they come, ``result`` at any point.

    The starting point (``messages``, ``state``; None means ``{}``) is copied; it must be
    JSON-serializable.
    """

    def __init__(
        self,
        messages: Sequence[Mapping[str, Any]] | None = None,
        state: Any = None,
        *,
        copy: bool = True,
    ) -> None:
        """Start from ``messages`` and ``state``: copied, or (``copy=False``) taken over by a
        caller that just decoded them and keeps no reference (it saves a pass over what can
        be a long conversation)."""
        if copy:
            self._messages: list[Message] = orjson.loads(
                orjson.dumps([dict(m) for m in messages or ()])
            )
            self._state: Any = {} if state is None else orjson.loads(orjson.dumps(state))
        else:
            self._messages = [m if type(m) is dict else dict(m) for m in messages or ()]
            self._state = {} if state is None else state
        # The reference's reducer can hold an undefined state (a root move from a missing
        # path) while the agent keeps showing the last defined one, which is `_state`.
        self._state_undefined = False
        self._interrupts: list[dict[str, Any]] = []
        self._problems: list[Problem] = []
        self._frames = 0
        self._compat = Compatibility()
        self._lanes = ChunkLanes()
        self._index: dict[str, Message] = {}  # id -> FIRST message with it
        self._tools: dict[str, tuple[Message, dict[str, Any]]] = {}  # id -> first holder, call
        self._aliased = False  # the same message object sits at two positions
        self._reindex()

    # -- the public surface -------------------------------------------------------------------

    def feed(self, frame: Frame) -> None:
        """Fold one frame: its raw JSON, or the parsed object (which the fold may keep)."""
        index = self._frames
        self._frames += 1
        if type(frame) is not bytes and isinstance(frame, Mapping):
            event: Any = frame if type(frame) is dict else dict(frame)
        else:
            try:
                event = orjson.loads(frame)
            except (orjson.JSONDecodeError, TypeError) as exc:
                self._problem(index, None, f"Invalid event: the frame is not JSON ({exc}).")
                return
        kind = event.get("type") if type(event) is dict else None
        if type(kind) is not str or not kind:
            self._problem(index, None, _NOT_AN_EVENT[type(event) is dict])
            return
        # This runs per streamed token: the steps are inlined, and each is skipped when it
        # has nothing to do. (`recorder.reference.check` runs the same steps; sharing one function
        # with it made bench/bench_fold.py about 6% slower.)
        try:
            if kind in TRANSLATED_TYPES or "rawEvent" in event:
                event = self._compat.translate(event, self._index.__contains__)
            if not enforce(event):
                self._problem(index, kind, _unrecognised(kind))
            elif self._lanes.lanes or kind in CHUNK_TYPES:
                for expanded in self._lanes.expand(event):
                    _REDUCERS[expanded["type"]](self, index, expanded)
            else:
                _REDUCERS[event["type"]](self, index, event)
        except InvalidEvent as exc:
            self._problem(index, kind, f"Invalid {kind} event: {exc}")
        except ChunkError as exc:
            self._problem(index, kind, str(exc))
        except Exception as exc:
            # Events are validated, so only shapes in the messages the fold started with get
            # here (the reference throws on those too). Report, never raise.
            self._problem(index, kind, f"Cannot apply {kind}: {type(exc).__name__}: {exc}")

    def feed_many(self, frames: Iterable[Frame]) -> None:
        for frame in frames:
            self.feed(frame)

    def result(self) -> Projection:
        copied = orjson.loads(orjson.dumps([self._messages, self._state, self._interrupts]))
        return Projection(copied[0], copied[1], copied[2], tuple(self._problems))

    def take(self) -> Projection:
        """The result without a copy, for a caller done with this projector: feeding it
        afterwards would change the returned projection."""
        return Projection(self._messages, self._state, self._interrupts, tuple(self._problems))

    def checkpoint(self) -> bytes:
        return orjson.dumps(
            {
                "version": _CHECKPOINT_VERSION,
                "frames": self._frames,
                "messages": self._messages,
                "aliases": self._alias_groups(),
                "state": self._state,
                "stateUndefined": self._state_undefined,
                "pendingInterrupts": self._interrupts,
                "lanes": self._lanes.to_json(),
                "compat": self._compat.to_json(),
                "problems": [[p.index, p.type, p.message] for p in self._problems],
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
    def _from_checkpoint(cls, saved: dict[str, Any]) -> Projector:
        made = cls()
        made._messages = saved["messages"]
        for group in saved["aliases"]:  # the same object, as the reference had it
            for position in group[1:]:
                made._messages[position] = made._messages[group[0]]
        made._state, made._state_undefined = saved["state"], bool(saved["stateUndefined"])
        made._interrupts = saved["pendingInterrupts"]
        made._lanes = ChunkLanes.from_json(saved["lanes"])
        made._compat = Compatibility.from_json(saved["compat"])
        made._problems = [Problem(int(i), t, str(m)) for i, t, m in saved["problems"]]
        made._frames = int(saved["frames"])
        made._reindex()
        return made

    # -- the message list and its indexes ------------------------------------------------------

    def _problem(self, index: int, kind: str | None, message: str) -> None:
        self._problems.append(Problem(index, kind, message))

    def _reindex(self) -> None:
        self._messages = [m for m in self._messages if type(m) is dict]
        self._index.clear()
        self._tools.clear()
        for message in self._messages:
            self._index_message(message)
        self._aliased = len({id(m) for m in self._messages}) != len(self._messages)

    def _index_message(self, message: Message) -> None:
        """Index a message that comes after every message already indexed."""
        mid = message.get("id")
        if type(mid) is str and mid not in self._index:
            self._index[mid] = message
        calls = message.get("toolCalls")
        if type(calls) is list:
            for call in calls:
                cid = call.get("id") if type(call) is dict else None
                if type(cid) is str and cid not in self._tools:
                    self._tools[cid] = (message, call)

    def _push(self, message: Message) -> None:
        self._messages.append(message)
        self._index_message(message)

    def _insert(self, position: int, message: Message) -> None:
        self._messages.insert(position, message)
        mid = message["id"]
        if mid in self._index:  # a duplicate id: which one comes first now?
            self._index[mid] = next(m for m in self._messages if m.get("id") == mid)
        else:
            self._index[mid] = message

    def _position(self, message: Message) -> int:
        """Where a message (found through the indexes) sits: its first position."""
        messages = self._messages
        if self._aliased:
            return next(i for i, m in enumerate(messages) if m is message)
        # Without aliasing identity is unique, and the message sought is usually recent.
        return next(i for i in range(len(messages) - 1, -1, -1) if messages[i] is message)

    def _replace(self, position: int, old: Message, new: Message) -> None:
        self._messages[position] = new
        if type(new.get("id")) is str:
            self._index[new["id"]] = new  # `position` was the first with that id
        if "toolCalls" in old or "toolCalls" in new or self._aliased:
            self._reindex()

    def _alias_groups(self) -> list[list[int]]:
        if not self._aliased:
            return []
        groups: dict[int, list[int]] = {}
        for position, message in enumerate(self._messages):
            groups.setdefault(id(message), []).append(position)
        return [group for group in groups.values() if len(group) > 1]

    def _assistant_owner(self, call_id: str) -> Message | None:
        found = self._tools.get(call_id)
        if found is None or found[0].get("role") == "assistant":
            return None if found is None else found[0]
        return next(
            (m for m in self._messages if m.get("role") == "assistant" and _holds(m, call_id)), None
        )


# -- the reducer, one function per event type -------------------------------------------------

_NO_CLAIM: Final = object()


def _merge_metadata(target: dict[str, Any], event: dict[str, Any]) -> None:
    incoming = event.get("metadata")
    if incoming is not None:
        existing = target.get("metadata")
        target["metadata"] = {**existing, **incoming} if type(existing) is dict else dict(incoming)


def _holds(message: Message, call_id: str) -> bool:
    calls = message.get("toolCalls")
    return type(calls) is list and any(type(c) is dict and c.get("id") == call_id for c in calls)


def _unrecognised(kind: str) -> str:
    return (
        f"Dropping unrecognised event '{kind}': no middleware translated it and the protocol "
        "does not describe it."
    )


def _on_activity(kind: str, mid: str, family: str) -> str:
    return (
        f"{kind}: Message '{mid}' is an activity message — message ids must be unique across "
        f"activity and {family} messages"
    )


def _family(kind: str) -> str:
    return "reasoning" if kind.startswith("REASONING") else "text"


def _start_message(self: Projector, index: int, event: dict[str, Any]) -> None:
    """TEXT_MESSAGE_START, REASONING_MESSAGE_START: create unless the id exists."""
    mid = event["messageId"]
    target = self._index.get(mid)
    if target is not None and target.get("role") == "activity":
        kind = event["type"]
        self._problem(index, kind, _on_activity(kind, mid, _family(kind)))
        return
    if target is None:
        if event["type"] == "TEXT_MESSAGE_START":
            target = {"id": mid, "role": event.get("role", "assistant"), "content": ""}
            if "name" in event:
                target["name"] = event["name"]
        else:
            target = {"id": mid, "role": "reasoning", "content": ""}
        if event.get("subagentRunId") is not None:
            target["subagentRunId"] = event["subagentRunId"]
        self._push(target)
    if "metadata" in event:
        _merge_metadata(target, event)


def _continue_message(self: Projector, index: int, event: dict[str, Any]) -> None:
    """*_MESSAGE_CONTENT and *_MESSAGE_END, text and reasoning alike."""
    target = self._index.get(event["messageId"])
    if target is None or target.get("role") == "activity":
        kind, mid = event["type"], event["messageId"]
        missing = f"{kind}: No message found with ID '{mid}'"
        self._problem(
            index, kind, missing if target is None else _on_activity(kind, mid, _family(kind))
        )
        return
    if "delta" in event:
        text = target.get("content")
        if type(text) is str:
            # Drop the dict's reference first, so `+=` can grow the string in place instead
            # of copying it: long messages are built from thousands of deltas.
            target["content"] = None
            text += event["delta"]
        else:
            text = event["delta"]  # array content is overwritten by a string (a quirk)
        target["content"] = text
    if "metadata" in event:
        _merge_metadata(target, event)


def _tool_call_start(self: Projector, index: int, event: dict[str, Any]) -> None:
    call_id, name = event["toolCallId"], event["toolCallName"]
    found = self._tools.get(call_id)
    if found is not None:  # idempotent: a replayed start renames at most, args are kept
        function = found[1]["function"]
        if function["name"] != name:
            self._problem(
                index,
                event["type"],
                f"TOOL_CALL_START: tool call '{call_id}' already exists with name "
                f"'{function['name']}' — updating it to '{name}'",
            )
            function["name"] = name
        _merge_metadata(found[1], event)
        return
    target = _assistant_for(self, index, event)
    calls = target.get("toolCalls")
    if calls is None:
        target["toolCalls"] = calls = []
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    calls.append(call)
    _merge_metadata(call, event)
    self._tools[call_id] = (target, call)


def _assistant_for(self: Projector, index: int, event: dict[str, Any]) -> Message:
    """The assistant message a new tool call attaches to, created if need be."""
    call_id, parent = event["toolCallId"], event.get("parentMessageId")
    mid = call_id
    if parent:  # an empty parent id counts as none
        existing = self._index.get(parent)
        if existing is None:
            mid = parent  # a later TEXT_MESSAGE_START under this id fills in the text
        elif existing.get("role") == "assistant":
            return existing
        else:
            self._problem(
                index,
                event["type"],
                f"TOOL_CALL_START: parentMessageId '{parent}' matches a '{existing.get('role')}' "
                "message, not assistant — falling back to toolCallId",
            )
    created: Message = {"id": mid, "role": "assistant", "toolCalls": []}
    # The reference judges "created" by id, so a new message under a taken id stays untagged.
    if mid not in self._index and event.get("subagentRunId") is not None:
        created["subagentRunId"] = event["subagentRunId"]
    self._push(created)
    return created


def _tool_call_continue(self: Projector, index: int, event: dict[str, Any]) -> None:
    found = self._tools.get(event["toolCallId"])
    if found is None:
        self._problem(
            index,
            event["type"],
            f"{event['type']}: No message found containing tool call with ID "
            f"'{event['toolCallId']}'",
        )
        return
    if "delta" in event:
        function = found[1]["function"]
        arguments = function.get("arguments")
        if type(arguments) is str:
            function["arguments"] = None  # as for message content: let `+=` grow it in place
            arguments += event["delta"]
        else:
            arguments = event["delta"]
        function["arguments"] = arguments
    if "metadata" in event:
        _merge_metadata(found[1], event)


def _tool_call_result(self: Projector, index: int, event: dict[str, Any]) -> None:
    call_id = event["toolCallId"]
    message: Message = {
        "id": event["messageId"],
        "toolCallId": call_id,
        "role": event.get("role") or "tool",
        "content": event["content"],
    }
    if event.get("subagentRunId") is not None:
        message["subagentRunId"] = event["subagentRunId"]
    _merge_metadata(message, event)
    owner = self._assistant_owner(call_id)
    if owner is None:
        self._push(message)
        return
    messages = self._messages
    position = self._position(owner) + 1
    while position < len(messages) and messages[position].get("role") == "tool":
        position += 1
    self._insert(position, message)


def _state_snapshot(self: Projector, index: int, event: dict[str, Any]) -> None:
    self._state, self._state_undefined = event["snapshot"], False


def _state_delta(self: Projector, index: int, event: dict[str, Any]) -> None:
    document = UNDEFINED if self._state_undefined else self._state
    try:
        patched = apply_patch(document, event["delta"])
    except PatchError as exc:
        self._problem(index, event["type"], f"Failed to apply state patch: {exc}")
        return
    if patched is UNDEFINED:
        self._state_undefined = True  # the agent keeps showing the state it had
    else:
        self._state, self._state_undefined = patched, False


def _messages_snapshot(self: Projector, index: int, event: dict[str, Any]) -> None:
    snapshot: list[Message] = event["messages"]
    by_id = {m["id"]: m for m in snapshot}
    keep = _preserved_locally(event, snapshot)
    merged = []
    for message in self._messages:
        mid = message.get("id")
        replacement = by_id.get(mid) if type(mid) is str else None
        if replacement is not None:
            merged.append(replacement)
        elif keep(message):
            merged.append(message)
    present = {m.get("id") for m in merged if type(m.get("id")) is str}
    merged.extend(m for m in snapshot if m["id"] not in present)
    self._messages = merged
    self._reindex()


def _preserved_locally(event: dict[str, Any], snapshot: list[Message]) -> Any:
    """Which local messages a snapshot that leaves them out keeps (activity/reasoning rules)."""
    owned = _authoritative_activity_types(event)
    has_activity = any(m["role"] == "activity" for m in snapshot)
    has_reasoning = any(m["role"] == "reasoning" for m in snapshot)

    def keep(message: Message) -> bool:
        role = message.get("role")
        if role == "activity":
            if type(owned) is list:
                return message.get("activityType") not in owned
            return owned is _NO_CLAIM and not has_activity
        return role == "reasoning" and not has_reasoning

    return keep


def _authoritative_activity_types(event: dict[str, Any]) -> Any:
    """``metadata["@ag-ui/client"].authoritativeActivityTypes``: None = all, [] if invalid."""
    metadata = event.get("metadata")
    if type(metadata) is not dict or "@ag-ui/client" not in metadata:
        return _NO_CLAIM
    claim = metadata["@ag-ui/client"]
    if type(claim) is not dict:
        return []
    if "authoritativeActivityTypes" not in claim:
        return _NO_CLAIM
    types = claim["authoritativeActivityTypes"]
    if types is None:
        return None
    return types if type(types) is list and all(type(t) is str for t in types) else []


def _activity_snapshot(self: Projector, index: int, event: dict[str, Any]) -> None:
    mid, tag = event["messageId"], event.get("subagentRunId")
    fresh: Message = {
        "id": mid,
        "role": "activity",
        "activityType": event["activityType"],
        "content": event["content"],
    }
    if tag is not None:
        fresh["subagentRunId"] = tag
    existing = self._index.get(mid)
    target: Message | None = fresh
    if existing is None:
        self._push(fresh)
    elif not event.get("replace", True):
        target = existing if existing.get("role") == "activity" else None
    elif existing.get("role") == "activity":
        # A replace keeps the metadata built up so far but re-mints the attribution.
        target = {**existing, "activityType": event["activityType"], "content": event["content"]}
        if tag is None:
            target.pop("subagentRunId", None)
        else:
            target["subagentRunId"] = tag
        self._replace(self._position(existing), existing, target)
    else:
        self._replace(self._position(existing), existing, fresh)
    if target is not None:
        _merge_metadata(target, event)


def _activity_delta(self: Projector, index: int, event: dict[str, Any]) -> None:
    mid = event["messageId"]
    existing = self._index.get(mid)
    if existing is None or existing.get("role") != "activity":
        problem = "No message found with ID" if existing is None else "Not an activity message:"
        self._problem(index, event["type"], f"ACTIVITY_DELTA: {problem} '{mid}'")
        return
    _merge_metadata(existing, event)  # kept even when the patch fails
    content = existing.get("content")
    # The reference patches a copy and builds a new message; an alias keeps the old content.
    base = {} if content is None else deep_clone(content) if self._aliased else content
    try:
        patched = apply_patch(base, event["patch"])
    except PatchError as exc:
        self._problem(index, event["type"], f"Failed to apply activity patch for '{mid}': {exc}")
        return
    updated = {**existing, "content": patched, "activityType": event["activityType"]}
    if patched is UNDEFINED:
        del updated["content"]
    self._replace(self._position(existing), existing, updated)


def _encrypted_value(self: Projector, index: int, event: dict[str, Any]) -> None:
    entity, value = event["entityId"], event["encryptedValue"]
    if event["subtype"] == "tool-call":
        owner = self._assistant_owner(entity)
        if owner is not None:
            next(c for c in owner["toolCalls"] if type(c) is dict and c.get("id") == entity)[
                "encryptedValue"
            ] = value
            return
    else:
        message = self._index.get(entity)
        if message is not None and message.get("role") != "activity":
            message["encryptedValue"] = value
            return
    what = "tool call" if event["subtype"] == "tool-call" else "message"
    self._problem(
        index, event["type"], f"REASONING_ENCRYPTED_VALUE: No {what} found with ID '{entity}'"
    )


def _run_started(self: Projector, index: int, event: dict[str, Any]) -> None:
    given = event.get("input")
    if given is not None:
        for message in given["messages"]:
            if message["id"] not in self._index:
                self._push(message)


def _run_finished(self: Projector, index: int, event: dict[str, Any]) -> None:
    outcome = event.get("outcome") or {}
    self._interrupts = list(outcome["interrupts"]) if outcome.get("type") == "interrupt" else []


def _unchanged(self: Projector, index: int, event: dict[str, Any]) -> None:
    """Lifecycle, step, raw, custom, span and subagent events leave messages and state be."""


_REDUCERS: Final = {
    "TEXT_MESSAGE_START": _start_message,
    "TEXT_MESSAGE_CONTENT": _continue_message,
    "TEXT_MESSAGE_END": _continue_message,
    "TOOL_CALL_START": _tool_call_start,
    "TOOL_CALL_ARGS": _tool_call_continue,
    "TOOL_CALL_END": _tool_call_continue,
    "TOOL_CALL_RESULT": _tool_call_result,
    "STATE_SNAPSHOT": _state_snapshot,
    "STATE_DELTA": _state_delta,
    "MESSAGES_SNAPSHOT": _messages_snapshot,
    "ACTIVITY_SNAPSHOT": _activity_snapshot,
    "ACTIVITY_DELTA": _activity_delta,
    "REASONING_MESSAGE_START": _start_message,
    "REASONING_MESSAGE_CONTENT": _continue_message,
    "REASONING_MESSAGE_END": _continue_message,
    "REASONING_ENCRYPTED_VALUE": _encrypted_value,
    "RUN_STARTED": _run_started,
    "RUN_FINISHED": _run_finished,
    **dict.fromkeys(
        (
            "RUN_ERROR",
            "STEP_STARTED",
            "STEP_FINISHED",
            "RAW",
            "CUSTOM",
            "REASONING_START",
            "REASONING_END",
            "SUBAGENT_STARTED",
            "SUBAGENT_FINISHED",
            "SUBAGENT_ERROR",
        ),
        _unchanged,
    ),
}


def fold(
    frames: Iterable[Frame],
    *,
    messages: Sequence[Mapping[str, Any]] | None = None,
    state: Any = None,
) -> Projection:
    """Fold ``frames`` from the given starting point (state None means ``{}``)."""
    projector = Projector(messages, state)
    projector.feed_many(frames)
    return projector.result()
