"""EventStore.save_checkpoint."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from recorder.errors import RunNotFound
from recorder.store import EventStore, NewRun, PurgeSelection, Run, open_store, reads
from tests.conftest import raw_sql
from tests.store.spec.conftest import ev, shared_database


async def test_a_checkpoint_is_kept(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    blob = bytes(range(256)) * 1024
    await store.save_checkpoint("r1", 99, blob)
    assert await store.nearest_checkpoint("r1", 99) == (99, blob)


async def test_saving_one_that_exists_keeps_the_first(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.save_checkpoint("r1", 199, b"b")
    await store.save_checkpoint("r1", 199, b"b")  # a concurrent reader saving it too
    await store.save_checkpoint("r1", 199, b"other")
    assert await store.nearest_checkpoint("r1", 500) == (199, b"b")
    # Readers racing to save the same one all succeed.
    await asyncio.gather(*(store.save_checkpoint("r1", 299, b"c") for _ in range(5)))
    assert await store.nearest_checkpoint("r1", 299) == (299, b"c")


async def test_an_unknown_run_is_not_found(store: EventStore) -> None:
    with pytest.raises(RunNotFound, match="'nope'"):
        await store.save_checkpoint("nope", 0, b"x")


# -- a closed run's last checkpoint, kept as the changes from the run's input -------------


def _posted(run: str, turns: int) -> bytes:
    """A client's input: the state, then the history so far."""
    messages = [
        {"id": f"m{i}", "role": "user", "content": f"turn {i} " + "words " * 30}
        for i in range(turns)
    ]
    state = {"todos": [{"id": i, "text": f"to do {i} " * 4} for i in range(20)]}
    return orjson.dumps({"runId": run, "state": state, "messages": messages})


def _checkpoint(posted: bytes, reply: str) -> bytes:
    """A projector's at the run's end: the messages, a reply added, then the state."""
    started = orjson.loads(posted)
    messages = [*started["messages"], {"id": "a", "role": "assistant", "content": reply}]
    rest = {"version": 3, "state": started["state"], "frames": 5}
    return orjson.dumps(messages) + b"\n\n" + orjson.dumps(rest)


async def _closed(store: EventStore, run_id: str, posted: bytes) -> Run:
    await store.create_run(NewRun(run_id, "t", input=posted))
    await store.append(run_id, [ev("{}"), ev("{}"), ev("{}")])
    await store.set_status(run_id, "finished")
    return await store.get_run(run_id, input=False)


async def _kept_as(store: EventStore, run_id: str) -> tuple[bool, int, bool]:
    """The checkpoint row's ``(from_input, length of data, kept as a tree)``."""
    ((from_input, data, root),) = await raw_sql(
        store, "SELECT from_input, data, root FROM checkpoints WHERE run_id = ?", run_id
    )
    return bool(from_input), len(data or b""), root is not None


async def test_a_closed_runs_last_checkpoint_is_kept_as_changes_from_its_input(
    spec_url: str,
) -> None:
    store = await open_store(spec_url, migrate=True, checkpoint_deltas=True)
    try:
        made = {}
        for n in range(3):  # the first input a tree, the next ones deltas from it
            run_id = f"r{n}"
            posted = _posted(run_id, 40 + n)
            seen = await _closed(store, run_id, posted)
            made[run_id] = _checkpoint(posted, f"reply {n} " * 20)
            await store.save_checkpoint(run_id, 2, made[run_id], seen=seen)
            from_input, size, tree = await _kept_as(store, run_id)
            assert from_input and not tree and size < len(made[run_id]) // 20
        for run_id, data in made.items():
            assert await store.nearest_checkpoint(run_id, 2) == (2, data)
            _run, found = await store.run_checkpoint(run_id)
            assert found == (2, data)
        if shared_database(spec_url):  # from the tables alone, not this store's memory
            other = await open_store(spec_url)
            try:
                for run_id, data in made.items():
                    assert await other.nearest_checkpoint(run_id, 9) == (2, data)
            finally:
                await other.close()
    finally:
        await store.close()


