"""EventStore.verify_chains and the chains the append path and closing runs build.

Tampering the way an attacker would (triggers dropped, rows rewritten, the file's bytes
edited) is in ``tests/store/test_tamper.py``.
"""

from __future__ import annotations

import pytest

from recorder.errors import RunNotFound, ThreadNotFound
from recorder.store import EventStore, NewRun, chain
from tests.conftest import raw_sql
from tests.store.spec.conftest import ev


async def _hashes(store: EventStore, run_id: str) -> list[bytes]:
    rows = await raw_sql(store, "SELECT hash FROM events WHERE run_id = ? ORDER BY seq", run_id)
    return [bytes(row[0]) for row in rows]


async def test_each_event_carries_its_link_in_the_run_s_chain(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    events = [ev('{"type":"RUN_STARTED"}', "RUN_STARTED"), ev(b"\xff raw", None), ev("{}", "")]
    # Two batches of one run in one call, then a later call: one chain across all three.
    await store.append_batches([("r1", events[:1]), ("r1", events[1:2])])
    await store.append("r1", events[2:])
    expected = chain.event_links(
        chain.run_genesis("t1", "r1"), 0, [(e.type, e.payload) for e in events]
    )
    assert await _hashes(store, "r1") == expected
    report = await store.verify_chains(["t1"])
    assert report.ok and (report.threads, report.runs, report.events) == (1, 1, 3)


async def test_closing_a_run_seals_its_head_into_the_thread_s_chain(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev("{}"), ev("[]")])
    await store.create_run(NewRun("r2", "t1"))  # no events: its head is its genesis
    await store.set_status("r2", "cancelled")
    await store.set_status("r1", "finished")
    await store.set_status("r1", "error")  # closed again: sealed once, where it first closed
    heads = await store.heads()
    r1_head = (await _hashes(store, "r1"))[-1]
    expected = chain.thread_head("t1", [("r2", chain.run_genesis("t1", "r2")), ("r1", r1_head)])
    assert heads.threads["t1"] == (expected, 2)
    assert heads.running == {}
    assert (await store.verify_chains()).ok


async def test_runs_closed_as_incomplete_are_sealed_too(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", owner="gone"))
    await store.append("r1", [ev("{}")])
    assert await store.mark_incomplete(owner="gone") == ["r1"]
    assert (await store.heads()).threads["t1"][1] == 1
    report = await store.verify_chains(run_ids=["r1"])
    assert report.ok


async def test_heads_give_each_running_run_s_last_hash(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev("{}"), ev("[]")])
    await store.create_run(NewRun("r2", "t2"))
    heads = await store.heads()
    assert heads.running["r1"] == ("t1", 1, (await _hashes(store, "r1"))[-1])
    assert heads.running["r2"] == ("t2", -1, chain.run_genesis("t2", "r2"))
    assert heads.threads["t2"] == (chain.thread_genesis("t2"), 0)


async def test_marks_give_the_recomputed_hash_at_a_point(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev(str(i)) for i in range(5)])
    report = await store.verify_chains(run_ids=["r1"], marks={"r1": 2})
    assert report.marked == {"r1": (await _hashes(store, "r1"))[2]}


async def test_unknown_ids_are_not_found(store: EventStore) -> None:
    with pytest.raises(ThreadNotFound):
        await store.verify_chains(["nope"])
    with pytest.raises(RunNotFound):
        await store.verify_chains(run_ids=["nope"])
