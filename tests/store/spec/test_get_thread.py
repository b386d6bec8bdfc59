"""EventStore.get_thread."""

from __future__ import annotations

import pytest

from recorder.errors import ThreadNotFound
from recorder.store import EventStore, NewRun


async def test_a_thread_with_its_latest_runs_status(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", agent="a", created_at=1000.0))
    await store.create_run(NewRun("r2", "t1", agent="b", created_at=1001.0))
    await store.set_status("r2", "interrupted", summary="what was said")
    thread = await store.get_thread("t1")
    assert (thread.thread_id, thread.agent, thread.run_count) == ("t1", "a", 2)
    # Updated when its latest run ended (closed just now), not when that run began.
    r2 = await store.get_run("r2")
    assert (thread.created_at, thread.updated_at) == (1000.0, r2.finished_at)
    assert (thread.latest_run_id, thread.latest_status, thread.summary) == (
        "r2",
        "interrupted",
        "what was said",
    )


async def test_an_unknown_thread_is_not_found(store: EventStore) -> None:
    with pytest.raises(ThreadNotFound, match=r"^thread 'nope' not found$") as raised:
        await store.get_thread("nope")
    assert raised.value.thread_id == "nope"
