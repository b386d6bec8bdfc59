"""A read past its deadline releases its caller, however long the work takes to let go."""

from __future__ import annotations

import asyncio
import time

import pytest

from recorder.errors import StoreUnavailable
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
