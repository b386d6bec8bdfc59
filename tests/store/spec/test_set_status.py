"""EventStore.set_status."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from recorder.errors import InputError, RunNotFound
from recorder.store import EventStore, NewRun, open_store
from recorder.store.model import STATUSES, TERMINAL
from tests.conftest import create_pg_database, drop_pg_database, pg_available, require


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


async def test_a_summary_is_kept_until_a_close_brings_another(store: EventStore) -> None:
    """Each close may bring the thread's summary: the same one leaves it as it is, another
    replaces it, none keeps it; so does a status that is not an end, and a run closed again."""
    long = "a long conversation " * 1500  # past PostgreSQL's inline size: kept in TOAST
    for number, summary in enumerate([long, long, None, long + "more", None]):
        await store.create_run(NewRun(f"r{number}", "t1"))
        await store.set_status(f"r{number}", "finished", summary=summary)
    assert (await store.get_thread("t1")).summary == long + "more"
    await store.set_status("r4", "running", summary="running again")
    assert (await store.get_thread("t1")).summary == "running again"
    await store.set_status("r4", "running", summary="running again")
    await store.set_status("r4", "finished", summary=long)  # closed again: not re-sealed
    assert (await store.get_thread("t1")).summary == long
    assert (await store.verify_chains(["t1"])).ok


@pytest.fixture
async def pg_store() -> AsyncIterator[EventStore]:
    require(pg_available(), "PostgreSQL at 127.0.0.1:5432")
    url = await create_pg_database()
    store = await open_store(url, migrate=True)
    try:
        yield store
    finally:
        await store.close()
        await drop_pg_database(url)


@pytest.mark.postgres
async def test_an_unchanged_summary_leaves_no_dead_copy(pg_store: EventStore) -> None:
    """On PostgreSQL, closing runs with the summary the thread has already adds nothing
    to the thread's TOAST table (a rewritten long summary would leave a dead copy each)."""
    long = "".join(f"word{i} " for i in range(6000))  # ~50 KB, barely compressible
    await pg_store.create_run(NewRun("r0", "t1"))
    await pg_store.set_status("r0", "finished", summary=long)
    before = await _toast_bytes(pg_store)
    for number in range(1, 6):
        await pg_store.create_run(NewRun(f"r{number}", "t1"))
        await pg_store.set_status(f"r{number}", "finished", summary=long)
    assert await _toast_bytes(pg_store) == before > 0
    await pg_store.create_run(NewRun("r6", "t1"))
    await pg_store.set_status("r6", "finished", summary=long + "!")
    assert await _toast_bytes(pg_store) > before


async def _toast_bytes(store: EventStore) -> int:
    """The bytes of the threads table's TOAST, dead rows included (until vacuumed)."""
    from recorder.store.sql import SqlStore
    from recorder.store.statements import Fetch

    assert isinstance(store, SqlStore)

    def body() -> Any:
        ((name,),) = yield (
            Fetch("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'threads'"),
            (),
        )
        ((size,),) = yield Fetch(f"SELECT pg_relation_size('{name}')"), ()
        return int(size)

    count: int = await store.database.read(body)
    return count
