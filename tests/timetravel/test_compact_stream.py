"""The compact thread stream of a thread whose only run is still recording: streamed as it
is recorded, to its real end, never closed early as if it had finished."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from recorder.store import EventStore, NewEvent, NewRun
from recorder.timetravel.history import History
from recorder.timetravel.replay import ThreadStream
from tests.servers import sse_data


def frames(*events: dict[str, Any]) -> list[NewEvent]:
    return [NewEvent(json.dumps(e).encode(), str(e["type"])) for e in events]


def text(delta: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta}


async def test_a_lone_live_run_is_followed_to_its_end(store: EventStore) -> None:
    posted = {"messages": [{"id": "u", "role": "user", "content": "hi"}]}
    await store.create_run(NewRun("r", "t", agent="a", input=json.dumps(posted).encode()))
    await store.append(
        "r",
        frames(
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            text("w0 "),
        ),
    )
    stream = ThreadStream(store, History(store)).frames("t", compact=True)
    received: list[bytes] = []

    async def read() -> None:
        async for chunk in stream:
            received.append(chunk)

    reading = asyncio.create_task(read())
    await asyncio.sleep(0.3)
    assert not reading.done()  # still following the run
    await store.append(
        "r",
        frames(
            text("w1"),
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ),
    )
    await store.set_status("r", "finished")
    await asyncio.wait_for(reading, 10)
    events = [json.loads(f) for f in sse_data(b"".join(received))]
    kinds = [e["type"] for e in events]
    assert kinds == [
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
    assert events[1]["messages"] == posted["messages"]
