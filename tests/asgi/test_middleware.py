"""``RecordingMiddleware`` around apps of this process: the proxy's guarantees (the run in
the log before the app is called, byte-exact frames, every fault closed by the recorder's
RUN_ERROR), the time-travel API beside the app, forks that call the app in process, and
everything else passed to the app untouched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from recorder.asgi import RecordingMiddleware
from recorder.config import AgentConfig, Settings, TokenConfig, hash_token
from recorder.demo_agent import create_demo_app
from tests.servers import post_run, serving, sse_data, user
from tests.telemetry.scripts import frame, run_input

CALLS: list[str] = []


def agent_app() -> Starlette:
    """Endpoints that answer well, badly or not at all."""

    async def events(request: Request, *, end: str) -> Response:
        posted = orjson.loads(await request.body())
        CALLS.append(posted["runId"])
        started = {"type": "RUN_STARTED", "threadId": posted["threadId"], "runId": posted["runId"]}
        text = {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "caf\u00e9 \u2615"}

        async def body() -> AsyncIterator[bytes]:
            yield frame(started)
            yield b": a comment\n\ndata: " + orjson.dumps(text) + b"\r\n\r\n"
            if end == "finish":
                yield frame({"type": "RUN_FINISHED", "threadId": "x", "runId": posted["runId"]})
            elif end == "raise":
                raise RuntimeError("the model went away")
            elif end == "stall":
                await asyncio.sleep(30)

        return StreamingResponse(body(), media_type="text/event-stream")

    async def finish(request: Request) -> Response:
        return await events(request, end="finish")

    async def fail_mid(request: Request) -> Response:
        return await events(request, end="raise")

    async def stall(request: Request) -> Response:
        return await events(request, end="stall")

    async def incomplete(request: Request) -> Response:
        return await events(request, end="none")

    async def refuse(request: Request) -> Response:
        return JSONResponse({"detail": "no such model"}, status_code=422)

    async def other(request: Request) -> Response:
        return PlainTextResponse(f"the app's own {request.method} {request.url.path}")

    return Starlette(
        routes=[
            Route("/agent", finish, methods=["POST"]),
            Route("/fail-mid", fail_mid, methods=["POST"]),
            Route("/stall", stall, methods=["POST"]),
            Route("/incomplete", incomplete, methods=["POST"]),
            Route("/refuse", refuse, methods=["POST"]),
            Route("/other", other, methods=["GET", "POST"]),
        ]
    )


async def crash_before_answering(scope: Scope, receive: Receive, send: Send) -> None:
    """A bare ASGI app that fails before its answer's head."""
    if scope["type"] == "http":
        raise RuntimeError("no answer")


AGENTS = {
    "good": "/agent",
    "mid": "/fail-mid",
    "stall": "/stall",
    "incomplete": "/incomplete",
    "refuse": "/refuse",
}


async def test_faults_are_closed_as_the_proxy_closes_them(sqlite_url: str) -> None:
    settings = Settings(db=sqlite_url, idle_timeout=0.5)
    app = RecordingMiddleware(agent_app(), agents=AGENTS, settings=settings)
    async with (
        serving(app) as url,
        httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client,
    ):
        answers = {}
        for name, path in AGENTS.items():
            answers[name] = await client.post(path, json=run_input(name, f"{name}-r"))
        runs = {name: (await client.get(f"/recorder/runs/{name}-r")).json() for name in AGENTS}
        stored = {
            name: sse_data(
                (
                    await client.get(f"/recorder/runs/{name}-r/stream", params={"live": "false"})
                ).content
            )
            for name in AGENTS
        }
        # Not an agent's endpoint: the app's own, untouched.
        assert (await client.get("/other")).text == "the app's own GET /other"
        assert (await client.post("/other")).text == "the app's own POST /other"
        assert (await client.get("/agent")).status_code == 405

    good = sse_data(answers["good"].content)
    assert answers["good"].headers["x-recorder-run-id"] == "good-r"
    assert good[1] == orjson.dumps(
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "caf\u00e9 \u2615"}
    )
    assert stored["good"] == good, "stored byte for byte, as forwarded"
    assert runs["good"]["status"] == "finished"

    def closing(name: str) -> dict[str, Any]:
        last: dict[str, Any] = orjson.loads(stored[name][-1])
        assert last["type"] == "RUN_ERROR" and runs[name]["status"] == "error"
        assert sse_data(answers[name].content) == stored[name]
        return last

    assert closing("mid")["code"] == "upstream_dropped"
    assert "the model went away" in closing("mid")["message"]
    assert closing("stall")["code"] == "upstream_idle"
    assert closing("incomplete")["code"] == "upstream_incomplete"
    assert len(stored["mid"]) == len(stored["stall"]) == 3
    assert answers["refuse"].status_code == 422
    assert answers["refuse"].json() == {"detail": "no such model"}
    assert runs["refuse"]["status"] == "error"
    assert "HTTP 422" in runs["refuse"]["error"]


