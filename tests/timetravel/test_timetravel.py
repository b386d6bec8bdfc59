"""Time travel end to end: history, state at any point, replay, resume, connect, fork.

Real servers on loopback ports, real databases, and the real @ag-ui/client as the judge of
what a frontend sees.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from recorder.store import NewEvent, NewRun, open_store
from recorder.wire.sse import FrameSplitter
from tests.conftest import node_available, require
from tests.servers import (
    conversation,
    demo_upstream,
    free_port,
    healthy,
    node_client,
    post_run,
    project_oracle,
    recorder_at,
    run_recorded,
    user,
    view,
)


async def sse_get(client: httpx.AsyncClient, url: str, **kw: Any) -> list[tuple[str | None, bytes]]:
    async with client.stream("GET", url, **kw) as response:
        assert response.status_code == 200, await response.aread()
        raw = await response.aread()
    splitter = FrameSplitter()
    return [(f.id, f.data) for f in splitter.feed(raw) + splitter.close()]


@pytest.fixture
async def recorded(db_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient, str]]:
    async with demo_upstream() as upstream, recorder_at(db_url, {"demo": upstream}) as rec:
        async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
            yield rec, client, db_url


async def test_state_at_every_seq_equals_the_reference_client(recorded: Any) -> None:
    require(node_available(), "Node and @ag-ui/client")
    rec, client, _db = recorded
    runs = await conversation(client, rec, "t1")
    cases, ours = [], []
    for run_id in runs:
        run = (await client.get(f"{rec}/runs/{run_id}")).json()
        events = [
            e["event"] for e in (await client.get(f"{rec}/runs/{run_id}/events")).json()["events"]
        ]
        start = run["input"]
        for seq in range(-1, len(events)):
            ours.append(
                view((await client.get(f"{rec}/runs/{run_id}/state", params={"seq": seq})).json())
            )
            cases.append(
                {
                    "messages": start["messages"],
                    "state": start.get("state") or {},
                    "events": events[: seq + 1],
                }
            )
    judged = await project_oracle(cases)
    assert len(judged) == len(ours) > 60
    for case, mine, theirs in zip(cases, ours, judged, strict=True):
        assert mine == view(theirs), (len(case["events"]), theirs.get("error"))
    # The thread's state is the end of its latest run, interrupt resolved.
    thread_state = (await client.get(f"{rec}/threads/t1/state")).json()
    assert thread_state["runId"] == runs[-1] and thread_state["pendingInterrupts"] == []
    assert "Deleted report.txt." in [m.get("content") for m in thread_state["messages"]]


async def test_replayed_run_and_thread_pass_the_client_and_fold_to_the_recorded_state(
    recorded: Any,
) -> None:
    require(node_available(), "Node and @ag-ui/client")
    rec, client, _db = recorded
    runs = await conversation(client, rec, "t2")
    for run_id in runs:
        run = (await client.get(f"{rec}/runs/{run_id}")).json()
        expected = view((await client.get(f"{rec}/runs/{run_id}/state")).json())
        start = run["input"]
        seen = await node_client(
            "stream",
            f"{rec}/runs/{run_id}/stream",
            {"threadId": "t2", "messages": start["messages"], "state": start.get("state") or {}},
        )
        assert seen["error"] is None
        assert view(seen) == expected
    expected = view((await client.get(f"{rec}/threads/t2/state")).json())
    for path in ("/threads/t2/stream", "/threads/t2/stream?compact=true"):
        seen = await node_client("stream", rec + path, {"threadId": "t2"})
        assert seen["error"] is None, path
        assert view(seen) == expected, path
    connected = await node_client(
        "run", f"{rec}/agents/demo/connect", {"threadId": "t2", "runId": "connect-1"}
    )
    assert connected["error"] is None
    assert view(connected) == expected


async def test_thread_stream_of_a_branch_with_an_incomplete_run(recorded: Any) -> None:
    require(node_available(), "Node and @ag-ui/client")
    rec, client, db = recorded
    runs = await conversation(client, rec, "t3")
    fork = await client.post(
        f"{rec}/runs/{runs[0]}/fork",
        json={"atSeq": 10, "messages": ["and Rome?"], "runId": "t3-fork"},
    )
    assert fork.status_code == 200
    store = await open_store(db)
    try:
        run = await store.create_run(
            NewRun("t3-broken", "t3", agent="demo", parent_run_id="t3-fork")
        )
        await store.append(
            run.run_id,
            [
                NewEvent(
                    b'{"type":"RUN_STARTED","threadId":"t3","runId":"t3-broken"}', "RUN_STARTED"
                ),
                NewEvent(b'{"type":"TEXT_MESSAGE_START","messageId":"x"}', "TEXT_MESSAGE_START"),
                NewEvent(b"garbage", None),
            ],
        )
        await store.set_status(run.run_id, "incomplete")
    finally:
        await store.close()
    expected = view((await client.get(f"{rec}/threads/t3/state")).json())
    seen = await node_client("stream", f"{rec}/threads/t3/stream", {"threadId": "t3"})
    assert seen["error"] is None
    assert view(seen) == expected


async def test_resume_from_every_hundredth_event(recorded: Any) -> None:
    rec, client, _db = recorded
    body = {
        "threadId": "t4",
        "runId": "long",
        "messages": [user("hi", "u")],
        "forwardedProps": {"demo": {"extra": 450}},
    }
    await post_run(client, f"{rec}/agents/demo", body)
    everything = await sse_get(client, f"{rec}/runs/long/stream")
    assert [i for i, _d in everything] == [str(n) for n in range(len(everything))]
    assert len(everything) > 450
    for after in range(-1, len(everything), 100):
        rest = await sse_get(client, f"{rec}/runs/long/stream", params={"afterSeq": after})
        assert rest == everything[after + 1 :]
    by_header = await sse_get(client, f"{rec}/runs/long/stream", headers={"Last-Event-ID": "399"})
    assert by_header == everything[400:]
    # A thread stream's frame id: taken for its own run, refused for another run's.
    own = await sse_get(client, f"{rec}/runs/long/stream", headers={"Last-Event-ID": "long:399"})
    assert own == everything[400:]
    other = await client.get(f"{rec}/runs/long/stream", headers={"Last-Event-ID": "t4-r1:399"})
    assert other.status_code == 422
    assert "is a frame of run 't4-r1', not of 'long'" in other.json()["detail"]


async def test_a_thread_stream_resumes_after_any_frame_it_sent(recorded: Any) -> None:
    rec, client, _db = recorded
    runs = await conversation(client, rec, "t4b")
    url = f"{rec}/threads/t4b/stream"
    everything = await sse_get(client, url)
    data = [d for _i, d in everything]
    # Frames the recorder adds carry no id (the splitter, as an EventSource, keeps the last).
    ids = [
        i for i, (fid, _d) in enumerate(everything) if fid != (everything[i - 1][0] if i else None)
    ]
    assert {str(everything[i][0]).split(":")[0] for i in ids} == set(runs)
    assert len(ids) < len(everything)  # (snapshots were added)
    # A stride through the frames, each run's first, and each one followed by added frames.
    picks = set(ids[::5]) | {i for i in ids if str(everything[i][0]).endswith(":0")}
    picks |= {i for i in ids if i + 1 < len(everything) and i + 1 not in ids}
    for index in sorted(picks):
        resumed = await sse_get(client, url, headers={"Last-Event-ID": str(everything[index][0])})
        assert [d for _i, d in resumed] == data[index + 1 :], index
    # A point that is not on the stream (another thread's run, an unknown one): all of it.
    for foreign in ("nope:3", f"{runs[0]}x:1"):
        assert [
            d for _i, d in await sse_get(client, url, headers={"Last-Event-ID": foreign})
        ] == data
    bad = await client.get(url, headers={"Last-Event-ID": "12"})
    assert bad.status_code == 422 and "<runId>:<seq>" in bad.json()["detail"]
    # A run's stream: the id an EventSource sends back wins over the afterSeq it opened with.
    run_url = f"{rec}/runs/{runs[0]}/stream"
    whole = await sse_get(client, run_url)
    again = await sse_get(client, run_url, params={"afterSeq": 2}, headers={"Last-Event-ID": "9"})
    assert again == whole[10:]


async def test_live_run_is_tailed_until_it_ends(recorded: Any) -> None:
    rec, client, db = recorded
    body = {
        "threadId": "t5",
        "runId": "slow",
        "messages": [user("hi", "u")],
        "forwardedProps": {"demo": {"delay": 0.01, "extra": 60}},
    }
    producer = asyncio.create_task(post_run(client, f"{rec}/agents/demo", body))
    await run_recorded(client, rec, "slow")
    tailed = await sse_get(client, f"{rec}/runs/slow/stream")
    sent = await producer
    assert [orjson.loads(d) for _i, d in tailed] == sent
    store = await open_store(db)
    try:
        assert [e.payload for e in await store.read_events("slow")] == [d for _i, d in tailed]
    finally:
        await store.close()


@pytest.mark.postgres
async def test_live_run_tailed_from_a_second_recorder_process(pg_url: str) -> None:
    async with demo_upstream() as upstream, recorder_at(pg_url, {"demo": upstream}) as rec:
        port = free_port()
        env = {**os.environ, "RECORDER_DB": pg_url}
        other = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "recorder.cli.main",
            "serve",
            "--port",
            str(port),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
                second = f"http://127.0.0.1:{port}"
                await healthy(client, second)
                body = {
                    "threadId": "t6",
                    "runId": "shared",
                    "messages": [user("hi", "u")],
                    "forwardedProps": {"demo": {"delay": 0.02, "extra": 40}},
                }
                producer = asyncio.create_task(post_run(client, f"{rec}/agents/demo", body))
                await run_recorded(client, second, "shared")
                assert (await client.get(f"{second}/runs/shared")).json()["status"] == "running"
                tailed = await sse_get(client, f"{second}/runs/shared/stream")
                sent = await producer
                assert [orjson.loads(d) for _i, d in tailed] == sent
                assert (await client.get(f"{second}/runs/shared")).json()["status"] == "finished"
        finally:
            other.terminate()
            await other.wait()


async def test_fork_inside_at_end_and_from_an_interrupt(recorded: Any) -> None:
    rec, client, _db = recorded
    runs = await conversation(client, rec, "t7")
    # Dry run: the input is the projection at the point plus the new message. (The demo
    # agent rebuilds from the posted messages: a same-thread fork is right for it.)
    same = {"strategy": "same-thread"}
    at = (await client.get(f"{rec}/runs/{runs[0]}/state", params={"seq": 12})).json()
    plan = (
        await client.post(
            f"{rec}/runs/{runs[0]}/fork",
            json={"atSeq": 12, "messages": ["What about Rome?"], "dryRun": True, **same},
        )
    ).json()
    assert plan["input"]["messages"][:-1] == at["messages"]
    assert plan["input"]["messages"][-1]["content"] == "What about Rome?"
    assert plan["input"]["state"] == at["state"] and plan["input"]["parentRunId"] == runs[0]
    # Inside a run.
    inside = await post_run(
        client,
        f"{rec}/runs/{runs[0]}/fork",
        {"atSeq": 12, "messages": ["What about Rome?"], "runId": "f-inside", **same},
    )
    assert inside[0]["type"] == "RUN_STARTED" and inside[-1]["type"] == "RUN_FINISHED"
    child = (await client.get(f"{rec}/runs/f-inside")).json()
    assert (child["parentRunId"], child["parentSeq"], child["parentInferred"]) == (
        runs[0],
        12,
        False,
    )
    assert child["input"]["messages"][:-1] == at["messages"]
    # At the end of a run.
    end = {"messages": ["Thanks"], "runId": "f-end", **same}
    await post_run(client, f"{rec}/runs/{runs[0]}/fork", end)
    assert (await client.get(f"{rec}/runs/f-end")).json()["parentSeq"] is None
    # From the interrupted run, resuming its interrupt differently (cancelled).
    interrupted = (await client.get(f"{rec}/runs/{runs[1]}/state")).json()
    (pending,) = interrupted["pendingInterrupts"]
    resumed = await post_run(
        client,
        f"{rec}/runs/{runs[1]}/fork",
        {
            "resume": [{"interruptId": pending["id"], "status": "cancelled"}],
            "runId": "f-resume",
            "threadId": "t7",  # the parent's thread: a same-thread fork
        },
    )
    assert any(e.get("delta") == "Kept" for e in resumed)
    # Into a new thread.
    await post_run(
        client, f"{rec}/runs/{runs[0]}/fork", {"threadId": "t7-copy", "runId": "f-thread"}
    )
    copy = (await client.get(f"{rec}/threads/t7-copy")).json()
    assert copy["runs"][0]["runId"] == "f-thread"
    assert copy["forkedFrom"] == {"threadId": "t7", "runId": runs[0], "seq": None}
    t7 = (await client.get(f"{rec}/threads/t7")).json()
    assert [f["threadId"] for f in t7["forks"]] == ["t7-copy"]
    (root,) = t7["runs"]
    assert root["runId"] == runs[0]
    assert {c["runId"] for c in root["children"]} >= {runs[1], "f-inside", "f-end"}
    bad = await client.post(f"{rec}/runs/{runs[0]}/fork", json={"atSeq": 10_000})
    assert bad.status_code == 422 and "outside" in bad.json()["detail"]
    assert (await client.post(f"{rec}/runs/nope/fork", json={})).status_code == 404


async def test_history_queries_and_errors(recorded: Any) -> None:
    rec, client, _db = recorded
    await conversation(client, rec, "t8")
    await conversation(client, rec, "t9")
    threads = (await client.get(f"{rec}/threads", params={"limit": 1})).json()
    assert len(threads["threads"]) == 1 and threads["nextCursor"]
    rest = (
        await client.get(f"{rec}/threads", params={"limit": 5, "cursor": threads["nextCursor"]})
    ).json()
    assert {t["threadId"] for t in threads["threads"] + rest["threads"]} == {"t8", "t9"}
    found = (await client.get(f"{rec}/threads", params={"q": "Deleted report"})).json()["threads"]
    assert {t["threadId"] for t in found} == {"t8", "t9"}
    assert (await client.get(f"{rec}/threads", params={"q": "no such words"})).json()[
        "threads"
    ] == []
    assert (
        await client.get(f"{rec}/threads", params={"agent": "demo", "status": "finished"})
    ).json()["threads"]
    events = (
        await client.get(f"{rec}/runs/t8-r1/events", params={"afterSeq": 3, "limit": 2})
    ).json()
    assert [e["seq"] for e in events["events"]] == [4, 5] and events["nextAfterSeq"] == 5
    for path in (
        "/threads/nope",
        "/threads/nope/state",
        "/runs/nope",
        "/runs/nope/events",
        "/runs/nope/state",
        "/runs/nope/stream",
    ):
        response = await client.get(rec + path)
        assert response.status_code == 404 and "nope" in response.json()["detail"], path
    empty = await client.post(
        f"{rec}/agents/demo/connect", json={"threadId": "never", "runId": "x"}
    )
    assert (empty.status_code, empty.content) == (200, b"")
    as_json = {"content-type": "application/json"}
    bad = await client.post(f"{rec}/agents/demo/connect", content=b"[]", headers=as_json)
    assert bad.status_code == 422 and "JSON object" in bad.json()["detail"]
    assert (
        await client.post(f"{rec}/agents/nope/connect", json={"threadId": "t8"})
    ).status_code == 404
    for path, params in (
        ("/threads", {"status": "weird"}),
        ("/threads", {"since": "yesterday"}),
        ("/runs/t8-r1/state", {"seq": -5}),
        ("/threads", {"cursor": "zz"}),
    ):
        assert (await client.get(rec + path, params=params)).status_code == 422, (path, params)


async def test_export_import_round_trip(recorded: Any, tmp_path: Path) -> None:
    rec, client, db = recorded
    await conversation(client, rec, "t10")
    out = tmp_path / "export.jsonl"
    target = f"sqlite+aiosqlite:///{tmp_path / 'copy.db'}"
    await cli("export", "--db", db, "--out", str(out))
    await cli("import", "--db", target, str(out))
    second = await cli("import", "--db", target, str(out))
    assert "0 runs" in second and "0 events" in second
    source, copy = await open_store(db), await open_store(target)
    try:
        for run_id in ("t10-r1", "t10-r2", "t10-r3"):
            a, b = await source.get_run(run_id), await copy.get_run(run_id)
            assert (a.input, a.parent_run_id, a.status, a.outcome) == (
                b.input,
                b.parent_run_id,
                b.status,
                b.outcome,
            )
            ea, eb = await source.read_events(run_id), await copy.read_events(run_id)
            assert [(e.seq, e.payload, e.type, e.origin) for e in ea] == [
                (e.seq, e.payload, e.type, e.origin) for e in eb
            ]
    finally:
        await source.close()
        await copy.close()


async def cli(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "recorder.cli.main",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()
