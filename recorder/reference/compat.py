"""The compatibility boundary: the first stage after parsing (the order: ``recorder.reference``).

The boundary (``src/middleware/compatibility-boundary.ts``) translates retired shapes into 1.0
ones: THINKING_* events become REASONING_* events, legacy nulls become absent fields, legacy
``binary`` content parts become media parts. ``Compatibility`` is pure and stateful per
stream (the open THINKING span and message), and its state round-trips through JSON for
checkpoints.

The reference mints random UUIDs for THINKING events, which carry no ids, so they never meet
an id the producer uses. A fold must be deterministic, so ours are UUIDs too, but the n-th
is always the same one (``minted_id``): derived from a hash, as far from what a producer
writes as a random one, and skipped should the stream have used it already.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from typing import Any, Final

from recorder.reference import JSONObject
from recorder.reference.enforce import MEDIA_PART_TYPES
from recorder.reference.jsvalues import js_strict_equal, js_truthy


class Compatibility:
    """Translates retired shapes into 1.0 ones, as the reference's CompatibilityBoundary."""

    __slots__ = ("message_id", "minted", "reasoning_id")

    def __init__(self) -> None:
        self.reasoning_id: str | None = None
        self.message_id: str | None = None
        self.minted = 0

    def translate(self, event: JSONObject, taken: Callable[[str], bool]) -> JSONObject:
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
            candidate = minted_id(self.minted)
            if not taken(candidate):
                return candidate

    def _thinking_start(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
        self.reasoning_id = self._mint(taken)
        event.pop("title", None)  # REASONING_START has no title: the label is lost
        event.update(type="REASONING_START", messageId=self.reasoning_id)

    def _thinking_end(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
        # With no opener there is no id to continue, so one is minted (and verification
        # later rejects the event for naming something nothing opened).
        span = self.reasoning_id or self._mint(taken)
        self.reasoning_id = None
        event.update(type="REASONING_END", messageId=span)

    def _thinking_message_start(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
        self.message_id = self._mint(taken)
        event.update(type="REASONING_MESSAGE_START", messageId=self.message_id, role="reasoning")

    def _thinking_message_content(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
        message = self.message_id or self._mint(taken)
        event.update(type="REASONING_MESSAGE_CONTENT", messageId=message)

    def _thinking_message_end(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
        message = self.message_id or self._mint(taken)
        self.message_id = None
        event.update(type="REASONING_MESSAGE_END", messageId=message)

    def _tool_call(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
        _omit_null(event, "parentMessageId")

    def _run_finished(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
        _omit_null(event, "result")
        _omit_null(event, "outcome")

    def _subagent_finished(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
        _omit_null(event, "result")

    def _messages_snapshot(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
        if type(event.get("messages")) is list:
            event["messages"] = [_upgrade_message(m) for m in event["messages"]]

    def _run_started(self, event: JSONObject, taken: Callable[[str], bool]) -> None:
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


def minted_id(number: int) -> str:
    """The ``number``-th id the boundary mints: a version 4 UUID made from a hash."""
    digest = hashlib.sha256(b"agui-recorder minted id %d" % number).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


_TRANSLATIONS: Final[
    dict[str, Callable[[Compatibility, JSONObject, Callable[[str], bool]], None]]
] = {
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
MINTING_TYPES: Final = frozenset(t for t in _TRANSLATIONS if t.startswith("THINKING_"))
"""Types whose translation may mint an id: one no message holds (the others' are local)."""


def _omit_null(record: JSONObject, field: str) -> None:
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
        _without_null(p, "metadata") if type(p) is dict and p.get("type") in MEDIA_PART_TYPES else p
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
        "data" if js_truthy(part.get("data")) else "url" if js_truthy(part.get("url")) else None
    )
    if source is None:  # only an id: no modern equivalent, left for enforcement to drop
        return [part]
    kind = next((k for k in ("image", "audio", "video") if mime.startswith(f"{k}/")), "document")
    converted: JSONObject = {
        "type": kind,
        "source": {"type": source, "value": part[source], "mimeType": mime},
    }
    if js_truthy(part.get("filename")):
        converted["metadata"] = {"filename": part["filename"]}
    # A legacy part mirrored by a modern one already present is a duplicate, not a repeat.
    if any(_mirrors(other, converted, part.get("filename")) for other in siblings):
        return []
    return [converted]


def _mirrors(part: Any, converted: JSONObject, filename: Any) -> bool:
    if type(part) is not dict or part.get("type") != converted["type"]:
        return False
    source, wanted = part.get("source"), converted["source"]
    if type(source) is not dict or not all(
        key in source and js_strict_equal(source[key], wanted[key])
        for key in ("type", "value", "mimeType")
    ):
        return False
    metadata = part.get("metadata")
    return not js_truthy(filename) or (
        type(metadata) is dict
        and "filename" in metadata
        and js_strict_equal(metadata["filename"], filename)
    )
