"""The recording proxy end to end: real uvicorn servers on loopback, real databases."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import orjson
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from recorder.store import EventStore, open_store
from recorder.timetravel.transfer import export_lines, import_lines
from recorder.wire.sse import FrameSplitter
from tests.conftest import node_available, require
from tests.servers import (
    demo_upstream,
    free_port,
    node_client,
    recorder_at,
    run_closed,
    scripted_upstream,
    serving,
    sse,
    user,
)


def run_input(thread: str, run: str, text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [user(text)],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


async def post_stream(
    url: str, body: Any, **kw: Any
) -> tuple[int, list[tuple[str | None, bytes]], bytes]:
    """POST and read the whole answer: status, (id, data) frames, raw bytes."""
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    kw["headers"] = {"content-type": "application/json", **kw.get("headers", {})}
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        async with client.stream("POST", url, content=content, **kw) as response:
            raw = await response.aread()
    splitter = FrameSplitter()
    frames = splitter.feed(raw) + splitter.close()
    return response.status_code, [(f.id, f.data) for f in frames], raw


async def upstream_frames(url: str, body: dict[str, Any]) -> list[bytes]:
    _status, frames, _raw = await post_stream(url, body)
    return [data for _id, data in frames]


@pytest.fixture
async def store_for(db_url: str) -> Any:
    opened: list[EventStore] = []

    async def get() -> EventStore:
        s = await open_store(db_url, migrate=True)
        opened.append(s)
        return s

    yield get
    for s in opened:
        await s.close()


async def test_client_sees_the_same_run_and_the_log_holds_every_byte(
    db_url: str, store_for: Any
) -> None:
    async with demo_upstream() as upstream, recorder_at(db_url, {"demo": upstream}) as rec:
        body = run_input("t1", "r1", "What's the weather?")
        direct = await upstream_frames(upstream, body)
        status, frames, _ = await post_stream(f"{rec}/agents/demo", body)
        assert status == 200
        assert [data for _id, data in frames] == direct
        assert [i for i, _data in frames] == [str(n) for n in range(len(direct))]
        store = await store_for()
        recorded = await store.read_events("r1")
        assert [e.payload for e in recorded] == direct
        run = await store.get_run("r1")
        assert (run.status, run.outcome, run.violations) == ("finished", "success", [])
        assert orjson.loads(run.input or b"") == body


async def test_reference_client_through_the_proxy_equals_direct(sqlite_url: str) -> None:
    require(node_available(), "Node and @ag-ui/client")
    async with demo_upstream() as upstream, recorder_at(sqlite_url, {"demo": upstream}) as rec:
        payload = {
            "threadId": "t1",
            "runId": "r1",
            "messages": [user("hi there")],
            "state": {"k": 1},
        }
        direct = await node_client("run", upstream, payload)
        proxied = await node_client("run", f"{rec}/agents/demo", payload)
        assert proxied["error"] is None and direct["error"] is None
        for key in ("messages", "state", "pendingInterrupts", "events"):
            assert proxied[key] == direct[key], key
        assert any(m.get("toolCalls") for m in proxied["messages"])
        # An interrupting run, then its resume, as a frontend would drive them.
        payload2 = {
            **payload,
            "runId": "r2",
            "messages": proxied["messages"] + [user("delete report.txt", "u2")],
            "state": proxied["state"],
        }
        interrupted = await node_client("run", f"{rec}/agents/demo", payload2)
        assert [i["reason"] for i in interrupted["pendingInterrupts"]] == ["confirmation"]
        async with httpx.AsyncClient(trust_env=False) as client:
            run = (await client.get(f"{rec}/runs/r2")).json()
        assert (run["status"], run["outcome"], run["parentRunId"], run["parentInferred"]) == (
            "interrupted",
            "interrupt",
            "r1",
            True,
        )


@pytest.mark.parametrize(
    "body, problem",
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"runId": "r"}', "threadId"),
        (b'{"threadId": "t", "runId": 5}', "runId"),
        (b'{"threadId": "", "runId": "r"}', "threadId"),
    ],
)
async def test_malformed_requests_are_422_and_nothing_is_recorded(
    db_url: str, body: bytes, problem: str
) -> None:
    hits: list[bytes] = []

    def script(request: Request) -> Response:
        hits.append(b"x")
        return sse([])

    async with (
        serving(scripted_upstream({"ok": script})) as up,
        recorder_at(db_url, {"a": f"{up}/ok"}) as rec,
    ):
        status, _frames, raw = await post_stream(f"{rec}/agents/a", body)
        assert status == 422
        assert problem in json.loads(raw)["detail"]
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(f"{rec}/threads")).json()["threads"] == []
    assert hits == []


async def test_unknown_agent_is_404(db_url: str) -> None:
    async with recorder_at(db_url, {}) as rec:
        status, _frames, raw = await post_stream(f"{rec}/agents/nope", run_input("t", "r"))
        assert status == 404 and "nope" in json.loads(raw)["detail"]
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(f"{rec}/agents")).json() == {"agents": []}


async def test_upstream_refusing_gives_a_run_error(db_url: str, store_for: Any) -> None:
    dead = f"http://127.0.0.1:{free_port()}/"
    async with recorder_at(db_url, {"a": dead}) as rec:
        status, frames, _ = await post_stream(f"{rec}/agents/a", run_input("t", "r1"))
    assert status == 200
    (only,) = [orjson.loads(data) for _i, data in frames]
    assert only["type"] == "RUN_ERROR" and only["code"] == "upstream_unreachable"
    store = await store_for()
    run = await store.get_run("r1")
    assert run.status == "error" and "unreachable" in (run.error or "")
    (event,) = await store.read_events("r1")
    assert event.origin == "recorder"


async def test_non_2xx_is_relayed_and_recorded_as_failed(db_url: str, store_for: Any) -> None:
    upstream = scripted_upstream(
        {
            "boom": lambda r: PlainTextResponse("agent exploded", status_code=500),
            "json": lambda r: Response(b'{"not":"sse"}', media_type="application/json"),
        }
    )
    async with (
        serving(upstream) as up,
        recorder_at(db_url, {"boom": f"{up}/boom", "json": f"{up}/json"}) as rec,
    ):
        status, _frames, raw = await post_stream(f"{rec}/agents/boom", run_input("t", "r1"))
        assert (status, raw) == (500, b"agent exploded")
        status, _frames, raw = await post_stream(f"{rec}/agents/json", run_input("t", "r2"))
        assert status == 502 and "text/event-stream" in json.loads(raw)["detail"]
    store = await store_for()
    assert "HTTP 500" in ((await store.get_run("r1")).error or "")
    assert (await store.get_run("r2")).status == "error"


RUN = [
    b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r1"}\n\n',
    b'data: {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}\n\n',
    b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}\n\n',
    b'data: {"type":"TEXT_MESSAGE_END","messageId":"m"}\n\n',
    b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r1"}\n\n',
]


async def _scripted(
    db_url: str, script: Any, *, run: str = "r1", **settings: Any
) -> tuple[int, list[Any]]:
    async with (
        serving(scripted_upstream({"s": script})) as up,
        recorder_at(db_url, {"a": f"{up}/s"}, **settings) as rec,
    ):
        status, frames, _ = await post_stream(f"{rec}/agents/a", run_input("t", run))
    return status, frames


async def test_framing_variants_are_recorded_as_their_data(db_url: str, store_for: Any) -> None:
    crlf = [c.replace(b"\n", b"\r\n") for c in RUN[:2]]
    multi = (
        b'data: {"type":"TEXT_MESSAGE_CONTENT",\ndata: "messageId":"m","delta":"hi"}\n: comment\n\n'
    )
    tail = b"".join(RUN[3:]).rstrip(b"\n")  # no trailing blank line at the end
    body = b"".join(crlf) + multi + tail
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
    _status, frames = await _scripted(db_url, lambda r: sse(pieces))
    store = await store_for()
    recorded = [e.payload for e in await store.read_events("r1")]
    expected = (
        [c[6:-2] for c in RUN[:2]]
        + [b'{"type":"TEXT_MESSAGE_CONTENT",\n"messageId":"m","delta":"hi"}']
        + [c[6:-2] for c in RUN[3:]]
    )
    assert recorded == expected
    assert [data for _i, data in frames] == expected
    assert (await store.get_run("r1")).status == "finished"


async def test_garbage_frames_are_forwarded_recorded_and_flagged(
    db_url: str, store_for: Any
) -> None:
    chunks = [*RUN[:2], b"data: <html>oops</html>\n\n", *RUN[2:]]
    _status, frames = await _scripted(db_url, lambda r: sse(chunks))
    assert [d for _i, d in frames][2] == b"<html>oops</html>"
    store = await store_for()
    events = await store.read_events("r1")
    assert (events[2].type, events[2].payload) == (None, b"<html>oops</html>")
    run = await store.get_run("r1")
    assert run.status == "finished"
    assert run.violations == [
        {"seq": 2, "message": "Invalid event: the frame is not a JSON object."}
    ]


async def test_stall_past_idle_timeout_closes_the_run(db_url: str, store_for: Any) -> None:
    def stalled(request: Request) -> Response:
        return sse([*RUN[:2], b""], delay=5)

    _status, frames = await _scripted(db_url, stalled, idle_timeout=0.5)
    last = orjson.loads(frames[-1][1])
    assert last["type"] == "RUN_ERROR" and last["code"] == "upstream_idle"
    store = await store_for()
    events = await store.read_events("r1")
    assert [e.origin for e in events] == ["upstream", "recorder"]  # one frame, then silence
    assert (await store.get_run("r1")).status == "error"


async def test_drop_mid_stream_is_closed_by_a_recorder_run_error(
    db_url: str, store_for: Any
) -> None:
    _status, frames = await _scripted(
        db_url, lambda r: sse(RUN[:3], then=ConnectionResetError("gone"))
    )
    types = [orjson.loads(d)["type"] for _i, d in frames]
    assert types == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "RUN_ERROR"]
    store = await store_for()
    events = await store.read_events("r1")
    assert events[-1].origin == "recorder" and events[-1].type == "RUN_ERROR"
    run = await store.get_run("r1")
    assert run.status == "error"


async def test_an_agent_s_error_is_relayed_and_its_redirect_named(
    db_url: str, store_for: Any
) -> None:
    page = "<html>\n  <body>Server   Error \xe9</body>\n</html>"
    scripts = {
        "fails": lambda _r: Response(page.encode(), status_code=500, media_type="text/html"),
        "moved": lambda _r: Response(
            status_code=307, headers={"location": "http://127.0.0.1:9/agent/"}
        ),
    }
    async with (
        serving(scripted_upstream(scripts)) as up,
        recorder_at(db_url, {"fails": f"{up}/fails", "moved": f"{up}/moved"}) as rec,
    ):
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            relayed = await client.post(f"{rec}/agents/fails", json=run_input("t", "e1"))
        assert (relayed.status_code, relayed.content) == (500, page.encode())  # as it came
        assert relayed.headers["x-recorder-run-id"] == "e1"  # (recorded, with its error)
        status, _frames, raw = await post_stream(f"{rec}/agents/moved", run_input("t", "e2"))
        assert status == 502
        detail = orjson.loads(raw)["detail"]
        assert "HTTP 307" in detail and "'http://127.0.0.1:9/agent/'" in detail
    store = await store_for()
    # The run's error reads as text: no bytes' repr, the body's whitespace made one line.
    failed = await store.get_run("e1")
    assert (
        failed.error == "upstream answered HTTP 500: <html> <body>Server Error \xe9</body> </html>"
    )
    moved = await store.get_run("e2")
    assert moved.status == "error" and moved.error == detail
    (event,) = await store.read_events("e2")
    assert orjson.loads(event.payload)["code"] == "upstream_redirect"


async def test_stream_ending_without_terminal_event(db_url: str, store_for: Any) -> None:
    _status, frames = await _scripted(db_url, lambda r: sse(RUN[:2]))
    assert orjson.loads(frames[-1][1])["code"] == "upstream_incomplete"
    assert (await (await store_for()).get_run("r1")).status == "error"


async def test_several_runs_in_one_response(db_url: str, store_for: Any) -> None:
    second = [c.replace(b'"r1"', b'"r2"').replace(b'"m"', b'"m2"') for c in RUN]
    await _scripted(db_url, lambda r: sse(RUN + second))
    store = await store_for()
    assert len(await store.read_events("r1")) == 5
    assert len(await store.read_events("r2")) == 5
    r2 = await store.get_run("r2")
    assert (r2.parent_run_id, r2.parent_inferred, r2.status) == ("r1", True, "finished")
    # It came through the same agent: forkable through it, visible to a token limited to it.
    assert (await store.get_run("r1")).agent == r2.agent == "a"


@pytest.mark.parametrize(
    "ids",
    [
        b'"threadId":"t/x","runId":"r2"',
        b'"threadId":"t","runId":"r2/x"',
        b'"threadId":"t","runId":"r2\\n"',
        b'"threadId":"","runId":"r2"',
        b'"threadId":"t","runId":""',
        b'"threadId":"t","runId":"r2","parentRunId":"p\\u0000"',
        b'"threadId":"t","runId":"\\ud800"',
    ],
)
async def test_a_later_run_with_ids_no_input_could_carry_stays_with_the_run_before(
    db_url: str, store_for: Any, ids: bytes, tmp_path: Any
) -> None:
    later = [
        b'data: {"type":"RUN_STARTED",' + ids + b"}\n\n",
        b'data: {"type":"RUN_FINISHED",' + ids + b"}\n\n",
    ]
    status, frames = await _scripted(db_url, lambda r: sse(RUN + later))
    assert status == 200 and len(frames) == 7
    store = await store_for()
    assert [e.payload for e in await store.read_events("r1")] == [f[1] for f in frames]
    assert [t.thread_id for t in (await store.list_threads()).items] == ["t"]
    # What was recorded exports and imports whole.
    exported = [line async for line in export_lines(store, [])]
    copy = await open_store(f"sqlite+aiosqlite:///{tmp_path}/copy.db", migrate=True)
    try:
        report = await import_lines(copy, exported)
        assert report.runs_created == 1
        assert [e.payload for e in await copy.read_events("r1")] == [f[1] for f in frames]
    finally:
        await copy.close()


async def test_many_runs_in_the_first_chunk(db_url: str, store_for: Any) -> None:
    # The first chunk is recorded before any client reads; however many runs it holds
    # (more than the output queue's 4 batches), the client gets them all.
    runs = [
        b"".join(c.replace(b'"r1"', b'"r%d"' % i).replace(b'"m"', b'"m%d"' % i) for c in RUN)
        for i in range(1, 8)
    ]
    status, frames = await asyncio.wait_for(_scripted(db_url, lambda r: sse([b"".join(runs)])), 30)
    assert status == 200 and len(frames) == 7 * 5
    store = await store_for()
    for i in range(1, 8):
        assert (await store.get_run(f"r{i}")).status == "finished"
        assert len(await store.read_events(f"r{i}")) == 5


async def test_client_disconnect_keeps_recording(db_url: str, store_for: Any) -> None:
    async with demo_upstream() as upstream, recorder_at(db_url, {"demo": upstream}) as rec:
        body = run_input("t", "r1", forwardedProps={"demo": {"delay": 0.01, "extra": 40}})
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            async with client.stream("POST", f"{rec}/agents/demo", json=body) as response:
                async for _chunk in response.aiter_bytes():
                    break  # the frontend goes away after the first bytes
        store = await store_for()
        run = await run_closed(store, "r1")
        assert run.status == "finished"
        # Every frame the agent sent after the client left is in the log, byte for byte.
        sent = await upstream_frames(upstream, body)
        assert [e.payload for e in await store.read_events("r1")] == sent


async def test_limits(db_url: str, store_for: Any) -> None:
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}, max_body_bytes=2000, max_events_per_run=10) as rec,
    ):
        big = run_input("t", "big", "x" * 5000)
        status, _frames, raw = await post_stream(f"{rec}/agents/demo", big)
        assert status == 413 and "limit" in json.loads(raw)["detail"]
        status, frames, _ = await post_stream(f"{rec}/agents/demo", run_input("t", "r1"))
        assert len(frames) == 11
        assert orjson.loads(frames[-1][1])["code"] == "limit_exceeded"
    store = await store_for()
    assert (await store.get_run("r1")).event_count == 11


async def test_frame_size_limit(db_url: str, store_for: Any) -> None:
    huge = b'data: {"type":"CUSTOM","name":"x","value":"' + b"y" * 5000 + b'"}\n\n'
    _status, frames = await _scripted(db_url, lambda r: sse([RUN[0], huge]), max_frame_bytes=1000)
    assert orjson.loads(frames[-1][1])["code"] == "frame_too_large"


async def test_concurrent_run_limit(db_url: str) -> None:
    app = scripted_upstream({"refuse": lambda _r: PlainTextResponse("no", status_code=500)})
    async with (
        demo_upstream() as upstream,
        serving(app) as scripted,
        recorder_at(
            db_url,
            {
                "demo": upstream,
                "refuse": f"{scripted}/refuse",
                "gone": f"http://127.0.0.1:{free_port()}/",
            },
            max_concurrent_runs=1,
        ) as rec,
    ):
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            # Runs that end early (refused, non-2xx, duplicate id) or normally each give
            # their slot back exactly once: the one slot is free again, and never doubled.
            for agent, run, status in [
                ("gone", "a", 200),
                ("refuse", "b", 500),
                ("demo", "c", 200),
                ("demo", "c", 409),
            ]:
                answer = await client.post(f"{rec}/agents/{agent}", json=run_input(run, run))
                assert answer.status_code == status, (agent, answer.text)
            slow = run_input("t", "slow", forwardedProps={"demo": {"delay": 0.05}})
            async with client.stream("POST", f"{rec}/agents/demo", json=slow) as first:
                assert first.status_code == 200
                second = await client.post(f"{rec}/agents/demo", json=run_input("t2", "r2"))
                assert (
                    second.status_code == 503
                    and "already being recorded" in second.json()["detail"]
                )
                await first.aread()


async def test_duplicate_run_id_is_409(db_url: str) -> None:
    async with demo_upstream() as upstream, recorder_at(db_url, {"demo": upstream}) as rec:
        assert (await post_stream(f"{rec}/agents/demo", run_input("t", "r1")))[0] == 200
        status, _f, raw = await post_stream(f"{rec}/agents/demo", run_input("t", "r1"))
        assert status == 409 and "already exists" in json.loads(raw)["detail"]


async def test_api_token_protects_all_but_proxy_and_health(db_url: str) -> None:
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}, api_token="s3cret") as rec,
    ):
        async with httpx.AsyncClient(base_url=rec, trust_env=False) as client:
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/threads")).status_code == 401
            assert (await client.get("/agents")).status_code == 401
            auth = {"authorization": "Bearer s3cret"}
            assert (await client.get("/threads", headers=auth)).status_code == 200
        assert (await post_stream(f"{rec}/agents/demo", run_input("t", "r1")))[0] == 200


async def test_headers_are_forwarded_but_never_stored(db_url: str, store_for: Any) -> None:
    seen: dict[str, str] = {}

    def script(request: Request) -> Response:
        seen.update(request.headers)
        return sse(RUN)

    async with (
        serving(scripted_upstream({"s": script})) as up,
        recorder_at(db_url, {"a": f"{up}/s"}) as rec,
    ):
        headers = {
            "authorization": "Bearer user-token",
            "x-tenant": "acme",
            "x-forwarded-host": "evil",
            "proxy-authorization": "no",
        }
        await post_stream(f"{rec}/agents/a", run_input("t", "r1"), headers=headers)
    assert seen["authorization"] == "Bearer user-token" and seen["x-tenant"] == "acme"
    assert "proxy-authorization" not in seen
    store = await store_for()
    run = await store.get_run("r1")
    assert b"user-token" not in (run.input or b"")


class FailingStore:
    """A real store that starts failing after ``ok`` appends (a database going away)."""

    def __init__(self, inner: EventStore, ok: int) -> None:
        self._inner = inner
        self._ok = ok

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def append_batches(self, batches: Any, closes: Any = ()) -> Any:
        from recorder.errors import StoreUnavailable

        if self._ok <= 0:
            raise StoreUnavailable("database connection lost")
        self._ok -= 1
        return await self._inner.append_batches(batches, closes)


@pytest.mark.parametrize("mode", ["error", "continue"])
async def test_store_failure_mid_run(db_url: str, mode: str) -> None:
    from recorder.api import create_app
    from recorder.config import Settings

    inner = await open_store(db_url, migrate=True)
    failing = FailingStore(inner, ok=2)
    async with demo_upstream() as upstream:
        # Without the journal (with it, the run rides through: tests/proxy/test_journal_*).
        settings = Settings(
            db=db_url, agents={"demo": upstream}, on_store_failure=mode, journal=False
        )
        body = run_input("t", "r1", forwardedProps={"demo": {"delay": 0.005}})
        async with serving(create_app(settings, store=failing)) as rec:  # type: ignore[arg-type]
            _status, frames, _ = await post_stream(f"{rec}/agents/demo", body)
    direct_count = len(await upstream_frames_count())
    run = await inner.get_run("r1")
    recorded = await inner.read_events("r1")
    await inner.close()
    assert run.status == "error" and "store failure" in (run.error or "")
    if mode == "error":
        last = orjson.loads(frames[-1][1])
        assert (last["type"], last["code"]) == ("RUN_ERROR", "store_failure")
        # The client never saw an event that is not in the log.
        assert len(frames) - 1 == len(recorded)
    else:
        assert len(frames) >= direct_count
        assert len(recorded) < len(frames)


async def upstream_frames_count() -> list[bytes]:
    async with demo_upstream() as upstream:
        return await upstream_frames(upstream, run_input("t", "r1", forwardedProps={"demo": {}}))


@pytest.mark.parametrize("durability", ["commit", "buffered"])
async def test_concurrent_streams_lose_nothing(
    db_url: str, store_for: Any, durability: str
) -> None:
    streams, extra = 50, 1980
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}, durability=durability) as rec,
    ):
        bodies = [
            run_input(f"t{i}", f"r{i}", forwardedProps={"demo": {"extra": extra}})
            for i in range(streams)
        ]
        results = await asyncio.gather(*(post_stream(f"{rec}/agents/demo", b) for b in bodies))
    store = await store_for()
    for i, (status, frames, _raw) in enumerate(results):
        assert status == 200
        recorded = await store.read_events(f"r{i}")
        assert len(recorded) >= 2000, (await store.get_run(f"r{i}")).error
        assert [e.seq for e in recorded] == list(range(len(recorded)))
        assert [e.payload for e in recorded] == [d for _i, d in frames]
        assert (await store.get_run(f"r{i}")).status == "finished"
