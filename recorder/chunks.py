"""The inbound half of the reference client's pipeline: everything before its reducer.

The 1.0 ``@ag-ui/client`` takes each event through, in order:

1. the **compatibility boundary** (``Compatibility``): THINKING_* events become REASONING_*
   events, legacy nulls become absent fields, legacy ``binary`` content parts become media
   parts;
2. **enforcement** (``enforce``): events of unknown type are dropped; structured fields are
   validated against the 1.0 schema, with unknown keys and unknown union members (a message
   with an unknown role, a content part of an unknown type, a patch operation with an unknown
   ``op``) stripped, which changes what the reducer stores;
3. **chunk expansion** (``ChunkLanes``): TEXT_MESSAGE_CHUNK, TOOL_CALL_CHUNK and
   REASONING_MESSAGE_CHUNK become start/content/end events, one pending stream per lane
   (per ``subagentRunId``).

All three are pure and stateful per stream, and their state round-trips through JSON for
checkpoints. Where the reference would fail the stream, these raise ``InvalidEvent`` or
``ChunkError`` with the reference's reason (chunk errors word for word).

The reference mints random UUIDs for THINKING events, which carry no ids. A fold must be
deterministic, so ours are ``thinking-1``, ``thinking-2``, ... (skipping ids already taken).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

Event = dict[str, Any]
Conform = Callable[[Any], Any]


class InvalidEvent(Exception):
    """The reference's enforcement stage would reject this event (and fail the stream)."""


class ChunkError(Exception):
    """The reference's chunk expansion would fail the stream with this message."""


# -- 1. the compatibility boundary ------------------------------------------------------------


class Compatibility:
    """Translates retired shapes into 1.0 ones, as the reference's CompatibilityBoundary."""

    __slots__ = ("message_id", "minted", "reasoning_id")

    def __init__(self) -> None:
        self.reasoning_id: str | None = None
        self.message_id: str | None = None
        self.minted = 0

    def translate(self, event: Event, taken: Callable[[str], bool]) -> Event:
        """The 1.0 shape of ``event`` (changed in place); ``taken`` says which ids exist."""
        if event.get("rawEvent", 0) is None:
            del event["rawEvent"]
        handler = _TRANSLATIONS.get(event["type"])
        if handler is not None:
            handler(self, event, taken)
        return event

    def to_json(self) -> list[Any]:
        return [self.reasoning_id, self.message_id, self.minted]

    @classmethod
    def from_json(cls, data: list[Any]) -> Compatibility:
        made = cls()
        made.reasoning_id, made.message_id, made.minted = data[0], data[1], int(data[2])
        return made

    def _mint(self, taken: Callable[[str], bool]) -> str:
        while True:
            self.minted += 1
            candidate = f"thinking-{self.minted}"
            if not taken(candidate):
                return candidate

    def _thinking_start(self, event: Event, taken: Callable[[str], bool]) -> None:
        self.reasoning_id = self._mint(taken)
        event.pop("title", None)  # REASONING_START has no title: the label is lost
        event.update(type="REASONING_START", messageId=self.reasoning_id)

    def _thinking_end(self, event: Event, taken: Callable[[str], bool]) -> None:
        # With no opener there is no id to continue, so one is minted (and verification
        # later rejects the event for naming something nothing opened).
        span = self.reasoning_id or self._mint(taken)
        self.reasoning_id = None
        event.update(type="REASONING_END", messageId=span)

    def _thinking_message_start(self, event: Event, taken: Callable[[str], bool]) -> None:
        self.message_id = self._mint(taken)
        event.update(type="REASONING_MESSAGE_START", messageId=self.message_id, role="reasoning")

    def _thinking_message_content(self, event: Event, taken: Callable[[str], bool]) -> None:
        message = self.message_id or self._mint(taken)
        event.update(type="REASONING_MESSAGE_CONTENT", messageId=message)

    def _thinking_message_end(self, event: Event, taken: Callable[[str], bool]) -> None:
        message = self.message_id or self._mint(taken)
        self.message_id = None
        event.update(type="REASONING_MESSAGE_END", messageId=message)

    def _tool_call(self, event: Event, taken: Callable[[str], bool]) -> None:
        _omit_null(event, "parentMessageId")

    def _run_finished(self, event: Event, taken: Callable[[str], bool]) -> None:
        _omit_null(event, "result")
        _omit_null(event, "outcome")

    def _subagent_finished(self, event: Event, taken: Callable[[str], bool]) -> None:
        _omit_null(event, "result")

    def _messages_snapshot(self, event: Event, taken: Callable[[str], bool]) -> None:
        if type(event.get("messages")) is list:
            event["messages"] = [_upgrade_message(m) for m in event["messages"]]

    def _run_started(self, event: Event, taken: Callable[[str], bool]) -> None:
        given = event.get("input")
        if type(given) is not dict:
            return
        given = dict(given)
        _omit_null(given, "forwardedProps")
        for field, nullable in (("tools", "parameters"), ("resume", "payload")):
            if type(given.get(field)) is list:
                given[field] = [_without_null(entry, nullable) for entry in given[field]]
        if type(given.get("messages")) is list:
            given["messages"] = [_upgrade_message(m) for m in given["messages"]]
        event["input"] = given


