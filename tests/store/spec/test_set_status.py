"""EventStore.set_status."""

from __future__ import annotations

import time

import pytest

from recorder.errors import InputError, RunNotFound
from recorder.store import EventStore, NewRun
from recorder.store.model import STATUSES, TERMINAL


@pytest.mark.parametrize("status", sorted(TERMINAL))
async def test_a_terminal_status_closes_the_run(store: EventStore, status: str) -> None:
    await store.create_run(NewRun("r1", "t1"))
    before = time.time()
    await store.set_status("r1", status, outcome="success")
    run = await store.get_run("r1")
    assert (run.status, run.outcome, run.error, run.violations) == (status, "success", None, [])
    assert run.finished_at is not None and before <= run.finished_at <= time.time()
    assert (await store.get_thread("t1")).latest_status == status


async def test_running_is_not_an_end(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.set_status("r1", "running", outcome="pending")
    run = await store.get_run("r1")
    assert (run.status, run.outcome, run.finished_at) == ("running", "pending", None)


async def test_what_is_given_replaces_what_was_there(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    violations: list[dict[str, object]] = [{"seq": 3, "message": 'bad "frame" \x00 é'}]
    await store.set_status("r1", "error", outcome="error", error="boom", violations=violations)
    run = await store.get_run("r1")
    assert (run.outcome, run.error, run.violations) == ("error", "boom", violations)
    await store.set_status("r1", "finished", outcome="success")
    run = await store.get_run("r1")
    # Not given: kept.
    assert (run.status, run.outcome, run.error, run.violations) == (
        "finished",
        "success",
        "boom",
        violations,
    )


async def test_closing_a_run_can_set_its_threads_summary(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t2"))
    await store.set_status("r1", "finished", outcome="success", summary="about Paris")
    assert (await store.get_thread("t1")).summary == "about Paris"
    assert (await store.get_thread("t2")).summary is None
    assert (await store.get_run("r1")).status == "finished"
    # One transaction: an unknown run changes no summary either.
    with pytest.raises(RunNotFound):
        await store.set_status("nope", "finished", summary="lost")
    await store.set_status("r2", "error", error="boom")
    assert (await store.get_thread("t2")).summary is None


async def test_text_with_nul_characters_closes_the_run(store: EventStore) -> None:
    # A user message "hello\u0000world" is valid JSON; the summary built from it must not
    # keep the run from closing (PostgreSQL's text cannot hold NUL): NUL is left out.
    await store.create_run(NewRun("r1", "t1"))
    await store.set_status(
        "r1",
        "error",
        outcome="err\x00or",
        error="broke \x00 here",
        summary="hello\u0000world\n",
    )
    run = await store.get_run("r1")
    assert (run.status, run.outcome, run.error) == ("error", "error", "broke  here")
    assert (await store.get_thread("t1")).summary == "helloworld\n"


async def test_an_unknown_run_is_not_found(store: EventStore) -> None:
    with pytest.raises(RunNotFound, match="'nope'"):
        await store.set_status("nope", "finished")


async def test_unknown_status_is_rejected(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    with pytest.raises(InputError, match="unknown run status 'done'"):
        await store.set_status("r1", "done")
    assert (await store.get_run("r1")).status == "running"
    assert "done" not in STATUSES
