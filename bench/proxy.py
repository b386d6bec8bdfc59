"""Proxy throughput: the upstream's events read directly, through a bare proxy, and recorded.

The upstream streams the "mixed" workload, one event per network chunk. Each round sends
one request down every path, in turn, so drift hits all of them alike.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context, store_url
from bench.report import Row, at_least, at_most
from recorder.proxy.committer import IN_FLIGHT
from recorder.proxy.output import QUEUED_BATCHES
from recorder.proxy.reader import READ_AHEAD


async def run(ctx: Context) -> list[Row]:
    urls = dict(await ctx.http_servers())
    anchors, skipped = await ctx.anchors()
    urls |= anchors
    urls |= await _what_if(ctx, urls["upstream"])
    expected = ctx.plan.proxy_events
    targets = {
        "direct": urls["upstream"] + "/events",
        "bare": urls["bare"] + "/agents/up",
        "commit": urls["commit"] + "/agents/up",
        "buffered": urls["buffered"] + "/agents/up",
        "lite": urls["lite"] + "/agents/up",
    }
    targets |= {name: url + "/agents/up" for name, url in anchors.items()}
    paths = tuple(path for path in targets if path != "pg2")
    rates: dict[str, list[float]] = {path: [] for path in paths}
    async with new_client() as client:
        # The aggregates queue 200 requests on 16 connections: on a loaded machine the last
        # ones wait past any fixed pool timeout, so a slot is waited for as long as it takes
        # (every request still has its read timeout).
        client.timeout = httpx.Timeout(120.0, connect=10.0, pool=None)

        recorders = [path for path in ("commit", "buffered", "lite", "pg", "pg2") if urls.get(path)]
        pooled = {"pg": "commit-pg", "pg2": "commit-pg2"}  # the server pool's names

        async def idle(path: str, timeout: float = 30.0) -> None:
            await ctx.pool.idle(pooled.get(path, path), timeout)

        async def measure(path: str, alone: bool = True) -> float:
            """One stream's events/s; ``alone``: then the recorder's work behind the run
            (checkpoints, indexing) is waited out, so it never slows the next path."""
            try:
                frames, _first, elapsed, run_id = await read_stream(
                    client, "POST", targets[path], run_input()
                )
            except httpx.HTTPError as exc:  # (which path broke, in the report)
                raise StreamError(f"{path}: {type(exc).__name__}: {exc}") from exc
            if frames < expected:
                raise StreamError(f"{path}: {frames} frames of {expected}")
            if path in recorders:
                await settled(client, urls[path], run_id)
                if alone:
                    await idle(path)
            return expected / elapsed

        async def aggregate(path: str, streams: int, *more: str) -> float:
            """Events/s of ``streams`` requests at once, spread over ``path`` and ``more``."""
            spread = [path, *more]
            started = time.perf_counter()
            await asyncio.gather(
                *(measure(spread[n % len(spread)], alone=False) for n in range(streams))
            )
            rate = streams * expected / (time.perf_counter() - started)
            for recorder in recorders:  # (many runs' checkpoints and indexing: minutes)
                await idle(recorder, 300.0)
            return rate

        for path in paths:  # warm-up: connections, imports, the first run of each server
            await measure(path)
        warm = ctx.pool.rss_mb("commit")
        after: list[float] = []
        for _ in range(ctx.plan.rounds):
            for path in paths:
                rates[path].append(await measure(path))
            after.append(ctx.pool.rss_mb("commit"))
        # 50 streams at once through the same recorder, twice: the first batch sets the
        # high-water mark (the allocator keeps it), the second must not grow past it.
        streams = ctx.plan.concurrent_streams
        await asyncio.gather(*(measure("commit", alone=False) for _ in range(streams)))
        await idle("commit")
        first_batch = ctx.pool.rss_mb("commit")
        await asyncio.gather(*(measure("commit", alone=False) for _ in range(streams)))
        await idle("commit")
        second_batch = ctx.pool.rss_mb("commit")
        many = ctx.plan.aggregate_streams
        totals = {
            path: await aggregate(path, many) for path in ("commit", *anchors) if path != "pg2"
        }
        if "pg2" in anchors:
            totals["two"] = await aggregate("pg", many, "pg2")
    workload = f"{expected:,} mixed events per request, one per chunk"
    memory = [
        Row(
            "proxy",
            "memory: recorder RSS after every round vs after warm-up",
            "MB",
            after,
            [warm] * len(after),
            "flat (<= 1.1x)",
            at_most(1.1),
            note=f"{workload}; one run per round, resident memory of the recorder process",
        ),
        Row(
            "proxy",
            f"memory: RSS after a 2nd batch of {streams} concurrent streams vs the 1st",
            "MB",
            [second_batch],
            [first_batch],
            "flat (<= 1.1x)",
            at_most(1.1),
            note=(
                f"{streams} requests of {expected:,} events at once, twice; after warm-up "
                f"{warm:.0f} MB (per stream the recorder holds at most {READ_AHEAD:,} "
                f"read-ahead frames and what one read brings, {IN_FLIGHT} batches handed to "
                f"the store (one on PostgreSQL) and {QUEUED_BATCHES} recorded batches for "
                "the client)"
            ),
        ),
    ]
    throughput = [
        Row(
            "proxy",
            "recorder (commit) vs bare pass-through",
            "ev/s",
            rates["commit"],
            rates["bare"],
            ">= 0.9x",
            at_least(0.9),
            note=workload + "; durability commit (default), SQLite file",
        ),
        Row(
            "proxy",
            "recorder (commit) vs direct",
            "ev/s",
            rates["commit"],
            rates["direct"],
            ">= 0.5x",
            at_least(0.5),
        ),
        Row(
            "proxy",
            "recorder (buffered) vs bare pass-through",
            "ev/s",
            rates["buffered"],
            rates["bare"],
            ">= 0.9x",
            at_least(0.9),
        ),
        Row(
            "proxy",
            "recorder (buffered) vs direct",
            "ev/s",
            rates["buffered"],
            rates["direct"],
            ">= 0.5x",
            at_least(0.5),
        ),
        Row(
            "proxy",
            "bare pass-through vs direct (context)",
            "ev/s",
            rates["bare"],
            rates["direct"],
        ),
    ]
    return [*throughput, *_anchored(rates, totals, skipped, many), *memory]


async def _what_if(ctx: Context, upstream: str) -> dict[str, str]:
    """A recorder (SQLite, commit) without the hash chain's SHA-256 and the stream check
    (``bench.serve --without``): what those two cost the hop, beside nginx."""
    path = str(ctx.workdir / "proxy-lite.db")
    spec = ["recorder", "--db", store_url(path), "--agent", f"up={upstream}/events"]
    return await ctx.pool.start({"lite": [*spec, "--without", "chain", "--without", "check"]})


def _anchored(
    rates: dict[str, list[float]], totals: dict[str, float], skipped: dict[str, str], many: int
) -> list[Row]:
    """The recorder on SQLite and on PostgreSQL against nginx passing the same stream."""

    def row(name: str, path: str, base: str, target: float | None, figures: Any) -> Row:
        made = Row("proxy", name, "ev/s")
        why = skipped.get(base) or skipped.get("pg2" if path == "two" else path, "")
        if why:
            made.skipped = why
            return made
        made.ours, made.base = figures(path), figures(base)
        if target is not None:
            made.target, made.check = f">= {target}x", at_least(target)
        return made

    def each(path: str) -> list[float]:
        return rates[path]

    def total(path: str) -> list[float]:
        return [totals[path]]

    return [
        row("recorder (SQLite, commit) vs nginx", "commit", "nginx", 0.5, each),
        row("recorder (PostgreSQL, commit) vs nginx", "pg", "nginx", 0.4, each),
        row(
            "what-if: recorder (SQLite) without the chain's SHA-256 and the stream check "
            "vs nginx (context)",
            "lite",
            "nginx",
            None,
            each,
        ),
        row("nginx vs direct (context)", "nginx", "direct", None, each),
        row(f"{many} streams at once, recorder (SQLite) vs nginx", "commit", "nginx", None, total),
        row(f"{many} streams at once, recorder (PostgreSQL) vs nginx", "pg", "nginx", None, total),
        row(
            f"scale-out: {many} streams at once, two recorders vs one (PostgreSQL)",
            "two",
            "pg",
            None,
            total,
        ),
    ]