_TRANSLATIONS: Final[dict[str, Callable[[Compatibility, Event, Callable[[str], bool]], None]]] = {
    "THINKING_START": Compatibility._thinking_start,
    "THINKING_END": Compatibility._thinking_end,
    "THINKING_TEXT_MESSAGE_START": Compatibility._thinking_message_start,
    "THINKING_TEXT_MESSAGE_CONTENT": Compatibility._thinking_message_content,
    "THINKING_TEXT_MESSAGE_END": Compatibility._thinking_message_end,
    "TOOL_CALL_START": Compatibility._tool_call,
    "TOOL_CALL_CHUNK": Compatibility._tool_call,
    "RUN_FINISHED": Compatibility._run_finished,
    "SUBAGENT_FINISHED": Compatibility._subagent_finished,
    "MESSAGES_SNAPSHOT": Compatibility._messages_snapshot,
    "RUN_STARTED": Compatibility._run_started,
}
TRANSLATED_TYPES: Final = frozenset(_TRANSLATIONS)
"""Types the boundary may change; any other event needs it only for a ``rawEvent: null``."""
_MEDIA: Final = frozenset(("image", "audio", "video", "document"))


def _omit_null(record: dict[str, Any], field: str) -> None:
    if field in record and record[field] is None:
        del record[field]


def _without_null(value: Any, field: str) -> Any:
    if type(value) is dict and field in value and value[field] is None:
        return {k: v for k, v in value.items() if k != field}
    return value


def _upgrade_message(message: Any) -> Any:
    """Media-part metadata nulls dropped, legacy binary parts upgraded to media parts."""
    if type(message) is not dict or type(message.get("content")) is not list:
        return message
    content = [
        _without_null(p, "metadata") if type(p) is dict and p.get("type") in _MEDIA else p
        for p in message["content"]
    ]
    if any(type(p) is dict and p.get("type") == "binary" for p in content):
        content = [part for original in content for part in _upgrade_binary(original, content)]
    return {**message, "content": content}


def _upgrade_binary(part: Any, siblings: list[Any]) -> list[Any]:
    if not (type(part) is dict and part.get("type") == "binary"):
        return [part]
    mime = part.get("mimeType")
    if type(mime) is not str:
        return [part]
    source = (
        "data" if _js_truthy(part.get("data")) else "url" if _js_truthy(part.get("url")) else None
    )
    if source is None:  # only an id: no modern equivalent, left for enforcement to drop
        return [part]
    kind = next((k for k in ("image", "audio", "video") if mime.startswith(f"{k}/")), "document")
    converted: dict[str, Any] = {
        "type": kind,
        "source": {"type": source, "value": part[source], "mimeType": mime},
    }
    if _js_truthy(part.get("filename")):
        converted["metadata"] = {"filename": part["filename"]}
    # A legacy part mirrored by a modern one already present is a duplicate, not a repeat.
    if any(_mirrors(other, converted, part.get("filename")) for other in siblings):
        return []
    return [converted]


