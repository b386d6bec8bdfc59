"""The state at a point: starting points, checkpoints (derived, rebuildable), bounded cost."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest

from bench.workload import mixed_events
from recorder.errors import InputError
from recorder.reference.projector import fold
from recorder.store import EventStore, NewEvent, NewRun, inputs, open_store
from recorder.store.inputs import build, leaves
from recorder.timetravel.history import History, rebuild_checkpoints
from recorder.wire.jsontext import dump
from tests.conftest import raw_sql
from tests.servers import demo_upstream, eventually, post_run, recorder_at, run_closed, user

START = [{"id": "u0", "role": "user", "content": "start here"}]


async def record(store: EventStore, run_id: str, frames: list[bytes], **run: object) -> None:
    posted = orjson.dumps({"threadId": "t", "runId": run_id, "messages": START, "state": {"s": 1}})
    await store.create_run(NewRun(run_id, "t", agent="a", input=posted, **run))  # type: ignore[arg-type]
    await store.append(run_id, [NewEvent(f, None) for f in frames])
    await store.set_status(run_id, "finished")


async def test_state_at_every_point_with_checkpoints_equals_a_plain_fold(store: EventStore) -> None:
    frames = mixed_events(600, seed=3)
    await record(store, "r1", frames)
    history = History(store, checkpoint_every=50)
    run = await store.get_run("r1")
    for seq in [-1, 0, 1, 48, 49, 50, 51, 99, 100, 333, 598, 599, None]:
        upto = len(frames) if seq is None else seq + 1
        expected = fold(frames[:upto], messages=START, state={"s": 1}).to_json()
        assert (await history.project(run, seq)).to_json() == expected, seq
    saved = [seq for (seq,) in await raw_sql(store, "SELECT seq FROM checkpoints ORDER BY seq")]
    assert saved and all(s % 50 == 49 for s in saved)
    # Derived data: dropping every checkpoint changes nothing but the cost.
    await raw_sql(store, "DELETE FROM checkpoints")
    again = History(store, checkpoint_every=50)
    for seq in (77, 450):
        expected = fold(frames[: seq + 1], messages=START, state={"s": 1}).to_json()
        assert (await again.project(run, seq)).to_json() == expected


async def test_checkpoint_is_used_instead_of_folding_from_the_start(store: EventStore) -> None:
    frames = mixed_events(300, seed=4)
    await record(store, "r1", frames)
    history = History(store, checkpoint_every=100)
    run = await store.get_run("r1")
    await history.project(run)  # builds checkpoints at 99 and 199
    # A forged checkpoint proves later reads start from it rather than from seq 0.
    from recorder.reference.projector import Projector

    forged = Projector([{"id": "forged", "role": "user", "content": "x"}], {"forged": True})
    await raw_sql(store, "UPDATE checkpoints SET data = ? WHERE seq = 199", forged.checkpoint())
    at = await history.project(run, 250)
    assert at.state == {"forged": True} or any(m["id"] == "forged" for m in at.messages)


async def test_building_checkpoints_gives_way_to_runs_being_recorded(store: EventStore) -> None:
    # While runs are being recorded, building a closed run's checkpoints waits between
    # slices (up to its lag), and a query never waits.
    frames = mixed_events(600, seed=5)
    await record(store, "r1", frames)
    busy = [True]
    history = History(store, checkpoint_every=100, busy=lambda: busy[0], max_lag=60.0)
    building = asyncio.create_task(history.build_checkpoints("r1"))
    await asyncio.sleep(0.3)
    assert not building.done()
    assert not await raw_sql(store, "SELECT seq FROM checkpoints")  # not a slice folded yet
    run = await store.get_run("r1")
    expected = fold(frames, messages=START, state={"s": 1}).to_json()
    assert (await asyncio.wait_for(history.project(run), 5)).to_json() == expected
    busy[0] = False  # the recorder is quiet: it goes on, and builds them all
    assert await asyncio.wait_for(building, 5) == 600
    saved = [seq for (seq,) in await raw_sql(store, "SELECT seq FROM checkpoints ORDER BY seq")]
    assert saved == [99, 199, 299, 399, 499, 599]
    # Past its lag it goes on even while the recorder stays busy.
    await raw_sql(store, "DELETE FROM checkpoints")
    hurried = History(store, checkpoint_every=100, busy=lambda: True, max_lag=0.2)
    assert await asyncio.wait_for(hurried.build_checkpoints("r1"), 10) == 600


async def test_starting_points(store: EventStore) -> None:
    # Posted input wins; then RUN_STARTED.input; then the parent's fork point.
    await record(store, "parent", [b'{"type":"RUN_STARTED","threadId":"t","runId":"parent"}'])
    started = orjson.dumps(
        {
            "type": "RUN_STARTED",
            "threadId": "t",
            "runId": "imported",
            "input": {"messages": [{"id": "i", "role": "user", "content": "from input"}]},
        }
    )
    await store.create_run(NewRun("imported", "t", origin="import"))
    await store.append("imported", [NewEvent(started, "RUN_STARTED")])
    await store.create_run(NewRun("child", "t", parent_run_id="parent", parent_seq=0))
    history = History(store)
    imported = await history.starting_point(await store.get_run("imported"))
    assert (imported.source, imported.messages[0]["id"]) == ("run_started", "i")
    child = await history.starting_point(await store.get_run("child"))
    assert child.source == "parent" and child.messages == START and child.state == {"s": 1}
    parent = await history.starting_point(await store.get_run("parent"))
    assert parent.source == "input"


async def test_bad_points(store: EventStore) -> None:
    await record(store, "r1", mixed_events(10))
    history = History(store)
    with pytest.raises(InputError):
        await history.project(await store.get_run("r1"), -2)
    end = await history.project(await store.get_run("r1"))
    assert (await history.project(await store.get_run("r1"), 10_000)) == end


async def test_checkpoints_built_at_close_answer_and_rebuild_to_the_same_answers(
    store: EventStore,
) -> None:
    frames = mixed_events(300, seed=6)
    await record(store, "r1", frames)
    history = History(store, checkpoint_every=100)
    assert await history.build_checkpoints("r1") == 300
    saved = [seq for (seq,) in await raw_sql(store, "SELECT seq FROM checkpoints ORDER BY seq")]
    assert saved == [99, 199, 299]  # inside the run, and at its boundary
    # Large checkpoints are kept as trees of shared chunks, like inputs.
    trees = await raw_sql(store, "SELECT count(*) FROM checkpoints WHERE root IS NOT NULL")
    assert trees[0][0] >= 1
    run = await store.get_run("r1", input=False)
    assert run.input is None
    points = [-1, 0, 98, 99, 150, 299, None]

    async def answers(h: History) -> list[object]:
        return [(await h.project(run, seq)).to_json() for seq in points]

    want = [
        fold(
            frames[: len(frames) if seq is None else seq + 1], messages=START, state={"s": 1}
        ).to_json()
        for seq in points
    ]
    assert await answers(history) == want
    # The boundary is read from its checkpoint: a forged one shows through.
    from recorder.reference.projector import Projector

    forged = Projector([{"id": "forged", "role": "user", "content": "x"}], {"forged": True})
    await raw_sql(
        store, "UPDATE checkpoints SET data = ?, root = NULL WHERE seq = 299", forged.checkpoint()
    )
    assert (await history.project(run)).state == {"forged": True}
    # Derived data: dropped and rebuilt, the answers are the log's again.
    assert await rebuild_checkpoints(history, ["r1", "purged-since-listed"]) == 1
    again = [seq for (seq,) in await raw_sql(store, "SELECT seq FROM checkpoints ORDER BY seq")]
    assert again == [99, 199, 299]
    assert await answers(History(store, checkpoint_every=100)) == want
    # With checkpoints off, none is read: the forged one changes nothing.
    await raw_sql(store, "UPDATE checkpoints SET data = ?, root = NULL", forged.checkpoint())
    assert await answers(History(store, checkpoint_every=0)) == want


async def test_each_checkpoint_of_a_run_is_cut_from_the_one_before(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's checkpoints grow with it, each holding the one before's messages and more:
    the store cuts and hashes what changed since the one before, not the run again (which
    made a long run's checkpoints cost the square of its length), and keeps the very
    trees it would have built from scratch."""
    frames = mixed_events(6000, seed=7)
    await record(store, "r1", frames)
    hashed: list[int] = []
    real = inputs._hash
    monkeypatch.setattr(
        inputs, "_hash", lambda level, data: hashed.append(level) or real(level, data)
    )
    await History(store, checkpoint_every=100).build_checkpoints("r1")
    cut_here = hashed.count(0)
    rows = await raw_sql(store, "SELECT seq, root FROM checkpoints WHERE root IS NOT NULL")
    assert len(rows) >= 25
    cut = 0
    distinct: set[bytes] = set()
    for seq, root in rows:
        found = await store.nearest_checkpoint("r1", seq)
        assert found is not None and found[0] == seq
        assert build(found[1]).root == bytes(root)
        cut += len(leaves(found[1]))
        distinct.update(leaves(found[1]))
    # Hashed: about each distinct leaf once (what is new), where from scratch every
    # checkpoint hashed all of its leaves again (7,358 here, for 1,424 distinct).
    assert cut_here <= len(distinct) + 2 * len(rows)
    assert cut_here * 4 < cut


