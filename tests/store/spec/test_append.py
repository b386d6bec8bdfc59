"""EventStore.append (one run's batch), and the log's append-only rule."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time

import asyncpg
import pytest

from recorder.errors import RunClosed, RunNotFound
from recorder.store import EventStore, NewEvent, NewRun, PurgeSelection, Redacted
from tests.conftest import raw_sql
from tests.store.spec.conftest import ev


async def test_seq_is_gap_free_and_positions_increase(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t1"))
    first = await store.append("r1", [ev('{"n":0}'), ev('{"n":1}')])
    other = await store.append("r2", [ev('{"n":0}')])
    second = await store.append("r1", [ev('{"n":2}')])
    assert [a.seq for a in first + second] == [0, 1, 2]
    assert other[0].seq == 0
    positions = [a.position for a in first + other + second]
    assert positions == sorted(positions) and len(set(positions)) == 3 + 1 - 1 + 1
    assert positions == list(range(positions[0], positions[0] + 4))  # contiguous here
    assert (await store.get_run("r1")).event_count == 3
    stored = await store.read_events("r1")
    assert [(e.seq, e.position) for e in stored] == [tuple(a) for a in first + second]


async def test_an_event_is_stored_as_given(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    before = time.time()
    await store.append(
        "r1",
        [
            NewEvent(b'{"type":"RUN_STARTED"}', "RUN_STARTED"),
            NewEvent(b"garbage", None, origin="recorder", recorded_at=123.5),
        ],
    )
    started, garbage = await store.read_events("r1")
    assert (started.thread_id, started.run_id, started.type, started.origin) == (
        "t1",
        "r1",
        "RUN_STARTED",
        "upstream",
    )
    assert before <= started.recorded_at <= time.time()
    assert (garbage.payload, garbage.type, garbage.origin, garbage.recorded_at) == (
        b"garbage",
        None,
        "recorder",
        123.5,
    )


# What the database's triggers raise (the store translates it: see test_errors).
REFUSED = (sqlite3.IntegrityError, asyncpg.RaiseError)
PAYLOADS = [
    '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"héllo wörld ✓ 🚀 中文"}',
    '{"type":"CUSTOM","value":"tab\\t quote\\" backslash\\\\ nl\\n \\u00e9 \\ud83d\\ude80"}',
    '{"z":1,"a":2,"m":{"y":[3,2,1],"b":null}}',
    '{  "spaced" :  [ 1 ,2 ] ,\t"x":1.50 , "big": 12345678901234567890 }',
    "not json at all \x00\x01",
    "",
]


async def test_payloads_are_byte_exact(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    big = json.dumps({"type": "STATE_SNAPSHOT", "snapshot": {"blob": "é" * (5 * 1024 * 1024 // 2)}})
    raw = [p.encode() for p in PAYLOADS] + [big.encode(), bytes(range(256))]
    await store.append("r1", [NewEvent(p, None) for p in raw])
    back = await store.read_events("r1")
    assert [e.payload for e in back] == raw
    assert len(back[-2].payload) > 5 * 1024 * 1024


async def test_a_type_with_a_nul_character_is_stored_without_it(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    payload = b'{"type":"CUS\\u0000TOM"}'
    await store.append("r1", [NewEvent(payload, "CUS\x00TOM")])
    (stored,) = await store.read_events("r1")
    assert (stored.type, stored.payload) == ("CUSTOM", payload)


async def test_an_append_refreshes_the_runs_heartbeat(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", created_at=1000.0))
    before = time.time()
    await store.append("r1", [ev("{}")])
    heartbeat = (await store.get_run("r1")).heartbeat_at
    assert heartbeat is not None and before <= heartbeat <= time.time()


async def test_nothing_to_append_is_nothing(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    assert await store.append("r1", []) == []
    assert (await store.get_run("r1")).event_count == 0


async def test_an_unknown_run_takes_no_events(store: EventStore) -> None:
    with pytest.raises(RunNotFound):
        await store.append("nope", [ev("{}")])
    assert await store.max_position() == 0


@pytest.mark.parametrize("status", ["finished", "error", "incomplete", "cancelled"])
async def test_closed_run_takes_no_events(store: EventStore, status: str) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev('{"type":"RUN_STARTED"}', "RUN_STARTED")])
    await store.set_status("r1", status, outcome="success")
    with pytest.raises(RunClosed, match=f"run 'r1' is {status}"):
        await store.append("r1", [ev("{}")])
    run = await store.get_run("r1")
    assert (run.status, run.outcome, run.event_count) == (status, "success", 1)
    assert run.finished_at is not None
    assert len(await store.read_events("r1")) == 1


async def test_concurrent_appends_to_one_run(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))

    async def writer(w: int) -> None:
        for i in range(10):
            await store.append("r1", [ev(f'{{"w":{w},"i":{i},"k":{k}}}') for k in range(3)])

    await asyncio.gather(*(writer(w) for w in range(8)))
    events = await store.read_events("r1")
    assert [e.seq for e in events] == list(range(8 * 10 * 3))
    assert len({e.payload for e in events}) == 240
    positions = [e.position for e in events]
    assert positions == sorted(positions)  # seq order is commit order is position order
    # Each writer's events keep their order inside the run.
    for w in range(8):
        mine = [json.loads(e.payload) for e in events if json.loads(e.payload)["w"] == w]
        assert [(m["i"], m["k"]) for m in mine] == [(i, k) for i in range(10) for k in range(3)]


async def test_an_append_is_whole_even_when_its_caller_is_cancelled(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    events = [ev(f'{{"i":{i},"pad":"{"x" * 500}"}}') for i in range(2000)]  # a large one
    appending = asyncio.create_task(store.append("r1", events))
    await asyncio.sleep(0)
    appending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await appending
    stored = len(await store.read_events("r1"))
    if store.append_survives_cancel:
        assert stored == 2000
    else:
        assert stored in (0, 2000)
    # The store goes on working.
    assert [a.seq for a in await store.append("r1", [ev("{}")])] == [stored]


async def test_the_database_refuses_to_change_or_remove_events(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev('{"original":true}')])
    for sql in (
        "UPDATE events SET payload = payload",
        "UPDATE events SET seq = seq + 1",
        "DELETE FROM events",
    ):
        with pytest.raises(REFUSED, match="events are append-only"):
            await raw_sql(store, sql)
    if "postgresql" in store.url:
        with pytest.raises(REFUSED, match="events are append-only"):
            await raw_sql(store, "TRUNCATE events CASCADE")
    assert [e.payload for e in await store.read_events("r1")] == [b'{"original":true}']


async def test_the_database_refuses_to_change_or_remove_what_redaction_did(
    store: EventStore,
) -> None:
    """The rules and the keyed hash of the original: what shows a redacted event was the
    one recorded. Only a rewrite (a row gains rules) and a purge change them."""
    await store.create_run(NewRun("r1", "t1"))
    secret = ev('{"type":"CUSTOM","name":"x","value":"bob@example.com"}')
    redacted = Redacted(("email",), "ab" * 32)
    await store.append(
        "r1", [secret._replace(payload=b'{"v":"[REDACTED:email]"}', redacted=redacted)]
    )
    for sql in (
        "UPDATE redactions SET rules = '[]'",
        "UPDATE redactions SET original_mac = NULL",
        "DELETE FROM redactions",
    ):
        with pytest.raises(REFUSED, match="what redaction did is append-only"):
            await raw_sql(store, sql)
    if "postgresql" in store.url:
        with pytest.raises(REFUSED, match="what redaction did is append-only"):
            await raw_sql(store, "TRUNCATE redactions")
    (kept,) = await store.list_redactions("r1")
    assert (kept.rules, kept.mac) == (("email",), "ab" * 32)
    # The sanctioned rewrite adds its rules to the row; the purge removes it.
    await store.set_status("r1", "finished")
    again = {0: b'{"v":"[REDACTED:card]"}'}
    await store.rewrite(
        "r1", again, actor="t", reason=None, redacted={0: Redacted(("card",), None)}
    )
    (kept,) = await store.list_redactions("r1")
    assert (set(kept.rules), kept.mac) == ({"email", "card"}, "ab" * 32)
    await store.purge(PurgeSelection(thread_ids=("t1",)), actor="t", reason=None)
    assert await raw_sql(store, "SELECT count(*) FROM redactions") == [(0,)]


async def test_the_database_refuses_to_change_or_remove_posted_inputs(store: EventStore) -> None:
    posted = b'{"messages":[{"id":"u","role":"user","content":"delete my file"}]}'
    await store.create_run(NewRun("r1", "t1", input=posted))
    for sql in (
        "UPDATE run_inputs SET input = NULL",
        "UPDATE run_inputs SET rewritten_at = 1",
        "DELETE FROM run_inputs",
    ):
        with pytest.raises(REFUSED, match="posted inputs are append-only"):
            await raw_sql(store, sql)
    if "postgresql" in store.url:
        with pytest.raises(REFUSED, match="posted inputs are append-only"):
            await raw_sql(store, "TRUNCATE run_inputs")
    assert (await store.get_run("r1")).input == posted
    # The sanctioned rewrite still replaces it.
    changed = posted.replace(b"delete my file", b"[REDACTED]")
    assert await store.rewrite_inputs("t1", {"r1": changed}) == 1
    assert (await store.get_run("r1")).input == changed