def _mirrors(part: Any, converted: dict[str, Any], filename: Any) -> bool:
    if type(part) is not dict or part.get("type") != converted["type"]:
        return False
    source, wanted = part.get("source"), converted["source"]
    if type(source) is not dict or not all(
        key in source and _js_same(source[key], wanted[key])
        for key in ("type", "value", "mimeType")
    ):
        return False
    metadata = part.get("metadata")
    return not _js_truthy(filename) or (
        type(metadata) is dict
        and "filename" in metadata
        and _js_same(metadata["filename"], filename)
    )


def _js_truthy(value: Any) -> bool:
    if value is None or value is False:
        return False
    return bool(value) if type(value) in (str, int, float) else True


def _js_same(a: Any, b: Any) -> bool:
    """JavaScript ``===`` on JSON values: containers are equal only to themselves."""
    numbers = (int, float)
    if type(a) in (dict, list) or type(b) in (dict, list):
        return a is b
    if type(a) in numbers and type(b) in numbers:
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


# -- 2. enforcement ---------------------------------------------------------------------------

DROP: Final = object()
"""An unrecognised union member: removed from its array, or its optional key omitted."""
_ABSENT: Final = object()
_SAFE: Final = 2**53 - 1
_POINTER: Final = re.compile(r"(/([^/~]|~[01])*)*")


def _string(value: Any) -> Any:
    if type(value) is not str:
        raise InvalidEvent("expected a string")
    return value


def _opaque(value: Any) -> Any:
    return value


def _not_null(value: Any) -> Any:
    if value is None:
        raise InvalidEvent("expected a value, not null")
    return value


def _boolean(value: Any) -> Any:
    if type(value) is not bool:
        raise InvalidEvent("expected a boolean")
    return value


def _record(value: Any) -> Any:
    if type(value) is not dict:
        raise InvalidEvent("expected an object")
    return value


def _integer(low: int) -> Conform:
    def conform(value: Any) -> Any:
        kind = type(value)
        if not (kind is int or (kind is float and value.is_integer())) or not low <= value <= _SAFE:
            raise InvalidEvent(f"expected an integer from {low} to {_SAFE}")
        return value

    return conform


def _choice(*allowed: str) -> Conform:
    def conform(value: Any) -> Any:
        if type(value) is not str or value not in allowed:
            raise InvalidEvent(f"expected one of {', '.join(map(repr, allowed))}")
        return value

    return conform


def _pointer(value: Any) -> Any:
    if type(value) is not str or _POINTER.fullmatch(value) is None:
        raise InvalidEvent("expected a JSON Pointer")
    return value


def _array(element: Conform, least: int = 0) -> Conform:
    def conform(value: Any) -> Any:
        if type(value) is not list:
            raise InvalidEvent("expected an array")
        kept = [c for c in (_at(i, element, v) for i, v in enumerate(value)) if c is not DROP]
        if len(kept) < least:
            raise InvalidEvent(f"expected at least {least} item(s)")
        return kept

    return conform


def _shape(fields: dict[str, tuple[Conform, bool]]) -> Conform:
    """An object: unknown keys stripped, declared ones conformed."""

    def conform(value: Any) -> Any:
        if type(value) is not dict:
            raise InvalidEvent("expected an object")
        kept: dict[str, Any] = {}
        failure: InvalidEvent | None = None
        for key, item in value.items():
            spec = fields.get(key)
            if spec is None:
                continue
            try:
                conformed = _at(key, spec[0], item)
            except InvalidEvent as exc:
                failure = failure or exc
                continue
            if conformed is DROP:
                # Stripping runs before validation: an unrecognisable required member makes
                # the whole object unrecognisable, whatever else is wrong with it.
                if spec[1]:
                    return DROP
                continue
            kept[key] = conformed
        if failure is not None:
            raise failure
        for key, (_, required) in fields.items():
            if required and key not in kept:
                raise InvalidEvent(f"'{key}' is required")
        return kept

    return conform


def _tagged(tag: str, options: dict[str, Conform]) -> Conform:
    """A discriminated union: a member with an unknown tag is DROP, not an error."""

    def conform(value: Any) -> Any:
        if type(value) is not dict:
            raise InvalidEvent("expected an object")
        option = options.get(value[tag]) if type(value.get(tag)) is str else None
        return DROP if option is None else option(value)

    return conform


