"""Receipts: the log's heads at a moment, signed; later proof that the log up to them is
unchanged, while it goes on growing. Also the audited rewrite."""

from __future__ import annotations

import pytest

from recorder.errors import InputError
from recorder.store import EventStore, NewRun, PurgeSelection, chain
from recorder.store.sql import SqlStore
from recorder.store.statements import Body, Execute, Sanction
from recorder.timetravel import audit, receipts
from tests.conftest import raw_sql
from tests.store.spec.conftest import ev

KEY = "receipt-key"


async def _log(store: EventStore) -> None:
    await store.create_run(NewRun("done", "t1"))
    await store.append("done", [ev(f'{{"n":{i}}}') for i in range(3)])
    await store.set_status("done", "finished")
    await store.create_run(NewRun("live", "t2"))
    await store.append("live", [ev(f'{{"n":{i}}}') for i in range(3)])


async def test_a_receipt_proves_the_log_up_to_it_while_it_grows(store: EventStore) -> None:
    await _log(store)
    receipt = await receipts.receipt(store, KEY)
    assert receipt["running"]["live"]["seq"] == 2 and receipt["threads"]["t1"]["sealed"] == 1
    # The log goes on: the live run gets more events and closes, t1 a new run, a new thread.
    await store.append("live", [ev("{}")])
    await store.set_status("live", "finished")
    await store.create_run(NewRun("next", "t1"))
    await store.set_status("next", "finished")
    await store.create_run(NewRun("other", "t3"))
    result = await receipts.check_receipt(store, receipt, KEY)
    assert result["ok"], result["problems"]
    # An unsigned receipt does not pass where a key is set; a signed one needs the key.
    unsigned = await receipts.receipt(store, None)
    result = await receipts.check_receipt(store, unsigned, KEY)
    assert [p["what"] for p in result["problems"]] == ["the receipt is not signed"]
    with pytest.raises(InputError, match="audit_key"):
        await receipts.check_receipt(store, receipt, None)


async def _tamper(store: EventStore, run_id: str, seq: int) -> None:
    """Change an event's payload as someone holding the database could, past its triggers
    (its hash left as it was: a break that verification finds)."""
    if store.url.startswith("sqlite"):
        await raw_sql(store, "DROP TRIGGER events_no_update")
    else:
        await raw_sql(store, "DROP TRIGGER events_append_only ON events")
    change = "UPDATE events SET payload = ? WHERE run_id = ? AND seq = ?"
    await raw_sql(store, change, b"1", run_id, seq)


async def test_a_change_before_the_receipt_is_found(store: EventStore) -> None:
    await _log(store)
    receipt = await receipts.receipt(store, KEY)
    await _tamper(store, "live", 1)
    result = await receipts.check_receipt(store, receipt, KEY)
    assert not result["ok"]
    assert ("t2", "live", 2) in [(p["threadId"], p["runId"], p["seq"]) for p in result["problems"]]


async def test_a_thread_gone_without_a_tombstone_is_found(store: EventStore) -> None:
    await _log(store)
    receipt = await receipts.receipt(store, None)
    receipt["threads"]["t9"] = {"head": "00" * 32, "sealed": 0}
    result = await receipts.check_receipt(store, receipt, None)
    assert [p["threadId"] for p in result["problems"]] == ["t9"]
    assert "no purge's tombstone" in result["problems"][0]["what"]


async def test_an_audited_rewrite_is_in_the_audit_log(store: EventStore) -> None:
    await _log(store)
    result = await audit.rewrite(store, "done", {1: b'{"n":"[REDACTED]"}'}, actor="cli", reason="r")
    assert result["rewritten"] == [1] and result["newHead"] != result["oldHead"]
    (action,) = await store.list_actions()
    assert (action.actor, action.action, action.target, action.outcome) == (
        "cli",
        "rewrite",
        "done",
        "ok",
    )
    with pytest.raises(InputError):
        await audit.rewrite(store, "done", {7: b"{}"}, actor="cli", reason=None)
    assert (await store.list_actions())[0].outcome == "error"
    assert (await store.verify_chains()).ok


