"""A recording's ends that no client can cause: a shutdown at its first step, or while closing.

However a recording task is cancelled, the client's stream must end and the run's slot
must come back (once). Driven through ``Proxy`` directly, against the real demo agent and
a real store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson

from recorder.config import Settings
from recorder.proxy.proxy import Proxy, Stream
from recorder.runtime import upstream_client
from recorder.store import EventStore, open_store
from tests.servers import demo_upstream


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
