"""EventStore.rewrite: the sanctioned way to replace stored payloads (redaction)."""

from __future__ import annotations

import pytest

from recorder.errors import Conflict, InputError, RunNotFound
from recorder.store import EventStore, NewRun, Redacted
from tests.conftest import raw_sql
from tests.store.spec.conftest import ev


async def _recorded(store: EventStore) -> None:
    for run in ("r1", "r2"):
        await store.create_run(NewRun(run, "t1"))
        await store.append(run, [ev(f'{{"n":{i},"email":"a{i}@x.org"}}') for i in range(4)])
        await store.set_status(run, "finished")


async def test_a_rewrite_replaces_payloads_and_reseals_the_chains(store: EventStore) -> None:
    await _recorded(store)
    before = await store.heads()
    old_hashes = await raw_sql(store, "SELECT seq, hash FROM events WHERE run_id = 'r1'")
    report = await store.rewrite(
        "r1",
        {1: b'{"n":1,"email":"[REDACTED:email]"}', 3: b'{"n":3,"email":"[REDACTED:email]"}'},
        actor="cli",
        reason="rule email",
    )
    assert report.rewritten == (1, 3) and report.rehashed == 3  # seq 1, 2 and 3
    events = await store.read_events("r1")
    assert events[1].payload == b'{"n":1,"email":"[REDACTED:email]"}'
    assert events[0].payload == b'{"n":0,"email":"a0@x.org"}'
    assert events[2].payload == b'{"n":2,"email":"a2@x.org"}'
    # The chains verify again, with new heads; the record links old heads to new.
    assert (await store.verify_chains()).ok
    after = await store.heads()
    assert after.threads["t1"][0] != before.threads["t1"][0]
    assert report.old_thread_head == before.threads["t1"][0]
    assert report.new_thread_head == after.threads["t1"][0]
    assert report.old_head == dict((s, bytes(h)) for s, h in old_hashes)[3]
    (record,) = await raw_sql(
        store, "SELECT actor, reason, run_id, old_head, new_head, detail FROM rewrites"
    )
    assert record[:3] == ("cli", "rule email", "r1")
    assert bytes(record[3]) == report.old_head and bytes(record[4]) == report.new_head
    assert '"seq":1' in record[5] and '"seq":3' in record[5]
    # Outside the sanctioned transaction the events are append-only as before.
    with pytest.raises(Exception, match="append-only"):
        await raw_sql(store, "UPDATE events SET payload = ? WHERE run_id = 'r1'", b"{}")
    with pytest.raises(Exception, match="append-only"):
        await raw_sql(store, "DELETE FROM rewrites")


async def test_a_rewrite_is_refused_for_what_it_cannot_do(store: EventStore) -> None:
    await _recorded(store)
    await store.create_run(NewRun("live", "t1"))
    await store.append("live", [ev("{}")])
    with pytest.raises(Conflict):
        await store.rewrite("live", {0: b"[]"}, actor="cli", reason=None)
    with pytest.raises(InputError):
        await store.rewrite("r1", {9: b"[]"}, actor="cli", reason=None)
    with pytest.raises(RunNotFound):
        await store.rewrite("nope", {0: b"[]"}, actor="cli", reason=None)
    assert (await store.read_events("r1"))[0].payload == b'{"n":0,"email":"a0@x.org"}'
    assert (await store.verify_chains()).ok


async def test_a_rewrite_drops_the_checkpoints_folded_over_what_it_changed(
    store: EventStore,
) -> None:
    await _recorded(store)
    for seq in (0, 1, 2, 3):
        await store.save_checkpoint("r1", seq, b"before %d" % seq)
    await store.save_checkpoint("r2", 3, b"other run")
    await store.rewrite("r1", {2: b'{"n":2,"email":"[REDACTED:email]"}'}, actor="cli", reason=None)
    # Those at or past seq 2 held the old payload; those before it did not.
    assert await store.nearest_checkpoint("r1", 3) == (1, b"before 1")
    assert (await store.run_checkpoint("r1"))[1] == (1, b"before 1")
    assert await store.nearest_checkpoint("r2", 3) == (3, b"other run")


