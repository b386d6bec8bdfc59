"""The benchmark's HTTP client: one httpx client, streaming reads that count SSE frames."""

from __future__ import annotations

import asyncio
import itertools
import os
import time

import httpx
import orjson

_IDS = itertools.count()
_TAG = f"{os.getpid()}-{time.time_ns()}"
_HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}


def new_client() -> httpx.AsyncClient:
    timeout = httpx.Timeout(120.0, connect=10.0)
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
    return httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False)


def run_input() -> bytes:
    """A RunAgentInput with a thread and run id never used before (the recorder wants both)."""
    n = next(_IDS)
    return orjson.dumps(
        {
            "threadId": f"bench-thread-{_TAG}-{n}",
            "runId": f"bench-run-{_TAG}-{n}",
            "state": {},
            "messages": [{"id": f"u{n}", "role": "user", "content": "go"}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    )


class StreamError(RuntimeError):
    pass


async def read_stream(
    client: httpx.AsyncClient, method: str, url: str, body: bytes | None = None
) -> tuple[int, float, float, str | None]:
    """Frames received, seconds to the first frame, seconds in all, and the run id header."""
    frames = 0
    first = 0.0
    last = b""
    started = time.perf_counter()
    async with client.stream(method, url, content=body, headers=_HEADERS) as response:
        if response.status_code != 200:
            await response.aread()
            raise StreamError(f"{method} {url}: HTTP {response.status_code}: {response.text[:300]}")
        async for chunk in response.aiter_raw():
            # A frame ends at a blank line; the two LFs may arrive in different chunks.
            found = chunk.count(b"\n\n") + (last == b"\n" and chunk[:1] == b"\n")
            if found and not frames:
                first = time.perf_counter() - started
            frames += found
            last = chunk[-1:]
        run_id = response.headers.get("x-recorder-run-id")
    return frames, first, time.perf_counter() - started, run_id


async def settled(client: httpx.AsyncClient, base: str, run_id: str | None) -> None:
    """Wait until the recorder has closed the run, so its last writes never overlap the next
    measurement (with durability "buffered" the client is done before the recorder is)."""
    if run_id is None:
        raise StreamError("the recorder named no run (x-recorder-run-id)")
    deadline = time.monotonic() + 60
    while (await client.get(f"{base}/runs/{run_id}")).json()["status"] == "running":
        if time.monotonic() > deadline:
            raise StreamError(f"run {run_id} still running after 60 s")
        await asyncio.sleep(0.01)
