"""EventStore.nearest_checkpoint."""

from __future__ import annotations

from recorder.store import EventStore, NewRun


async def test_checkpoints_are_found_by_nearest_seq(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t1"))
    await store.save_checkpoint("r1", 99, b"a")
    await store.save_checkpoint("r1", 199, b"b")
    await store.save_checkpoint("r2", 120, b"other run")
    assert await store.nearest_checkpoint("r1", 50) is None
    assert await store.nearest_checkpoint("r1", 98) is None
    assert await store.nearest_checkpoint("r1", 99) == (99, b"a")
    assert await store.nearest_checkpoint("r1", 150) == (99, b"a")
    assert await store.nearest_checkpoint("r1", 500) == (199, b"b")
    assert await store.nearest_checkpoint("nope", 500) is None
