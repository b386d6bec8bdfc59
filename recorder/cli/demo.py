"""``recorder demo``: start the recorder with the demo agent, drive runs, fork one, show it all."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

from recorder.cli.local import describe_database
from recorder.cli.render import thread_text, threads_table, transcript
from recorder.cli.serve import listen, make_server
from recorder.client import AsyncRecorderClient
from recorder.config import AgentConfig, Settings
from recorder.errors import RecorderError
from recorder.models import ForkOptions, ForkPlan
from recorder.runtime import Runtime


async def run_demo(settings: Settings, *, keep_serving: bool = False) -> int:
    # The port, then the database, then the server: what stops any of them is one line,
    # and a port taken leaves no database behind.
    sock = listen("127.0.0.1", settings.port if keep_serving and settings.port else 0)
    try:
        port = sock.getsockname()[1]
        settings = settings.model_copy(
            update={"port": port, "host": "127.0.0.1", "demo_agent": True}
        )
        settings = settings.model_copy(
            update={
                "agents": {
                    **settings.agents,
                    "demo": AgentConfig(url=f"http://127.0.0.1:{port}/demo-agent/"),
                }
            }
        )
        runtime = await Runtime.start(settings)
        try:
            return await _serve_demo(settings, runtime, sock, keep_serving)
        finally:
            await runtime.close()
    finally:
        sock.close()


async def _serve_demo(
    settings: Settings, runtime: Runtime, sock: socket.socket, keep_serving: bool
) -> int:
    port = settings.port
    server = make_server(settings, runtime=runtime)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    base = f"http://127.0.0.1:{port}"
    try:
        while not server.started:
            if task.done():
                await task
                return 1
            await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=base, timeout=30, trust_env=False) as client:
            thread = await _drive(client)
        async with AsyncRecorderClient(base) as recorder:
            plan = await _fork(recorder, thread)
            print(await _report(recorder, thread, plan))
        if not keep_serving:
            print(hints(settings, thread, plan.thread_id))
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
    return thread


async def answered(recorder: AsyncRecorderClient, run_id: str) -> int:
    """The seq right after the run's answer is complete: its RUN_FINISHED (else its last
    TEXT_MESSAGE_END), read from the recorded events; a fork there branches between turns,
    never inside an answer."""
    ends = {
        e.type: e.seq
        async for e in recorder.iter_events(run_id)
        if e.type in ("RUN_FINISHED", "TEXT_MESSAGE_END")
    }
    found = ends.get("RUN_FINISHED", ends.get("TEXT_MESSAGE_END"))
    if found is None:
        raise RecorderError(f"run {run_id!r} recorded no complete answer to fork after")
    return found


async def _fork(recorder: AsyncRecorderClient, thread: str) -> ForkPlan:
    """Ask the first turn's question differently: fork run-1 once its answer is complete,
    by the agent's strategy (the demo agent has the default, a new thread)."""
    first = f"{thread}-run-1"
    options = ForkOptions(
        at_seq=await answered(recorder, first),
        messages=["Actually, what about Rome?"],
        run_id=f"{thread}-fork-1",
    )
    plan = await recorder.plan_fork(first, options)
    async for _event in recorder.fork(first, options, thread_id=plan.thread_id):
        pass
    return plan


async def _report(recorder: AsyncRecorderClient, thread: str, plan: ForkPlan) -> str:
    threads = (await recorder.threads(limit=5)).threads
    tree = await recorder.thread(thread)
    now = await recorder.thread_state(thread)
    branch = await recorder.thread_state(plan.thread_id)
    interrupted = await recorder.run_state(f"{thread}-run-2")
    strategy = "a new thread" if plan.strategy == "new-thread" else "the same thread"
    return "\n".join(
        [
            "recorded threads:",
            threads_table(threads),
            "",
            thread_text(tree, now),
            "",
            "run-2 ended waiting for a confirmation:",
            *transcript(interrupted)[-3:],
            "",
            f"forked run-1 after seq {plan.parent_seq} (its RUN_FINISHED: the first answer "
            "complete),",
            f"into {strategy}, {plan.thread_id} ({plan.strategy}), asking something else:",
            side_by_side(
                (f"original ({thread})", transcript(now)),
                (f"branch ({plan.thread_id})", transcript(branch)),
            ),
        ]
    )


def side_by_side(left: tuple[str, list[str]], right: tuple[str, list[str]], width: int = 44) -> str:
    """Two transcripts in two columns, line by line (``*`` where they differ); lines past
    ``width`` are cut."""

    def fit(text: str) -> str:
        text = text.strip()
        return text if len(text) <= width else text[: width - 1] + "~"

    (left_title, left_text), (right_title, right_text) = left, right
    left_lines = "\n".join(left_text).splitlines()
    right_lines = "\n".join(right_text).splitlines()
    rows = [(left_title, right_title), ("-" * width, "-" * width)]
    for n in range(max(len(left_lines), len(right_lines))):
        here = left_lines[n] if n < len(left_lines) else ""
        there = right_lines[n] if n < len(right_lines) else ""
        mark = "|" if here.strip() == there.strip() else "*"
        rows.append((f"{fit(here):<{width}} {mark}", fit(there)))
    return "\n".join(f"  {a:<{width + 2}} {b}".rstrip() for a, b in rows)


def hints(settings: Settings, thread: str, branch: str) -> str:
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
            f"  {cmd} show {shlex.quote(branch)} --db {db}",
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