async def test_an_app_that_fails_before_answering(sqlite_url: str) -> None:
    app = RecordingMiddleware(crash_before_answering, agents={"a": "/"}, db=sqlite_url)
    async with app.running():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://in") as client:
            answer = await client.post("/", json=run_input("t", "r"))
            run = (await client.get("/recorder/runs/r")).json()
    (event,) = [orjson.loads(d) for d in sse_data(answer.content)]
    assert event["code"] == "upstream_unreachable" and "no answer" in event["message"]
    assert run["status"] == "error"


async def test_the_run_is_in_the_log_before_the_app_is_called(sqlite_url: str) -> None:
    app = RecordingMiddleware(agent_app(), agents={"good": "/agent"}, db=sqlite_url)
    async with app.running():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://in") as client:
            CALLS.clear()
            first = await client.post("/agent", json=run_input("t", "dup"))
            again = await client.post("/agent", json=run_input("t", "dup"))
            bad = await client.post("/agent", content=b"{not json")
    assert first.status_code == 200 and CALLS == ["dup"]
    assert again.status_code == 409, "a taken run id is refused before the app is called"
    assert bad.status_code == 422 and "not valid JSON" in bad.json()["detail"]
    assert CALLS == ["dup"]


async def test_without_a_lifespan_it_says_how_to_start(sqlite_url: str) -> None:
    app = RecordingMiddleware(agent_app(), agents={"good": "/agent"}, db=sqlite_url)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://in") as client:
        answer = await client.post("/agent", json=run_input("t", "r"))
        other = await client.get("/other")
    assert answer.status_code == 503 and "running()" in answer.json()["detail"]
    assert other.status_code == 200


@pytest.mark.parametrize("api_path", ["/recorder", "/ops/history"])
async def test_the_api_beside_the_app_forks_in_process(sqlite_url: str, api_path: str) -> None:
    app = RecordingMiddleware(
        create_demo_app(), agents={"demo": "/"}, db=sqlite_url, api_path=api_path
    )
    async with (
        serving(app) as url,
        httpx.AsyncClient(base_url=url + api_path, timeout=30, trust_env=False) as api,
    ):
        body = {"threadId": "t1", "runId": "t1-r1", "messages": [user("Weather?", "u1")]}
        events = await post_run(api, f"{url}/", body)
        assert events[-1]["type"] == "RUN_FINISHED"
        threads = (await api.get("/threads")).json()
        assert [t["threadId"] for t in threads["threads"]] == ["t1"]
        fork = await api.post("/runs/t1-r1/fork", json={"messages": ["And tomorrow?"]})
        assert fork.status_code == 200
        forked = [orjson.loads(d) for d in sse_data(fork.content)]
        assert forked[-1]["type"] == "RUN_FINISHED"
        child = (await api.get(f"/runs/{fork.headers['x-recorder-run-id']}")).json()
        via_api = await post_run(
            api, "/agents/demo", {"threadId": "t9", "runId": "t9-r1", "messages": []}
        )
        assert (await api.get("/")).status_code == 200, "the web timeline"
        assert (await api.get("/healthz")).json()["ok"] is True
    assert (child["parentRunId"], child["status"], child["agent"]) == ("t1-r1", "finished", "demo")
    assert via_api[-1]["type"] == "RUN_FINISHED"


