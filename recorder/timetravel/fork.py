"""Fork: a new run from any earlier point, through the parent's agent, recorded as a branch.

The new RunAgentInput is the history and state where the branch starts (a point, an edited
user message or a regenerated turn: ``recorder.timetravel.rewind``), with the state replaced
or patched and messages appended on request; tools, context and forwarded props come from
the input of the run it starts from. The fork point is recorded with the run
(``parent_run_id``, ``parent_seq``).

Where the branch goes is the fork's strategy:

- ``new-thread``: a new thread (``threadId`` given, or ``thread-`` and the new run id's hex),
  its input carrying the whole history at the point and no ``parentRunId`` (the agent sees
  a conversation it never had). The recorder records the parent all the same, and the new
  thread keeps the point as its source. Right for agents that keep their own memory per
  thread: posted on their old thread, they would load their latest checkpoint and carry the
  later turns into the branch.
- ``same-thread``: the parent's thread, with ``parentRunId``; right only for agents that
  rebuild everything from the posted messages.

A ``threadId`` names the strategy itself (the parent's thread, or a new one, which must not
exist yet); otherwise the request's ``strategy``, else the agent's configured one, else
``new-thread``.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from recorder.config import DEFAULT_FORK_STRATEGY, AgentConfig, ForkStrategy
from recorder.errors import BodyTooLarge, Conflict, InputError, RunNotFound, ThreadNotFound
from recorder.models import ForkOptions
from recorder.reference.patch import UNDEFINED, PatchError, UnclonableResult, apply_patch
from recorder.store import EventStore, Run
from recorder.store.model import RUNNING
from recorder.timetravel.history import History
from recorder.timetravel.rewind import Start, start_at, start_edited, start_regenerated
from recorder.wire.events import decode
from recorder.wire.ids import check_id
from recorder.wire.jsontext import MAX_DEPTH, dump, nested_too_deeply

NEW_THREAD: ForkStrategy = "new-thread"
SAME_THREAD: ForkStrategy = "same-thread"

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class ForkRequest:
    at_seq: int | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: Any = _UNSET
    state_patch: list[Any] | None = None
    edit: tuple[str, Any] | None = None  # (message id, new content)
    regenerate: str | None = None  # an assistant message's id
    run_id: str | None = None
    thread_id: str | None = None
    strategy: ForkStrategy | None = None
    resume: list[dict[str, Any]] | None = None
    forwarded_props: Any = _UNSET


def fork_request(options: ForkOptions) -> ForkRequest:
    """The request from the public options; ``state`` and ``forwardedProps`` only when given."""
    given = options.model_fields_set
    edit = options.edit
    return ForkRequest(
        at_seq=options.at_seq,
        messages=[m if isinstance(m, dict) else {"content": m} for m in options.messages],
        state_patch=options.state_patch,
        edit=None if edit is None else (edit.message_id, edit.content),
        regenerate=options.regenerate,
        run_id=options.run_id,
        thread_id=options.thread_id,
        strategy=options.strategy,
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
    strategy: ForkStrategy

    @property
    def thread_id(self) -> str:
        thread: str = self.input["threadId"]
        return thread

    @property
    def body(self) -> bytes:
        return dump(self.input)


async def plan_fork(
    store: EventStore,
    history: History,
    run_id: str,
    req: ForkRequest,
    agents: Mapping[str, AgentConfig],
    max_bytes: int | None = None,
) -> ForkPlan:
    """The input a fork of ``run_id`` posts, to which agent, from which point, where.

    ``agents`` is the configuration that decides the strategy of a fork that names none.
    The input meets the checks the proxy makes of what it posts (its depth, and its size
    against ``max_bytes``): a dry run is refused where the fork itself would be.
    """
    _check_options(req)
    parent = await store.get_run(run_id)
    if parent.agent is None:
        raise InputError(
            f"run {run_id!r} has no agent recorded; it cannot be forked through the proxy"
        )
    if req.at_seq is not None and not -1 <= req.at_seq < parent.event_count:
        raise InputError(
            f"atSeq {req.at_seq} is outside run {run_id!r} (events 0..{parent.event_count - 1})"
        )
    if req.at_seq is None and parent.status == RUNNING:
        # Its end is not known yet: the branch starts where it is now, and says so.
        req = replace(req, at_seq=parent.event_count - 1)
    start = await _start(store, history, parent, req)
    if req.run_id is not None and await _exists(store, req.run_id):
        raise Conflict(f"run {req.run_id!r} already exists")  # (as the fork itself says)
    new_run = f"run-{uuid.uuid4().hex}" if req.run_id is None else req.run_id
    strategy, thread = await _placement(store, start.run, req, new_run, agents)
    body: dict[str, Any] = {"threadId": thread, "runId": new_run}
    if strategy == SAME_THREAD:
        body["parentRunId"] = start.run.run_id
    body |= _input(start, req, new_run)
    plan = ForkPlan(start.run.agent or parent.agent, body, start.run.run_id, start.seq, strategy)
    _check_postable(plan, max_bytes)
    return plan


async def _exists(store: EventStore, run_id: str) -> bool:
    try:
        await store.get_run(run_id, input=False)
    except RunNotFound:
        return False
    return True


def _check_postable(plan: ForkPlan, max_bytes: int | None) -> None:
    data = plan.body
    if nested_too_deeply(data, plan.input):
        raise InputError(f"the fork's input nests arrays and objects past {MAX_DEPTH} levels")
    if max_bytes is not None and len(data) > max_bytes:
        raise BodyTooLarge(
            f"the fork's input is {len(data)} bytes; the limit is {max_bytes} "
            "(setting max_body_bytes)"
        )


def _input(start: Start, req: ForkRequest, new_run: str) -> dict[str, Any]:
    """The rest of the branch's RunAgentInput: the history and state where it starts, as
    changed; tools, context and the rest from the input of the run it starts from."""
    added = [_message(m, f"{new_run}-message-{n}") for n, m in enumerate(req.messages, 1)]
    posted = (decode(start.run.input) if start.run.input is not None else None) or {}
    body: dict[str, Any] = {
        "state": _state(start.state, req),
        "messages": [*start.messages, *added],
        "tools": posted.get("tools") or [],
        "context": posted.get("context") or [],
        "forwardedProps": posted.get("forwardedProps", {})
        if req.forwarded_props is _UNSET
        else req.forwarded_props,
    }
    if "protocolVersion" in posted:
        body["protocolVersion"] = posted["protocolVersion"]
    resume = req.resume if req.resume is not None else start.resume
    if resume is not None:
        body["resume"] = resume
    return body


def _check_options(req: ForkRequest) -> None:
    if req.edit is not None and req.regenerate is not None:
        raise InputError("a fork either edits a message or regenerates one, not both")
    if (req.edit is not None or req.regenerate is not None) and req.messages:
        raise InputError(
            "messages cannot be appended to an edit or a regeneration: the branch's new turn "
            "is the edited message, or the same turn again"
        )
    if req.state is not _UNSET and req.state_patch is not None:
        raise InputError("give a state or a statePatch, not both")
    # The proxy's rule for ids: an empty one is refused, not replaced.
    if req.run_id is not None:
        check_id(req.run_id, "runId")
    if req.thread_id is not None:
        check_id(req.thread_id, "threadId")


async def _start(store: EventStore, history: History, parent: Run, req: ForkRequest) -> Start:
    if req.edit is not None:
        message_id, content = req.edit
        return await start_edited(store, history, parent, req.at_seq, message_id, content)
    if req.regenerate is not None:
        return await start_regenerated(store, history, parent, req.at_seq, req.regenerate)
    return await start_at(history, parent, req.at_seq)


async def _placement(
    store: EventStore,
    base: Run,
    req: ForkRequest,
    new_run: str,
    agents: Mapping[str, AgentConfig],
) -> tuple[ForkStrategy, str]:
    """The strategy and the branch's thread."""
    if req.thread_id is not None:
        strategy = SAME_THREAD if req.thread_id == base.thread_id else NEW_THREAD
        if req.strategy is not None and req.strategy != strategy:
            which = "the parent's thread" if strategy == SAME_THREAD else "another thread"
            raise InputError(
                f"threadId {req.thread_id!r} is {which}: a {req.strategy} fork cannot go there"
            )
        thread = req.thread_id
    else:
        configured = agents.get(base.agent or "")
        strategy = req.strategy or (configured.fork if configured else DEFAULT_FORK_STRATEGY)
        thread = base.thread_id if strategy == SAME_THREAD else new_thread_id(new_run)
    if strategy == NEW_THREAD:
        try:
            await store.get_thread(thread)
        except ThreadNotFound:
            return strategy, thread
        raise Conflict(
            f"thread {thread!r} exists already: a fork into a new thread needs an id no thread has"
        )
    return strategy, thread