def _text_or(parts: Conform) -> Conform:
    def conform(value: Any) -> Any:
        return value if type(value) is str else parts(value)

    return conform


def _at(where: str | int, conform: Conform, value: Any) -> Any:
    try:
        return conform(value)
    except InvalidEvent as exc:
        where = f"{where}:" if isinstance(where, int) else f"'{where}'"
        raise InvalidEvent(f"{where} {exc}") from None
    except RecursionError:
        raise InvalidEvent("nested too deeply") from None


def _fields(**fields: tuple[Conform, bool]) -> dict[str, tuple[Conform, bool]]:
    return fields


_REQ, _OPT = True, False
_STR, _OPT_STR = (_string, _REQ), (_string, _OPT)
_OPT_RECORD = (_record, _OPT)
_SOURCE = _tagged(
    "type",
    {
        "data": _shape(_fields(type=_STR, value=_STR, mimeType=_STR)),
        "url": _shape(_fields(type=_STR, value=_STR, mimeType=_OPT_STR)),
        "file": _shape(_fields(type=_STR, value=_STR, provider=_OPT_STR, mimeType=_OPT_STR)),
    },
)
_MEDIA_PART = _shape(
    _fields(type=_STR, id=_OPT_STR, source=(_SOURCE, _REQ), metadata=(_not_null, _OPT))
)
_PARTS = _array(
    _tagged(
        "type",
        {
            "text": _shape(_fields(type=_STR, id=_OPT_STR, text=_STR, metadata=(_not_null, _OPT))),
            **dict.fromkeys(_MEDIA, _MEDIA_PART),
        },
    )
)
_CONTENT = (_text_or(_PARTS), _REQ)
_TOOL_CALL = _shape(
    _fields(
        id=_STR,
        type=(_choice("function"), _REQ),
        function=(_shape(_fields(name=_STR, arguments=_STR)), _REQ),
        encryptedValue=_OPT_STR,
        metadata=_OPT_RECORD,
    )
)


def _message(**fields: tuple[Conform, bool]) -> Conform:
    base = _fields(subagentRunId=_OPT_STR, id=_STR, role=_STR, metadata=_OPT_RECORD)
    return _shape({**base, **fields})


_NAMED = _fields(name=_OPT_STR, encryptedValue=_OPT_STR)
_MESSAGE: Final = _tagged(
    "role",
    {
        "developer": _message(**_NAMED, content=_STR),
        "system": _message(**_NAMED, content=_STR),
        "assistant": _message(**_NAMED, content=_OPT_STR, toolCalls=(_array(_TOOL_CALL), _OPT)),
        "user": _message(**_NAMED, content=_CONTENT),
        "tool": _message(
            content=_CONTENT, toolCallId=_STR, error=_OPT_STR, encryptedValue=_OPT_STR
        ),
        "activity": _message(activityType=_STR, content=(_record, _REQ)),
        "reasoning": _message(content=_STR, encryptedValue=_OPT_STR),
    },
)
"""A message as the reference keeps it: unknown keys and parts stripped, unknown roles DROP."""
_MESSAGES = (_array(_MESSAGE), _REQ)
_OPT_ANY = (_not_null, _OPT)


# What each RFC 6902 operation needs besides its path. Operations are open objects (members
# they do not define are kept, as RFC 6902 requires), so a valid one is kept as it is.
_OPERATIONS: Final = {
    "add": ("value",),
    "remove": (),
    "replace": ("value",),
    "move": ("from",),
    "copy": ("from",),
    "test": ("value",),
}


def _operation(value: Any) -> Any:
    if type(value) is not dict:
        raise InvalidEvent("expected an object")
    name = value.get("op")
    needs = _OPERATIONS.get(name) if type(name) is str else None
    if needs is None:  # an unknown operation is an unrecognised union member
        return DROP
    for field in ("path", *needs):
        if field not in value:
            raise InvalidEvent(f"'{field}' is required")
        if field != "value":
            _at(field, _pointer, value[field])
    return value