async def _purge(store: EventStore, thread_id: str) -> None:
    selection = PurgeSelection(thread_ids=(thread_id,))
    await audit.purge(store, selection, actor="cli", reason="erasure", dry_run=False)


async def test_a_purge_since_the_receipt_accounts_for_its_thread_only_with_its_chain(
    store: EventStore,
) -> None:
    await _log(store)
    await store.create_run(NewRun("second", "t1"))
    await store.set_status("second", "finished")
    receipt = await receipts.receipt(store, None)
    assert receipt["threads"]["t1"]["sealed"] == 2
    # Runs closed after the receipt, then the purge: its tombstone covers more runs.
    await store.create_run(NewRun("third", "t1"))
    await store.set_status("third", "finished")
    await _purge(store, "t1")
    result = await receipts.check_receipt(store, receipt, None)
    assert result["ok"], result["problems"]
    (note,) = result["sanctioned"]
    assert (
        note["threadId"] == "t1" and "purged by cli" in note["what"] and "erasure" in note["what"]
    )
    # A tombstone that does not hold the receipt's chain accounts for nothing.
    forged = dict(receipt, threads={"t1": {"head": "ab" * 32, "sealed": 2}})
    result = await receipts.check_receipt(store, forged, None)
    assert [p["threadId"] for p in result["problems"]] == ["t1"]
    assert "no purge since the receipt holds its chain" in result["problems"][0]["what"]


async def test_a_tombstone_written_by_hand_or_before_the_receipt_accounts_for_nothing(
    store: EventStore,
) -> None:
    await _log(store)
    # A purge before the receipt, of a thread of the same name that existed then.
    await store.create_run(NewRun("old", "t9"))
    await store.set_status("old", "finished")
    await _purge(store, "t9")
    await store.create_run(NewRun("new", "t9"))
    await store.set_status("new", "finished")
    receipt = await receipts.receipt(store, None)
    # Gone by hand, with a tombstone inserted by hand that names it (a plain INSERT),
    # past the triggers as any client of the database can get past them.
    fake = '[{"threadId": "t9", "head": "00", "sealed": 1, "runs": []}]'

    def by_hand() -> Body[None]:
        yield Sanction("purge"), ()
        for table in ("events", "checkpoints", "run_inputs", "search_docs", "search_runs"):
            yield Execute(f"DELETE FROM {table} WHERE run_id = 'new'"), ()
        yield Execute("DELETE FROM runs WHERE thread_id = 't9'"), ()
        yield Execute("DELETE FROM threads WHERE thread_id = 't9'"), ()
        yield Sanction("purge", on=False), ()
        insert = "INSERT INTO purges (at, actor, reason, threads, runs, events, detail) "
        yield Execute(insert + "VALUES (0, 'x', 'y', 1, 0, 0, ?)"), (fake,)

    assert isinstance(store, SqlStore)
    await store.database.write(by_hand)
    result = await receipts.check_receipt(store, receipt, None)
    assert [p["threadId"] for p in result["problems"]] == ["t9"], result
    assert result["sanctioned"] == []


async def test_a_sanctioned_rewrite_since_the_receipt_is_named_not_a_mismatch(
    store: EventStore,
) -> None:
    await _log(store)
    receipt = await receipts.receipt(store, None)
    await audit.rewrite(store, "done", {1: b'{"n":"[REDACTED]"}'}, actor="cli", reason="redact")
    await audit.rewrite(store, "done", {2: b'{"n":"[REDACTED]"}'}, actor="cli", reason="again")
    result = await receipts.check_receipt(store, receipt, None)
    assert result["ok"], result["problems"]
    notes = result["sanctioned"]  # each rewrite, naming its record
    assert [(n["threadId"], n["runId"]) for n in notes] == [("t1", "done")] * 2
    assert ["(redact)" in notes[0]["what"], "(again)" in notes[1]["what"]] == [True, True]
    assert all("rewritten by cli" in n["what"] for n in notes)
    # Tampering after the rewrite is still found.
    await _tamper(store, "done", 0)
    result = await receipts.check_receipt(store, receipt, None)
    assert not result["ok"]


