"""EventStore.list_redactions: what redaction did to a run's stored input and events,
written in the transaction that stores them."""

from __future__ import annotations

from recorder.store import EventStore, NewEvent, NewRun, Redacted


async def test_redactions_are_kept_with_the_payloads_they_describe(store: EventStore) -> None:
    await store.create_run(
        NewRun(
            "r1", "t1", input=b'{"x":"[REDACTED:email]"}', input_redacted=Redacted(("email",), "ab")
        )
    )
    await store.append(
        "r1",
        [
            NewEvent(b'{"type":"A"}', "A"),
            NewEvent(b'{"d":"[REDACTED:card]"}', "B", redacted=Redacted(("card", "ip"), None)),
        ],
    )
    await store.append_batches(
        [("r1", [NewEvent(b'{"d":"[REDACTED:x]"}', "C", redacted=Redacted(("x",), "cd"))])]
    )
    found = await store.list_redactions("r1")
    assert [(r.run_id, r.seq, r.rules, r.mac) for r in found] == [
        ("r1", -1, ("email",), "ab"),
        ("r1", 1, ("card", "ip"), None),
        ("r1", 2, ("x",), "cd"),
    ]
    assert all(r.recorded_at > 0 for r in found)
    assert [e.payload for e in await store.read_events("r1")][1] == b'{"d":"[REDACTED:card]"}'
    assert await store.list_redactions("nope") == []
    await store.create_run(NewRun("r2", "t1", input=b"{}"))
    assert await store.list_redactions("r2") == []
