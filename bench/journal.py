"""The journal: what riding through an outage costs, and that a healthy store never pays it.

Three recorders on the same workloads, side by side: the default one (journal on, store
healthy), one with the journal off, and one whose SQLite database is held locked by this
process for the whole benchmark (another writer, past ``store_deadline``): every write of
the last one goes to the journal, flushed with group commit before its frames are sent.

The journal's commit rate comes from the recorder's ``/healthz`` (its ``journal.commits``
and ``journal.records`` over the down recorder's requests).
"""

from __future__ import annotations

import contextlib
import sqlite3
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context, store_url
from bench.report import Row, at_least

PATHS = ("healthy", "off", "down")
REQUESTS = 3  # throughput requests per path and round


async def servers(ctx: Context) -> dict[str, str]:
    urls = await ctx.http_servers()
    upstream = urls["upstream"]
    agents = ["--agent", f"up={upstream}/events", "--agent", f"small={upstream}/small"]
    specs = {
        "nojournal": [
            "recorder",
            "--db",
            store_url(str(ctx.workdir / "proxy-nojournal.db")),
            "--no-journal",
            *agents,
        ],
        "storedown": [
            "recorder",
            "--db",
            store_url(str(ctx.workdir / "proxy-storedown.db")),
            "--store-deadline",
            "0.2",
            *agents,
        ],
    }
    missing = {name: spec for name, spec in specs.items() if ctx.pool.url(name) is None}
    if missing:
        await ctx.pool.start(missing)
    return {
        "healthy": urls["commit"],
        "off": ctx.pool.url("nojournal") or "",
        "down": ctx.pool.url("storedown") or "",
    }


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Another writer holding the SQLite database's write lock."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


async def run(ctx: Context) -> list[Row]:
    urls = await servers(ctx)
    expected = ctx.plan.proxy_events
    rate: dict[str, list[float]] = {path: [] for path in PATHS}
    ttfe: dict[str, list[float]] = {path: [] for path in PATHS}
    commits: list[float] = []  # journal commits per second of the down recorder's requests
    per_commit: list[float] = []  # records per journal commit
    async with new_client() as client:

        async def journal() -> dict[str, float]:
            answer = (await client.get(urls["down"] + "/healthz")).json()
            return answer.get("journal") or {}

        async def throughput(path: str) -> float:
            frames, _first, elapsed, run_id = await read_stream(
                client, "POST", urls[path] + "/agents/up", run_input()
            )
            if frames < expected:
                raise StreamError(f"{path}: {frames} frames of {expected}")
            if path != "down":  # the down recorder's runs are in its journal only
                await settled(client, urls[path], run_id)
            return expected / elapsed

        async def first_event(path: str) -> float:
            frames, first, _elapsed, run_id = await read_stream(
                client, "POST", urls[path] + "/agents/small", run_input()
            )
            if frames < 1:
                raise StreamError(f"{path}: no frame")
            if path != "down":
                await settled(client, urls[path], run_id)
            return first * 1000

        with locked(ctx.workdir / "proxy-storedown.db"):
            for path in PATHS:  # warm-up (the down recorder finds its store down here)
                await throughput(path)
                for _ in range(5):
                    await first_event(path)
            if (await journal()).get("bytes", 0) <= 0:
                raise StreamError("the down recorder's journal holds nothing")
            for _ in range(ctx.plan.rounds):
                for path in PATHS:
                    before, started = await journal(), time.perf_counter()
                    rate[path].append(
                        statistics.median([await throughput(path) for _ in range(REQUESTS)])
                    )
                    if path == "down":
                        after, spent = await journal(), time.perf_counter() - started
                        flushed = after["commits"] - before["commits"]
                        commits.append(flushed / spent)
                        per_commit.append((after["records"] - before["records"]) / max(flushed, 1))
                samples: dict[str, list[float]] = {path: [] for path in PATHS}
                for _ in range(ctx.plan.ttfe_requests):
                    for path in PATHS:
                        samples[path].append(await first_event(path))
                for path in PATHS:
                    ttfe[path].append(statistics.median(samples[path]))
    added = [d - h for d, h in zip(ttfe["down"], ttfe["healthy"], strict=True)]
    return [
        Row(
            "journal",
            "proxy throughput, healthy store: journal on vs off",
            "ev/s",
            rate["healthy"],
            rate["off"],
            ">= 0.95x",
            at_least(0.95),
            note=f"{expected:,} mixed events per request, median of {REQUESTS} per round",
        ),
        Row(
            "journal",
            "proxy throughput, store down (journal) vs healthy",
            "ev/s",
            rate["down"],
            rate["healthy"],
            note=(
                f"journal: {statistics.median(commits):,.0f} commits/s (write + fsync), "
                f"{statistics.median(per_commit):.1f} records per commit"
            ),
        ),
        Row(
            "journal",
            "ttfe, store down (journal) vs healthy",
            "ms",
            ttfe["down"],
            ttfe["healthy"],
            note=(
                f"median of {ctx.plan.ttfe_requests} requests per round; added by the journal "
                f"{statistics.median(added):.2f} ms [{min(added):.2f}-{max(added):.2f}]"
            ),
        ),
        Row(
            "journal", "ttfe, healthy store: journal on vs off", "ms", ttfe["healthy"], ttfe["off"]
        ),
    ]
