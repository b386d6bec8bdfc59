"""EventStore.create_run."""

from __future__ import annotations

import asyncio
import time

import pytest

from recorder.errors import Conflict, InputError
from recorder.store import EventStore, NewRun
from tests.store.spec.conftest import ev


async def test_a_new_run_is_running_and_read_back_as_returned(store: EventStore) -> None:
    posted = b'{"threadId":"t1","runId":"r1","messages":[],  "state":{"b":1,"a":2}}'
    before = time.time()
    run = await store.create_run(NewRun("r1", "t1", agent="echo", input=posted, owner="me"))
    assert (run.run_id, run.thread_id, run.agent, run.owner) == ("r1", "t1", "echo", "me")
    assert (run.status, run.event_count, run.outcome, run.error) == ("running", 0, None, None)
    assert run.violations == [] and run.finished_at is None
    assert before <= run.created_at <= time.time() and run.heartbeat_at == run.created_at
    assert run.input == posted  # byte for byte
    assert await store.get_run("r1") == run
    (listed,) = await store.list_runs("t1", inputs=True)
    assert listed.input == posted


async def test_the_thread_is_created_and_the_run_becomes_its_latest(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", agent="echo", created_at=1000.0))
    thread = await store.get_thread("t1")
    assert (thread.run_count, thread.latest_run_id, thread.agent) == (1, "r1", "echo")
    assert (thread.created_at, thread.updated_at, thread.latest_status) == (
        1000.0,
        1000.0,
        "running",
    )
    await store.create_run(NewRun("r2", "t1", agent="other", created_at=1005.0))
    thread = await store.get_thread("t1")
    assert (thread.run_count, thread.latest_run_id) == (2, "r2")
    assert (thread.agent, thread.created_at, thread.updated_at) == ("echo", 1000.0, 1005.0)


async def test_given_parents_are_kept_as_given(store: EventStore) -> None:
    run = await store.create_run(
        NewRun("r2", "t1", parent_run_id="elsewhere", parent_seq=4, origin="import")
    )
    assert (run.parent_run_id, run.parent_seq, run.parent_inferred) == ("elsewhere", 4, False)
    assert run.origin == "import"
    flagged = await store.create_run(NewRun("r3", "t1", parent_run_id="r2", parent_inferred=True))
    assert (flagged.parent_run_id, flagged.parent_inferred) == ("r2", True)
    assert await store.get_run("r3") == flagged


async def test_parent_inferred_inside_the_creating_transaction(store: EventStore) -> None:
    first = await store.create_run(NewRun("r1", "t1", infer_parent=True))
    assert (first.parent_run_id, first.parent_inferred) == (None, False)
    second = await store.create_run(NewRun("r2", "t1", infer_parent=True))
    assert (second.parent_run_id, second.parent_inferred) == ("r1", True)
    given = await store.create_run(NewRun("r3", "t1", parent_run_id="r1", infer_parent=True))
    assert (given.parent_run_id, given.parent_inferred) == ("r1", False)
    assert await store.get_run("r2") == second
    # Concurrent posts on one thread each get a distinct, earlier parent: a chain.
    await asyncio.gather(
        *(store.create_run(NewRun(f"c{i}", "t2", infer_parent=True)) for i in range(6))
    )
    parents = [(await store.get_run(f"c{i}")).parent_run_id for i in range(6)]
    assert parents.count(None) == 1 and len({p for p in parents if p}) == 5


async def test_first_runs_of_a_new_thread_posted_at_once_line_up(store: EventStore) -> None:
    # Inputs kept as trees (large, nothing to be a delta of) are created statement by
    # statement on every database: the thread is inserted by one of them, claimed by it,
    # and each of the others finds it there and takes its latest run as its parent.
    big = b'{"messages":[' + b",".join(b'{"content":"%d"}' % i for i in range(400)) + b"]}"
    for round_no in range(3):
        thread, runs = f"t{round_no}", [f"r{round_no}-{i}" for i in range(6)]
        await asyncio.gather(
            *(store.create_run(NewRun(r, thread, input=big, infer_parent=True)) for r in runs)
        )
        got = {r: await store.get_run(r) for r in runs}
        parents = [run.parent_run_id for run in got.values()]
        assert parents.count(None) == 1 and len({p for p in parents if p}) == 5
        assert {p for p in parents if p} < set(runs)
        thread_row = await store.get_thread(thread)
        assert thread_row.run_count == 6
        # The latest run is the one no other names as its parent: the end of the chain.
        assert thread_row.latest_run_id in set(runs) - set(parents)
        assert all(run.input == big for run in got.values())


async def test_duplicate_run_id_is_a_conflict(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", input=b"first"))
    with pytest.raises(Conflict, match=r"^run 'r1' already exists$"):
        await store.create_run(NewRun("r1", "t2", input=b"second"))
    run = await store.get_run("r1")
    assert (run.thread_id, run.input) == ("t1", b"first")
    # Nothing of the refused run was kept: not its thread, not a claim on the first one.
    assert [t.thread_id for t in (await store.list_threads()).items] == ["t1"]
    assert (await store.get_thread("t1")).run_count == 1


async def test_one_new_run_id_posted_ten_times_at_once_gives_one_run(store: EventStore) -> None:
    # As ten clients posting one runId: the winner records and closes its run while the
    # others are still being refused. Refusals must be Conflicts, never a deadlock.
    async def post(run_id: str) -> None:
        await store.create_run(NewRun(run_id, "t1", agent="a", input=b"{}", infer_parent=True))
        await store.append(run_id, [ev('{"type":"RUN_STARTED"}', "RUN_STARTED")])
        await store.set_status(run_id, "finished", outcome="success", summary="hello")

    for attempt in range(5):
        run_id = f"r{attempt}"
        results = await asyncio.gather(*(post(run_id) for _ in range(10)), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        assert len(failures) == 9, failures
        assert all(isinstance(f, Conflict) for f in failures), failures
        assert {str(f) for f in failures} == {f"run {run_id!r} already exists"}
        run = await store.get_run(run_id)
        assert (run.status, run.event_count) == ("finished", 1)
    assert (await store.get_thread("t1")).run_count == 5


@pytest.mark.parametrize(
    "run",
    [NewRun("r\x001", "t1"), NewRun("r1", "t\x001"), NewRun("r1", "t1", parent_run_id="p\x00")],
)
async def test_an_id_with_a_nul_character_is_refused(store: EventStore, run: NewRun) -> None:
    with pytest.raises(InputError, match="NUL"):
        await store.create_run(run)
    assert (await store.list_threads()).items == []


async def test_a_run_that_must_start_its_thread_is_refused_on_an_existing_one(
    store: EventStore,
) -> None:
    await store.create_run(NewRun("r1", "t1"))
    with pytest.raises(Conflict, match="exists already"):
        await store.create_run(NewRun("r2", "t1", new_thread=True))
    assert [r.run_id for r in await store.list_runs("t1")] == ["r1"]
    made = await asyncio.gather(
        *(store.create_run(NewRun(f"b{i}", "branch", new_thread=True)) for i in range(5)),
        return_exceptions=True,
    )
    assert sum(not isinstance(m, BaseException) for m in made) == 1
    assert all(isinstance(m, Conflict) for m in made if isinstance(m, BaseException))
    assert len(await store.list_runs("branch")) == 1
