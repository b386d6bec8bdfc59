"""Where a fork starts when its point is implicit: a run still recording has no end yet,
and a run's start counts the resume answers it was given."""

from __future__ import annotations

import json
from typing import Any

from recorder.store import EventStore, NewEvent, NewRun
from recorder.timetravel.fork import ForkRequest, plan_fork
from recorder.timetravel.history import History


def frames(*events: dict[str, Any]) -> list[NewEvent]:
    return [NewEvent(json.dumps(e).encode(), str(e["type"])) for e in events]


async def test_a_fork_of_a_run_still_recording_starts_where_it_is(store: EventStore) -> None:
    posted = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "u", "role": "user", "content": "hi"}],
    }
    await store.create_run(NewRun("r", "t", agent="a", input=json.dumps(posted).encode()))
    await store.append(
        "r",
        frames(
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "w0 w1 "},
        ),
    )
    plan = await plan_fork(store, History(store), "r", ForkRequest(), {})
    # The point is the last event recorded so far, not "its end" (which is still to come).
    assert plan.parent_seq == 2
    assert [m.get("content") for m in plan.input["messages"]] == ["hi", "w0 w1 "]
    await store.append(
        "r",
        frames(
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "w2"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ),
    )
    await store.set_status("r", "finished")
    ended = await plan_fork(store, History(store), "r", ForkRequest(), {})
    assert ended.parent_seq is None  # an ended run's end is a point
    assert ended.input["messages"][-1]["content"] == "w0 w1 w2"


async def test_a_fork_at_a_resume_runs_start_gives_the_answers_again(store: EventStore) -> None:
    interrupt = {"id": "i1", "reason": "approve"}
    await store.create_run(NewRun("r1", "t", agent="a", input=b'{"messages":[]}'))
    await store.append(
        "r1",
        frames(
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "r1",
                "outcome": {"type": "interrupt", "interrupts": [interrupt]},
            },
        ),
    )
    await store.set_status("r1", "finished")
    resume = [{"interruptId": "i1", "status": "resolved", "payload": {"approved": False}}]
    posted = {"threadId": "t", "runId": "r2", "messages": [], "resume": resume}
    await store.create_run(
        NewRun("r2", "t", agent="a", parent_run_id="r1", input=json.dumps(posted).encode())
    )
    await store.append(
        "r2",
        frames(
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"},
        ),
    )
    await store.set_status("r2", "finished")
    history = History(store)
    at_start = await history.project(await store.get_run("r2"), -1)
    assert at_start.pending_interrupts == []  # the point counts the answers

    plan = await plan_fork(store, history, "r2", ForkRequest(at_seq=-1), {})
    assert plan.input["resume"] == resume
    later = await plan_fork(store, history, "r2", ForkRequest(at_seq=0), {})
    assert "resume" not in later.input  # after its start, they were given already
    mine = [{"interruptId": "i1", "status": "resolved", "payload": {"approved": True}}]
    chosen = await plan_fork(store, history, "r2", ForkRequest(at_seq=-1, resume=mine), {})
    assert chosen.input["resume"] == mine  # the request's own answers win
