"""EventStore.rewrite_inputs: posted inputs replaced (a redaction after the fact)."""

from __future__ import annotations

import orjson
import pytest

from recorder.errors import InputError, ThreadNotFound
from recorder.store import EventStore, NewRun, open_store
from tests.conftest import raw_sql, stored_chunks, stored_inputs

SECRET = b"bob@example.com"


def _posted(thread: str, run: str, turns: int, secret: bool = True) -> bytes:
    messages = [
        {"id": f"m{i}", "role": "user", "content": f"turn {i} " + "words " * 40}
        for i in range(turns)
    ]
    if secret:
        messages[0]["content"] += SECRET.decode()
    return orjson.dumps({"threadId": thread, "runId": run, "messages": messages})


async def _thread(
    store: EventStore, thread: str = "t", runs: int = 3, secret: bool = True
) -> dict[str, bytes]:
    posted = {}
    for n in range(runs):
        run_id = f"{thread}-r{n}"
        posted[run_id] = _posted(thread, run_id, 10 + n, secret)
        await store.create_run(NewRun(run_id, thread, input=posted[run_id]))
        await store.set_status(run_id, "finished")
    return posted


async def _stored_bytes(store: EventStore) -> bytes:
    """Every byte kept for inputs: whole ones, deltas and chunks."""
    return b"".join(await stored_inputs(store)) + b"".join(await stored_chunks(store))


async def test_inputs_rewritten_come_back_as_given_and_the_old_bytes_are_gone(
    store: EventStore,
) -> None:
    posted = await _thread(store)
    other = await _thread(store, "u", 1, secret=False)  # its chunks shared, not the secret
    bases = dict(await raw_sql(store, "SELECT run_id, base FROM run_inputs"))
    assert bases["t-r1"] == "t-r0" and bases["t-r2"] == "t-r1"  # kept as changes
    await store.save_checkpoint("t-r1", 0, b"folded from the old input")
    assert SECRET in await _stored_bytes(store)
    # r1 is kept as changes from r0: rewriting r0 alone keeps r1 whole first, as it was,
    # and r2, kept as changes from r1, is read as before.
    assert await store.rewrite_inputs("t", {"t-r0": b"{}"}) == 1
    assert [(await store.get_run(r)).input for r in posted] == [b"{}", *list(posted.values())[1:]]
    bases = dict(await raw_sql(store, "SELECT run_id, base FROM run_inputs"))
    assert bases["t-r1"] is None and bases["t-r2"] == "t-r1"
    new = {run: data.replace(SECRET, b"[REDACTED:email]") for run, data in posted.items()}
    assert await store.rewrite_inputs("t", new) == 3
    for run_id, data in new.items():
        assert (await store.get_run(run_id)).input == data
    assert (await store.get_run("u-r0")).input == other["u-r0"]
    assert SECRET not in await _stored_bytes(store)
    assert await store.nearest_checkpoint("t-r1", 0) is None
    assert dict(await raw_sql(store, "SELECT run_id, base FROM run_inputs"))["t-r2"] is None
    # What cannot be rewritten is refused, and nothing is written.
    with pytest.raises(ThreadNotFound):
        await store.rewrite_inputs("nope", {"t-r0": b"{}"})
    with pytest.raises(InputError, match="u-r0"):
        await store.rewrite_inputs("t", {"u-r0": b"{}", "t-r0": b"{}"})
    assert (await store.get_run("t-r0")).input == new["t-r0"]


async def test_a_process_holding_an_input_from_before_its_rewrite_makes_no_delta_of_it(
    db_url: str,
) -> None:
    """A recording process keeps the latest input of each thread as the base of the next
    run's delta. Rewritten by another process, that input is no base any more: the next
    run's input is kept whole (a tree), and comes back as posted. (Two stores on one
    database: a file or PostgreSQL.)"""
    store = await open_store(db_url, migrate=True)
    try:
        await _next_turns_after_a_rewrite_elsewhere(store, db_url)
    finally:
        await store.close()


async def _next_turns_after_a_rewrite_elsewhere(store: EventStore, url: str) -> None:
    posted = await _thread(store, runs=2)
    rewriter = await open_store(url)
    try:
        new = {run: data.replace(SECRET, b"[REDACTED:email]") for run, data in posted.items()}
        await rewriter.rewrite_inputs("t", new)
    finally:
        await rewriter.close()
    # The next turn: the client posts the history again, as it has it.
    nxt = _posted("t", "t-r2", 12).replace(SECRET, b"[REDACTED:email]")
    await store.create_run(NewRun("t-r2", "t", input=nxt))
    assert (await store.get_run("t-r2")).input == nxt
    assert dict(await raw_sql(store, "SELECT run_id, base FROM run_inputs"))["t-r2"] is None
    # and a turn after it is a delta again, from the new one
    last = _posted("t", "t-r3", 13).replace(SECRET, b"[REDACTED:email]")
    await store.create_run(NewRun("t-r3", "t", input=last))
    assert (await store.get_run("t-r3")).input == last
    assert dict(await raw_sql(store, "SELECT run_id, base FROM run_inputs"))["t-r3"] == "t-r2"
