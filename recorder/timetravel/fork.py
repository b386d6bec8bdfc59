"""Fork: a new run from any earlier point, through the parent's agent, recorded as a branch.

The new RunAgentInput is the projection at the point (messages, state), plus the messages
to append, with ``parentRunId`` set; tools, context and forwarded props come from the
parent's own input. The fork point is recorded with the run (``parent_seq``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from recorder.errors import InputError
from recorder.models import ForkOptions
from recorder.store import EventStore
from recorder.timetravel.history import History
from recorder.wire.events import decode
from recorder.wire.jsontext import dump

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class ForkRequest:
    at_seq: int | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: Any = _UNSET
    run_id: str | None = None
    thread_id: str | None = None
    resume: list[dict[str, Any]] | None = None
    forwarded_props: Any = _UNSET


def fork_request(options: ForkOptions) -> ForkRequest:
    """The request from the public options; ``state`` and ``forwardedProps`` only when given."""
    given = options.model_fields_set
    return ForkRequest(
        at_seq=options.at_seq,
        messages=[m if isinstance(m, dict) else {"content": m} for m in options.messages],
        run_id=options.run_id,
        thread_id=options.thread_id,
        resume=options.resume,
        **({"state": options.state} if "state" in given else {}),
        **({"forwarded_props": options.forwarded_props} if "forwarded_props" in given else {}),
    )


@dataclass(frozen=True, slots=True)
class ForkPlan:
    agent: str
    input: dict[str, Any]
    parent_run_id: str
    parent_seq: int | None

    @property
    def body(self) -> bytes:
        return dump(self.input)


async def plan_fork(store: EventStore, history: History, run_id: str, req: ForkRequest) -> ForkPlan:
    parent = await store.get_run(run_id)
    if parent.agent is None:
        raise InputError(
            f"run {run_id!r} has no agent recorded; it cannot be forked through the proxy"
        )
    if req.at_seq is not None and not -1 <= req.at_seq < parent.event_count:
        raise InputError(
            f"atSeq {req.at_seq} is outside run {run_id!r} (events 0..{parent.event_count - 1})"
        )
    at = await history.project(parent, req.at_seq)
    posted = (decode(parent.input) if parent.input is not None else None) or {}
    messages = [m for m in at.messages if m.get("role") != "activity"]
    messages.extend(_message(m) for m in req.messages)
    body: dict[str, Any] = {
        "threadId": req.thread_id or parent.thread_id,
        "runId": req.run_id or f"run-{uuid.uuid4().hex}",
        "parentRunId": parent.run_id,
        "state": at.state if req.state is _UNSET else req.state,
        "messages": messages,
        "tools": posted.get("tools") or [],
        "context": posted.get("context") or [],
        "forwardedProps": posted.get("forwardedProps", {})
        if req.forwarded_props is _UNSET
        else req.forwarded_props,
    }
    if "protocolVersion" in posted:
        body["protocolVersion"] = posted["protocolVersion"]
    if req.resume is not None:
        body["resume"] = req.resume
    return ForkPlan(parent.agent, body, parent.run_id, req.at_seq)


def _message(message: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(message, str):
        message = {"content": message}
    if not isinstance(message, dict):
        raise InputError("each message to append must be an object or a string")
    out = {"id": f"msg-{uuid.uuid4().hex[:16]}", "role": "user", **message}
    if out["role"] == "user" and not isinstance(out.get("content"), (str, list)):
        raise InputError("a user message needs content (a string or content parts)")
    return out
