"""Real servers on loopback ports for end-to-end tests, and the reference client as a frontend."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from recorder.api import create_app
from recorder.cli.serve import free_port as free_port  # (for servers in other processes)
from recorder.cli.serve import listen
from recorder.config import Settings
from recorder.demo_agent import create_demo_app
from recorder.store import EventStore, Run
from recorder.wire.sse import FrameSplitter
from tests.conftest import INTEROP


@asynccontextmanager
async def serving(app: Any, sock: socket.socket | None = None) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn in this event loop, on ``sock`` (``bound()``, for an app
    that must know its port before it serves) or a socket of its own; yields its base URL."""
    sock = sock or bound()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                await task
                raise RuntimeError("server did not start")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)


def bound() -> socket.socket:
    """A socket listening on a loopback port the system chose: bound at once, so that no
    other server (another test worker's) or connection takes the port before it serves."""
    return listen("127.0.0.1", 0)


@asynccontextmanager
async def demo_upstream() -> AsyncIterator[str]:
    async with serving(create_demo_app()) as url:
        yield url + "/"


@asynccontextmanager
async def recorder_at(db: str, agents: dict[str, str], **settings: Any) -> AsyncIterator[str]:
    sock = bound()
    port = sock.getsockname()[1]
    config = Settings(db=db, agents=agents, port=port, heartbeat_interval=0.5, **settings)
    async with serving(create_app(config), sock) as url:
        yield url


Script = Callable[[Request], Response]


def scripted_upstream(scripts: dict[str, Script]) -> Starlette:
    """An upstream whose answer to POST /{name} is whatever the test scripted."""

    async def handle(request: Request) -> Response:
        await request.body()
        return scripts[request.path_params["name"]](request)

    return Starlette(routes=[Route("/{name}", handle, methods=["POST"])])


def sse(chunks: list[bytes], *, delay: float = 0.0, then: Exception | None = None) -> Response:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
            if delay:
                await asyncio.sleep(delay)
        if then is not None:
            raise then

    return StreamingResponse(body(), media_type="text/event-stream")


def sse_data(raw: bytes) -> list[bytes]:
    """The ``data`` of each frame of an SSE body, joined as the spec joins its lines.

    Deliberately independent of the recorder's own framing code, which is under test."""
    data = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [line for line in block.split(b"\n") if line.startswith(b"data:")]
        if lines:
            data.append(b"\n".join(line[6:] if line[5:6] == b" " else line[5:] for line in lines))
    return data


@dataclass
class Exchange:
    """One request as it reached an agent, and the agent's answer, byte for byte."""

    request: bytes
    status: int
    response: bytes = b""

    def body(self) -> Any:
        return json.loads(self.request)

    def frames(self) -> list[bytes]:
        return sse_data(self.response)


@dataclass
class Tee:
    """A pass-through in front of an agent that keeps a copy of both directions, so a test
    can compare what the agent really sent with what the recorder stored."""

    upstream: str
    exchanges: list[Exchange] = field(default_factory=list)

    def by_run(self, run_id: str) -> Exchange:
        (found,) = [e for e in self.exchanges if e.body().get("runId") == run_id]
        return found

    def app(self) -> Starlette:
        async def forward(request: Request) -> Response:
            body = await request.body()
            headers = {k: v for k, v in request.headers.items() if k in ("content-type", "accept")}
            client = httpx.AsyncClient(timeout=60, trust_env=False)
            answer = await client.send(
                client.build_request("POST", self.upstream, content=body, headers=headers),
                stream=True,
            )
            exchange = Exchange(body, answer.status_code)
            self.exchanges.append(exchange)

            async def relay() -> AsyncIterator[bytes]:
                try:
                    async for chunk in answer.aiter_raw():
                        exchange.response += chunk
                        yield chunk
                finally:
                    await answer.aclose()
                    await client.aclose()

            return StreamingResponse(
                relay(),
                status_code=answer.status_code,
                media_type=answer.headers.get("content-type"),
            )

        return Starlette(routes=[Route("/", forward, methods=["POST"])])