@pytest.mark.parametrize(
    "change",
    [
        {"threads": {"t1": {}}},
        {"threads": {"t1": "abc"}},
        {"threads": {"t1": {"head": "00", "sealed": "2"}}},
        {"running": {"live": {"threadId": "t2"}}},
        {"running": []},
        {"at": "yesterday"},
    ],
)
async def test_a_malformed_receipt_is_an_input_error(
    store: EventStore, change: dict[str, object]
) -> None:
    await _log(store)
    receipt = {**await receipts.receipt(store, None), **change}
    with pytest.raises(InputError, match="not a receipt"):
        await receipts.check_receipt(store, receipt, None)


async def _forge(store: EventStore, run_id: str, thread_id: str, seq: int, payload: bytes) -> None:
    """Change an event as someone with the database could: its hash and every later one
    recomputed, the run's head and its thread's chain too (no break left to find)."""
    events = await store.read_events(run_id)
    hashes = await raw_sql(store, f"SELECT hash FROM events WHERE run_id = '{run_id}' ORDER BY seq")
    previous = bytes(hashes[seq - 1][0]) if seq else chain.run_genesis(thread_id, run_id)
    new = [(e.type, payload if e.seq == seq else e.payload) for e in events[seq:]]
    links = chain.event_links(previous, seq, new)

    def by_hand() -> Body[None]:
        yield Sanction("rewrite"), ()
        for event, (_kind, data), link in zip(events[seq:], new, links, strict=True):
            yield (
                Execute("UPDATE events SET payload = ?, hash = ? WHERE run_id = ? AND seq = ?"),
                (
                    data,
                    link,
                    run_id,
                    event.seq,
                ),
            )
        yield Sanction("rewrite", on=False), ()
        yield Execute("UPDATE runs SET head = ? WHERE run_id = ?"), (links[-1], run_id)
        head = chain.thread_head(thread_id, [(run_id, links[-1])])
        yield Execute("UPDATE threads SET head = ? WHERE thread_id = ?"), (head, thread_id)

    assert isinstance(store, SqlStore)
    await store.database.write(by_hand)


async def test_a_rewrite_since_the_receipt_explains_only_the_events_it_rewrote(
    store: EventStore,
) -> None:
    await store.create_run(NewRun("r", "t"))
    await store.append("r", [ev(f'{{"n":{i}}}') for i in range(2)])
    receipt = await receipts.receipt(store, None)
    assert receipt["running"]["r"]["seq"] == 1
    await store.append("r", [ev(f'{{"n":{i}}}') for i in range(2, 4)])
    await store.set_status("r", "finished")
    # A sanctioned rewrite of the event at the receipt's seq: named, not a mismatch.
    await audit.rewrite(store, "r", {1: b'{"n":"[REDACTED]"}'}, actor="cli", reason="redact")
    result = await receipts.check_receipt(store, receipt, None)
    assert result["ok"], result["problems"]
    assert [n["runId"] for n in result["sanctioned"]] == ["r"]
    # An event before the receipt's seq changed by hand, then a sanctioned rewrite of one
    # after it: the rewrite explains nothing of what the receipt covered.
    await _forge(store, "r", "t", 0, b'{"n":"forged"}')
    assert (await store.verify_chains()).ok  # (no break left to find without the receipt)
    await audit.rewrite(store, "r", {3: b'{"n":"[REDACTED]"}'}, actor="cli", reason="later")
    result = await receipts.check_receipt(store, receipt, None)
    assert not result["ok"]
    assert ("t", "r", 1) in [(p["threadId"], p["runId"], p["seq"]) for p in result["problems"]]
