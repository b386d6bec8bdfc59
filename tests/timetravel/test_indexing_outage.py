"""The indexer that follows closing runs rides through an outage with one line of log."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from recorder.errors import StoreUnavailable
from recorder.store import EventStore
from recorder.timetravel.indexing import Indexer


async def test_an_unavailable_database_is_said_once_per_outage(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    indexer = Indexer(store)
    answers = iter(["down", "down", "down", "up", "down", "down", "bug"])
    tries = 0
    enough = asyncio.Event()

    async def index_own() -> int:
        nonlocal tries
        tries += 1
        if tries == 9:
            enough.set()
        answer = next(answers, "up")
        if answer == "down":
            raise StoreUnavailable("the database did not answer within 30 s")
        if answer == "bug":
            raise ValueError("a bug")
        return 0

    indexer.index_own = index_own  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING, "recorder.search")
    following = asyncio.create_task(indexer.follow(0.001))
    await asyncio.wait_for(enough.wait(), 10)
    following.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await following
    lines = [(r.getMessage(), r.exc_info is not None) for r in caplog.records]
    said = "the database did not answer within 30 s"
    waiting = (f"search indexing waits for the database: {said}", False)
    assert lines == [waiting, waiting, ("search indexing failed: a bug", True)]
