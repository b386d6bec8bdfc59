"""The real ``recorder`` command, run as a user runs it, and a recorded database to ask."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest

from tests.servers import conversation, demo_upstream, eventually, post_run, recorder_at, user

RECORDER = str(Path(sys.executable).parent / "recorder")
TOKEN = "s3cret"


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without the caller's RECORDER_* settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECORDER_")}
    return {**env, **extra}


async def recorder(
    *args: str,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    cwd: Path | None = None,
) -> Done:
    proc = await asyncio.create_subprocess_exec(
        RECORDER,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env or clean_env(),
        cwd=cwd,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    return Done(proc.returncode or 0, out.decode(), err.decode())


_ONE_AT_A_TIME = threading.Lock()


def _main_captured(args: tuple[str, ...]) -> Done:
    from recorder.cli.main import main

    out, err = io.BytesIO(), io.BytesIO()
    text_out = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    text_err = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    with _ONE_AT_A_TIME:
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = text_out, text_err
        try:
            code = main(list(args))
        finally:
            sys.stdout, sys.stderr = saved
    return Done(code, out.getvalue().decode(), err.getvalue().decode())


async def run_main(*args: str) -> Done:
    """``main()`` in this process (on a thread: this loop serves the recorder it may ask),
    its stdout and stderr captured: the command without a process start per call."""
    return await asyncio.to_thread(_main_captured, args)


@pytest.fixture(autouse=True)
def no_recorder_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("RECORDER_")]:
        monkeypatch.delenv(name)


@dataclass(frozen=True)
class Recorded:
    url: str  # the running server
    db: str  # its database
    http: httpx.AsyncClient
    upstream: str  # the demo agent's URL


@pytest.fixture
async def recorded(db_url: str) -> AsyncIterator[Recorded]:
    """A server with the demo agent and an API token; threads t1 and t2 (three runs each),
    a fork of t1 on its thread, a fork of t2 into a new thread (t2-branch), and a thread
    with a long run."""
    async with (
        demo_upstream() as upstream,
        # The server indexes nothing itself: its indexer would race the CLI's ``reindex``
        # (the index comes out whole either way, but the count each reports would not).
        recorder_at(db_url, {"demo": upstream}, api_token=TOKEN, search_index=False) as rec,
        httpx.AsyncClient(
            base_url=rec, timeout=60, trust_env=False, headers={"authorization": f"Bearer {TOKEN}"}
        ) as http,
    ):
        runs = await conversation(http, rec, "t1") + await conversation(http, rec, "t2")
        same = {"atSeq": 12, "messages": ["Rome?"], "runId": "t1-f", "strategy": "same-thread"}
        await post_run(http, f"{rec}/runs/t1-r1/fork", same)
        branch = {"messages": ["And Oslo?"], "runId": "t2-f", "threadId": "t2-branch"}
        await post_run(http, f"{rec}/runs/t2-r1/fork", branch)
        long = {
            "threadId": "a-thread-with-a-rather-long-identifier-that-goes-on-and-on",
            "runId": "long",
            "messages": [user("hi", "u")],
            "forwardedProps": {"demo": {"extra": 3000}},
        }
        await post_run(http, f"{rec}/agents/demo", long)
        # A client has read a run's last event before the recorder closes it: questions
        # asked of the database (closed runs only, for the index) wait for every close.
        for run in [*runs, "t1-f", "t2-f", "long"]:
            await eventually(partial(_closed, http, run), f"run {run!r} closed", timeout=30)
        yield Recorded(rec, db_url, http, upstream)


async def _closed(http: httpx.AsyncClient, run_id: str) -> bool:
    return (await http.get(f"/runs/{run_id}")).json()["status"] != "running"