_PATCH = _array(_operation)
_VALUE = (_opaque, _REQ)  # any JSON value, null included, but present
_INTERRUPT = _shape(
    _fields(
        subagentRunId=_OPT_STR,
        id=_STR,
        reason=_STR,
        message=_OPT_STR,
        toolCallId=_OPT_STR,
        responseSchema=_OPT_RECORD,
        expiresAt=_OPT_STR,
        metadata=_OPT_RECORD,
    )
)
_OUTCOME = _tagged(
    "type",
    {
        "success": _shape(_fields(type=_STR, pendingToolCallIds=(_array(_string), _OPT))),
        "interrupt": _shape(_fields(type=_STR, interrupts=(_array(_INTERRUPT, 1), _REQ))),
        "cancelled": _shape(_fields(type=_STR)),
    },
)
_COUNT = (_integer(0), _OPT)
_USAGE = _array(
    _shape(
        _fields(
            provider=_OPT_STR,
            model=_OPT_STR,
            inputTokens=_COUNT,
            outputTokens=_COUNT,
            totalTokens=_COUNT,
            reasoningTokens=_COUNT,
            cachedInputTokens=_COUNT,
            cacheWriteInputTokens=_COUNT,
        )
    )
)
_INPUT = _shape(
    _fields(
        threadId=_STR,
        runId=_STR,
        protocolVersion=_OPT_STR,
        parentRunId=_OPT_STR,
        state=(_opaque, _OPT),
        messages=_MESSAGES,
        tools=(
            _array(
                _shape(
                    _fields(name=_STR, description=_STR, parameters=_OPT_ANY, metadata=_OPT_RECORD)
                )
            ),
            _OPT,
        ),
        context=(_array(_shape(_fields(description=_STR, value=_STR))), _OPT),
        forwardedProps=_OPT_ANY,
        resume=(
            _array(
                _shape(
                    _fields(
                        interruptId=_STR,
                        status=(_choice("resolved", "cancelled"), _REQ),
                        payload=_OPT_ANY,
                        metadata=_OPT_RECORD,
                    )
                )
            ),
            _OPT,
        ),
    )
)
_SUBAGENT_OUTCOME = _tagged(
    "type",
    {
        "success": _shape(_fields(type=_STR)),
        "suspended": _shape(_fields(type=_STR, interruptIds=(_array(_string), _OPT))),
    },
)

