"""EventStore.purge and tombstones: a thread goes whole, a tombstone says what went.

Every byte gone from the files: ``tests/store/test_purge_bytes.py``.
"""

from __future__ import annotations

import time

import orjson
import pytest

from recorder.errors import InputError, ThreadNotFound
from recorder.store import EventStore, NewRun, PurgeSelection
from tests.conftest import raw_sql, stored_chunks
from tests.store.spec.conftest import ev


async def _thread(store: EventStore, thread: str, runs: int, agent: str = "a") -> None:
    for n in range(runs):
        run = f"{thread}-r{n}"
        await store.create_run(NewRun(run, thread, agent=agent, input=b'{"in":1}'))
        await store.append(run, [ev(f'{{"n":{i}}}') for i in range(3)])
        await store.save_checkpoint(run, 1, b"derived")
        await store.set_status(run, "finished", summary=f"summary of {thread}")


async def _count(store: EventStore, table: str, thread: str) -> int:
    sql = f"SELECT count(*) FROM {table} WHERE thread_id = ?"
    if table in ("checkpoints", "run_inputs"):
        of_thread = "SELECT run_id FROM runs WHERE thread_id = ?"
        sql = f"SELECT count(*) FROM {table} WHERE run_id IN ({of_thread})"
    return int((await raw_sql(store, sql, thread))[0][0])


async def test_a_purge_deletes_the_thread_and_everything_of_it(store: EventStore) -> None:
    await _thread(store, "gone", 2)
    await _thread(store, "kept", 1)
    before = await store.heads()
    report = await store.purge(
        PurgeSelection(thread_ids=("gone",)), actor="cli", reason="erasure request 42"
    )
    assert [t.thread_id for t in report.threads] == ["gone"]
    assert (report.runs, report.events) == (2, 6)
    for table in ("threads", "runs", "events", "run_inputs", "checkpoints"):
        assert await _count(store, table, "gone") == 0, table
    assert await _count(store, "events", "kept") == 3
    with pytest.raises(ThreadNotFound):
        await store.get_thread("gone")
    # The tombstone: ids, counts, chain heads, when, by whom, why.
    (tombstone,) = await store.tombstones()
    assert tombstone.id == report.tombstone
    assert (tombstone.actor, tombstone.reason) == ("cli", "erasure request 42")
    assert (tombstone.threads, tombstone.runs, tombstone.events) == (1, 2, 6)
    (gone,) = tombstone.detail
    assert gone["threadId"] == "gone" and gone["head"] == before.threads["gone"][0].hex()
    assert [r["runId"] for r in gone["runs"]] == ["gone-r0", "gone-r1"]
    assert abs(tombstone.at - time.time()) < 60
    # The rest still verifies, and the log is append-only again right after.
    assert (await store.verify_chains()).ok
    with pytest.raises(Exception, match="append-only"):
        await raw_sql(store, "DELETE FROM events WHERE thread_id = 'kept'")
    assert await raw_sql(store, "SELECT count(*) FROM sanctioned") == [(0,)]


async def test_a_dry_run_deletes_nothing(store: EventStore) -> None:
    await _thread(store, "t1", 1)
    report = await store.purge(
        PurgeSelection(thread_ids=("t1",)), actor="cli", reason=None, dry_run=True
    )
    assert report.dry_run and report.tombstone is None
    assert [t.thread_id for t in report.threads] == ["t1"] and report.events == 3
    assert await _count(store, "events", "t1") == 3
    assert await store.tombstones() == []


async def test_threads_by_age_and_agent_running_ones_skipped(store: EventStore) -> None:
    await _thread(store, "old-a", 1, agent="a")
    await _thread(store, "old-b", 1, agent="b")
    await store.create_run(NewRun("live", "old-live", agent="a"))
    cutoff = time.time() + 1
    report = await store.purge(
        PurgeSelection(updated_before=cutoff, agent="a"), actor="retention", reason="90d"
    )
    assert [t.thread_id for t in report.threads] == ["old-a"]
    assert report.skipped == ("old-live",)
    assert await _count(store, "threads", "old-b") == 1
    assert await _count(store, "threads", "old-live") == 1
    report = await store.purge(
        PurgeSelection(thread_ids=("old-b", "nope")), actor="cli", reason=None
    )
    assert report.missing == ("nope",) and [t.thread_id for t in report.threads] == ["old-b"]


async def test_a_selection_of_nothing_is_refused(store: EventStore) -> None:
    with pytest.raises(InputError):
        await store.purge(PurgeSelection(), actor="cli", reason=None)


async def test_forks_of_a_purged_thread_lose_their_reference(store: EventStore) -> None:
    await _thread(store, "source", 1)
    await store.create_run(NewRun("fork-r0", "fork", parent_run_id="source-r0", parent_seq=1))
    await store.set_status("fork-r0", "finished")
    assert (await store.get_thread("fork")).source is not None
    await store.purge(PurgeSelection(thread_ids=("source",)), actor="cli", reason=None)
    fork = await store.get_thread("fork")
    assert fork.source is None
    assert (await store.get_run("fork-r0")).parent_run_id is None
    assert (await store.verify_chains(["fork"])).ok


def _posted(thread: str, messages: list[str]) -> bytes:
    """A RunAgentInput large enough to be kept as chunks (over ``INLINE_BELOW``)."""
    body = [{"id": f"m{i}", "role": "user", "content": text} for i, text in enumerate(messages)]
    return orjson.dumps({"threadId": thread, "runId": "r", "messages": body})


async def test_a_purge_deletes_the_chunks_only_its_thread_used(store: EventStore) -> None:
    shared = [f"a message both threads were posted, number {i} " * 8 for i in range(30)]
    secret = [f"only the purged thread said this, line {i} " * 8 for i in range(30)]
    kept_input = _posted("kept", shared)
    await store.create_run(NewRun("kept-r0", "kept", agent="a", input=kept_input))
    await store.set_status("kept-r0", "finished")
    await store.create_run(NewRun("gone-r0", "gone", agent="a", input=_posted("gone", shared)))
    await store.set_status("gone-r0", "finished")
    await store.create_run(NewRun("gone-r1", "gone", agent="a", input=_posted("x", secret)))
    await store.set_status("gone-r1", "finished")
    chunks = await stored_chunks(store)
    assert any(b"only the purged thread" in data for data in chunks)

    await store.purge(PurgeSelection(thread_ids=("gone",)), actor="cli", reason="erasure")

    chunks = await stored_chunks(store)
    assert not any(b"only the purged thread" in data for data in chunks)
    assert any(b"both threads were posted" in data for data in chunks)
    # The thread that stays reads its input whole, byte for byte, from what is left.
    assert (await store.get_run("kept-r0")).input == kept_input
    assert (await store.verify_chains()).ok