async def node_client(mode: str, url: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Run the real @ag-ui/client HttpAgent against ``url``; its view of the run."""
    result: dict[str, Any] = await _client_mjs(mode, url, payload)
    return result


async def node_conversation(url: str, conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """Drive a multi-turn conversation with one real HttpAgent; its view after each turn."""
    turns: list[dict[str, Any]] = await _client_mjs("conversation", url, conversation)
    return turns


async def _client_mjs(mode: str, url: str, payload: dict[str, Any]) -> Any:
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(INTEROP / "client.mjs"),
        mode,
        url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=INTEROP,
        env={**os.environ, "SUPPRESS_TRANSFORMATION_WARNINGS": "true"},
    )
    out, err = await asyncio.wait_for(proc.communicate(json.dumps(payload).encode()), 120)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def project_oracle(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference client's fold of each {messages, state, events} case (one node process)."""
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(INTEROP / "project.mjs"),
        cwd=INTEROP,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(json.dumps(cases).encode())
    assert proc.returncode == 0, err.decode()
    result: list[dict[str, Any]] = json.loads(out)
    return result


def view(state: dict[str, Any]) -> dict[str, Any]:
    """What a frontend shows: messages, state, pending interrupts."""
    return {k: state[k] for k in ("messages", "state", "pendingInterrupts")}


def user(text: str, mid: str = "u1") -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": text}


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 10) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` when ``timeout`` passes first."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: still not so after {timeout:g} s")
        await asyncio.sleep(0.02)


async def run_recorded(client: httpx.AsyncClient, base: str, run_id: str) -> None:
    """Wait until the recorder at ``base`` knows the run (its request has gone through)."""

    async def known() -> bool:
        return (await client.get(f"{base}/runs/{run_id}")).status_code == 200

    await eventually(known, f"run {run_id!r} recorded")


async def run_closed(store: EventStore, run_id: str, timeout: float = 10) -> Run:
    """Wait until the run is no longer running; the run as it ended."""

    async def closed() -> bool:
        return (await store.get_run(run_id)).status != "running"

    await eventually(closed, f"run {run_id!r} closed", timeout)
    return await store.get_run(run_id)


async def healthy(client: httpx.AsyncClient, base: str, timeout: float = 10) -> None:
    """Wait until a recorder starting at ``base`` answers /healthz."""

    async def up() -> bool:
        try:
            return (await client.get(f"{base}/healthz")).status_code == 200
        except httpx.HTTPError:
            return False

    await eventually(up, f"{base} healthy", timeout)


async def post_run(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    async with client.stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        raw = await response.aread()
    splitter = FrameSplitter()
    return [orjson.loads(f.data) for f in splitter.feed(raw) + splitter.close()]


async def conversation(client: httpx.AsyncClient, rec: str, thread: str, **props: Any) -> list[str]:
    """Three runs as a frontend drives them: a chat turn, an interrupt, its resume."""
    runs: list[str] = []

    async def turn(run: str, text: str | None, **extra: Any) -> list[dict[str, Any]]:
        state = (
            (await client.get(f"{rec}/threads/{thread}/state")).json()
            if runs
            else {"messages": [], "state": {}}
        )
        messages = list(state["messages"])
        if text is not None:
            messages.append(user(text, f"{run}-u"))
        body = {
            "threadId": thread,
            "runId": run,
            "messages": messages,
            "state": state["state"],
            **extra,
        }
        if props:
            body["forwardedProps"] = {"demo": props}
        runs.append(run)
        return await post_run(client, f"{rec}/agents/demo", body)

    await turn(f"{thread}-r1", "What's the weather?")
    finished = await turn(f"{thread}-r2", "delete report.txt please")
    interrupt = finished[-1]["outcome"]["interrupts"][0]
    await turn(
        f"{thread}-r3", None, resume=[{"interruptId": interrupt["id"], "status": "resolved"}]
    )
    return runs