_BASE: Final = _fields(timestamp=(_integer(-_SAFE), _OPT), rawEvent=_OPT_ANY, metadata=_OPT_RECORD)
_RUN_SCOPED: Final = ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT")
_EVENT_FIELDS: Final[dict[str, dict[str, tuple[Conform, bool]]]] = {
    "TEXT_MESSAGE_START": _fields(
        messageId=_STR,
        role=(_choice("developer", "system", "assistant", "user"), _OPT),
        name=_OPT_STR,
    ),
    "TEXT_MESSAGE_CONTENT": _fields(messageId=_STR, delta=_STR),
    "TEXT_MESSAGE_END": _fields(messageId=_STR),
    "TEXT_MESSAGE_CHUNK": _fields(
        messageId=_OPT_STR,
        role=(_choice("developer", "system", "assistant", "user"), _OPT),
        delta=_OPT_STR,
        name=_OPT_STR,
    ),
    "TOOL_CALL_START": _fields(toolCallId=_STR, toolCallName=_STR, parentMessageId=_OPT_STR),
    "TOOL_CALL_ARGS": _fields(toolCallId=_STR, delta=_STR),
    "TOOL_CALL_END": _fields(toolCallId=_STR),
    "TOOL_CALL_CHUNK": _fields(
        toolCallId=_OPT_STR, toolCallName=_OPT_STR, parentMessageId=_OPT_STR, delta=_OPT_STR
    ),
    "TOOL_CALL_RESULT": _fields(
        messageId=_STR, toolCallId=_STR, content=_CONTENT, role=(_choice("tool"), _OPT)
    ),
    "STATE_SNAPSHOT": _fields(snapshot=_VALUE),
    "STATE_DELTA": _fields(delta=(_PATCH, _REQ)),
    "MESSAGES_SNAPSHOT": _fields(messages=_MESSAGES),
    "ACTIVITY_SNAPSHOT": _fields(
        messageId=_STR,
        activityType=_STR,
        content=(_record, _REQ),
        replace=(_boolean, _OPT),
    ),
    "ACTIVITY_DELTA": _fields(messageId=_STR, activityType=_STR, patch=(_PATCH, _REQ)),
    "RAW": _fields(event=_VALUE, source=_OPT_STR),
    "CUSTOM": _fields(name=_STR, value=_VALUE),
    "RUN_STARTED": _fields(
        threadId=_STR,
        runId=_STR,
        protocolVersion=_OPT_STR,
        parentRunId=_OPT_STR,
        input=(_INPUT, _OPT),
    ),
    "RUN_FINISHED": _fields(
        threadId=_STR,
        runId=_STR,
        result=_OPT_ANY,
        outcome=(_OUTCOME, _OPT),
        usage=(_USAGE, _OPT),
    ),
    "RUN_ERROR": _fields(message=_STR, code=_OPT_STR, usage=(_USAGE, _OPT)),
    "STEP_STARTED": _fields(stepName=_STR),
    "STEP_FINISHED": _fields(stepName=_STR),
    "REASONING_START": _fields(messageId=_STR),
    "REASONING_MESSAGE_START": _fields(messageId=_STR, role=(_choice("reasoning"), _REQ)),
    "REASONING_MESSAGE_CONTENT": _fields(messageId=_STR, delta=_STR),
    "REASONING_MESSAGE_END": _fields(messageId=_STR),
    "REASONING_MESSAGE_CHUNK": _fields(messageId=_OPT_STR, delta=_OPT_STR),
    "REASONING_END": _fields(messageId=_STR),
    "REASONING_ENCRYPTED_VALUE": _fields(
        subtype=(_choice("tool-call", "message"), _REQ), entityId=_STR, encryptedValue=_STR
    ),
    "SUBAGENT_STARTED": _fields(
        subagentRunId=_STR,
        name=_STR,
        description=_OPT_STR,
        parentSubagentRunId=_OPT_STR,
        parentToolCallId=_OPT_STR,
        parentMessageId=_OPT_STR,
    ),
    "SUBAGENT_FINISHED": _fields(
        subagentRunId=_STR, result=_OPT_ANY, outcome=(_SUBAGENT_OUTCOME, _OPT)
    ),
    "SUBAGENT_ERROR": _fields(subagentRunId=_STR, message=_STR, code=_OPT_STR),
}
_TIMESTAMP: Final = _BASE["timestamp"][0]


class _Spec:
    """One event type's declared fields, arranged for a cheap check of what streams most."""

    __slots__ = ("fields", "flat", "required", "strings")

    def __init__(self, declared: dict[str, tuple[Conform, bool]]) -> None:
        self.fields = {name: conform for name, (conform, _) in declared.items()}
        self.required = frozenset(name for name, (_, needed) in declared.items() if needed)
        self.strings = tuple(name for name in self.required if self.fields[name] is _string)
        # Every required field a string: an event holding only those (and a timestamp) is
        # checked without walking its keys.
        self.flat = len(self.strings) == len(self.required)


_EVENTS: Final = {
    kind: _Spec({**_BASE, **({} if kind in _RUN_SCOPED else {"subagentRunId": _OPT_STR}), **fields})
    for kind, fields in _EVENT_FIELDS.items()
}
KNOWN_TYPES: Final = frozenset(_EVENTS)


def enforce(event: Event) -> bool:
    """Validate a known event in place (nested values conformed); False if its type is unknown.

    Raises InvalidEvent where the reference's schema would reject the event.
    """
    spec = _EVENTS.get(event["type"])
    if spec is None:
        return False
    if spec.flat:
        for name in spec.strings:
            if type(event.get(name)) is not str:
                break
        else:
            checked = len(spec.strings) + 1  # and "type"
            stamp = event.get("timestamp")
            if stamp is not None and type(stamp) is int and -_SAFE <= stamp <= _SAFE:
                checked += 1
            if len(event) == checked:
                return True
    _enforce_fields(event, spec)
    return True


