"""kill -9 mid-run: after a restart the run is incomplete and everything committed is intact."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

import httpx

from recorder.store import open_store
from recorder.wire.sse import FrameSplitter
from tests.servers import demo_upstream, free_port, run_closed


async def _start(db: str, agent: str, port: int) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "RECORDER_DB": db,
        "RECORDER_HEARTBEAT_INTERVAL": "0.3",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "recorder.cli.main",
        "serve",
        "--agent",
        f"demo={agent}",
        "--port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(200):
            try:
                if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return proc
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.05)
    proc.kill()
    raise AssertionError("recorder did not start")


async def test_kill_9_mid_run(sqlite_url: str) -> None:
    async with demo_upstream() as upstream:
        port = free_port()
        proc = await _start(sqlite_url, upstream, port)
        seen: list[tuple[str | None, bytes]] = []
        body: dict[str, Any] = {
            "threadId": "t",
            "runId": "r1",
            "messages": [{"id": "u", "role": "user", "content": "hi"}],
            "forwardedProps": {"demo": {"delay": 0.01, "extra": 500}},
        }
        splitter = FrameSplitter()
        try:
            async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
                async with client.stream(
                    "POST", f"http://127.0.0.1:{port}/agents/demo", json=body
                ) as response:
                    async for chunk in response.aiter_bytes():
                        seen += [(f.id, f.data) for f in splitter.feed(chunk)]
                        if len(seen) >= 40:
                            os.kill(proc.pid, signal.SIGKILL)
                            break
        except httpx.HTTPError:
            pass
        await proc.wait()
        assert len(seen) >= 40

        restarted = await _start(sqlite_url, upstream, port)
        try:
            store = await open_store(sqlite_url)
            try:
                run = await run_closed(store, "r1", timeout=15)
                assert run.status == "incomplete"
                recorded = {e.seq: e.payload for e in await store.read_events("r1")}
                # Every frame the client saw is in the log, under the seq it was sent with.
                for frame_id, data in seen:
                    assert recorded[int(frame_id or -1)] == data
                assert len(recorded) < 500
            finally:
                await store.close()
        finally:
            restarted.terminate()
            await restarted.wait()
