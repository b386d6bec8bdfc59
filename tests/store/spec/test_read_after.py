"""EventStore.read_after: tailing the whole log by position."""

from __future__ import annotations

import asyncio
import random

from recorder.store import EventStore, NewRun
from tests.store.spec.conftest import ev


async def test_reads_by_position(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev(f'{{"n":{i}}}') for i in range(10)])
    everything = await store.read_after(0)
    assert [e.seq for e in everything] == list(range(10))
    assert [e.seq for e in await store.read_after(everything[4].position, limit=2)] == [5, 6]
    assert await store.read_after(everything[-1].position) == []


async def test_read_after_filters_by_thread(store: EventStore) -> None:
    await store.create_run(NewRun("a", "t1"))
    await store.create_run(NewRun("b", "t2"))
    await store.append_batches([("a", [ev("{}")]), ("b", [ev("{}"), ev("{}")])])
    assert {e.run_id for e in await store.read_after(0, thread_id="t2")} == {"b"}
    assert len(await store.read_after(0, thread_id="t2", limit=1)) == 1
    assert [e.run_id for e in await store.read_after(0)] == ["a", "b", "b"]


async def test_tailing_by_position_never_skips_a_late_commit(store: EventStore) -> None:
    runs = [f"r{i}" for i in range(6)]
    for r in runs:
        await store.create_run(NewRun(r, "t1"))
    total = 6 * 25
    rng = random.Random(7)

    async def writer(run_id: str) -> None:
        for i in range(25):
            await store.append(run_id, [ev(f'{{"i":{i}}}')])
            await asyncio.sleep(rng.random() / 500)

    seen: list[int] = []

    async def tail() -> None:
        last = 0
        while len(seen) < total:
            batch = await store.read_after(last)
            for e in batch:
                assert e.position > last
                seen.append(e.position)
                last = e.position
            await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(tail(), *(writer(r) for r in runs)), 60)
    everything = [e.position for e in await store.read_after(0)]
    assert seen == everything
    assert len(seen) == total
    for r in runs:  # and every run's seqs are gap-free
        assert [e.seq for e in await store.read_events(r)] == list(range(25))
