"""EventStore.list_runs."""

from __future__ import annotations

from recorder.store import EventStore, NewRun


async def test_oldest_first_ties_by_run_id(store: EventStore) -> None:
    await store.create_run(NewRun("r3", "t1", created_at=1002.0, input=b"3"))
    await store.create_run(NewRun("r1", "t1", created_at=1001.0, input=b"1"))
    await store.create_run(NewRun("r2b", "t1", created_at=1002.0))
    await store.create_run(NewRun("r2a", "t1", created_at=1002.0))
    await store.create_run(NewRun("x", "t2", created_at=1000.0))
    runs = await store.list_runs("t1")
    assert [r.run_id for r in runs] == ["r1", "r2a", "r2b", "r3"]
    assert all(r.input is None for r in runs)  # inputs only when asked
    with_inputs = await store.list_runs("t1", inputs=True)
    assert [r.input for r in with_inputs] == [b"1", None, None, b"3"]
    assert with_inputs == [await store.get_run(r.run_id) for r in with_inputs]


async def test_an_unknown_thread_has_no_runs(store: EventStore) -> None:
    assert await store.list_runs("nope") == []
