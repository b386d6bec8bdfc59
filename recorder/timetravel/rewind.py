"""Where a branch starts: a point of a run, and the messages and state it is given there.

A fork names its start in one of three ways:

- **A point** ``(run, seq)``: the history and state there.
- **An edited user message** (as ``update_state`` on a message is used in LangGraph): the
  turn that sent the message runs again with the new text. That turn is the first run of
  the lineage whose posted input holds the message; the branch starts at that run's start
  (seq -1) from its input cut right before the message, then the message changed (same id,
  new content). What followed it, the old answer and any later turn, is gone, and the state
  is the one that run was given. Only user messages: an assistant message is not edited but
  regenerated, and a tool result belongs to its call. A message no posted input holds (an
  agent's own snapshot brought it) is cut from the history at the point instead.
- **Regenerating an assistant message**: the turn that produced it runs again. That turn is
  the run just before the first run of the lineage whose input holds the message (the forked
  run itself when no input does); the branch starts at its start (seq -1) with exactly what
  it was given: messages, state and resume answers.

The lineage (``EventStore.lineage``) follows parents across threads, so a branch of a
branch still finds the turn in the thread it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recorder.errors import InputError
from recorder.store import EventStore, Run
from recorder.timetravel.history import History
from recorder.wire.events import decode


@dataclass(frozen=True, slots=True)
class Start:
    """The branch's start: after event ``seq`` of ``run`` (-1: its start; None: its end)."""

    run: Run
    seq: int | None
    messages: list[dict[str, Any]]
    state: Any
    resume: list[Any] | None = None


async def start_at(history: History, run: Run, seq: int | None) -> Start:
    """The history and state after event ``seq`` of ``run``, as a frontend would post them
    (activity messages are the frontend's own and never posted). At the run's start (-1),
    with the resume answers it was given: that point counts them (its interrupts are no
    longer pending), so the branch gives them again."""
    at = await history.project(run, seq)
    return Start(run, seq, _postable(at.messages), at.state, _resume(run) if seq == -1 else None)


async def start_edited(
    store: EventStore, history: History, run: Run, seq: int | None, message_id: str, content: Any
) -> Start:
    """The turn that sent user message ``message_id`` (seen at the point), with ``content``."""
    at = await history.project(run, seq)
    _message_at(at.messages, message_id, "user", run, seq)
    for turn in await store.lineage(run.run_id):
        given = await history.starting_point(turn)
        index = _index(given.messages, message_id)
        if index is not None:
            return Start(turn, -1, _edited(given.messages, index, content), given.state)
    messages = _postable(at.messages)
    index = next(i for i, m in enumerate(messages) if m.get("id") == message_id)
    return Start(run, seq, _edited(messages, index, content), at.state)


async def start_regenerated(
    store: EventStore, history: History, run: Run, seq: int | None, message_id: str
) -> Start:
    """The start of the turn that produced assistant message ``message_id``."""
    at = await history.project(run, seq)
    _message_at(at.messages, message_id, "assistant", run, seq)
    chain = await store.lineage(run.run_id)
    producer = chain[-1]
    for number, turn in enumerate(chain):
        given = await history.starting_point(turn)
        if _index(given.messages, message_id) is None:
            continue
        if number == 0:
            raise InputError(
                f"message {message_id!r} was given to run {turn.run_id!r}, the first of its "
                "line, not produced by a recorded run: there is no turn to regenerate"
            )
        producer = chain[number - 1]
        break
    given = await history.starting_point(producer)
    return Start(producer, -1, given.messages, given.state, _resume(producer))


def _resume(run: Run) -> list[Any] | None:
    """The resume answers ``run`` was posted with."""
    posted = (decode(run.input) if run.input is not None else None) or {}
    resume = posted.get("resume")
    return resume if isinstance(resume, list) else None


def _postable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("role") != "activity"]


def _index(messages: list[dict[str, Any]], message_id: str) -> int | None:
    return next((i for i, m in enumerate(messages) if m.get("id") == message_id), None)


def _edited(messages: list[dict[str, Any]], index: int, content: Any) -> list[dict[str, Any]]:
    return [*messages[:index], {**messages[index], "content": content}]


def _message_at(
    messages: list[dict[str, Any]], message_id: str, role: str, run: Run, seq: int | None
) -> None:
    """Refuse a message that is not in the history at the point, or not of ``role``."""
    where = f"run {run.run_id!r} " + ("at its end" if seq is None else f"after seq {seq}")
    index = _index(messages, message_id)
    if index is None:
        raise InputError(f"no message {message_id!r} in the history of {where}")
    found = messages[index].get("role")
    if found == role:
        return
    # ("an assistant", "a user": by the sound, which "u" of "user" is not)
    kind = f"an {found}" if str(found)[:1] in ("a", "e", "i", "o") else f"a {found}"
    if role == "user":
        raise InputError(
            f"message {message_id!r} is {kind} message: only user messages are edited "
            "(regenerate an assistant message instead)"
        )
    raise InputError(
        f"message {message_id!r} is {kind} message: only an assistant message is "
        "regenerated (edit a user message instead)"
    )
