"""The reference's reducer (``defaultApplyEvents`` in ``@ag-ui/client`` 1.0), one function per
event type, applied by ``recorder.reference.projector.Projector`` to events that have been
through the earlier stages (``recorder.reference``). Each reducer takes the projector, the
index of the frame the event came from (for problems) and the event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from recorder.reference import JSONObject
from recorder.reference.jsclone import deep_clone
from recorder.reference.patch import UNDEFINED, PatchError, UnclonableResult, apply_patch
from recorder.reference.state import RunFails

if TYPE_CHECKING:
    from recorder.reference.projector import Projector

_NO_CLAIM: Final = object()


def _merge_metadata(fold: Projector, target: JSONObject, event: JSONObject) -> None:
    incoming = event.get("metadata")
    if incoming is not None:
        incoming = fold.doubled(incoming)
        existing = target.get("metadata")
        target["metadata"] = {**existing, **incoming} if type(existing) is dict else dict(incoming)


def _role(message: Any) -> Any:
    return message.get("role") if type(message) is dict else None


def _on_activity(kind: str, mid: str, family: str) -> str:
    return (
        f"{kind}: Message '{mid}' is an activity message — message ids must be unique across "
        f"activity and {family} messages"
    )


def _family(kind: str) -> str:
    return "reasoning" if kind.startswith("REASONING") else "text"


def _start_message(fold: Projector, index: int, event: JSONObject) -> None:
    """TEXT_MESSAGE_START, REASONING_MESSAGE_START: create unless the id exists."""
    mid = event["messageId"]
    target = fold.messages.by_id.get(mid)
    if target is not None and target.get("role") == "activity":
        kind = event["type"]
        fold.problem(index, kind, _on_activity(kind, mid, _family(kind)))
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
        fold.messages.push(target)
    if "metadata" in event:
        _merge_metadata(fold, target, event)


def _continue_message(fold: Projector, index: int, event: JSONObject) -> None:
    """*_MESSAGE_CONTENT and *_MESSAGE_END, text and reasoning alike."""
    target = fold.messages.by_id.get(event["messageId"])
    if target is None or target.get("role") == "activity":
        kind, mid = event["type"], event["messageId"]
        missing = f"{kind}: No message found with ID '{mid}'"
        fold.problem(
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
        _merge_metadata(fold, target, event)


def _tool_call_start(fold: Projector, index: int, event: JSONObject) -> None:
    call_id, name = event["toolCallId"], event["toolCallName"]
    found = fold.messages.calls.get(call_id)
    if found is not None:  # idempotent: a replayed start renames at most, args are kept
        function = found[1]["function"]
        if function["name"] != name:
            fold.problem(
                index,
                event["type"],
                f"TOOL_CALL_START: tool call '{call_id}' already exists with name "
                f"'{function['name']}' — updating it to '{name}'",
            )
            function["name"] = name
        _merge_metadata(fold, found[1], event)
        return
    target = _assistant_for(fold, index, event)
    calls = target.get("toolCalls")
    if calls is None:
        target["toolCalls"] = calls = []
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    calls.append(call)
    _merge_metadata(fold, call, event)
    fold.messages.calls[call_id] = (target, call)


def _assistant_for(fold: Projector, index: int, event: JSONObject) -> JSONObject:
    """The assistant message a new tool call attaches to, created if need be."""
    call_id, parent = event["toolCallId"], event.get("parentMessageId")
    mid = call_id
    if parent:  # an empty parent id counts as none
        existing = fold.messages.by_id.get(parent)
        if existing is None:
            mid = parent  # a later TEXT_MESSAGE_START under this id fills in the text
        elif existing.get("role") == "assistant":
            return existing
        else:
            fold.problem(
                index,
                event["type"],
                f"TOOL_CALL_START: parentMessageId '{parent}' matches a '{existing.get('role')}' "
                "message, not assistant — falling back to toolCallId",
            )
    created: JSONObject = {"id": mid, "role": "assistant", "toolCalls": []}
    # The reference judges "created" by id, so a new message under a taken id stays untagged.
    if mid not in fold.messages.by_id and event.get("subagentRunId") is not None:
        created["subagentRunId"] = event["subagentRunId"]
    fold.messages.push(created)
    return created


def _tool_call_continue(fold: Projector, index: int, event: JSONObject) -> None:
    found = fold.messages.calls.get(event["toolCallId"])
    if found is None:
        fold.problem(
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
        _merge_metadata(fold, found[1], event)


def _tool_call_result(fold: Projector, index: int, event: JSONObject) -> None:
    call_id = event["toolCallId"]
    message: JSONObject = {
        "id": event["messageId"],
        "toolCallId": call_id,
        "role": event.get("role") or "tool",
        "content": fold.doubled(event["content"]),
    }
    if event.get("subagentRunId") is not None:
        message["subagentRunId"] = event["subagentRunId"]
    _merge_metadata(fold, message, event)
    owner = fold.messages.assistant_holding(call_id)
    if owner is None:
        fold.messages.push(message)
        return
    items = fold.messages.items
    position = fold.messages.position(owner) + 1
    while position < len(items) and _role(items[position]) == "tool":
        position += 1
    fold.messages.insert(position, message)


def _state_snapshot(fold: Projector, index: int, event: JSONObject) -> None:
    fold.state.snapshot(fold.doubled(event["snapshot"]))


def _state_delta(fold: Projector, index: int, event: JSONObject) -> None:
    kind = event["type"]
    try:
        fold.state.delta(fold.doubled(event["delta"]), plain=fold.plain())
    except PatchError as exc:
        fold.problem(index, kind, f"Failed to apply state patch: {exc}")
    except RunFails as exc:
        fold.problem(index, kind, f"Cannot apply {kind}: the reference client's run fails: {exc}")
    except UnclonableResult:
        fold.problem(
            index,
            kind,
            f"{kind}: the patch leaves the state cyclic (the root moved into one of its "
            "children), which no frontend can write down; shown is the last state JSON holds",
        )


def _messages_snapshot(fold: Projector, index: int, event: JSONObject) -> None:
    snapshot: list[JSONObject] = fold.doubled(event["messages"])
    by_id = {m["id"]: m for m in snapshot}
    keep = _preserved_locally(event, snapshot)
    merged = []
    for message in fold.messages.items:
        if type(message) is not dict:
            continue  # a frontend's stray value: no id to match, no role to keep it
        mid = message.get("id")
        replacement = by_id.get(mid) if type(mid) is str else None
        if replacement is not None:
            merged.append(replacement)
        elif keep(message):
            merged.append(message)
    present = {m.get("id") for m in merged if type(m.get("id")) is str}
    merged.extend(m for m in snapshot if m["id"] not in present)
    fold.messages.items = merged
    fold.messages.reindex()


def _preserved_locally(event: JSONObject, snapshot: list[JSONObject]) -> Any:
    """Which local messages a snapshot that leaves them out keeps (activity/reasoning rules)."""
    owned = _authoritative_activity_types(event)
    has_activity = any(m["role"] == "activity" for m in snapshot)
    has_reasoning = any(m["role"] == "reasoning" for m in snapshot)

    def keep(message: JSONObject) -> bool:
        role = message.get("role")
        if role == "activity":
            if type(owned) is list:
                return message.get("activityType") not in owned
            return owned is _NO_CLAIM and not has_activity
        return role == "reasoning" and not has_reasoning

    return keep


def _authoritative_activity_types(event: JSONObject) -> Any:
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


def _activity_snapshot(fold: Projector, index: int, event: JSONObject) -> None:
    mid, tag = event["messageId"], event.get("subagentRunId")
    content = fold.doubled(event["content"])
    fresh: JSONObject = {
        "id": mid,
        "role": "activity",
        "activityType": event["activityType"],
        "content": content,
    }
    if tag is not None:
        fresh["subagentRunId"] = tag
    existing = fold.messages.by_id.get(mid)
    target: JSONObject | None = fresh
    if existing is None:
        fold.messages.push(fresh)
    elif not event.get("replace", True):
        target = existing if existing.get("role") == "activity" else None
    elif existing.get("role") == "activity":
        # A replace keeps the metadata built up so far but re-mints the attribution.
        target = {**existing, "activityType": event["activityType"], "content": content}
        if tag is None:
            target.pop("subagentRunId", None)
        else:
            target["subagentRunId"] = tag
        fold.messages.replace(fold.messages.position(existing), existing, target)
    else:
        fold.messages.replace(fold.messages.position(existing), existing, fresh)
    if target is not None:
        _merge_metadata(fold, target, event)


def _activity_delta(fold: Projector, index: int, event: JSONObject) -> None:
    mid = event["messageId"]
    existing = fold.messages.by_id.get(mid)
    if existing is None or existing.get("role") != "activity":
        problem = "No message found with ID" if existing is None else "Not an activity message:"
        fold.problem(index, event["type"], f"ACTIVITY_DELTA: {problem} '{mid}'")
        return
    _merge_metadata(fold, existing, event)  # kept even when the patch fails
    content = existing.get("content")
    # The reference patches a copy and builds a new message; an alias keeps the old content.
    base = {} if content is None else deep_clone(content) if fold.messages.aliased else content
    try:
        patched = apply_patch(base, fold.doubled(event["patch"]), plain=fold.plain())
    except (PatchError, UnclonableResult) as exc:
        if isinstance(exc, UnclonableResult) and exc.cycle:
            # The reference keeps the cyclic content, which nothing can write down.
            fold.problem(
                index,
                event["type"],
                f"ACTIVITY_DELTA: the patch leaves the content of '{mid}' cyclic; shown is "
                "the last content JSON holds",
            )
            return
        fold.problem(index, event["type"], f"Failed to apply activity patch for '{mid}': {exc}")
        return
    updated = {**existing, "content": patched, "activityType": event["activityType"]}
    if patched is UNDEFINED:
        del updated["content"]
    fold.messages.replace(fold.messages.position(existing), existing, updated)


def _encrypted_value(fold: Projector, index: int, event: JSONObject) -> None:
    entity, value = event["entityId"], event["encryptedValue"]
    if event["subtype"] == "tool-call":
        owner = fold.messages.assistant_holding(entity)
        if owner is not None:
            next(c for c in owner["toolCalls"] if type(c) is dict and c.get("id") == entity)[
                "encryptedValue"
            ] = value
            return
    else:
        message = fold.messages.by_id.get(entity)
        if message is not None and message.get("role") != "activity":
            message["encryptedValue"] = value
            return
    what = "tool call" if event["subtype"] == "tool-call" else "message"
    fold.problem(
        index, event["type"], f"REASONING_ENCRYPTED_VALUE: No {what} found with ID '{entity}'"
    )


def _run_started(fold: Projector, index: int, event: JSONObject) -> None:
    given = event.get("input")
    if given is not None:
        for message in fold.doubled(given["messages"]):
            if message["id"] not in fold.messages.by_id:
                fold.messages.push(message)


def _run_finished(fold: Projector, index: int, event: JSONObject) -> None:
    outcome = event.get("outcome") or {}
    interrupted = outcome.get("type") == "interrupt"
    fold.interrupts = list(fold.doubled(outcome["interrupts"])) if interrupted else []


def _unchanged(fold: Projector, index: int, event: JSONObject) -> None:
    """Lifecycle, step, raw, custom, span and subagent events leave messages and state be."""


REDUCERS: Final = {
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
