"""EventStore.append_batches with ``closes``: a run's last events and its close, one commit."""

from __future__ import annotations

import asyncio

import pytest

from recorder.errors import InputError, RunClosed, RunNotFound
from recorder.store import Closing, EventStore, NewRun, Run
from tests.store.spec.conftest import ev

VIOLATIONS: list[dict[str, object]] = [{"seq": 1, "message": 'bad "frame" \x00 é'}]


def _closed(run: Run) -> tuple[object, ...]:
    return (run.status, run.outcome, run.error, run.violations, run.event_count)


async def test_a_close_with_its_events_is_the_close_set_status_writes(store: EventStore) -> None:
    """Two threads, the same turns: one closes each run apart (``set_status``), the other
    with its last events. Runs, threads and both hash chains come out the same."""
    turns = [
        ("finished", "success", None, None, "hello"),
        ("error", "error", "broke \x00 here", VIOLATIONS, None),
        ("interrupted", "interrupt", None, [], "hello again"),
        ("finished", "success", None, None, "hello again"),  # the same summary: kept
    ]
    for number, (status, outcome, error, violations, summary) in enumerate(turns):
        events = [ev(f'{{"turn":{number},"i":{i}}}') for i in range(number + 1)]
        for thread in ("apart", "with"):
            run_id = f"{thread}-{number}"
            await store.create_run(NewRun(run_id, thread, infer_parent=True))
            if thread == "apart":
                await store.append(run_id, events)
                await store.set_status(
                    run_id,
                    status,
                    outcome=outcome,
                    error=error,
                    violations=violations,
                    summary=summary,
                )
            else:
                close = Closing(run_id, status, outcome, error, violations, summary)
                appended = await store.append_batches([(run_id, events)], [close])
                assert [a.seq for a in appended[0]] == list(range(number + 1))
            run = await store.get_run(run_id)
            assert run.finished_at is not None
        apart = await store.get_run(f"apart-{number}")
        closed = await store.get_run(f"with-{number}")
        assert _closed(closed) == _closed(apart)
    for thread in ("apart", "with"):
        assert (await store.get_thread(thread)).summary == "hello again"
    report = await store.verify_chains(["apart", "with"])
    assert report.ok, report.problems
    assert [run for run, _head in report.sealed["with"]] == [f"with-{n}" for n in range(4)]
    heads = (await store.heads()).threads
    assert heads["with"][1] == heads["apart"][1] == len(turns)


async def test_several_runs_close_with_one_group_of_batches(store: EventStore) -> None:
    for run_id, thread in (("r1", "t1"), ("r2", "t2"), ("r3", "t2")):
        await store.create_run(NewRun(run_id, thread, infer_parent=True))
    closes = [Closing("r1", "finished", "success", summary="one"), Closing("r3", "cancelled")]
    batches = [("r1", [ev("1"), ev("2")]), ("r2", [ev("3")]), ("r3", [ev("4")])]
    await store.append_batches(batches, closes)
    statuses = [(await store.get_run(r)).status for r in ("r1", "r2", "r3")]
    assert statuses == ["finished", "running", "cancelled"]
    assert (await store.get_thread("t1")).summary == "one"
    await store.append("r2", [ev("5")])  # the one left running still takes events
    assert (await store.verify_chains(["t1", "t2"])).ok


async def test_a_close_without_events_of_its_run_is_written_too(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t1"))
    await store.append_batches([("r1", [ev("1")])], [Closing("r2", "finished")])
    assert [(await store.get_run(r)).status for r in ("r1", "r2")] == ["running", "finished"]
    assert (await store.verify_chains(["t1"])).ok


async def test_a_closed_run_takes_neither_events_nor_a_close(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t1"))
    await store.append_batches([("r1", [ev("1")])], [Closing("r1", "finished")])
    with pytest.raises(RunClosed):
        await store.append_batches([("r1", [ev("2")]), ("r2", [ev("3")])], [Closing("r2", "error")])
    # Nothing of the call was written: r2 is still running, without events.
    run = await store.get_run("r2")
    assert (run.status, run.event_count) == ("running", 0)
    assert (await store.get_run("r1")).event_count == 1


async def test_an_unknown_run_closes_nothing(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    with pytest.raises(RunNotFound):
        await store.append_batches(
            [("nope", [ev("1")]), ("r1", [ev("2")])], [Closing("r1", "error")]
        )
    run = await store.get_run("r1")
    assert (run.status, run.event_count) == ("running", 0)


async def test_only_an_end_closes_a_run(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    with pytest.raises(InputError, match="terminal status"):
        await store.append_batches([("r1", [ev("1")])], [Closing("r1", "running")])
    run = await store.get_run("r1")
    assert (run.status, run.event_count) == ("running", 0)


async def test_many_runs_of_one_thread_close_at_once(store: EventStore) -> None:
    """Runs of one thread closing together (each its own call): every run is sealed once,
    into one chain."""
    for n in range(8):
        await store.create_run(NewRun(f"r{n}", "t1", infer_parent=True))

    async def turn(n: int) -> None:
        await store.append_batches(
            [(f"r{n}", [ev(f"{n}"), ev(f"{n}!")])], [Closing(f"r{n}", "finished", summary=f"{n}")]
        )

    await asyncio.gather(*(turn(n) for n in range(8)))
    report = await store.verify_chains(["t1"])
    assert report.ok, report.problems
    assert sorted(run for run, _head in report.sealed["t1"]) == [f"r{n}" for n in range(8)]
    assert (await store.heads()).threads["t1"][1] == 8


async def test_a_close_moves_its_thread_s_update_to_when_it_ended(store: EventStore) -> None:
    # Every way a run closes: set_status (alone, and with a summary), with its last events
    # (one round trip on PostgreSQL), by the reaper, and an import's given end time.
    long_ago = 1_000_000.0
    for n in range(4):
        await store.create_run(NewRun(f"r{n}", f"t{n}", created_at=long_ago))
    await store.set_status("r0", "finished")
    await store.set_status("r1", "finished", summary="said")
    await store.append_batches([("r2", [ev("{}")])], [Closing("r2", "finished")])
    await store.mark_incomplete(owner=None, stale_before=None, exclude_owner=None)
    for n in range(4):
        run = await store.get_run(f"r{n}")
        thread = await store.get_thread(f"t{n}")
        assert run.finished_at is not None and thread.updated_at == run.finished_at, n
    # An end given (an import's) moves it there, never back.
    await store.create_run(NewRun("r4", "t4", created_at=long_ago))
    ended = long_ago + 60
    await store.append_batches([("r4", [ev("{}")])], [Closing("r4", "finished", finished_at=ended)])
    assert (await store.get_thread("t4")).updated_at == ended
    await store.create_run(NewRun("r5", "t4", created_at=long_ago + 120))
    await store.append_batches([("r5", [])], [Closing("r5", "finished", finished_at=long_ago)])
    assert (await store.get_thread("t4")).updated_at == long_ago + 120
