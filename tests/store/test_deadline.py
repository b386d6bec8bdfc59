"""A read past its deadline releases its caller, however long the work takes to let go."""

from __future__ import annotations

import asyncio
import time

import pytest

from recorder.errors import StoreUnavailable
from recorder.store import NewEvent, NewRun, open_store
from recorder.store.deadline import within


async def stubborn(ended: asyncio.Event, *, answer: float = 60) -> str:
    """A read whose cancel waits, as a driver's does for a server that does not answer."""
    try:
        await asyncio.sleep(answer)
    except asyncio.CancelledError:
        await asyncio.shield(asyncio.sleep(0.5))  # the cancel confirmed, eventually
        ended.set()
        raise
    return "rows"


async def test_past_the_deadline_the_caller_is_released_at_once() -> None:
    ended = asyncio.Event()
    began = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"did not answer within 0\.2 s"):
        await within(stubborn(ended), 0.2)
    assert time.monotonic() - began < 0.45  # not the 0.5 s the cancel takes
    assert not ended.is_set()
    await asyncio.wait_for(ended.wait(), 5)  # the work was cancelled, and ends on its own


async def test_an_answer_in_time_is_returned() -> None:
    assert await within(stubborn(asyncio.Event(), answer=0.01), 5) == "rows"


async def test_a_cancelled_caller_lets_the_work_go() -> None:
    ended = asyncio.Event()
    caller = asyncio.create_task(within(stubborn(ended), 30))
    await asyncio.sleep(0.05)
    caller.cancel()
    began = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert time.monotonic() - began < 0.25
    await asyncio.wait_for(ended.wait(), 5)


async def test_the_works_failure_is_the_callers() -> None:
    async def failing() -> None:
        raise StoreUnavailable("gone")

    with pytest.raises(StoreUnavailable, match="gone"):
        await within(failing(), 5)


@pytest.mark.postgres
async def test_writes_and_whole_log_reads_are_not_cut_by_the_read_deadline(pg_url: str) -> None:
    """The deadline is for a read's answer: a write (the single-statement ones too, which
    are sent again like reads) is never let go still running, and a read that walks the
    whole log (verify, the heads of a receipt) may take long on a healthy database."""
    store = await open_store(pg_url, migrate=True, read_deadline=1e-9)
    try:
        await store.create_run(NewRun("r1", "t1"))
        await store.append("r1", [NewEvent(b'{"type":"CUSTOM","name":"x","value":1}', "CUSTOM")])
        await store.set_status("r1", "finished")
        assert (await store.verify_chains()).ok
        assert "t1" in (await store.heads()).threads
        with pytest.raises(StoreUnavailable, match="did not answer within 1e-09 s"):
            await store.get_run("r1")
    finally:
        await store.close()