def _enforce_fields(event: Event, spec: _Spec) -> None:
    conformed: dict[str, Any] | None = None
    for name, value in event.items():
        conform = spec.fields.get(name)
        if conform is None:
            continue
        if conform is _string:
            if type(value) is not str:
                raise InvalidEvent(f"'{name}' expected a string")
            continue
        result = _at(name, conform, value)
        if result is not value:
            conformed = conformed or {}
            conformed[name] = result
    if not event.keys() >= spec.required:
        missing = next(name for name in spec.fields if name in spec.required and name not in event)
        raise InvalidEvent(f"'{missing}' is required")
    for name, result in (conformed or {}).items():
        if result is DROP:  # an unrecognised outcome reads as no outcome at all
            del event[name]
        else:
            event[name] = result


# -- 3. chunk expansion -----------------------------------------------------------------------

CHUNK_TYPES: Final = frozenset(("TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"))
# What each non-chunk event does to the pending streams (1.0 lanes): an attributable event
# closes only its own lane, a run-level one closes them all, a subagent's terminal closes that
# subagent's lane; RAW, ACTIVITY_*, REASONING_ENCRYPTED_VALUE and SUBAGENT_STARTED pass by.
_CLOSES_OWN: Final = frozenset(
    (
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "CUSTOM",
        "STEP_STARTED",
        "STEP_FINISHED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    )
)
_CLOSES_ALL: Final = frozenset(_RUN_SCOPED)
_CLOSES_SUBAGENT: Final = frozenset(("SUBAGENT_FINISHED", "SUBAGENT_ERROR"))
# Per kind of pending stream: its START, CONTENT and END event types and its id field.
_STREAMS: Final = {
    "text": ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "messageId"),
    "tool": ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "toolCallId"),
    "reasoning": (
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "messageId",
    ),
}
_CHUNKS: Final = {
    "TEXT_MESSAGE_CHUNK": ("text", "text message"),
    "TOOL_CALL_CHUNK": ("tool", "tool call"),
    "REASONING_MESSAGE_CHUNK": ("reasoning", "reasoning message"),
}