async def test_a_recorder_builds_a_runs_checkpoints_when_it_closes(db_url: str) -> None:
    async with demo_upstream() as upstream, recorder_at(db_url, {"demo": upstream}) as rec:
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            body = {
                "threadId": "t",
                "runId": "r1",
                "messages": [user("hello")],
                "state": {},
                "tools": [],
                "context": [],
                "forwardedProps": {},
            }
            await post_run(client, f"{rec}/agents/demo", body)
            opened = await open_store(db_url)
            try:
                run = await run_closed(opened, "r1")

                async def built() -> bool:
                    found = await opened.nearest_checkpoint("r1", run.event_count - 1)
                    return found is not None and found[0] == run.event_count - 1

                await eventually(built, "the end checkpoint of r1")
            finally:
                await opened.close()
            state = (await client.get(f"{rec}/runs/r1/state")).json()
            fresh = History(await open_store(db_url), checkpoint_every=0)
            try:
                plain = await fresh.project(await fresh.store.get_run("r1"))
            finally:
                await fresh.store.close()
            assert state["messages"] == plain.to_json()["messages"]
            assert state["state"] == plain.to_json()["state"]


async def test_state_read_with_its_checkpoint_in_one_query_equals_a_plain_fold(
    store: EventStore,
) -> None:
    # ``History.state``: the run and its nearest checkpoint read together (at a run's end,
    # the checkpoint its close wrote), the same answers as a fold from the run's start.
    frames = mixed_events(400, seed=7)
    await record(store, "r1", frames)
    for every in (0, 50, 1000):
        history = History(store, checkpoint_every=every)
        await store.drop_checkpoints()
        await history.build_checkpoints("r1")
        for seq in [-1, 0, 48, 49, 50, 120, 398, 399, None]:
            upto = len(frames) if seq is None else seq + 1
            expected = fold(frames[:upto], messages=START, state={"s": 1}).to_json()
            run, at = await history.state("r1", seq)
            assert run == await store.get_run("r1", input=False)
            assert at.to_json() == expected, (every, seq)
            # What ``locate`` read for one seq is not taken for another.
            located = await history.locate("r1", 120)
            other = await history.project(located.run, seq, located=located)
            assert other.to_json() == expected, (every, seq)
    with pytest.raises(InputError):
        await History(store).state("r1", -2)


