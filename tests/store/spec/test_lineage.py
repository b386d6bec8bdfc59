"""EventStore.lineage."""

from __future__ import annotations

import pytest

from recorder.errors import RunNotFound
from recorder.store import EventStore, NewRun


async def test_lineage_follows_parents(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t1", parent_run_id="r1", parent_inferred=True))
    await store.create_run(NewRun("r3", "t1", parent_run_id="r2", parent_seq=4))
    chain = await store.lineage("r3")
    assert [r.run_id for r in chain] == ["r1", "r2", "r3"]
    assert chain[1].parent_inferred and not chain[2].parent_inferred
    assert chain[2].parent_seq == 4
    assert chain == [await store.get_run(r) for r in ("r1", "r2", "r3")]
    assert [r.run_id for r in await store.lineage("r1")] == ["r1"]


async def test_the_chain_ends_at_a_parent_recorded_elsewhere(store: EventStore) -> None:
    await store.create_run(NewRun("x", "t9", parent_run_id="elsewhere"))
    await store.create_run(NewRun("y", "t9", parent_run_id="x"))
    assert [r.run_id for r in await store.lineage("y")] == ["x", "y"]


async def test_a_cycle_of_parents_ends(store: EventStore) -> None:
    await store.create_run(NewRun("a", "t1", parent_run_id="b"))
    await store.create_run(NewRun("b", "t1", parent_run_id="a"))
    assert [r.run_id for r in await store.lineage("b")] == ["a", "b"]


async def test_an_unknown_run_is_not_found(store: EventStore) -> None:
    with pytest.raises(RunNotFound, match="'nope'"):
        await store.lineage("nope")


async def test_lineage_without_inputs(store: EventStore) -> None:
    big = b'{"messages":[' + b",".join(b'{"id":"m%d"},' % i for i in range(200)) + b"]}"
    await store.create_run(NewRun("p1", "t1", input=big))
    await store.create_run(NewRun("p2", "t1", input=b"{}", parent_run_id="p1"))
    assert [r.input for r in await store.lineage("p2")] == [big, b"{}"]
    bare = await store.lineage("p2", inputs=False)
    assert [(r.run_id, r.input) for r in bare] == [("p1", None), ("p2", None)]
    assert (await store.get_run("p1", input=False)).input is None
