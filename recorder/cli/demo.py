"""``recorder demo``: start the recorder with the demo agent, drive runs, fork one, show it all."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

from recorder.cli.local import describe_database
from recorder.cli.render import thread_text, threads_table, transcript
from recorder.cli.serve import free_port, make_server
from recorder.client import AsyncRecorderClient
from recorder.config import AgentConfig, Settings


async def run_demo(settings: Settings, *, keep_serving: bool = False) -> int:
    port = settings.port if keep_serving and settings.port else free_port()
    settings = settings.model_copy(update={"port": port, "host": "127.0.0.1", "demo_agent": True})
    settings = settings.model_copy(
        update={
            "agents": {
                **settings.agents,
                "demo": AgentConfig(url=f"http://127.0.0.1:{port}/demo-agent/"),
            }
        }
    )
    server = make_server(settings)
    task = asyncio.create_task(server.serve())
    base = f"http://127.0.0.1:{port}"
    try:
        while not server.started:
            if task.done():
                await task
                return 1
            await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=base, timeout=30, trust_env=False) as client:
            thread = await _drive(client)
        print(await _report(base, thread))
        if not keep_serving:
            print(hints(settings, thread))
        if keep_serving:
            print(
                f"\nweb timeline at {base}/#/threads/{thread}"
                f"  (API docs {base}/docs; Ctrl-C to stop)",
                flush=True,
            )
            await task
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return 0


async def _post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with client.stream("POST", path, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(orjson.loads(line[5:]))
    return events


async def _state(client: httpx.AsyncClient, thread: str) -> dict[str, Any]:
    response = await client.get(f"/threads/{thread}/state")
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


async def _drive(client: httpx.AsyncClient) -> str:
    thread = f"demo-{uuid.uuid4().hex[:8]}"

    async def turn(run: str, text: str | None, **extra: Any) -> list[dict[str, Any]]:
        now = await _state(client, thread) if run != "run-1" else {"messages": [], "state": {}}
        messages = list(now["messages"])
        if text is not None:
            messages.append({"id": f"{run}-user", "role": "user", "content": text})
        body = {
            "threadId": thread,
            "runId": f"{thread}-{run}",
            "messages": messages,
            "state": now["state"],
        }
        return await _post(client, "/agents/demo", {**body, **extra})

    await turn("run-1", "What's the weather like?")
    finished = await turn("run-2", "Please delete report.txt")
    interrupt = finished[-1]["outcome"]["interrupts"][0]
    await turn("run-3", None, resume=[{"interruptId": interrupt["id"], "status": "resolved"}])
    fork = {"atSeq": 16, "messages": ["Actually, what about Rome?"], "runId": f"{thread}-fork-1"}
    await _post(client, f"/runs/{thread}-run-1/fork", fork)
    return thread


async def _report(base: str, thread: str) -> str:
    async with AsyncRecorderClient(base) as client:
        threads = (await client.threads(limit=5)).threads
        tree = await client.thread(thread)
        now = await client.thread_state(thread)
        main = await client.run_state(f"{thread}-run-3")
        interrupted = await client.run_state(f"{thread}-run-2")
    return "\n".join(
        [
            "recorded threads:",
            threads_table(threads),
            "",
            thread_text(tree, now).replace("conversation now:", "conversation now (the fork):"),
            "",
            "run-2 ended waiting for a confirmation:",
            *transcript(interrupted)[-3:],
            "",
            "run-3 (resumed, the branch before the fork) shows:",
            *transcript(main),
        ]
    )


def hints(settings: Settings, thread: str) -> str:
    """Commands to look again, as they can be pasted: this very program, this database."""
    cmd = recorder_command()
    db = shlex.quote(describe_database(settings.db))
    port = 8000
    return "\n".join(
        [
            "",
            "look again (the same database):",
            f"  {cmd} threads --db {db}",
            f"  {cmd} show {shlex.quote(thread)} --db {db}",
            f"  {cmd} history {shlex.quote(thread)} --db {db}",
            "open the web timeline: serve it, then open the address in a browser:",
            f"  {cmd} serve --demo-agent --port {port} --db {db}",
            f"  http://127.0.0.1:{port}/#/threads/{thread}",
        ]
    )


def recorder_command() -> str:
    """How this program was started (``.venv/bin/recorder`` say), so a hint runs as printed."""
    invoked = sys.argv[0] if sys.argv else ""
    if Path(invoked).name == "recorder":
        return shlex.quote(invoked)
    return f"{shlex.quote(sys.executable)} -m recorder.cli"
