"""The state routes' bare endpoint (``recorder.api.state_endpoint``) answers exactly as the
routes do: every request below is asked of the recorder over real HTTP and of its FastAPI
routes alone (the app's own ``FastAPI.__call__``, in process, on the same runtime), and
the two answers must be the same: status, body, content type and retry header. The plain
requests must be the endpoint's; the others must reach the routes untouched."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

import recorder.api
from recorder.api import RecorderApp, create_app, state_endpoint
from recorder.api.deps import ANSWERED
from recorder.api.state_endpoint import state_request
from recorder.config import Settings, TokenConfig, hash_token
from recorder.reference.projector import Parts
from tests.servers import bound, serving, user

FULL = "full-state-token"
TOKENS = {
    "reader": ("state-read-token-0123", ["read"], None),
    "runner": ("state-run-token-0123", ["run"], None),
    "a-reader": ("state-a-read-token-0123", ["read"], ["a"]),
}


def auth(name: str | None) -> dict[str, str]:
    if name is None:
        return {}
    token = {"full": FULL, "wrong": "not-a-token"}.get(name) or TOKENS[name][0]
    return {"authorization": f"Bearer {token}"}


def agent() -> Starlette:
    async def handle(request: Request) -> Response:
        body = json.loads(await request.body())
        ids = {"threadId": body["threadId"], "runId": body["runId"]}
        mid = f"m-{ids['runId']}"
        events = [
            {"type": "RUN_STARTED", **ids},
            {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": "hello"},
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
            {"type": "STATE_SNAPSHOT", "snapshot": {"turn": ids["runId"]}},
            {"type": "RUN_FINISHED", **ids},
        ]
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
        return Response(sse, media_type="text/event-stream")

    return Starlette(routes=[Route("/{name}", handle, methods=["POST"])])


Served = tuple[httpx.AsyncClient, httpx.AsyncClient, list[str]]


@pytest.fixture
async def served(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    """A client of the recorder over HTTP, one of its routes alone, and the paths the bare
    endpoint answered."""
    tokens = {
        name: TokenConfig(hash=hash_token(value), scopes=scopes, agents=agents)  # type: ignore[arg-type]
        for name, (value, scopes, agents) in TOKENS.items()
    }
    answered: list[str] = []
    real = recorder.api.serve_state

    async def noted(runtime: Any, wanted: Any, scope: Scope, receive: Receive, send: Send) -> None:
        answered.append(scope["path"] + "?" + scope["query_string"].decode())
        await real(runtime, wanted, scope, receive, send)

    monkeypatch.setattr(recorder.api, "serve_state", noted)
    async with serving(agent()) as up:
        sock = bound()
        settings = Settings(
            db=sqlite_url,
            agents={"a": f"{up}/a", "b": f"{up}/b"},
            port=sock.getsockname()[1],
            api_token=FULL,
            tokens=tokens,
        )
        app = create_app(settings)

        async def routes(scope: Scope, receive: Receive, send: Send) -> None:
            try:
                await FastAPI.__call__(app, scope, receive, send)
            except Exception as exc:  # answered (500): raised again, as for the server to log
                if not hasattr(exc, ANSWERED):
                    raise

        async with (
            serving(app, sock) as base,
            httpx.AsyncClient(base_url=base, timeout=30, trust_env=False) as client,
            httpx.AsyncClient(
                base_url="http://127.0.0.1", transport=httpx.ASGITransport(app=routes)
            ) as routed,
        ):
            runs = (("a", "ta", "ra1"), ("a", "ta", "ra2"), ("b", "tb", "rb1"))
            for agent_name, thread, run in runs:
                body = {"threadId": thread, "runId": run, "messages": [user("hi", f"{run}-u")]}
                answer = await client.post(f"/agents/{agent_name}", json=body, headers=auth("full"))
                assert answer.status_code == 200, answer.text
            assert isinstance(app, RecorderApp)
            yield client, routed, answered


PLAIN = [
    ("/runs/ra1/state", {}, "full"),
    ("/runs/ra1/state", {"seq": "2"}, "full"),
    ("/runs/ra1/state", {"seq": "0"}, "reader"),
    ("/runs/ra1/state", {"seq": "-1"}, "full"),
    ("/runs/ra1/state", {"seq": "-2"}, "full"),  # 422: before -1
    ("/runs/ra1/state", {"seq": "6"}, "full"),  # 422: past the run's last event
    ("/runs/ra2/state", {"seq": "4"}, "a-reader"),
    ("/runs/rb1/state", {}, "a-reader"),  # 404: another agent's run
    ("/runs/nope/state", {}, "full"),  # 404
    ("/runs/ra1/state", {}, None),  # 401
    ("/runs/ra1/state", {}, "wrong"),  # 401
    ("/runs/ra1/state", {}, "runner"),  # 403: a run token reads nothing
    ("/runs/run with spaces/state", {}, "full"),  # 404
    ("/threads/ta/state", {}, "full"),
    ("/threads/ta/state", {"runId": "ra1"}, "reader"),
    ("/threads/ta/state", {"runId": "ra1", "seq": "3"}, "a-reader"),
    ("/threads/ta/state", {"runId": "rb1"}, "full"),  # 422: not a run of this thread
    ("/threads/ta/state", {"runId": "nope"}, "full"),  # 404
    ("/threads/tb/state", {}, "a-reader"),  # 404: another agent's thread
    ("/threads/nope/state", {}, "full"),  # 404
    ("/threads/ta/state", {"seq": "99"}, None),  # 401
]
ROUTED = [
    ("/runs/ra1/state", "seq=abc"),  # FastAPI's 422 for a parameter it cannot read
    ("/runs/ra1/state", "seq=%2B2"),  # "+2"
    ("/runs/ra1/state", "seq=1&seq=2"),
    ("/runs/ra1/state", "seq="),
    ("/runs/ra1/state", "seq=1&other=x"),
    ("/runs/ra1/state", "runId=ra1"),  # not a parameter of a run's state
    ("/runs/ra1/state/", ""),
    ("/runs/ra1/states", ""),
    ("/runs/ra1/x/state", ""),
    ("/runs//state", ""),
    ("/threads/ta/state", "runId="),
    ("/threads/ta/state", "seq=1.0"),
]


def answer_of(response: httpx.Response) -> tuple[Any, ...]:
    return (
        response.status_code,
        response.headers.get("content-type"),
        response.headers.get("retry-after"),
        response.content,
    )


async def test_plain_requests_are_the_endpoints_and_answer_as_the_routes(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, routed, answered = served
    # The answers sent in pieces (a checkpoint's messages as a view of it) are among them.
    pieces: list[int] = []
    real_parts = state_endpoint.send_parts

    async def counted(send: Send, status: int, parts: Parts, content_type: str) -> None:
        pieces.append(sum(type(part) is memoryview for part in parts))
        await real_parts(send, status, parts, content_type)

    monkeypatch.setattr(state_endpoint, "send_parts", counted)
    statuses = set()
    for path, params, token in PLAIN:
        answered.clear()
        ours = await client.get(path, params=params, headers=auth(token))
        assert answered, (path, params)  # the bare endpoint answered it
        theirs = await routed.get(path, params=params, headers=auth(token))
        assert answer_of(ours) == answer_of(theirs), (path, params, token, ours.text, theirs.text)
        statuses.add(ours.status_code)
    assert statuses == {200, 401, 403, 404, 422}
    assert any(pieces), pieces
    # The state answered is the conversation's: the run's message and its snapshot.
    state = (await client.get("/runs/ra2/state", headers=auth("full"))).json()
    assert [m["id"] for m in state["messages"]] == ["ra2-u", "m-ra2"]
    assert state["state"] == {"turn": "ra2"} and state["runId"] == "ra2"


async def test_other_requests_reach_the_routes(served: Served) -> None:
    client, routed, answered = served
    for path, query in ROUTED:
        answered.clear()
        url = f"{path}?{query}" if query else path
        ours = await client.get(url, headers=auth("full"))
        assert not answered, url
        theirs = await routed.get(url, headers=auth("full"))
        assert answer_of(ours) == answer_of(theirs), (url, ours.text)
    # HEAD and other methods are the routes' too (405: the routes answer GET only).
    answered.clear()
    head = await client.head("/runs/ra1/state", headers=auth("full"))
    assert head.status_code == 405 and not answered


async def test_an_unexpected_error_answers_with_an_error_id(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, routed, _ = served

    async def broken(*_args: Any, **_kwargs: Any) -> Parts:
        raise RuntimeError("SELECT secret FROM somewhere")

    monkeypatch.setattr("recorder.timetravel.views.run_state_parts", broken)
    ours = await client.get("/runs/ra1/state", headers=auth("full"))
    theirs = await routed.get("/runs/ra1/state", headers=auth("full"))
    for answer in (ours, theirs):
        assert answer.status_code == 500
        assert "SELECT" not in answer.text and "Traceback" not in answer.text
        assert answer.headers["x-error-id"] == answer.json()["errorId"]
    assert ours.json().keys() == theirs.json().keys()


def test_what_the_endpoint_takes() -> None:
    assert state_request("/runs/r1/state", b"seq=12") is not None
    assert state_request("/runs/r1/state", b"seq=-1").seq == -1  # type: ignore[union-attr]
    assert state_request("/threads/t%201/state", b"runId=r%2F1").run_id == "r/1"  # type: ignore[union-attr]
    for path, query in (
        ("/runs/r1/state", b"seq=\xd9\xa3"),  # an Arabic-Indic digit: not the endpoint's
        ("/runs/r1/state", b"seq=1234567890123456789"),  # (19 digits: the routes')
        ("/agents/r1/state", b""),
        ("/runs/r1", b""),
        ("/runs/r1/events", b""),
    ):
        assert state_request(path, query) is None, (path, query)
