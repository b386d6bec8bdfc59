"""EventStore.append_batches: several runs' events in one transaction."""

from __future__ import annotations

import pytest

from recorder.errors import RunClosed, RunNotFound
from recorder.store import EventStore, NewEvent, NewRun
from recorder.store.model import RECORDER, UPSTREAM
from tests.store.spec.conftest import ev


async def test_every_batch_gets_its_places(store: EventStore) -> None:
    await store.create_run(NewRun("a", "t1"))
    await store.create_run(NewRun("b", "t2"))
    await store.append("a", [ev("{}")])
    got = await store.append_batches(
        [("a", [ev('{"a":1}'), ev('{"a":2}')]), ("b", [ev('{"b":0}')]), ("a", [ev('{"a":3}')])]
    )
    assert [[a.seq for a in batch] for batch in got] == [[1, 2], [0], [3]]
    positions = [a.position for batch in got for a in batch]
    assert positions == list(range(positions[0], positions[0] + 4))  # contiguous, in order
    assert [e.payload for e in await store.read_events("a")] == [
        b"{}",
        b'{"a":1}',
        b'{"a":2}',
        b'{"a":3}',
    ]
    assert (await store.get_run("a")).event_count == 4
    assert (await store.get_run("b")).event_count == 1


async def test_append_batches_is_atomic(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    with pytest.raises(RunNotFound):
        await store.append_batches([("r1", [ev("{}")]), ("missing", [ev("{}")])])
    assert await store.read_events("r1") == []
    assert (await store.get_run("r1")).event_count == 0


async def test_a_closed_run_in_any_batch_fails_them_all(store: EventStore) -> None:
    await store.create_run(NewRun("open", "t1"))
    await store.create_run(NewRun("done", "t1"))
    await store.set_status("done", "finished")
    with pytest.raises(RunClosed):
        await store.append_batches([("open", [ev("{}")]), ("done", [ev("{}")])])
    assert await store.read_events("open") == []
    assert await store.max_position() == 0


async def test_no_batches_is_nothing(store: EventStore) -> None:
    assert await store.append_batches([]) == []


async def test_long_batches_with_mixed_times_and_origins_keep_every_field(
    store: EventStore,
) -> None:
    # Appends are written in blocks of events that share their time and origin, many rows
    # to a statement: every event keeps its own seq, position, type, payload, time,
    # origin and link of the chain, whatever the blocks' sizes.
    await store.create_run(NewRun("long", "t1"))
    await store.create_run(NewRun("other", "t2"))
    events = [
        NewEvent(
            b'{"n":%d}' % n,
            None if n % 7 == 0 else f"TYPE_{n % 3}",
            RECORDER if 150 <= n < 153 else UPSTREAM,
            1000.0 + n if 200 <= n < 230 else None,
        )
        for n in range(300)
    ]
    got = await store.append_batches(
        [("long", events[:170]), ("other", events[:20]), ("long", events[170:])]
    )
    assert [a.seq for a in got[0] + got[2]] == list(range(300))
    positions = [a.position for batch in got for a in batch]
    assert positions == list(range(positions[0], positions[0] + 320))
    stored = await store.read_events("long")
    assert [e.seq for e in stored] == list(range(300))
    assert [e.position for e in stored] == [a.position for a in got[0] + got[2]]
    assert [(e.payload, e.type, e.origin) for e in stored] == [
        (e.payload, e.type, e.origin) for e in events
    ]
    times = {e.recorded_at for e in stored[:200]} | {e.recorded_at for e in stored[230:]}
    assert len(times) == 1 and [e.recorded_at for e in stored[200:230]] == [
        1000.0 + n for n in range(200, 230)
    ]
    assert [e.payload for e in await store.read_events("other")] == [e.payload for e in events[:20]]
    assert (await store.verify_chains(run_ids=["long", "other"])).ok
