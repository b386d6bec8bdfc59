"""EventStore.run_checkpoint: a run and its nearest checkpoint, read together."""

from __future__ import annotations

import pytest

from recorder.errors import RunNotFound
from recorder.store import EventStore, NewRun
from tests.store.spec.conftest import ev


async def test_the_run_comes_with_its_nearest_checkpoint(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", input=b'{"messages": []}'))
    await store.create_run(NewRun("r2", "t1"))
    await store.append("r1", [ev(f'{{"n": {i}}}') for i in range(300)])
    await store.save_checkpoint("r1", 99, b"a")
    await store.save_checkpoint("r1", 199, b"b")
    await store.save_checkpoint("r2", 120, b"other run")
    for seq in (None, -1, 0, 98, 99, 150, 199, 250, 299, 300, 10**6, 10**20, -(10**20)):
        run, found = await store.run_checkpoint("r1", seq)
        # The run as get_run reads it without its input...
        assert run == await store.get_run("r1", input=False)
        # ...and the checkpoint nearest_checkpoint finds at seq (past the end: the end).
        at = 299 if seq is None else min(seq, 299)
        want = await store.nearest_checkpoint("r1", at) if at >= 0 else None
        assert found == want, seq
    assert (await store.run_checkpoint("r1", 150))[1] == (99, b"a")
    assert (await store.run_checkpoint("r1"))[1] == (199, b"b")
    assert (await store.run_checkpoint("r1", 98))[1] is None


async def test_a_checkpoint_past_the_runs_end_is_not_the_runs(store: EventStore) -> None:
    # Only events the run has count: a checkpoint past them (none is ever written so)
    # is not taken for the state at its end.
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev("{}") for _ in range(10)])
    await store.save_checkpoint("r1", 4, b"a")
    await store.save_checkpoint("r1", 50, b"later")
    assert (await store.run_checkpoint("r1"))[1] == (4, b"a")


async def test_a_run_without_events_or_checkpoints(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    run, found = await store.run_checkpoint("r1")
    assert run.run_id == "r1" and run.event_count == 0 and run.input is None
    assert found is None


async def test_a_large_checkpoint_comes_back_whole(store: EventStore) -> None:
    # Kept as a tree of chunks: read back, from the cache or from the database, the same.
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev("{}")])
    blob = (
        b"["
        + b",".join(b'{"n": %d, "pad": "%s"}' % (i, b"x" * (i % 50)) for i in range(4000))
        + b"]"
    )
    await store.save_checkpoint("r1", 0, blob)
    assert (await store.run_checkpoint("r1"))[1] == (0, blob)
    store.chunk_cache.clear()  # type: ignore[attr-defined]
    assert (await store.run_checkpoint("r1"))[1] == (0, blob)
    assert (await store.run_checkpoint("r1"))[1] == (0, blob)


async def test_an_unknown_run_is_not_found(store: EventStore) -> None:
    with pytest.raises(RunNotFound, match="'nope'"):
        await store.run_checkpoint("nope")
