"""EventStore.read_after: tailing the whole log by position."""

from __future__ import annotations

import asyncio
import random

from recorder.store import EventStore, NewRun, open_store
from tests.store.spec.conftest import ev, shared_database


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


async def test_two_stores_on_one_database_keep_commit_order_and_gap_free_seqs(
    store: EventStore, spec_url: str
) -> None:
    """Two recorders on one database (each store its own connections, as two processes
    have): a tail of either sees every position once, in order, and every run's seqs are
    gap-free, however their appends interleave."""
    if not shared_database(spec_url):
        return  # an in-memory database has one store
    other = await open_store(spec_url)
    try:
        stores = [store, other]
        runs = [f"s{i}" for i in range(8)]
        for n, r in enumerate(runs):
            await stores[n % 2].create_run(NewRun(r, f"t{n % 3}"))
        rng = random.Random(11)

        async def writer(n: int, run_id: str) -> None:
            for i in range(20):
                await stores[n % 2].append(run_id, [ev(f'{{"i":{i}}}'), ev(f'{{"j":{i}}}')])
                await asyncio.sleep(rng.random() / 500)

        total = len(runs) * 40
        seen: list[int] = []

        async def tail(reader: EventStore) -> None:
            last = 0
            while len(seen) < total:
                for e in await reader.read_after(last):
                    assert e.position > last
                    seen.append(e.position)
                    last = e.position
                await asyncio.sleep(0)

        writers = (writer(n, r) for n, r in enumerate(runs))
        await asyncio.wait_for(asyncio.gather(tail(other), *writers), 60)
        assert seen == [e.position for e in await store.read_after(0)]
        assert len(seen) == total
        for r in runs:
            assert [e.seq for e in await other.read_events(r)] == list(range(40))
    finally:
        await other.close()
