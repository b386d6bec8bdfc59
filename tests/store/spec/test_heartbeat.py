"""EventStore.heartbeat."""

from __future__ import annotations

import time

from recorder.store import EventStore, NewRun


async def test_a_stale_heartbeat_is_refreshed_with_its_owner(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", owner="old", created_at=time.time() - 100))
    await store.create_run(NewRun("r2", "t1", owner="old", created_at=time.time() - 100))
    before = time.time()
    await store.heartbeat(["r1", "unknown"], "new")
    run = await store.get_run("r1")
    assert run.owner == "new" and run.heartbeat_at is not None
    assert before <= run.heartbeat_at <= time.time()
    untouched = await store.get_run("r2")
    assert (untouched.owner, untouched.heartbeat_at) == ("old", untouched.created_at)


async def test_a_fresh_heartbeat_is_left_alone(store: EventStore) -> None:
    created = await store.create_run(NewRun("r1", "t1", owner="old"))
    await store.heartbeat(["r1"], "new")
    run = await store.get_run("r1")
    assert (run.owner, run.heartbeat_at) == ("old", created.heartbeat_at)


async def test_no_runs_is_nothing(store: EventStore) -> None:
    await store.heartbeat([], "me")
