"""Real servers on loopback ports for end-to-end tests, and the reference client as a frontend."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from recorder.api import create_app
from recorder.config import Settings
from recorder.demo_agent import create_demo_app
from recorder.wire.sse import FrameSplitter
from tests.conftest import INTEROP


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def serving(app: Any, port: int | None = None) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn in this event loop; yields its base URL."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
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


@asynccontextmanager
async def demo_upstream() -> AsyncIterator[str]:
    async with serving(create_demo_app()) as url:
        yield url + "/"


@asynccontextmanager
async def recorder_at(db: str, agents: dict[str, str], **settings: Any) -> AsyncIterator[str]:
    port = free_port()
    config = Settings(db=db, agents=agents, port=port, heartbeat_interval=0.5, **settings)
    async with serving(create_app(config), port) as url:
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


async def node_client(mode: str, url: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Run the real @ag-ui/client HttpAgent against ``url``; its view of the run."""
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
    result: dict[str, Any] = json.loads(out)
    return result


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


def user(text: str, mid: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": text}


async def post_run(
    client: httpx.AsyncClient, url: str, body: dict[str, Any]
) -> list[dict[str, Any]]:
    async with client.stream("POST", url, json=body) as response:
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