async def test_the_state_a_client_is_sent_is_the_fold_byte_for_byte(db_url: str) -> None:
    """Over HTTP the messages a checkpoint holds go out as stored (``History.answer``): at
    and after each checkpoint the body is still the plain fold's, byte for byte."""
    frames = mixed_events(1200, seed=8)
    opened = await open_store(db_url, migrate=True)
    try:
        await record(opened, "r1", frames)
        await History(opened).build_checkpoints("r1")  # every 250 events, and at the end
        saved = [s for (s,) in await raw_sql(opened, "SELECT seq FROM checkpoints ORDER BY seq")]
        assert saved == [249, 499, 749, 999, 1199]
    finally:
        await opened.close()
    points = [-1, 0, 248, 249, 250, 251, 400, 499, 998, 1000, 1198, 1199]
    async with (
        recorder_at(db_url, {}) as rec,
        httpx.AsyncClient(base_url=rec, timeout=30, trust_env=False) as client,
    ):
        for seq in [*points, None]:
            upto = len(frames) if seq is None else seq + 1
            shown = fold(frames[:upto], messages=START, state={"s": 1}).to_json()
            query = {} if seq is None else {"seq": seq}
            got = await client.get("/runs/r1/state", params=query)
            assert got.content == dump({"threadId": "t", "runId": "r1", "seq": seq, **shown})
            got = await client.get("/threads/t/state", params={"runId": "r1", **query})
            assert got.content == dump({"threadId": "t", "runId": "r1", "seq": seq, **shown})
        # The stored bytes are what goes out: a forged first message shows through after
        # the checkpoint at 499, never decoded on the way.
        before = (await client.get("/runs/r1/state", params={"seq": 520})).json()
        opened = await open_store(db_url)
        try:
            at = await opened.nearest_checkpoint("r1", 499)
            assert at is not None and at[0] == 499
            real = orjson.dumps(START[0])
            forged_first = real.replace(b"start here", b"FORGED!!!!")
            assert len(forged_first) == len(real)  # the index's lengths still hold
            forged = at[1].replace(real, forged_first, 1)
            sql = "UPDATE checkpoints SET data = ?, root = NULL WHERE seq = 499"
            await raw_sql(opened, sql, forged)
        finally:
            await opened.close()
        after = (await client.get("/runs/r1/state", params={"seq": 520})).json()
        assert after["messages"][0]["content"] == "FORGED!!!!"
        assert after["messages"][1:] == before["messages"][1:]
        assert after["state"] == before["state"]


