"""A recording's ends that no client can cause, and how its commits overlap its reading.

However a recording task is cancelled (a shutdown at its first step, or while closing), the
client's stream must end and the run's slot must come back (once). While a large batch
commits, the next one is observed. Driven through ``Proxy`` directly, against real
upstreams and a real store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from starlette.responses import StreamingResponse

from recorder.config import Settings
from recorder.proxy.proxy import Proxy, Stream
from recorder.proxy.segments import Segment
from recorder.runtime import upstream_client
from recorder.store import EventStore, open_store
from tests.servers import demo_upstream, scripted_upstream, serving, sse_data


def slow_run(run_id: str) -> bytes:
    return orjson.dumps(
        {
            "threadId": "t",
            "runId": run_id,
            "messages": [{"id": "u1", "role": "user", "content": "hello"}],
            "forwardedProps": {"demo": {"delay": 0.05}},
        }
    )


@asynccontextmanager
async def proxy_on(store: EventStore, db_url: str) -> AsyncIterator[Proxy]:
    """A proxy with one slot, in front of the demo agent."""
    async with demo_upstream() as upstream:
        settings = Settings(db=db_url, agents={"demo": upstream}, max_concurrent_runs=1)
        client = upstream_client(settings)
        try:
            yield Proxy(store, settings, client, "test")
        finally:
            await client.close()


async def drain(result: Stream) -> list[bytes]:
    return [chunk async for chunk in result.chunks]


async def test_a_recording_stopped_before_it_ran_still_ends_cleanly(db_url: str) -> None:
    # Proxy.close() (a shutdown) can cancel a recording task before its first step, which
    # skips the task's own cleanup: the client's stream must still end and the slot come back.
    store = await open_store(db_url, migrate=True)
    try:
        async with proxy_on(store, db_url) as proxy:
            result = await proxy.start("demo", slow_run("r1"), {})
            assert isinstance(result, Stream) and "r1" in proxy.active
            await proxy.close()  # no await in between: the task has not run yet
            await asyncio.wait_for(drain(result), 10)
            assert not proxy.active and not proxy._slots.locked()
    finally:
        await store.close()


class HangingClose:
    """A real store whose ``set_status`` hangs (a database that stops answering as the run
    closes); ``closing`` is set once it is called."""

    def __init__(self, inner: EventStore) -> None:
        self._inner = inner
        self.closing = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def set_status(self, *args: Any, **kwargs: Any) -> None:
        self.closing.set()
        await asyncio.Event().wait()


async def test_a_recording_cancelled_while_closing_still_ends_cleanly(sqlite_url: str) -> None:
    inner = await open_store(sqlite_url, migrate=True)
    store = HangingClose(inner)
    try:
        async with proxy_on(store, sqlite_url) as proxy:  # type: ignore[arg-type]
            result = await proxy.start("demo", slow_run("r1"), {})
            assert isinstance(result, Stream)
            reading = asyncio.create_task(drain(result))
            await asyncio.wait_for(store.closing.wait(), 10)
            assert "r1" in proxy.active
            await proxy.close()  # a shutdown while the run's status is being written
            await asyncio.wait_for(reading, 10)
            assert not proxy.active and not proxy._slots.locked()
            # Everything the client may have seen was committed before the run closed.
            events = await inner.read_events("r1")
            assert events[0].type == "RUN_STARTED" and events[-1].type == "RUN_FINISHED"
    finally:
        await inner.close()


class SlowAppend:
    """A real store whose large appends wait before they commit (a database under load),
    until more frames were observed or 5 s went by. ``seen`` holds, for each, the frames
    observed when it was handed over, the frames appended with it (this one included),
    and the frames observed when it went on."""

    def __init__(self, inner: EventStore, observed: list[int], total: int) -> None:
        self._inner = inner
        self._observed = observed
        self._total = total
        self._appended = 0
        self.seen: list[tuple[int, int, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def append_batches(self, batches: Any, closes: Any = ()) -> Any:
        count = sum(len(events) for _run, events in batches)
        if count >= 100:
            handed = self._observed[0]
            for _ in range(500):  # (5 s)
                if self._observed[0] > handed or handed == self._total:
                    break
                await asyncio.sleep(0.01)
            self.seen.append((handed, self._appended + count, self._observed[0]))
        self._appended += count
        return await self._inner.append_batches(batches, closes)


async def test_the_next_batch_is_observed_while_one_commits(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A large batch is handed to the store as soon as it is observed, and the recording
    # observes what came next while the store works: the two overlap instead of taking
    # turns (the hop's rate is the slower of the two, not their sum). After its first
    # frames the upstream sends everything at once: the next frames are there already
    # when a batch has been observed.
    observed = [0]
    observe = Segment.observe

    def counting(segment: Segment, data: bytes, summary: Any) -> Any:
        observed[0] += 1
        return observe(segment, data, summary)

    monkeypatch.setattr(Segment, "observe", counting)
    frame = b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}\n\n'
    start = (
        b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r1"}\n\n'
        b'data: {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}\n\n'
    )
    end = (
        b'data: {"type":"TEXT_MESSAGE_END","messageId":"m"}\n\n'
        b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r1"}\n\n'
    )
    total = 4 + 6000

    async def answer() -> AsyncIterator[bytes]:
        yield start
        await asyncio.sleep(0.3)  # (the first batch is the first event's: committed alone)
        for _ in range(12):
            yield frame * 500
        yield end

    app = scripted_upstream(
        {"big": lambda _request: StreamingResponse(answer(), media_type="text/event-stream")}
    )
    inner = await open_store(sqlite_url, migrate=True)
    store = SlowAppend(inner, observed, total)
    try:
        async with serving(app) as upstream:
            settings = Settings(db=sqlite_url, agents={"big": upstream + "/big"})
            client = upstream_client(settings)
            try:
                proxy = Proxy(store, settings, client, "test")  # type: ignore[arg-type]
                body = orjson.dumps({"threadId": "t", "runId": "r1", "messages": []})
                result = await proxy.start("big", body, {})
                assert isinstance(result, Stream)
                frames = sse_data(b"".join(await asyncio.wait_for(drain(result), 60)))
            finally:
                await client.close()
        assert len(frames) == total
        assert [e.seq for e in await inner.read_events("r1")] == list(range(total))
        # Each large batch was handed over before any frame after it was observed, and
        # those that came after it were observed while it waited to commit.
        assert len(store.seen) >= 2, store.seen
        for handed, appended, after in store.seen:
            assert handed == appended, store.seen
            assert after > handed or handed == total, store.seen
    finally:
        await inner.close()
