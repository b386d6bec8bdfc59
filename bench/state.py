"""State at a point: ``GET /runs/{id}/state?seq=N`` on a long recorded run.

A run of mixed events is written into a SQLite store (with a posted RunAgentInput as its
starting point) and its checkpoints are built as a recorder builds them when a run closes
(every 250 events, the default, and one at its last event). Then two recorder processes
serve that file: one as configured by default, one with checkpoints off, which folds the
run from its start for every query: the baseline. A first query at the run's end reads the
checkpoint its close wrote; then each round asks for the state at seeded random points and
takes the median. The client is a lean one (HTTP/1.1 on a kept-alive socket, each answer
read whole, nothing parsed), as the first-event benchmark's is: the figure is the server's.
The same points read with httpx are a row of context: reading a multi-megabyte body costs
that client milliseconds of its own here.

The same is measured in process (``History(store).project`` of the run read once) to show
what the HTTP layer and the JSON response add.
"""

from __future__ import annotations

import asyncio
import random
import socket
import statistics
import time

import orjson

from bench.client import new_client
from bench.context import SEED, Context, store_url
from bench.report import Row
from bench.store import typed
from bench.workload import mixed_events
from recorder.store import EventStore, NewRun, open_store
from recorder.timetravel.history import History

RUN_ID = "state-run"
THREAD_ID = "state-thread"
NO_CHECKPOINTS = 0  # --checkpoint-every 0: no checkpoints, every query folds from the start


async def record(url: str, count: int) -> float:
    """Record the run, then build its checkpoints as a recorder does when a run closes;
    the milliseconds that build took."""
    posted = orjson.dumps(
        {
            "threadId": THREAD_ID,
            "runId": RUN_ID,
            "state": {"items": [], "counter": 0},
            "messages": [{"id": "u0", "role": "user", "content": "start"}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    )
    store = await open_store(url, migrate=True)
    try:
        await store.create_run(NewRun(RUN_ID, THREAD_ID, agent="bench", input=posted))
        events = typed(mixed_events(count, seed=5, run_id=RUN_ID, thread_id=THREAD_ID))
        for i in range(0, count, 1000):
            await store.append(RUN_ID, events[i : i + 1000])
        await store.set_status(RUN_ID, "finished", outcome="success")
        started = time.perf_counter()
        await History(store).build_checkpoints(RUN_ID)
        return (time.perf_counter() - started) * 1000
    finally:
        await store.close()


def points(ctx: Context, round_no: int) -> list[int]:
    rng = random.Random(SEED * 1000 + round_no)
    return [rng.randrange(ctx.plan.state_events) for _ in range(ctx.plan.state_points)]


class LeanClient:
    """HTTP/1.1 GETs on one kept-alive connection, each answer read whole (Content-Length)
    into one buffer kept from answer to answer, nothing parsed but the head: what the
    server takes, not what a client library adds. (httpx spends milliseconds of its own on
    a multi-megabyte body on this machine, and so did asyncio's ``StreamReader``: a
    2.2 MB body the server wrote in 0.5 ms took ``readexactly`` 4.2 ms to gather.)"""

    def __init__(self, base: str) -> None:
        self.host, port = base.removeprefix("http://").split(":")
        self.port = int(port)
        self.sock: socket.socket | None = None
        self.buffer = bytearray(8 << 20)

    async def get(self, target: str) -> int:
        """The answer's status; its body is read to the end."""
        loop = asyncio.get_running_loop()
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port))
            self.sock.setblocking(False)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request = f"GET {target} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n"
        await loop.sock_sendall(self.sock, request.encode())
        got, end = 0, -1
        while end < 0:
            got += await self._receive(got)
            end = self.buffer.find(b"\r\n\r\n", 0, got)
        lines = bytes(self.buffer[:end]).split(b"\r\n")
        status = int(lines[0].split()[1])
        length = next(
            int(line.split(b":", 1)[1])
            for line in lines
            if line.lower().startswith(b"content-length:")
        )
        total = end + 4 + length
        if total > len(self.buffer):
            self.buffer += bytes(total - len(self.buffer))
        while got < total:
            got += await self._receive(got, total)
        return status

    async def _receive(self, got: int, until: int | None = None) -> int:
        assert self.sock is not None
        if got == len(self.buffer):
            self.buffer += bytes(len(self.buffer))
        view = memoryview(self.buffer)[got:until]
        try:
            count = await asyncio.get_running_loop().sock_recv_into(self.sock, view)
        finally:
            view.release()
        if not count:
            raise ConnectionError("the server closed the connection mid-answer")
        return count

    async def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


