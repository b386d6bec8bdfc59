"""The client library against a real recorder (uvicorn on loopback) on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from recorder.client import AsyncRecorderClient, ForkOptions, MessageEdit, RecorderClient
from recorder.errors import InputError, NotFound, RecorderError, UpstreamError
from recorder.reference.projector import fold
from tests.servers import conversation, demo_upstream, free_port, recorder_at

TOKEN = "s3cret"


@pytest.fixture
async def served(db_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    """A recorder with the demo agent and an API token, and two recorded threads."""
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}, api_token=TOKEN) as rec,
        httpx.AsyncClient(
            base_url=rec, timeout=60, trust_env=False, headers={"authorization": f"Bearer {TOKEN}"}
        ) as http,
    ):
        await conversation(http, rec, "c1")
        await conversation(http, rec, "c2")
        yield rec, http


async def test_threads_runs_and_events(served: Any) -> None:
    rec, http = served
    async with AsyncRecorderClient(rec, token=TOKEN) as client:
        first = await client.threads(limit=1)
        assert len(first.threads) == 1 and first.next_cursor is not None
        rest = await client.threads(limit=5, cursor=first.next_cursor)
        assert {t.thread_id for t in first.threads + rest.threads} == {"c1", "c2"}
        assert rest.next_cursor is None
        assert {t.thread_id async for t in client.iter_threads(page_size=1)} == {"c1", "c2"}
        found = await client.threads(text="Deleted report", agent="demo")
        assert {t.thread_id for t in found.threads} == {"c1", "c2"}

        thread = await client.thread("c1")
        assert thread.run_count == 3 and thread.latest_run_id == "c1-r3"
        (root,) = thread.runs
        assert root.run_id == "c1-r1" and [c.run_id for c in root.children] == ["c1-r2"]
        # The model is the API's answer, field for field.
        assert thread.to_json() == (await http.get("/threads/c1")).json()

        run = await client.run("c1-r1")
        assert run.status == "finished" and run.input is not None
        assert run.input["threadId"] == "c1" and run.parent_run_id is None
        page = await client.events("c1-r1", after_seq=3, limit=2)
        assert [e.seq for e in page.events] == [4, 5] and page.next_after_seq == 5
        every = [e async for e in client.iter_events("c1-r1", page_size=7)]
        assert [e.seq for e in every] == list(range(run.event_count))
        assert every[0].event is not None and every[0].event["type"] == "RUN_STARTED"

        health = await client.health()
        assert health.ok and health.version
        assert [a.name for a in await client.agents()] == ["demo"]


async def test_state_history_and_errors(served: Any) -> None:
    rec, http = served
    async with AsyncRecorderClient(rec, token=TOKEN) as client:
        at = await client.run_state("c1-r1", seq=0)
        assert at.seq == 0 and at.run_id == "c1-r1" and at.thread_id == "c1"
        assert at.to_json() == (await http.get("/runs/c1-r1/state", params={"seq": 0})).json()
        now = await client.thread_state("c1")
        assert now.run_id == "c1-r3" and now.messages[-1]["role"] == "assistant"
        assert (await client.thread_state("c1", run_id="c1-r2", seq=-1)).messages[-1][
            "content"
        ] == "delete report.txt please"

        history = await client.history("c1")
        points = [(c.run_id, c.boundary, c.seq) for c in history]
        runs = {r: (await client.run(r)).event_count - 1 for r in ("c1-r1", "c1-r2", "c1-r3")}
        assert points == [
            ("c1-r3", "end", runs["c1-r3"]),
            ("c1-r3", "start", -1),
            ("c1-r2", "end", runs["c1-r2"]),
            ("c1-r2", "start", -1),
            ("c1-r1", "end", runs["c1-r1"]),
            ("c1-r1", "start", -1),
        ]
        for checkpoint in history:
            there = await client.run_state(checkpoint.run_id, seq=checkpoint.seq)
            assert (checkpoint.messages, checkpoint.state) == (there.messages, there.state)
        assert history[2].pending_interrupts, "run 2 ends waiting for a confirmation"
        assert len(await client.history("c1", limit=2)) == 2

        with pytest.raises(InputError, match="run 'c2-r1' is not in thread 'c1'"):
            await client.thread_state("c1", run_id="c2-r1")
        with pytest.raises(InputError, match="seq 10000 is outside run 'c1-r1'"):
            await client.run_state("c1-r1", seq=10_000)
        with pytest.raises(NotFound, match="thread 'nope' not found"):
            await client.thread("nope")
        with pytest.raises(NotFound, match="run 'nope' not found"):
            await client.history("c1") and await client.run("nope")
        with pytest.raises(InputError, match="limit"):
            await client.threads(limit=0)


async def test_replay_resume_and_verify(served: Any) -> None:
    rec, _http = served
    async with AsyncRecorderClient(rec, token=TOKEN) as client:
        recorded = [e async for e in client.iter_events("c1-r2")]
        replayed = [e async for e in client.replay_run("c1-r2")]
        assert [(e.seq, e.data) for e in replayed] == [
            (e.seq, orjson.dumps(e.event)) for e in recorded
        ]
        assert replayed[0].type == "RUN_STARTED" and replayed[0].event is not None
        resumed = [e.seq async for e in client.replay_run("c1-r2", after_seq=5)]
        assert resumed == list(range(6, len(recorded)))

        frames = [e.data async for e in client.replay_thread("c1")]
        folded = fold(frames)
        now = await client.thread_state("c1")
        assert (folded.messages, folded.state) == (now.messages, now.state)
        compact = [e async for e in client.replay_thread("c1", compact=True)]
        assert [e.type for e in compact][:3] == [
            "RUN_STARTED",
            "MESSAGES_SNAPSHOT",
            "STATE_SNAPSHOT",
        ]

        report = await client.verify("c1-r2")
        assert report.ok and report.run_id == "c1-r2" and report.event_count == len(recorded)
        with pytest.raises(NotFound, match="run 'nope' not found"):
            await client.verify("nope")
        with pytest.raises(NotFound, match="run 'nope' not found"):
            [e async for e in client.replay_run("nope")]


async def test_fork_every_option(served: Any) -> None:
    rec, _http = served
    async with AsyncRecorderClient(rec, token=TOKEN) as client:
        at = await client.run_state("c1-r1", seq=5)
        plan = await client.plan_fork("c1-r1", at_seq=5, messages=["What about Rome?"])
        assert plan.agent == "demo" and plan.parent_run_id == "c1-r1" and plan.parent_seq == 5
        # The agent's strategy, the default: a new thread, no parentRunId posted.
        assert plan.strategy == "new-thread" and plan.thread_id == plan.input["threadId"] != "c1"
        assert "parentRunId" not in plan.input
        assert plan.input["messages"][:-1] == [m for m in at.messages if m["role"] != "activity"]
        assert plan.input["messages"][-1]["content"] == "What about Rome?"
        same = await client.plan_fork("c1-r1", at_seq=5, strategy="same-thread")
        assert (same.strategy, same.thread_id, same.input["parentRunId"]) == (
            "same-thread",
            "c1",
            "c1-r1",
        )
        # The edits: a JSON Patch of the state, an edited user message, a regenerated turn.
        patch = [{"op": "replace", "path": "/turns", "value": 9}]
        patched = await client.plan_fork("c1-r1", state_patch=patch)
        assert patched.input["state"]["turns"] == 9
        edit = MessageEdit(message_id="c1-r2-u", content="What about tomorrow?")
        edited = await client.plan_fork("c1-r3", edit=edit)
        assert (edited.parent_run_id, edited.parent_seq) == ("c1-r2", -1)
        assert edited.input["messages"][-1]["content"] == "What about tomorrow?"
        again = await client.plan_fork("c1-r3", ForkOptions(regenerate="c1-r1-a2"))
        assert again.input["messages"] == (await client.run("c1-r1")).input["messages"]
        options = ForkOptions(
            at_seq=-1,
            state={"edited": True},
            run_id="c1-planned",
            thread_id="c1-copy",
            resume=[{"interruptId": "i", "status": "cancelled"}],
            forwarded_props=None,
        )
        planned = await client.plan_fork("c1-r1", options)
        assert planned.input["state"] == {"edited": True}
        assert (planned.input["runId"], planned.input["threadId"]) == ("c1-planned", "c1-copy")
        assert planned.input["resume"] == [{"interruptId": "i", "status": "cancelled"}]
        assert planned.input["forwardedProps"] is None and planned.parent_seq == -1
        # Keywords given beside the options win.
        assert (await client.plan_fork("c1-r1", options, run_id="other")).input["runId"] == "other"

        events = [
            e async for e in client.fork("c1-r1", at_seq=5, messages=["Rome?"], run_id="c1-f")
        ]
        assert events[0].type == "RUN_STARTED" and events[-1].type == "RUN_FINISHED"
        assert [e.seq for e in events] == list(range(len(events)))
        child = await client.run("c1-f")
        assert (child.parent_run_id, child.parent_seq, child.status) == ("c1-r1", 5, "finished")
        branch = await client.thread(child.thread_id)
        assert branch.forked_from is not None and branch.forked_from.run_id == "c1-r1"
        assert [t.thread_id for t in (await client.thread("c1")).forks] == [child.thread_id]
        with pytest.raises(NotFound):
            await client.plan_fork("nope")
        with pytest.raises(InputError, match="outside"):
            [e async for e in client.fork("c1-r1", at_seq=10_000)]
        with pytest.raises(InputError, match="not_an_option: Extra inputs"):
            await client.plan_fork("c1-r1", not_an_option=1)


async def test_export_and_import_through_servers(served: Any, tmp_path: Path) -> None:
    rec, _http = served
    copy_db = f"sqlite+aiosqlite:///{tmp_path / 'copy.db'}"
    async with (
        AsyncRecorderClient(rec, token=TOKEN) as source,
        recorder_at(copy_db, {}) as other,
        AsyncRecorderClient(other) as target,
    ):
        lines = [line async for line in source.export_jsonl(["c1"])]
        assert all(line.endswith(b"\n") for line in lines)
        assert {orjson.loads(line)["runId"] for line in lines} == {"c1-r1", "c1-r2", "c1-r3"}
        report = await target.import_jsonl(b"".join(lines))
        assert (report.runs_created, report.runs_skipped) == (3, 0)
        again = await target.import_jsonl(iter(lines))
        assert (again.runs_created, again.runs_skipped, again.events_added) == (0, 3, 0)
        for run_id in ("c1-r1", "c1-r2", "c1-r3"):
            mine = [(e.seq, e.event) async for e in source.iter_events(run_id)]
            theirs = [(e.seq, e.event) async for e in target.iter_events(run_id)]
            assert mine == theirs
        assert (await target.thread_state("c1")).messages == (
            await source.thread_state("c1")
        ).messages
        everything = [line async for line in source.export_jsonl()]
        assert {orjson.loads(line)["runId"][:2] for line in everything} == {"c1", "c2"}
        with pytest.raises(NotFound, match="thread 'nope' not found"):
            [line async for line in source.export_jsonl(["nope"])]
        with pytest.raises(InputError, match="line 1: not JSON"):
            await target.import_jsonl(b"not json\n")


async def test_token_unreachable_and_agent_errors(served: Any) -> None:
    rec, _http = served
    async with AsyncRecorderClient(rec) as anonymous:
        assert (await anonymous.health()).ok  # /healthz needs no token
        with pytest.raises(RecorderError, match="401: an API token is required"):
            await anonymous.threads()
    async with AsyncRecorderClient(f"http://127.0.0.1:{free_port()}") as nowhere:
        with pytest.raises(RecorderError, match="cannot reach the recorder at"):
            await nowhere.threads()


async def test_a_relayed_agent_error_is_an_upstream_error(sqlite_url: str) -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    from tests.servers import serving

    async def agent(request: Any) -> Response:
        await request.body()
        if b"refuse" in await request.body():
            return PlainTextResponse("the model is overloaded", status_code=503)
        return PlainTextResponse("data: {}\n\n", media_type="text/event-stream")

    app = Starlette(routes=[Route("/", agent, methods=["POST"])])
    async with serving(app) as upstream, recorder_at(sqlite_url, {"a": upstream + "/"}) as rec:
        async with httpx.AsyncClient(base_url=rec, trust_env=False) as http:
            body = {"threadId": "t", "runId": "r", "messages": []}
            assert (await http.post("/agents/a", json=body)).status_code == 200
        async with AsyncRecorderClient(rec) as client:
            with pytest.raises(
                UpstreamError, match="the agent answered 503: the model is overloaded"
            ):
                [e async for e in client.fork("r", messages=["refuse"])]


async def test_the_blocking_client(served: Any) -> None:
    rec, _http = served

    def use() -> dict[str, Any]:
        with RecorderClient(rec, token=TOKEN) as client:
            history = client.history("c2")
            replayed = client.replay_run("c2-r1")
            first = next(replayed)
            replayed.close()  # leaving a stream early closes it
            try:
                client.run("nope")
            except NotFound as exc:
                missing = str(exc)
            return {
                "threads": {t.thread_id for t in client.iter_threads(page_size=1)},
                "history": [(c.run_id, c.boundary) for c in history][:2],
                "first": first.type,
                "plan": client.plan_fork("c2-r1", at_seq=3).parent_seq,
                "missing": missing,
                "lines": sum(1 for _ in client.export_jsonl(["c2"])),
            }

    # (in a thread: this test's loop runs the server)
    seen = await asyncio.to_thread(use)
    assert seen["threads"] == {"c1", "c2"}
    assert seen["history"] == [("c2-r3", "end"), ("c2-r3", "start")]
    assert seen["first"] == "RUN_STARTED" and seen["plan"] == 3
    assert seen["missing"] == "run 'nope' not found" and seen["lines"] > 3


async def test_a_url_that_is_not_a_recorder_says_so() -> None:
    """A page where the recorder's JSON should be (another server, a proxy's error page):
    one line that says so, never a decoding traceback, nor the page's lines."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    from tests.servers import serving

    page = "<!doctype html>\n<html>\n  <body>Welcome</body>\n</html>\n"

    async def threads(request: Request) -> HTMLResponse:
        return HTMLResponse(page)

    async def gateway(request: Request) -> HTMLResponse:
        return HTMLResponse(page, status_code=502)

    app = Starlette(routes=[Route("/threads", threads), Route("/runs/{run}", gateway)])
    async with serving(app) as url, AsyncRecorderClient(url) as client:
        with pytest.raises(RecorderError, match="not a recorder's ThreadPage") as caught:
            await client.threads()
        assert "\n" not in str(caught.value) and "Welcome" in str(caught.value)
        with pytest.raises(RecorderError, match=r"^502: an answer that is not a recorder's: <!do"):
            await client.run("r")
