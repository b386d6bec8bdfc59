"""EventStore.read_events."""

from __future__ import annotations

from recorder.store import EventStore, NewRun
from tests.store.spec.conftest import ev


async def test_read_ranges(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev(f'{{"n":{i}}}') for i in range(10)])
    assert [e.seq for e in await store.read_events("r1", gt=3, lte=6)] == [4, 5, 6]
    assert [e.seq for e in await store.read_events("r1", gt=7)] == [8, 9]
    assert [e.seq for e in await store.read_events("r1", limit=2)] == [0, 1]
    assert [e.seq for e in await store.read_events("r1", gt=2, limit=3)] == [3, 4, 5]
    assert [e.seq for e in await store.read_events("r1", lte=1)] == [0, 1]
    assert await store.read_events("r1", gt=9) == []
    everything = await store.read_events("r1")
    assert [e.payload for e in everything] == [f'{{"n":{i}}}'.encode() for i in range(10)]


async def test_events_come_by_seq_with_their_fields(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t1"))
    await store.append_batches([("r1", [ev("a", "A")]), ("r2", [ev("x")]), ("r1", [ev("b", None)])])
    first, second = await store.read_events("r1")
    # Each field by name and by index, as RecordedEvent.
    assert (first.run_id, first.thread_id, first.seq, first.type, first.payload) == (
        "r1",
        "t1",
        0,
        "A",
        b"a",
    )
    assert tuple(second)[1:6] == ("t1", "r1", 1, None, b"b")
    assert second[0] == second.position > first.position


async def test_an_unknown_run_has_no_events(store: EventStore) -> None:
    assert await store.read_events("nope") == []


async def test_payloads_alone_are_those_of_the_same_range(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t1"))
    await store.append_batches(
        [("r1", [ev(f'{{"n":{i}}}') for i in range(6)]), ("r2", [ev("x")]), ("r1", [ev("y")])]
    )
    for gt, lte in ((-1, 6), (1, 4), (3, 3), (5, 6), (6, 20)):
        events = await store.read_events("r1", gt=gt, lte=lte)
        assert await store.read_payloads("r1", gt=gt, lte=lte) == [e.payload for e in events]
    assert await store.read_payloads("r1", gt=1, lte=3) == [b'{"n":2}', b'{"n":3}']
    assert await store.read_payloads("nope", gt=-1, lte=10) == []