async def over_http(ctx: Context, path: str) -> tuple[float, list[float], list[float], list[float]]:
    """The first query, the median of each round's random points with a lean client and
    with httpx, and the full folds."""
    urls = await ctx.pool.start(
        {
            "state": ["recorder", "--db", store_url(path)],
            "state-full": [
                "recorder",
                "--db",
                store_url(path),
                "--checkpoint-every",
                str(NO_CHECKPOINTS),
            ],
        }
    )
    lean = LeanClient(urls["state"])
    lean_full = LeanClient(urls["state-full"])
    try:
        async with new_client() as client:

            async def query(via: LeanClient, seq: int | None = None) -> float:
                target = f"/runs/{RUN_ID}/state" + ("" if seq is None else f"?seq={seq}")
                started = time.perf_counter()
                status = await via.get(target)
                elapsed = time.perf_counter() - started
                if status != 200:
                    raise RuntimeError(f"GET {target}: {status}")
                return elapsed * 1000

            async def query_httpx(seq: int) -> float:
                started = time.perf_counter()
                response = await client.get(f"{urls['state']}/runs/{RUN_ID}/state?seq={seq}")
                elapsed = time.perf_counter() - started
                response.raise_for_status()
                return elapsed * 1000

            first = await query(lean)
            full: list[float] = []
            medians: list[float] = []
            with_httpx: list[float] = []
            for round_no in range(ctx.plan.rounds):
                full.append(await query(lean_full))
                samples = [await query(lean, seq) for seq in points(ctx, round_no)]
                medians.append(statistics.median(samples))
                samples = [await query_httpx(seq) for seq in points(ctx, round_no)]
                with_httpx.append(statistics.median(samples))
    finally:
        await lean.close()
        await lean_full.close()
        await ctx.pool.stop("state")
        await ctx.pool.stop("state-full")
    return first, medians, with_httpx, full


async def in_process(ctx: Context, path: str) -> tuple[list[float], list[float]]:
    store: EventStore = await open_store(store_url(path))
    try:
        run = await store.get_run(RUN_ID)
        history = History(store)
        from_start = History(store, checkpoint_every=NO_CHECKPOINTS)
        medians: list[float] = []
        full: list[float] = []
        for round_no in range(ctx.plan.rounds):
            started = time.perf_counter()
            await from_start.project(run)
            full.append((time.perf_counter() - started) * 1000)
            samples = []
            for seq in points(ctx, round_no):
                started = time.perf_counter()
                await history.project(run, seq)
                samples.append((time.perf_counter() - started) * 1000)
            medians.append(statistics.median(samples))
    finally:
        await store.close()
    return medians, full


async def run(ctx: Context) -> list[Row]:
    path = str(ctx.workdir / "state.db")
    built = await record(store_url(path), ctx.plan.state_events)
    first, medians, with_httpx, full = await over_http(ctx, path)
    local, local_full = await in_process(ctx, path)
    size = f"{ctx.plan.state_events:,}-event run (SQLite)"
    return [
        Row(
            "state",
            "API, first query vs full fold",
            "ms",
            [first],
            full,
            "<= 1x",
            lambda _ours, _base, ratio: ratio <= 1.0,
            note=f"{size}; baseline: the same API on a recorder with checkpoints off",
        ),
        Row(
            "state",
            f"API, median of {ctx.plan.state_points} random seqs vs full fold",
            "ms",
            medians,
            full,
            "<= 5 ms and <= 0.05x",
            lambda ours, _base, ratio: ours <= 5 and ratio <= 0.05,
        ),
        Row(
            "state",
            f"API, median of {ctx.plan.state_points} random seqs, httpx as the client (context)",
            "ms",
            with_httpx,
            full,
            note="the same points read with httpx: its own cost of reading a large body added",
        ),
        Row(
            "state",
            "checkpoints built when the run closes (context)",
            "ms",
            [built],
            local_full,
            note="in process, off the client's path; baseline: one fold from the start",
        ),
        Row(
            "state",
            "in process History.project vs fold from start",
            "ms",
            local,
            local_full,
            "<= 20 ms and <= 0.05x",
            lambda ours, _base, ratio: ours <= 20 and ratio <= 0.05,
        ),
    ]
