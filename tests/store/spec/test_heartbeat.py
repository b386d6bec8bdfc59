"""EventStore.heartbeat."""

from __future__ import annotations

import time

from recorder.store import EventStore, NewRun
from tests.conftest import raw_sql


async def test_a_stale_heartbeat_is_refreshed_with_its_owner(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", owner="old", created_at=time.time() - 100))
    await store.create_run(NewRun("r2", "t1", owner="old", created_at=time.time() - 100))
    await raw_sql(store, "UPDATE runs SET heartbeat_at = created_at")  # stale
    before = time.time()
    await store.heartbeat(["r1", "unknown"], "new")
    run = await store.get_run("r1")
    assert run.owner == "new" and run.heartbeat_at is not None
    assert before <= run.heartbeat_at <= time.time()
    untouched = await store.get_run("r2")
    assert (untouched.owner, untouched.heartbeat_at) == ("old", untouched.created_at)


async def test_a_run_created_with_an_earlier_time_has_a_fresh_heartbeat(
    store: EventStore,
) -> None:
    """An imported run keeps its ``created_at``; its heartbeat says a writer is at work on
    it now (no reaper takes it for one whose recorder is gone)."""
    before = time.time()
    run = await store.create_run(NewRun("r1", "t1", created_at=before - 1000))
    assert run.created_at == before - 1000
    assert run.heartbeat_at is not None and before <= run.heartbeat_at <= time.time()
    assert await store.mark_incomplete(stale_before=before - 15) == []


async def test_a_fresh_heartbeat_is_left_alone(store: EventStore) -> None:
    created = await store.create_run(NewRun("r1", "t1", owner="old"))
    await store.heartbeat(["r1"], "new")
    run = await store.get_run("r1")
    assert (run.owner, run.heartbeat_at) == ("old", created.heartbeat_at)


async def test_no_runs_is_nothing(store: EventStore) -> None:
    await store.heartbeat([], "me")
