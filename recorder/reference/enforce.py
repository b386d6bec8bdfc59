"""Enforcement: the stage after the compatibility boundary (the order: ``recorder.reference``).

Enforcement (``src/enforce/*.ts`` with the generated 1.0 schemas) drops events of unknown
type (``enforce`` answers False for them) and validates the structured fields of the rest,
stripping unknown keys and unknown union members (a message with an unknown role, a content
part of an unknown type, a patch operation with an unknown ``op``), which changes what the
reducer stores. Where the reference's schema would reject an event (and fail the stream),
``enforce`` raises ``InvalidEvent`` with the reason. It is pure and keeps no state.

The schema is written as tables of conformers: ``_EVENT_FIELDS`` declares each event type's
fields as (conformer, required) pairs, and ``_Spec`` arranges them for a cheap check of the
flat events that stream most.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from recorder.reference import JSONObject

Conform = Callable[[Any], Any]


class InvalidEvent(Exception):
    """The reference's enforcement stage would reject this event (and fail the stream)."""


MEDIA_PART_TYPES: Final = frozenset(("image", "audio", "video", "document"))
"""The content part types that carry a ``source``; a legacy ``binary`` part becomes one."""
RUN_SCOPED_TYPES: Final = ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT")
"""Event types that belong to the whole run: they carry no ``subagentRunId``."""

DROP: Final = object()
"""An unrecognised union member: removed from its array, or its optional key omitted."""
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
        kept: JSONObject = {}
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
            **dict.fromkeys(MEDIA_PART_TYPES, _MEDIA_PART),
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
    kind: _Spec(
        {**_BASE, **({} if kind in RUN_SCOPED_TYPES else {"subagentRunId": _OPT_STR}), **fields}
    )
    for kind, fields in _EVENT_FIELDS.items()
}
KNOWN_TYPES: Final = frozenset(_EVENTS)


def enforce(event: JSONObject) -> bool:
    """Validate a known event in place (nested values conformed, unknown keys stripped);
    False if its type is unknown.

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


def _enforce_fields(event: JSONObject, spec: _Spec) -> None:
    conformed: JSONObject | None = None
    unknown: list[str] | None = None
    for name, value in event.items():
        conform = spec.fields.get(name)
        if conform is None:
            if name != "type":  # what the schema does not describe is stripped
                unknown = unknown or []
                unknown.append(name)
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
    for name in unknown or ():
        del event[name]
