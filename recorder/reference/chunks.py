"""Chunk expansion: the stage after enforcement (the order: ``recorder.reference``).

Chunk expansion (``src/chunks/transform.ts``) turns TEXT_MESSAGE_CHUNK, TOOL_CALL_CHUNK and
REASONING_MESSAGE_CHUNK into start/content/end events, one pending stream per lane (per
``subagentRunId``); other events close the pending streams they interrupt. ``ChunkLanes`` is
pure and stateful per stream, and its state round-trips through JSON for checkpoints. Where
the reference would fail the stream it raises ``ChunkError`` with the reference's message,
word for word.
"""

from __future__ import annotations

from typing import Any, Final

from recorder.reference import JSONObject
from recorder.reference.enforce import RUN_SCOPED_TYPES


class ChunkError(Exception):
    """The reference's chunk expansion would fail the stream with this message."""


CHUNK_TYPES: Final = frozenset(("TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"))
_ABSENT: Final = object()
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
_CLOSES_ALL: Final = frozenset(RUN_SCOPED_TYPES)
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
        self.lanes: dict[str | None, JSONObject] = {}

    def expand(self, event: JSONObject) -> list[JSONObject]:
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

    def _close(self, owner: str | None) -> list[JSONObject]:
        pending = self.lanes.pop(owner, None)
        if pending is None:
            return []
        _, _, end_type, id_field = _STREAMS[pending["kind"]]
        end = {"type": end_type, id_field: pending["id"]}
        if "subagentRunId" in pending:
            end["subagentRunId"] = pending["subagentRunId"]
        return [end]

    def _expand_chunk(self, chunk: JSONObject, kind: str, entity: str) -> list[JSONObject]:
        start_type, content_type, _, id_field = _STREAMS[kind]
        entity_id, tag = chunk.get(id_field), chunk.get("subagentRunId")
        lane = self._resolve(kind, entity_id, tag, chunk["type"], entity)
        pending = self.lanes.get(lane)
        out: list[JSONObject] = []
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

    def _open(self, chunk: JSONObject, kind: str, lane: str | None) -> JSONObject:
        chunk_type = chunk["type"]
        for required in _REQUIRED_TO_OPEN[kind]:
            if chunk.get(required) is None:
                raise ChunkError(f"First {chunk_type} must have a {required}")
        pending: JSONObject = {"kind": kind, "id": chunk[_STREAMS[kind][3]]}
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


def _with_metadata(event: JSONObject, chunk: JSONObject) -> JSONObject:
    # Every event made from a chunk carries its metadata, except the END that closes the
    # previous stream (it would leak onto the message being closed).
    if "metadata" in chunk:
        event["metadata"] = chunk["metadata"]
    return event