async def test_a_checkpoint_folded_before_a_rewrite_and_saved_after_it_is_not_kept(
    store: EventStore,
) -> None:
    """A fold that read the run (and its events) before a rewrite committed saves what
    the rewrite replaced: the store turns it away, seeing the run's head has changed."""
    await _recorded(store)
    seen = await store.get_run("r1", input=False)
    assert seen.head is not None  # a closed run's head: its last event's hash
    await store.rewrite("r1", {1: b'{"n":1,"email":"[REDACTED:email]"}'}, actor="cli", reason=None)
    await store.save_checkpoint("r1", 3, b"folded over a0@x.org and a1@x.org", seen=seen)
    assert await store.nearest_checkpoint("r1", 3) is None
    # Read again after the rewrite, the run's fold is what the log says: kept.
    again = await store.get_run("r1", input=False)
    await store.save_checkpoint("r1", 3, b"folded over the redacted log", seen=again)
    assert await store.nearest_checkpoint("r1", 3) == (3, b"folded over the redacted log")
    # A live run has no head until it closes; a fold of it read while it ran is kept
    # while it still runs, not once it has closed (its events may since be rewritten).
    await store.create_run(NewRun("live", "t1"))
    await store.append("live", [ev("{}"), ev("{}")])
    running = await store.get_run("live", input=False)
    assert running.head is None
    await store.append("live", [ev("{}")])
    await store.save_checkpoint("live", 1, b"live fold", seen=running)
    assert await store.nearest_checkpoint("live", 1) == (1, b"live fold")
    await store.set_status("live", "finished")
    await store.save_checkpoint("live", 2, b"read while it ran", seen=running)
    assert await store.nearest_checkpoint("live", 2) == (1, b"live fold")


async def test_a_redaction_s_rewrite_is_listed_with_what_record_time_did(
    store: EventStore,
) -> None:
    await store.create_run(NewRun("r1", "t1"))
    at_record = Redacted(("email",), "mac-of-the-original")
    await store.append(
        "r1",
        [
            ev('{"n":0,"who":"[REDACTED:email], +1 415 555 0100"}')._replace(redacted=at_record),
            ev('{"n":1,"ip":"10.0.0.1"}'),
            ev('{"n":2}'),
        ],
    )
    await store.set_status("r1", "finished")
    await store.rewrite(
        "r1",
        {
            0: b'{"n":0,"who":"[REDACTED:email], [REDACTED:phone]"}',
            1: b'{"n":1,"ip":"[REDACTED:ip]"}',
        },
        actor="cli",
        reason="later",
        redacted={0: Redacted(("phone",), "mac-of-redacted"), 1: Redacted(("ip",), "mac-1")},
    )
    listed = [(r.seq, r.rules, r.mac) for r in await store.list_redactions("r1")]
    # Seq 0 keeps the hash of what was received, and gains the rule; seq 1 is new.
    assert listed == [(0, ("email", "phone"), "mac-of-the-original"), (1, ("ip",), "mac-1")]
    # A rewrite that says nothing of redaction lists nothing more.
    await store.rewrite("r1", {2: b'{"n":2,"x":1}'}, actor="cli", reason=None)
    assert len(await store.list_redactions("r1")) == 2


async def test_a_rewrite_computed_from_a_run_rewritten_since_is_refused(
    store: EventStore,
) -> None:
    """Two redactions of one run at once (a manual one as the one behind the run): each
    computed its payloads from what it read; the second must not write over the first."""
    await _recorded(store)
    read = (await store.get_run("r1")).head
    assert read is not None
    first = b'{"n":1,"email":"[REDACTED:email]"}'
    await store.rewrite("r1", {1: first}, actor="redaction", reason=None, if_head=read)
    with pytest.raises(Conflict, match="rewritten since it was read"):
        stale = b'{"n":1,"email":"a1@x.org","other":"[REDACTED:x]"}'
        await store.rewrite("r1", {1: stale}, actor="cli", reason=None, if_head=read)
    assert (await store.read_events("r1"))[1].payload == first
    now = (await store.get_run("r1")).head
    await store.rewrite("r1", {2: b'{"n":2}'}, actor="cli", reason=None, if_head=now)