async def test_the_state_of_a_thread_without_runs_is_empty_over_http(db_url: str) -> None:
    opened = await open_store(db_url, migrate=True)
    try:
        await raw_sql(
            opened,
            "INSERT INTO threads (thread_id, agent, created_at, updated_at, run_count) "
            "VALUES (?, ?, ?, ?, ?)",
            "bare",
            "a",
            1.0,
            1.0,
            0,
        )
    finally:
        await opened.close()
    async with (
        recorder_at(db_url, {}) as rec,
        httpx.AsyncClient(base_url=rec, timeout=30, trust_env=False) as client,
    ):
        got = await client.get("/threads/bare/state")
        assert got.status_code == 200
        assert got.json() == {
            "threadId": "bare",
            "runId": None,
            "seq": None,
            "messages": [],
            "state": {},
            "pendingInterrupts": [],
            "problems": [],
        }
        refused = await client.get("/threads/bare/state", params={"seq": 3})
        assert refused.status_code == 422 and "has no runs" in refused.text


async def test_a_fold_overtaken_by_a_rewrite_saves_no_checkpoint_of_what_it_replaced(
    store: EventStore,
) -> None:
    """The recorder folds a closed run behind its client's back; a redaction committed
    while that fold is under way must not leave a checkpoint holding the text it removed
    (the next state read would answer from it)."""
    frames = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r1"}',
        b'{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"mail a1@x.org"}',
        b'{"type":"TEXT_MESSAGE_END","messageId":"m1"}',
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r1"}',
    ]
    await record(store, "r1", frames)
    redacted = frames[2].replace(b"a1@x.org", b"[REDACTED:email]")
    read_events = store.read_events

    async def overtaken(run_id: str, **where: object) -> list[object]:
        page = await read_events(run_id, **where)  # type: ignore[arg-type]
        if page and page[-1].seq == len(frames) - 1:  # the fold has what it will fold
            await store.rewrite("r1", {2: redacted}, actor="cli", reason="email")
        return page  # type: ignore[return-value]

    history = History(store, checkpoint_every=2)
    store.read_events = overtaken  # type: ignore[method-assign]
    try:
        await history.build_checkpoints("r1")
    finally:
        store.read_events = read_events  # type: ignore[method-assign]
    saved = await raw_sql(store, "SELECT seq, data, root FROM checkpoints")
    assert not any(b"a1@x.org" in bytes(data) for _seq, data, _root in saved)
    # The run's head changed under the fold: none of what it made is kept, the one
    # before the rewritten event included (a head says whether the events changed, not
    # where).
    assert saved == []
    _run, at = await history.state("r1")
    assert at.messages[-1]["content"] == "mail [REDACTED:email]"
    # Built again, now the log has the new text, its checkpoints are kept.
    await history.build_checkpoints("r1")
    assert await store.nearest_checkpoint("r1", len(frames) - 1) is not None
