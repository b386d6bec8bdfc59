"""The journal: what riding through an outage costs, and that a healthy store never pays it.

Three recorders on the same workloads, side by side: the default one (journal on, store
healthy), one with the journal off, and one whose SQLite database is held locked by this
process for the whole benchmark (another writer, past ``store_deadline``): every write of
the last one goes to the journal, flushed with group commit before its frames are sent.

The journal's commit rate comes from the recorder's ``/healthz`` (its ``journal.commits``
and ``journal.records`` over the down recorder's requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context
from bench.report import Row, at_least
from bench.telemetry import cpu_seconds
from recorder.proxy.journal import JournalFile, Record, encode

PATHS = ("healthy", "off", "down")
REQUESTS = 3  # throughput requests per path and round
SERVERS = {"healthy": "journal", "off": "nojournal", "down": "storedown"}  # in the pool
WRITERS = 50  # concurrent appenders of the journal file row


async def servers(ctx: Context) -> dict[str, str]:
    started = await ctx.paired(
        {
            "journal": [],
            "nojournal": ["--no-journal"],
            "storedown": ["--store-deadline", "0.2"],
        }
    )
    return {path: started[name] for path, name in SERVERS.items()}


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
    # "base": the healthy recorder measured beside the down one
    rate: dict[str, list[float]] = {path: [] for path in (*PATHS, "base")}
    ttfe: dict[str, list[float]] = {path: [] for path in (*PATHS, "base")}
    cpu: dict[str, list[float]] = {"healthy": [], "off": []}  # microseconds per event
    commits: list[float] = []  # journal commits per second of the down recorder's requests
    per_commit: list[float] = []  # events per journal commit
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
            # Two pairs, each interleaved within itself and measured apart from the other
            # (the down recorder's fsyncs must not land inside the on/off comparison).
            for round_no in range(ctx.plan.rounds):
                for pair in (("healthy", "off"), ("down", "healthy")):
                    # Each in turn goes first: a recorder builds a closed run's checkpoints
                    # behind it, on the CPUs the next measurement uses.
                    for path in pair if round_no % 2 == 0 else pair[::-1]:
                        before, started = await journal(), time.perf_counter()
                        cpu_before = cpu_seconds(ctx, SERVERS[path])
                        rates = [await throughput(path) for _ in range(REQUESTS)]
                        if pair[0] == "healthy":
                            spent_cpu = cpu_seconds(ctx, SERVERS[path]) - cpu_before
                            cpu[path].append(spent_cpu / (REQUESTS * expected) * 1e6)
                        rate[path if pair[0] != "down" or path == "down" else "base"].append(
                            statistics.median(rates)
                        )
                        if path == "down":
                            after, spent = await journal(), time.perf_counter() - started
                            flushed = after["commits"] - before["commits"]
                            commits.append(flushed / spent)
                            per_commit.append(REQUESTS * expected / max(flushed, 1))
                    samples: dict[str, list[float]] = {path: [] for path in pair}
                    for _ in range(ctx.plan.ttfe_requests):
                        for path in pair if round_no % 2 == 0 else pair[::-1]:
                            samples[path].append(await first_event(path))
                    for path in pair:
                        key = path if pair[0] != "down" or path == "down" else "base"
                        ttfe[key].append(statistics.median(samples[path]))
        file_rate, single_rate = await journal_file(ctx)
    added = [d - h for d, h in zip(ttfe["down"], ttfe["base"], strict=True)]
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
            "recorder CPU per event, healthy store: journal on vs off",
            "us",
            cpu["healthy"],
            cpu["off"],
            "<= 1.05x",
            lambda _ours, _base, ratio: ratio <= 1.05,
            note=(
                f"user + system time of the recorder process over the {REQUESTS} throughput "
                "requests of each round, per event (steadier than throughput on a shared machine)"
            ),
        ),
        Row(
            "journal",
            "proxy throughput, store down (journal) vs healthy",
            "ev/s",
            rate["down"],
            rate["base"],
            note=(
                f"its journal: {statistics.median(commits):,.0f} commits/s (write + fsync), "
                f"{statistics.median(per_commit):,.0f} events per commit"
            ),
        ),
        Row(
            "journal",
            "ttfe, store down (journal) vs healthy",
            "ms",
            ttfe["down"],
            ttfe["base"],
            note=(
                f"median of {ctx.plan.ttfe_requests} requests per round; added by the journal "
                f"{statistics.median(added):.2f} ms [{min(added):.2f}-{max(added):.2f}]"
            ),
        ),
        Row(
            "journal",
            "ttfe, healthy store: journal on vs off",
            "ms",
            ttfe["healthy"],
            ttfe["off"],
            note="added per round: "
            + ", ".join(f"{a - b:.2f}" for a, b in zip(ttfe["healthy"], ttfe["off"], strict=True))
            + " ms",
        ),
        Row(
            "journal",
            f"journal file: {WRITERS} concurrent writers vs one write + fsync at a time",
            "rec/s",
            file_rate,
            single_rate,
            note="one ~200 B record per append; group commit: one write + fsync per flush",
        ),
    ]


async def journal_file(ctx: Context) -> tuple[list[float], list[float]]:
    """Records/s of the journal file with ``WRITERS`` appenders at once, and of a loop that
    writes and fsyncs one record at a time (same record, same directory), per round."""
    directory = ctx.workdir / "journal-file"
    meta = {"op": "append", "run_id": "r", "first_seq": 0, "events": [["X", "upstream", 0]]}
    record = Record(meta, (b"x" * 150,))
    count = ctx.plan.proxy_events // 10
    ours: list[float] = []
    base: list[float] = []
    for _ in range(ctx.plan.rounds):
        journal = JournalFile.create(directory)
        remaining = count

        async def writer(journal: JournalFile = journal) -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await journal.append([record])

        try:
            started = time.perf_counter()
            await asyncio.gather(*(writer() for _ in range(WRITERS)))
            ours.append(count / (time.perf_counter() - started))
        finally:
            journal.close(remove=True)
        single = max(count // 10, 10)
        spent = await asyncio.to_thread(_one_at_a_time, directory / "single.log", record, single)
        base.append(single / spent)
    return ours, base


def _one_at_a_time(path: Path, record: Record, count: int) -> float:
    data = encode(record)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        started = time.perf_counter()
        for _ in range(count):
            os.write(fd, data)
            os.fsync(fd)
        return time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()
