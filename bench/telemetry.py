"""What the Prometheus metrics cost the proxy: the same recorder with metrics on (the
default) and off, side by side, on the throughput and time-to-first-event workloads.

Throughput on a shared 2-core machine moves by tens of percent between requests; the CPU
time the recorder process spends per event (user + system, from /proc) moves far less, so
it is measured too, over the same requests."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context
from bench.report import Row, at_least

PATHS = ("on", "off")


NAMES = {"on": "metrics", "off": "nometrics"}  # the servers in the pool
REQUESTS = 3  # throughput requests per path and round
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(ctx: Context, name: str) -> float:
    """User + system CPU time of a server process so far (Linux /proc)."""
    pid = ctx.pool.servers[name].process.pid
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


async def servers(ctx: Context) -> dict[str, str]:
    started = await ctx.paired({"metrics": [], "nometrics": ["--no-metrics"]})
    return {path: started[name] for path, name in NAMES.items()}


async def run(ctx: Context) -> list[Row]:
    urls = await servers(ctx)
    expected = ctx.plan.proxy_events
    rate: dict[str, list[float]] = {path: [] for path in PATHS}
    ttfe: dict[str, list[float]] = {path: [] for path in PATHS}
    cpu: dict[str, list[float]] = {path: [] for path in PATHS}  # microseconds per event
    async with new_client() as client:

        async def throughput(path: str) -> float:
            frames, _first, elapsed, run_id = await read_stream(
                client, "POST", urls[path] + "/agents/up", run_input()
            )
            if frames < expected:
                raise StreamError(f"{path}: {frames} frames of {expected}")
            await settled(client, urls[path], run_id)
            return expected / elapsed

        async def first_event(path: str) -> float:
            frames, first, _elapsed, run_id = await read_stream(
                client, "POST", urls[path] + "/agents/small", run_input()
            )
            if frames < 1:
                raise StreamError(f"{path}: no frame")
            await settled(client, urls[path], run_id)
            return first * 1000

        for path in PATHS:  # warm-up
            await throughput(path)
            for _ in range(5):
                await first_event(path)
        for _ in range(ctx.plan.rounds):
            for path in PATHS:
                # Three requests per round: 10 ms clock ticks need a few hundred ms of CPU.
                before = cpu_seconds(ctx, NAMES[path])
                rates = [await throughput(path) for _ in range(REQUESTS)]
                spent = cpu_seconds(ctx, NAMES[path]) - before
                rate[path].append(statistics.median(rates))
                cpu[path].append(spent / (REQUESTS * expected) * 1e6)
            samples: dict[str, list[float]] = {path: [] for path in PATHS}
            for _ in range(ctx.plan.ttfe_requests):
                for path in PATHS:
                    samples[path].append(await first_event(path))
            for path in PATHS:
                ttfe[path].append(statistics.median(samples[path]))
    added = [on - off for on, off in zip(ttfe["on"], ttfe["off"], strict=True)]
    return [
        Row(
            "telemetry",
            "proxy throughput, metrics on vs off",
            "ev/s",
            rate["on"],
            rate["off"],
            ">= 0.95x",
            at_least(0.95),
            note=(
                f"{expected:,} mixed events per request, median of {REQUESTS} per round; "
                "durability commit"
            ),
        ),
        Row(
            "telemetry",
            "recorder CPU per event, metrics on vs off",
            "us",
            cpu["on"],
            cpu["off"],
            "<= 1.05x",
            lambda _ours, _base, ratio: ratio <= 1.05,
            note=(
                f"user + system time of the recorder process over the {REQUESTS} throughput "
                "requests of each round "
                f"(clock ticks of {1000 / _TICK:g} ms), per event"
            ),
        ),
        Row(
            "telemetry",
            "ttfe, metrics on vs off",
            "ms",
            ttfe["on"],
            ttfe["off"],
            "added <= 0.1 ms",
            lambda ours, base, _ratio: ours - base <= 0.1,
            note=(
                f"median of {ctx.plan.ttfe_requests} requests per round; added "
                f"{statistics.median(added):.3f} ms [{min(added):.3f}-{max(added):.3f}]"
            ),
        ),
    ]
