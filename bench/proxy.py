"""Proxy throughput: the upstream's events read directly, through a bare proxy, and recorded.

The upstream streams the "mixed" workload, one event per network chunk. Each round sends
one request down every path, in turn, so drift hits all of them alike.
"""

from __future__ import annotations

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context
from bench.report import Row, at_least

PATHS = ("direct", "bare", "commit", "buffered")


async def run(ctx: Context) -> list[Row]:
    urls = await ctx.http_servers()
    expected = ctx.plan.proxy_events
    targets = {
        "direct": urls["upstream"] + "/events",
        "bare": urls["bare"] + "/agents/up",
        "commit": urls["commit"] + "/agents/up",
        "buffered": urls["buffered"] + "/agents/up",
    }
    rates: dict[str, list[float]] = {path: [] for path in PATHS}
    async with new_client() as client:

        async def measure(path: str) -> float:
            frames, _first, elapsed, run_id = await read_stream(
                client, "POST", targets[path], run_input()
            )
            if frames < expected:
                raise StreamError(f"{path}: {frames} frames of {expected}")
            if path in ("commit", "buffered"):
                await settled(client, urls[path], run_id)
            return expected / elapsed

        for path in PATHS:  # warm-up: connections, imports, the first run of each server
            await measure(path)
        for _ in range(ctx.plan.rounds):
            for path in PATHS:
                rates[path].append(await measure(path))
    workload = f"{expected:,} mixed events per request, one per chunk"
    return [
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
