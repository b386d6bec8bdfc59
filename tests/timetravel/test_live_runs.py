"""A run still recording, and a run's start: a fork of a live run starts where it is, the
compact thread stream follows a lone live run to its end, and a branch from a run's start
is given the resume answers that run was posted with."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from recorder.store import EventStore, NewEvent, NewRun
from recorder.timetravel.fork import ForkRequest, plan_fork
from recorder.timetravel.history import History
from recorder.timetravel.replay import ThreadStream
from tests.servers import sse_data

POSTED = {"messages": [{"id": "u", "role": "user", "content": "hi"}]}


def frames(*events: dict[str, Any]) -> list[NewEvent]:
    return [NewEvent(json.dumps(e).encode(), str(e["type"])) for e in events]


def text(delta: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta}


async def recording(store: EventStore) -> None:
    """Run ``r`` of thread ``t``, posted ``POSTED``, half way through its answer."""
    await store.create_run(NewRun("r", "t", agent="a", input=json.dumps(POSTED).encode()))
    await store.append(
        "r",
        frames(
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            text("w0 w1 "),
        ),
    )


async def ending(store: EventStore) -> None:
    await store.append(
        "r",
        frames(
            text("w2"),
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ),
    )
    await store.set_status("r", "finished")


async def test_a_fork_of_a_run_still_recording_starts_where_it_is(store: EventStore) -> None:
    await recording(store)
    plan = await plan_fork(store, History(store), "r", ForkRequest(), {})
    # The point is the last event recorded so far, not "its end" (which is still to come).
    assert plan.parent_seq == 2
    assert [m.get("content") for m in plan.input["messages"]] == ["hi", "w0 w1 "]
    await ending(store)
    ended = await plan_fork(store, History(store), "r", ForkRequest(), {})
    assert ended.parent_seq is None  # an ended run's end is a point
    assert ended.input["messages"][-1]["content"] == "w0 w1 w2"


async def test_the_compact_stream_follows_a_lone_live_run_to_its_end(store: EventStore) -> None:
    await recording(store)
    stream = ThreadStream(store, History(store)).frames("t", compact=True)
    received: list[bytes] = []

    async def read() -> None:
        async for chunk in stream:
            received.append(chunk)

    reading = asyncio.create_task(read())
    await asyncio.sleep(0.3)
    assert not reading.done()  # still following the run, never closed early as finished
    await ending(store)
    await asyncio.wait_for(reading, 10)
    events = [json.loads(f) for f in sse_data(b"".join(received))]
    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert {e.get("runId") for e in events if "runId" in e} == {"r"}  # no made-up run
    assert events[1]["messages"] == POSTED["messages"]


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
