"""What reaches an agent, and what a browser is given back: the recorder's credentials are
never forwarded, hop-by-hop headers stop at the recorder, a relayed page cannot run."""

from __future__ import annotations

from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from recorder.config import AgentConfig
from tests.servers import post_run, recorder_at, scripted_upstream, serving, sse

TOKEN = "recorder-secret-token"
RUN = [
    b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n',
    b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n',
]


def body(thread: str, run: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "messages": [], "state": {}}


async def test_a_fork_sends_none_of_its_callers_headers_only_the_agents_own(
    sqlite_url: str,
) -> None:
    seen: list[dict[str, str]] = []

    def agent(request: Request) -> Response:
        seen.append(dict(request.headers))
        return sse(RUN)

    async with serving(scripted_upstream({"a": agent})) as up:
        configured = AgentConfig(url=f"{up}/a", headers={"X-Api-Key": "agent-key"})
        async with recorder_at(sqlite_url, {"a": configured}, api_token=TOKEN) as rec:
            bearer = {"authorization": f"Bearer {TOKEN}", "cookie": "session=recorder"}
            async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
                await post_run(client, "/agents/a", body("t", "r"))
                fork = await client.post(
                    "/runs/r/fork", json={"runId": "f"}, headers={**bearer, "x-trace": "1"}
                )
                assert fork.status_code == 200, fork.text
    proxied, forked = seen
    assert proxied["x-api-key"] == "agent-key"
    assert forked["x-api-key"] == "agent-key"
    for leaked in ("authorization", "cookie", "x-trace"):
        assert leaked not in forked, f"a fork forwarded its caller's {leaked}"
    assert all(TOKEN not in value for value in forked.values())


async def test_the_recorders_token_and_connection_named_headers_are_never_forwarded(
    sqlite_url: str,
) -> None:
    seen: list[dict[str, str]] = []

    def agent(request: Request) -> Response:
        seen.append(dict(request.headers))
        return sse(RUN)

    async with serving(scripted_upstream({"a": agent})) as up:
        async with recorder_at(sqlite_url, {"a": f"{up}/a"}, api_token=TOKEN) as rec:
            async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
                headers = {
                    "authorization": f"Bearer {TOKEN}",
                    "x-carried": TOKEN,
                    "connection": "keep-alive, X-Secret-Hop, cookie",
                    "x-secret-hop": "hop",
                    "cookie": "c=1",
                    "x-kept": "yes",
                    "proxy-authorization": "Basic abc",
                }
                async with client.stream(
                    "POST", "/agents/a", json=body("t", "r"), headers=headers
                ) as answer:
                    assert answer.status_code == 200
                    await answer.aread()
                # a caller's own credentials for the agent still pass
                own = {"authorization": "Bearer agent-token"}
                async with httpx.AsyncClient(base_url=rec, headers=own, timeout=30) as caller:
                    await post_run(caller, "/agents/a", body("t", "r2"))
    first, second = seen
    for name in ("authorization", "x-carried", "x-secret-hop", "cookie", "proxy-authorization"):
        assert name not in first, name
    assert first["x-kept"] == "yes"
    assert second["authorization"] == "Bearer agent-token"


async def test_an_agents_html_error_is_relayed_so_a_browser_cannot_run_it(
    sqlite_url: str,
) -> None:
    page = b"<html><script>fetch('/threads')</script></html>"

    def agent(_request: Request) -> Response:
        return HTMLResponse(page, status_code=500)

    async with serving(scripted_upstream({"a": agent})) as up:
        async with recorder_at(sqlite_url, {"a": f"{up}/a"}) as rec:
            async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
                answers = [await client.post("/agents/a", json=body("t", "r"))]
                answers.append(await client.post("/runs/r/fork", json={"runId": "f"}))
    for answer in answers:
        assert answer.status_code == 500
        assert answer.content == page
        assert answer.headers["content-type"].startswith("text/html")
        assert answer.headers["content-security-policy"] == "sandbox"
        assert answer.headers["x-content-type-options"] == "nosniff"
