"""A run's close rides with its last events when the agent's answer ended with them.

Closing a run used to be a commit of its own after its last batch; when the answer is
known to be over as that batch is recorded (by the recording's task: the first batch's
commit is the first event's wait, and takes nothing more), the close goes in the batch's
commit (one commit, and one WAL flush on PostgreSQL, where there were two). Either way the
log ends the same: these tests count which way each run took, and check what it left.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from recorder.api import create_app
from recorder.config import Settings
from recorder.store import Closing, EventStore, NewEvent, open_store
from tests.servers import scripted_upstream, serving, user

JSON = {"content-type": "application/json"}


class CountingStore:
    """A real store that notes how runs were closed: with events, or apart."""

    def __init__(self, inner: EventStore) -> None:
        self._inner = inner
        self.with_events: list[str] = []
        self.apart: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def append_batches(
        self, batches: list[tuple[str, list[NewEvent]]], closes: list[Closing] | tuple[()] = ()
    ) -> Any:
        self.with_events += [close.run_id for close in closes]
        return await self._inner.append_batches(batches, closes)

    async def set_status(self, run_id: str, status: str, **kw: Any) -> None:
        if status != "running":
            self.apart.append(run_id)
        await self._inner.set_status(run_id, status, **kw)


def frame(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def started(run: str, thread: str = "t1") -> bytes:
    return frame({"type": "RUN_STARTED", "threadId": thread, "runId": run})


def finished(run: str, thread: str = "t1") -> bytes:
    return frame({"type": "RUN_FINISHED", "threadId": thread, "runId": run})


def text(run_message: str, delta: str) -> list[bytes]:
    return [
        frame({"type": "TEXT_MESSAGE_START", "messageId": run_message, "role": "assistant"}),
        frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": run_message, "delta": delta}),
        frame({"type": "TEXT_MESSAGE_END", "messageId": run_message}),
    ]


def paced(chunks: list[bytes], pause: float) -> StreamingResponse:
    """``chunks`` with ``pause`` seconds between two of them; the answer ends right after
    the last, as an agent's does once it wrote its run's end."""

    async def body() -> AsyncIterator[bytes]:
        for number, chunk in enumerate(chunks):
            if number:
                await asyncio.sleep(pause)
            yield chunk

    return StreamingResponse(body(), media_type="text/event-stream")


async def record(
    db_url: str, chunks: list[bytes], *, pause: float = 0.0, status: int = 200
) -> tuple[CountingStore, httpx.Response]:
    """One run r1 on thread t1 whose agent answers ``chunks`` (or, with another
    ``status``, that status and a plain body); the store once every run of the answer is
    closed, and the client's answer."""
    inner = await open_store(db_url, migrate=True)
    counting = CountingStore(inner)

    def answer(_request: Request) -> Response:
        if status != 200:
            return PlainTextResponse("no", status_code=status)
        return paced(chunks, pause)

    body = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [user("tell me")],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    async with serving(scripted_upstream({"a": answer})) as up:
        settings = Settings(db=db_url, agents={"a": f"{up}/a"}, journal=False)
        async with serving(create_app(settings, store=counting)) as rec:  # type: ignore[arg-type]
            async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
                got = await client.post(f"{rec}/agents/a", content=orjson.dumps(body), headers=JSON)
            # The recording outlives the client's read by a close at most.
            for _ in range(500):
                runs = await inner.list_runs("t1")
                if runs and all(run.status != "running" for run in runs):
                    break
                await asyncio.sleep(0.01)
    return counting, got


def frames_of(answer: httpx.Response) -> int:
    return sum(line.startswith(b"data:") for line in answer.content.split(b"\n"))


async def closed_state(store: EventStore, run_id: str) -> tuple[object, ...]:
    run = await store.get_run(run_id)
    return run.status, run.outcome, run.event_count


TRAILING = frame({"type": "CUSTOM", "name": "late", "value": 1})
CASES = {
    # The whole answer in one chunk, the first batch: its commit is the first event's wait,
    # so the run is closed after it.
    "one chunk": ([b"".join([started("r1"), *text("m1", "hello there"), finished("r1")])], 0.0),
    # Streamed, the answer ending right after its last chunk, as an agent's does.
    "streamed": ([started("r1"), *text("m1", "hello there"), finished("r1")], 0.02),
    # Frames after RUN_FINISHED are the run's too: the close rides with the last of them.
    "after the end": ([started("r1") + finished("r1"), TRAILING], 0.3),
    # The answer still open long after the run's end (a comment, then the end): the close
    # is a commit of its own once the answer is over.
    "left open": ([started("r1") + finished("r1"), b": still here\n\n"], 0.3),
}
EXPECTED = {  # runs closed with events, runs closed apart, events, frames, summary
    "one chunk": ([], ["r1"], 5, 5, "tell me\nhello there"),
    "streamed": (["r1"], [], 5, 5, "tell me\nhello there"),
    "after the end": (["r1"], [], 3, 3, "tell me\n"),
    "left open": ([], ["r1"], 2, 2, "tell me\n"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_run_closes_with_its_last_events_when_the_answer_ends_with_them(
    db_url: str, case: str
) -> None:
    chunks, pause = CASES[case]
    with_events, apart, events, frames, summary = EXPECTED[case]
    store, answer = await record(db_url, chunks, pause=pause)
    try:
        assert (store.with_events, store.apart) == (with_events, apart)
        assert await closed_state(store, "r1") == ("finished", "success", events)
        assert frames_of(answer) == frames
        assert (await store.get_thread("t1")).summary == summary
        assert (await store.verify_chains(["t1"])).ok
    finally:
        await store.close()


async def test_runs_of_one_answer_each_close_once(db_url: str) -> None:
    """An answer holding two runs: the first closes as soon as a later run's frames are
    committed, the last with its own last events; the thread's summary is written once."""
    chunks = [
        started("r1") + finished("r1") + started("r2"),
        b"".join([*text("m2", "again"), finished("r2")]),
    ]
    store, answer = await record(db_url, chunks, pause=0.05)
    try:
        assert (store.with_events, store.apart) == (["r2"], ["r1"])
        assert await closed_state(store, "r1") == ("finished", "success", 2)
        assert await closed_state(store, "r2") == ("finished", "success", 5)
        assert frames_of(answer) == 7
        assert (await store.get_thread("t1")).summary == "tell me\nagain"
        assert (await store.verify_chains(["t1"])).ok
    finally:
        await store.close()


async def test_a_run_that_never_streamed_closes_with_its_error(db_url: str) -> None:
    store, answer = await record(db_url, [], status=500)
    try:
        assert answer.status_code == 500
        assert (store.with_events, store.apart) == (["r1"], [])
        run = await store.get_run("r1")
        assert (run.status, run.event_count) == ("error", 1)
        event = orjson.loads((await store.read_events("r1"))[0].payload)
        assert (event["type"], event["code"]) == ("RUN_ERROR", "upstream_http_error")
    finally:
        await store.close()
