"""``connect()`` for ``HttpAgent``: the lines README.md gives a TypeScript frontend restore a
thread after a reload through ``POST /agents/{name}/connect``, run with the real
@ag-ui/client (tests/interop/connect.mjs) against a real recorder."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.conftest import INTEROP, ROOT, node_available, require
from tests.servers import conversation, demo_upstream, post_run, recorder_at, user, view

pytestmark = pytest.mark.node

README = ROOT / "README.md"
SCRIPT = INTEROP / "connect.mjs"
README_URL = '"http://127.0.0.1:8000/agents/support"'


@pytest.fixture
async def recorded(sqlite_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    require(node_available(), "Node and @ag-ui/client")
    async with demo_upstream() as upstream:
        agents = {"demo": upstream, "support": upstream}
        async with (
            recorder_at(sqlite_url, agents) as rec,
            httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as client,
        ):
            yield rec, client


async def connect(rec: str, thread: str) -> dict[str, Any]:
    """What a frontend's agent holds after ``connectAgent()`` on ``thread``."""
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(SCRIPT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "SUPPRESS_TRANSFORMATION_WARNINGS": "true"},
    )
    payload = {"url": f"{rec}/agents/support", "threadId": thread}
    out, err = await asyncio.wait_for(proc.communicate(json.dumps(payload).encode()), 120)
    assert proc.returncode == 0, err.decode()
    found: dict[str, Any] = json.loads(out)
    return found


async def test_connect_restores_threads_as_recorded(
    recorded: tuple[str, httpx.AsyncClient],
) -> None:
    rec, client = recorded
    runs = await conversation(client, rec, "done")  # three runs, the interrupt resolved
    await post_run(
        client, f"{rec}/runs/{runs[0]}/fork", {"messages": ["Rome?"], "threadId": "done"}
    )
    # A fork into a new thread: its first run's input holds the history it came from.
    await post_run(client, f"{rec}/runs/{runs[1]}/fork", {"messages": ["Oslo?"], "threadId": "new"})
    await conversation(client, rec, "waiting")
    body = {"threadId": "pending", "runId": "p1", "messages": [user("delete a.txt", "u")]}
    await post_run(client, f"{rec}/agents/demo", body)

    for thread in ("done", "new", "waiting", "pending"):
        restored = await connect(rec, thread)
        expected = (await client.get(f"/threads/{thread}/state")).json()
        assert view(restored) == view(expected), thread
    assert (await connect(rec, "pending"))["pendingInterrupts"][0]["reason"] == "confirmation"
    # The latest branch of a forked thread: the fork, not the runs beside it.
    said = [m.get("content") for m in (await connect(rec, "done"))["messages"]]
    assert "Rome?" in said and "Deleted report.txt." not in said
    # A thread with no history yet: nothing to restore, and no error.
    assert view(await connect(rec, "none")) == {
        "messages": [],
        "state": {},
        "pendingInterrupts": [],
    }


async def test_connect_follows_a_run_still_going(recorded: tuple[str, httpx.AsyncClient]) -> None:
    rec, client = recorded
    body = {
        "threadId": "live",
        "runId": "live-1",
        "messages": [user("What's the weather?", "u")],
        "forwardedProps": {"demo": {"delay": 0.05}},
    }
    going = asyncio.create_task(post_run(client, f"{rec}/agents/demo", body))
    for _ in range(500):  # until the run is recorded (its thread listed)
        if (await client.get("/threads")).json()["threads"]:
            break
        await asyncio.sleep(0.02)
    run = (await client.get("/runs/live-1")).json()
    assert run["status"] == "running"
    restored = await connect(rec, "live")  # the history so far, then the run as it goes on
    await going
    expected = (await client.get("/threads/live/state")).json()
    assert (await client.get("/runs/live-1")).json()["status"] == "finished"
    assert view(restored) == view(expected)
    assert restored["messages"][-1]["content"] == "It is clear and 21 °C in Paris."


def _readme_lines() -> list[str]:
    section = README.read_text().split("### Restoring a thread in a frontend", 1)[1]
    match = re.search(r"```ts\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1).strip().splitlines()


def test_the_readme_lines_are_the_ones_tested() -> None:
    lines = _readme_lines()
    assert len([line for line in lines if line.strip() and not line.startswith("//")]) <= 10
    # The TypeScript, types aside, with the example URL given to the script.
    as_js = [
        line.replace("protected ", "").replace(": RunAgentInput", "").replace(README_URL, "url")
        for line in lines
        if not line.startswith("import type ")
    ]
    as_js = [line.replace("{ url: url,", "{ url,") for line in as_js]
    script = SCRIPT.read_text().split("// README: connect\n", 1)[1].split("// README: end", 1)[0]
    assert as_js == script.strip().splitlines()
