"""EventStore.save_checkpoint."""

from __future__ import annotations

import asyncio

import pytest

from recorder.errors import RunNotFound
from recorder.store import EventStore, NewRun


async def test_a_checkpoint_is_kept(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    blob = bytes(range(256)) * 1024
    await store.save_checkpoint("r1", 99, blob)
    assert await store.nearest_checkpoint("r1", 99) == (99, blob)


async def test_saving_one_that_exists_keeps_the_first(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.save_checkpoint("r1", 199, b"b")
    await store.save_checkpoint("r1", 199, b"b")  # a concurrent reader saving it too
    await store.save_checkpoint("r1", 199, b"other")
    assert await store.nearest_checkpoint("r1", 500) == (199, b"b")
    # Readers racing to save the same one all succeed.
    await asyncio.gather(*(store.save_checkpoint("r1", 299, b"c") for _ in range(5)))
    assert await store.nearest_checkpoint("r1", 299) == (299, b"c")


async def test_an_unknown_run_is_not_found(store: EventStore) -> None:
    with pytest.raises(RunNotFound, match="'nope'"):
        await store.save_checkpoint("nope", 0, b"x")