def new_thread_id(run_id: str) -> str:
    """The thread of a new-thread fork that names none, after its run (``run-<hex>`` gives
    ``thread-<hex>``): the same fork planned twice lands in the same thread."""
    return f"thread-{run_id.removeprefix('run-')}"


def _state(at: Any, req: ForkRequest) -> Any:
    if req.state is not _UNSET:
        return req.state
    if req.state_patch is None:
        return at
    try:
        patched = apply_patch(copy.deepcopy(at), req.state_patch)
    except (PatchError, UnclonableResult) as exc:
        raise InputError(f"statePatch does not apply to the state at the point: {exc}") from exc
    if patched is UNDEFINED:
        raise InputError("statePatch leaves no state at all")
    return patched


def _message(message: dict[str, Any] | str, default_id: str) -> dict[str, Any]:
    """A message to append; without an id, one made after the new run's, so that the dry
    run of a fork with a given run id shows the very input the fork posts."""
    if isinstance(message, str):
        message = {"content": message}
    if not isinstance(message, dict):
        raise InputError("each message to append must be an object or a string")
    out = {"id": default_id, "role": "user", **message}
    if out["role"] == "user" and not isinstance(out.get("content"), (str, list)):
        raise InputError("a user message needs content (a string or content parts)")
    return out
