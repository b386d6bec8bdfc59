"""The verifier's checks of one event that need no state, and the texts it fails with.

Part of the port of ``verifyEvents`` (``recorder.reference.verify``): the subagent surface's
null rules, SUBAGENT_* outcomes, replayed history that cannot be seeded, whether a tagged
continuation agrees with its entity's owner, and how the reference names owners. The texts
are the reference's, word for word.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from recorder.reference import JSONObject
from recorder.reference.jsvalues import UNDEFINED, UNDEFINED_KEY, Key, js_string, js_typed, show

_PARENT: Final = "(the parent agent)"
_OPTIONAL: Final = "The field is optional — omit it entirely."
_NOT_ITERABLE: Final = "is not iterable (cannot read property Symbol(Symbol.iterator))"


ALREADY_OPEN: Final = {
    "TEXT_MESSAGE_START": "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '{id}' "
    "is already in progress. Complete it with 'TEXT_MESSAGE_END' first.",
    "TOOL_CALL_START": "Cannot send 'TOOL_CALL_START' event: A tool call with ID '{id}' "
    "is already in progress. Complete it with 'TOOL_CALL_END' first.",
    "REASONING_START": "Cannot send 'REASONING_START' event: A reasoning span with ID '{id}' "
    "is already in progress. Complete it with 'REASONING_END' first.",
    "REASONING_MESSAGE_START": "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message "
    "with ID '{id}' is already in progress. Complete it with 'REASONING_MESSAGE_END' first.",
}
NOT_OPEN: Final = {
    "TEXT_MESSAGE_CONTENT": "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message "
    "found with ID '{id}'. Start a text message with 'TEXT_MESSAGE_START' first.",
    "TEXT_MESSAGE_END": "Cannot send 'TEXT_MESSAGE_END' event: No active text message found "
    "with ID '{id}'. A 'TEXT_MESSAGE_START' event must be sent first.",
    "TOOL_CALL_ARGS": "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID "
    "'{id}'. Start a tool call with 'TOOL_CALL_START' first.",
    "TOOL_CALL_END": "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID "
    "'{id}'. A 'TOOL_CALL_START' event must be sent first.",
    "REASONING_MESSAGE_CONTENT": "Cannot send 'REASONING_MESSAGE_CONTENT' event: No active "
    "reasoning message found with ID '{id}'. Start a reasoning message with "
    "'REASONING_MESSAGE_START' first.",
    "REASONING_MESSAGE_END": "Cannot send 'REASONING_MESSAGE_END' event: No active reasoning "
    "message found with ID '{id}'. Start a reasoning message with 'REASONING_MESSAGE_START' "
    "first.",
    "REASONING_END": "Cannot send 'REASONING_END' event: No active reasoning span found with ID "
    "'{id}'. A 'REASONING_START' event must be sent first.",
}
# Optional SUBAGENT_* fields that must be absent rather than null, in the reference's order.
_SUBAGENT_OPTIONALS: Final = {
    "SUBAGENT_STARTED": (
        "description",
        "parentSubagentRunId",
        "parentToolCallId",
        "parentMessageId",
    ),
    "SUBAGENT_FINISHED": ("outcome",),
    "SUBAGENT_ERROR": ("code",),
}


def null_error(event: JSONObject, kind: str) -> str | None:
    """The subagent surface tolerates no nulls: absent is the only spelling of "none"."""
    if event.get("subagentRunId", UNDEFINED) is None:
        return f"Cannot send '{kind}' with 'subagentRunId: null'. {_OPTIONAL}"
    if kind in _SUBAGENT_OPTIONALS:
        return _subagent_fields_error(event, kind)
    if kind == "RUN_FINISHED":
        return _interrupt_tag_error(event.get("outcome"))
    return None


def _subagent_fields_error(event: JSONObject, kind: str) -> str | None:
    for field in _SUBAGENT_OPTIONALS[kind]:
        if _is_null(event, field):
            return f"Cannot send '{kind}' with '{field}: null'. {_OPTIONAL}"
    # The reference reads `outcome` on all three SUBAGENT_* types, not only on FINISHED.
    outcome = event.get("outcome", UNDEFINED)
    if outcome is UNDEFINED or outcome is None:
        return None
    outcome_type = outcome.get("type", UNDEFINED) if isinstance(outcome, Mapping) else UNDEFINED
    if outcome_type != "success" and outcome_type != "suspended":
        return (
            f"Cannot send '{kind}' with outcome type '{js_string(outcome_type)}'. "
            'The outcome is either { type: "success" } or { type: "suspended" }.'
        )
    interrupt_ids = outcome.get("interruptIds")
    if _is_null(outcome, "interruptIds"):
        return f"Cannot send '{kind}' with 'outcome.interruptIds: null'. {_OPTIONAL}"
    if isinstance(interrupt_ids, list) and not all(isinstance(i, str) for i in interrupt_ids):
        return (
            f"Cannot send '{kind}' with a non-string entry in 'outcome.interruptIds'. "
            "Interrupt ids are strings."
        )
    return None


def _interrupt_tag_error(outcome: Any) -> str | None:
    if not isinstance(outcome, Mapping) or outcome.get("type") != "interrupt":
        return None
    interrupts = outcome.get("interrupts")
    for interrupt in interrupts if isinstance(interrupts, list) else ():
        if _is_null(interrupt, "subagentRunId"):
            shown = js_string(interrupt.get("id", UNDEFINED))
            return (
                f"Cannot send 'RUN_FINISHED' with an interrupt (id '{shown}') carrying "
                f"'subagentRunId: null'. {_OPTIONAL}"
            )
    return None


def _is_null(value: Any, field: str) -> bool:
    """`value.field === null`: present and null, which the reference tells from absent."""
    return isinstance(value, Mapping) and field in value and value[field] is None


def seed_error(messages: Any) -> str | None:
    """Why replayed history cannot be seeded, checked in the order the reference seeds it."""
    if not isinstance(messages, list):
        return None
    for message in messages:
        if not isinstance(message, Mapping) or not isinstance(message.get("id"), str):
            continue
        if _is_null(message, "subagentRunId"):
            return (
                f"Cannot send a message (id '{message['id']}') with 'subagentRunId: null'. "
                f"{_OPTIONAL}"
            )
        # The reference iterates toolCalls with for-of: a non-iterable throws a V8 TypeError,
        # which errors the stream with the engine's own text.
        calls = message.get("toolCalls")
        if calls is not None and not isinstance(calls, list | str):
            return f"{js_typed(calls)} {_NOT_ITERABLE}"
    return None


def tag_error(kind: str, tag: Key, owner: Key | None, label: str, entity: Key) -> str | None:
    """A tagged continuation must agree with the entity's owner; untagged always agrees."""
    if owner is None or tag in (UNDEFINED_KEY, owner):
        return None
    return (
        f"Cannot send '{kind}': subagentRunId '{show(tag)}' does not match the {label} "
        f"'{show(entity)}' opener's subagent '{show_owner(owner)}'."
    )


# -- how the reference names owners ------------------------------------------------------------


def show_owner(owner: Key) -> str:
    return _PARENT if owner == UNDEFINED_KEY else show(owner)


def describe(owner: Key) -> str:
    return "the parent agent" if owner == UNDEFINED_KEY else f"subagent '{show(owner)}'"