class ChunkLanes:
    """Chunk expansion with one pending stream per lane (``None`` is the parent agent's)."""

    __slots__ = ("lanes",)

    def __init__(self) -> None:
        # owner -> {"kind", "id", and the opener's fields: role, name, toolCallName,
        # parentMessageId, subagentRunId}; insertion order is the order lanes close in.
        self.lanes: dict[str | None, dict[str, Any]] = {}

    def expand(self, event: Event) -> list[Event]:
        """The events ``event`` stands for; raises ChunkError where the reference fails."""
        kind = event["type"]
        if kind in _CHUNKS:
            return self._expand_chunk(event, *_CHUNKS[kind])
        if kind in _CLOSES_OWN:
            return [*self._close(event.get("subagentRunId")), event]
        if kind in _CLOSES_ALL:
            return [*(end for owner in list(self.lanes) for end in self._close(owner)), event]
        if kind in _CLOSES_SUBAGENT and event.get("subagentRunId") is not None:
            return [*self._close(event["subagentRunId"]), event]
        return [event]

    def to_json(self) -> list[Any]:
        return [[owner, pending] for owner, pending in self.lanes.items()]

    @classmethod
    def from_json(cls, data: list[Any]) -> ChunkLanes:
        made = cls()
        made.lanes = {owner: dict(pending) for owner, pending in data}
        return made

    def _close(self, owner: str | None) -> list[Event]:
        pending = self.lanes.pop(owner, None)
        if pending is None:
            return []
        _, _, end_type, id_field = _STREAMS[pending["kind"]]
        end = {"type": end_type, id_field: pending["id"]}
        if "subagentRunId" in pending:
            end["subagentRunId"] = pending["subagentRunId"]
        return [end]

    def _expand_chunk(self, chunk: Event, kind: str, entity: str) -> list[Event]:
        start_type, content_type, _, id_field = _STREAMS[kind]
        entity_id, tag = chunk.get(id_field), chunk.get("subagentRunId")
        lane = self._resolve(kind, entity_id, tag, chunk["type"], entity)
        pending = self.lanes.get(lane)
        out: list[Event] = []
        if pending is not None and pending["kind"] == kind and entity_id in (None, pending["id"]):
            for field in _AGREEING.get(kind, ()):
                _agree(entity, pending["id"], field, chunk.get(field), pending.get(field))
        else:
            out.extend(self._close(lane))
            pending = self._open(chunk, kind, lane)
            start = {"type": start_type, id_field: pending["id"]}
            start.update((k, v) for k, v in pending.items() if k not in ("kind", "id"))
            out.append(_with_metadata(start, chunk))
        delta, raw = chunk.get("delta"), chunk.get("rawEvent", _ABSENT)
        if delta is not None or raw is not _ABSENT or (not out and "metadata" in chunk):
            # A continuation carrying only metadata (say, usage on the last chunk) still
            # becomes an empty content event, so the metadata reaches the message.
            owner = tag if "subagentRunId" in chunk else pending.get("subagentRunId")
            content = {"type": content_type, id_field: pending["id"], "delta": delta or ""}
            if owner is not None:
                content["subagentRunId"] = owner
            if raw is not _ABSENT:
                content["rawEvent"] = raw
            out.append(_with_metadata(content, chunk))
        return out

    def _open(self, chunk: Event, kind: str, lane: str | None) -> dict[str, Any]:
        chunk_type = chunk["type"]
        for required in _REQUIRED_TO_OPEN[kind]:
            if chunk.get(required) is None:
                raise ChunkError(f"First {chunk_type} must have a {required}")
        pending: dict[str, Any] = {"kind": kind, "id": chunk[_STREAMS[kind][3]]}
        if kind == "text":  # absent means assistant, stated by the spec, applied here
            pending["role"] = chunk.get("role", "assistant")
        elif kind == "reasoning":
            pending["role"] = "reasoning"
        for field in _OPENER_FIELDS[kind]:
            if field in chunk:
                pending[field] = chunk[field]
        self.lanes[lane] = pending
        return pending

    def _resolve(
        self, kind: str, entity_id: str | None, tag: str | None, chunk_type: str, entity: str
    ) -> str | None:
        """The lane a chunk belongs to: its id's lane, else its tag, else the one open stream."""
        if entity_id is not None:
            for owner, pending in self.lanes.items():
                if pending["kind"] == kind and pending["id"] == entity_id:
                    if tag is not None and tag != owner:
                        raise ChunkError(
                            f"Cannot continue {entity} '{entity_id}': chunk subagentRunId "
                            f"'{tag}' does not match the open stream's subagent "
                            f"'{owner if owner is not None else '(the parent agent)'}'."
                        )
                    return owner
            return tag
        if tag is not None:
            return tag
        parent = self.lanes.get(None)
        if parent is not None and parent["kind"] == kind:
            return None
        candidates = [owner for owner, pending in self.lanes.items() if pending["kind"] == kind]
        if len(candidates) > 1:
            raise ChunkError(
                f"Ambiguous {chunk_type}: it carries neither a {_STREAMS[kind][3]} nor a "
                f"subagentRunId, but {len(candidates)} lanes have an open {entity}. "
                "Attribute the chunk to the subagent it belongs to."
            )
        return candidates[0] if candidates else None


_REQUIRED_TO_OPEN: Final = {
    "text": ("messageId",),
    "tool": ("toolCallId", "toolCallName"),
    "reasoning": ("messageId",),
}
_OPENER_FIELDS: Final = {
    "text": ("name", "subagentRunId"),
    "tool": ("toolCallName", "parentMessageId", "subagentRunId"),
    "reasoning": ("subagentRunId",),
}
# A continuation may repeat these opener fields, but only with the same value.
_AGREEING: Final = {"text": ("role", "name"), "tool": ("toolCallName", "parentMessageId")}


def _agree(entity: str, entity_id: str, field: str, incoming: Any, established: Any) -> None:
    if incoming is not None and incoming != established:
        was = "(absent)" if established is None else f"'{established}'"
        raise ChunkError(
            f"Cannot continue {entity} '{entity_id}': chunk {field} '{incoming}' does not match "
            f"the open stream's {field} {was}."
        )


def _with_metadata(event: Event, chunk: Event) -> Event:
    # Every event made from a chunk carries its metadata, except the END that closes the
    # previous stream (it would leak onto the message being closed).
    if "metadata" in chunk:
        event["metadata"] = chunk["metadata"]
    return event
