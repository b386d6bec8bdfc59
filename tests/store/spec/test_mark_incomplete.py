"""EventStore.mark_incomplete."""

from __future__ import annotations

import time

from recorder.store import EventStore, NewRun
from tests.conftest import raw_sql


async def test_running_runs_become_incomplete(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", owner="dead"))
    await store.create_run(NewRun("r2", "t1", owner="alive"))
    await store.create_run(NewRun("r3", "t1", owner="dead"))
    await store.set_status("r3", "finished")
    finished_at = (await store.get_run("r3")).finished_at
    before = time.time()
    assert await store.mark_incomplete(owner="dead") == ["r1"]
    run = await store.get_run("r1")
    assert run.status == "incomplete"
    assert run.finished_at is not None and before <= run.finished_at <= time.time()
    assert (await store.get_run("r2")).status == "running"
    closed = await store.get_run("r3")
    assert (closed.status, closed.finished_at) == ("finished", finished_at)
    assert await store.mark_incomplete(owner="dead") == []


async def test_all_running_runs_by_default_sorted(store: EventStore) -> None:
    for run_id in ("c", "a", "b"):
        await store.create_run(NewRun(run_id, "t1", owner=run_id))
    assert await store.mark_incomplete() == ["a", "b", "c"]
    assert {r.status for r in await store.list_runs("t1")} == {"incomplete"}


async def test_another_owners_stale_runs(store: EventStore) -> None:
    long_ago = time.time() - 100
    await store.create_run(NewRun("mine", "t1", owner="me", created_at=long_ago))
    await store.create_run(NewRun("stale", "t1", owner="gone", created_at=long_ago))
    await store.create_run(NewRun("orphan", "t1", owner=None, created_at=long_ago))
    await store.create_run(NewRun("fresh", "t1", owner="other"))
    await store.create_run(NewRun("silent", "t1", owner="other"))
    await raw_sql(
        store, "UPDATE runs SET heartbeat_at = created_at WHERE created_at < ?", long_ago + 1
    )
    await raw_sql(store, "UPDATE runs SET heartbeat_at = NULL WHERE run_id = 'silent'")
    closed = await store.mark_incomplete(stale_before=time.time() - 15, exclude_owner="me")
    assert closed == ["orphan", "silent", "stale"]
    statuses = {r.run_id: r.status for r in await store.list_runs("t1")}
    assert statuses == {
        "mine": "running",
        "stale": "incomplete",
        "orphan": "incomplete",
        "fresh": "running",
        "silent": "incomplete",
    }