async def test_the_agents_list_holds_the_in_process_agents(sqlite_url: str) -> None:
    full, mine = "full-token-0123456789", "good-token-0123456789"
    remote = AgentConfig(url="http://127.0.0.1:9/remote", fork="same-thread")
    settings = Settings(
        db=sqlite_url,
        # "mid" is configured too: its strategy is the configured one, as its forks' is.
        agents={"remote": remote, "mid": remote},
        api_token=full,
        tokens={"mine": TokenConfig(hash=hash_token(mine), scopes=("read",), agents=("good",))},
    )
    agents = {"good": "/agent", "mid": "/fail-mid"}
    app = RecordingMiddleware(agent_app(), agents=agents, settings=settings)
    async with app.running():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://in") as client:
            listed = await client.get(
                "/recorder/agents", headers={"authorization": f"Bearer {full}"}
            )
            limited = await client.get(
                "/recorder/agents", headers={"authorization": f"Bearer {mine}"}
            )
    assert listed.status_code == 200
    assert listed.json() == {
        "agents": [
            {"name": "good", "fork": "new-thread"},
            {"name": "mid", "fork": "same-thread"},
            {"name": "remote", "fork": "same-thread"},
        ]
    }
    assert limited.json() == {"agents": [{"name": "good", "fork": "new-thread"}]}


def slash_app(seen: list[str]) -> Starlette:
    """An agent whose route has no trailing slash (Starlette redirects ``/ok/`` to it), and
    one whose route has one."""

    async def answer(request: Request) -> Response:
        seen.append(request.url.path)
        posted = orjson.loads(await request.body())
        ids = {"threadId": posted["threadId"], "runId": posted["runId"]}
        body = frame({"type": "RUN_STARTED", **ids}) + frame({"type": "RUN_FINISHED", **ids})
        return Response(body, media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/ok", answer, methods=["POST"]),
            Route("/slashed/", answer, methods=["POST"]),
        ]
    )


async def test_a_trailing_slash_reaches_the_agent_at_its_path(sqlite_url: str) -> None:
    seen: list[str] = []
    agents = {"ok": "/ok", "slashed": "/slashed/"}
    app = RecordingMiddleware(slash_app(seen), agents=agents, db=sqlite_url)
    async with app.running():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answers = [
                await client.post(path, json=run_input("t", f"r{i}"))
                for i, path in enumerate(["/ok/", "/ok", "/slashed", "/slashed/"])
            ]
            runs = [(await client.get(f"/recorder/runs/r{i}")).json() for i in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 200]
    assert [orjson.loads(sse_data(a.content)[-1])["type"] for a in answers] == ["RUN_FINISHED"] * 4
    assert [(r["agent"], r["status"]) for r in runs] == [
        ("ok", "finished"),
        ("ok", "finished"),
        ("slashed", "finished"),
        ("slashed", "finished"),
    ]
    assert seen == ["/ok", "/ok", "/slashed/", "/slashed/"], "called at the agent's own path"


async def test_an_app_that_redirects_the_agents_path(sqlite_url: str) -> None:
    # The agent's path lacks the slash of the app's route: the app redirects it.
    app = RecordingMiddleware(slash_app([]), agents={"s": "/slashed"}, db=sqlite_url)
    async with app.running():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.post("/slashed", json=run_input("t", "r"))
            run = (await client.get("/recorder/runs/r")).json()
            fork = await client.post("/recorder/runs/r/fork", json={})
    assert run["status"] == "error"
    events = [orjson.loads(d) for d in sse_data(answer.content)]
    for said in (run["error"], *(e["message"] for e in events)):
        assert "HTTP 307" in said and "'http://t/slashed/'" in said
        assert "RecordingMiddleware" in said and "'s'" in said
        assert "URL" not in said, "no advice to change a URL: the agent has none"
    assert [e["type"] for e in events] == ["RUN_ERROR"]
    assert fork.status_code == 200
    forked = [orjson.loads(d) for d in sse_data(fork.content)]
    assert "URL" not in forked[-1]["message"] and "HTTP 307" in forked[-1]["message"]
