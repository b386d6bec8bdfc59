"""Receipts: the log's heads at a moment, signed; later proof that the log up to them is
unchanged, while it goes on growing. Also the audited rewrite."""

from __future__ import annotations

import pytest

from recorder.errors import InputError
from recorder.store import EventStore, NewRun
from recorder.timetravel import audit
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
    receipt = await audit.receipt(store, KEY)
    assert receipt["running"]["live"]["seq"] == 2 and receipt["threads"]["t1"]["sealed"] == 1
    # The log goes on: the live run gets more events and closes, t1 a new run, a new thread.
    await store.append("live", [ev("{}")])
    await store.set_status("live", "finished")
    await store.create_run(NewRun("next", "t1"))
    await store.set_status("next", "finished")
    await store.create_run(NewRun("other", "t3"))
    result = await audit.check_receipt(store, receipt, KEY)
    assert result["ok"], result["problems"]
    # An unsigned receipt does not pass where a key is set; a signed one needs the key.
    unsigned = await audit.receipt(store, None)
    result = await audit.check_receipt(store, unsigned, KEY)
    assert [p["what"] for p in result["problems"]] == ["the receipt is not signed"]
    with pytest.raises(InputError, match="audit_key"):
        await audit.check_receipt(store, receipt, None)


async def test_a_change_before_the_receipt_is_found(store: EventStore) -> None:
    await _log(store)
    receipt = await audit.receipt(store, KEY)
    if store.url.startswith("sqlite"):
        await raw_sql(store, "DROP TRIGGER events_no_update")
    else:
        await raw_sql(store, "DROP TRIGGER events_append_only ON events")
    await raw_sql(store, "UPDATE events SET payload = ? WHERE run_id = 'live' AND seq = 1", b"1")
    result = await audit.check_receipt(store, receipt, KEY)
    assert not result["ok"]
    assert ("t2", "live", 2) in [(p["threadId"], p["runId"], p["seq"]) for p in result["problems"]]


async def test_a_thread_gone_without_a_tombstone_is_found(store: EventStore) -> None:
    await _log(store)
    receipt = await audit.receipt(store, None)
    receipt["threads"]["t9"] = {"head": "00" * 32, "sealed": 0}
    result = await audit.check_receipt(store, receipt, None)
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