async def test_the_state_at_a_boundary_kept_from_a_chained_input_is_one_query(
    spec_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run, its checkpoint and the chain of deltas its input is kept as come in one
    statement (one round trip on PostgreSQL), the input's tree from the chunk cache."""
    store = await open_store(spec_url, migrate=True, checkpoint_deltas=True)
    try:
        made = {}
        for n in range(4):  # r0's input a tree, r1-r3's a chain of deltas down to it
            run_id = f"r{n}"
            posted = _posted(run_id, 40 + n)
            seen = await _closed(store, run_id, posted)
            made[run_id] = _checkpoint(posted, f"reply {n} " * 20)
            await store.save_checkpoint(run_id, 2, made[run_id], seen=seen)
            assert (await _kept_as(store, run_id))[0]
        asked: list[str] = []
        reading = reads.run_checkpoint

        def counted(*args: Any) -> Any:
            body = reading(*args)
            result = None
            try:
                while True:
                    statement = body.send(result)
                    asked.append(statement[0].sql)
                    result = yield statement
            except StopIteration as done:
                return done.value

        monkeypatch.setattr(reads, "run_checkpoint", counted)
        for run_id, data in made.items():
            asked.clear()
            _run, found = await store.run_checkpoint(run_id)
            assert found == (2, data)
            assert asked == [reads.RUN_CHECKPOINT.sql], run_id
    finally:
        await store.close()


async def test_other_checkpoints_are_kept_on_their_own(spec_url: str) -> None:
    store = await open_store(spec_url, migrate=True, checkpoint_deltas=True)
    try:
        posted = _posted("r1", 40)
        seen = await _closed(store, "r1", posted)
        data = _checkpoint(posted, "a reply")
        await store.save_checkpoint("r1", 1, data, seen=seen)  # not its last event
        await store.create_run(NewRun("r2", "t", input=_posted("r2", 41)))
        await store.append("r2", [ev("{}")])
        running = await store.get_run("r2", input=False)
        await store.save_checkpoint("r2", 0, data, seen=running)  # not closed
        await store.create_run(NewRun("r3", "u"))
        await store.append("r3", [ev("{}")])
        await store.set_status("r3", "finished")
        await store.save_checkpoint("r3", 0, data, seen=await store.get_run("r3"))  # no input
        for run_id, seq in (("r1", 1), ("r2", 0), ("r3", 0)):
            from_input, _size, tree = await _kept_as(store, run_id)
            assert not from_input and tree
            assert await store.nearest_checkpoint(run_id, seq) == (seq, data)
    finally:
        await store.close()


@pytest.mark.parametrize("deltas", [True, False], ids=["deltas", "trees"])
async def test_a_checkpoint_folded_before_its_input_was_rewritten_is_not_kept(
    spec_url: str, deltas: bool
) -> None:
    """A fold read the run, then a redaction rewrote its input (here, or in another process
    whose bytes this store's memory does not hold), then the fold saves: what it made may
    hold what the redaction replaced, so it is not kept. A fold that read the run after
    the rewrite is kept (on its own: a rewritten input is no delta's base)."""
    store = await open_store(spec_url, migrate=True, checkpoint_deltas=deltas)
    try:
        posted = _posted("r1", 40)
        seen = await _closed(store, "r1", posted)
        replaced = posted.replace(b"turn 3 ", b"[REDACTED] ")
        if shared_database(spec_url):
            other = await open_store(spec_url)
            try:
                assert await other.rewrite_inputs("t", {"r1": replaced}) == 1
            finally:
                await other.close()
        else:
            assert await store.rewrite_inputs("t", {"r1": replaced}) == 1
        await store.save_checkpoint("r1", 2, _checkpoint(posted, "a reply"), seen=seen)
        assert await store.nearest_checkpoint("r1", 2) is None
        assert await raw_sql(store, "SELECT count(*) FROM checkpoints") == [(0,)]

        again = await store.get_run("r1", input=False)
        assert again.input_rewritten_at is not None and seen.input_rewritten_at is None
        data = _checkpoint(replaced, "a reply")
        await store.save_checkpoint("r1", 2, data, seen=again)
        from_input, _size, tree = await _kept_as(store, "r1")
        assert not from_input and tree
        assert await store.nearest_checkpoint("r1", 2) == (2, data)
        assert (await store.get_run("r1")).input == replaced
    finally:
        await store.close()


async def test_a_run_purged_and_posted_again_is_kept_against_its_own_input(
    spec_url: str,
) -> None:
    """Run ``r1`` is purged, by this store or another, and posted again under its id with
    another input. A fold of the first ``r1`` saving after that is turned away (another
    run); one of the second keeps its checkpoint against the second's input, never the
    first's (which this store may still hold in memory), and it reads back as made."""
    store = await open_store(spec_url, migrate=True, checkpoint_deltas=True)
    try:
        first = _posted("r1", 40)
        stale = await _closed(store, "r1", first)
        selection = PurgeSelection(thread_ids=("t",))
        if shared_database(spec_url):
            other = await open_store(spec_url)
            try:
                await other.purge(selection, actor="cli", reason="erasure")
            finally:
                await other.close()
        else:
            await store.purge(selection, actor="cli", reason="erasure")
        user = {"id": "m0", "role": "user", "content": "hello"}
        second = orjson.dumps({"runId": "r1", "state": {}, "messages": [user]})
        # Small: kept whole, and not held in memory as a base for later deltas.
        seen = await _closed(store, "r1", second)
        assert seen.created_at != stale.created_at
        await store.save_checkpoint("r1", 2, _checkpoint(first, "old"), seen=stale)
        assert await store.nearest_checkpoint("r1", 2) is None
        data = _checkpoint(second, "a reply " * 40)
        await store.save_checkpoint("r1", 2, data, seen=seen)
        assert await store.nearest_checkpoint("r1", 2) == (2, data)
        _run, found = await store.run_checkpoint("r1")
        assert found == (2, data)
    finally:
        await store.close()


async def test_checkpoints_are_kept_as_changes_by_default_on_postgresql_only(
    store: EventStore, spec_url: str
) -> None:
    posted = _posted("r1", 40)
    seen = await _closed(store, "r1", posted)
    await store.save_checkpoint("r1", 2, _checkpoint(posted, "a reply"), seen=seen)
    from_input, _size, tree = await _kept_as(store, "r1")
    assert from_input == spec_url.startswith("postgresql") != tree
