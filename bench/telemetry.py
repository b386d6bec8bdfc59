"""What the Prometheus metrics cost the proxy: the same recorder with metrics on (the
default) and off, side by side, on the throughput and time-to-first-event workloads."""

from __future__ import annotations

import statistics

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context, store_url
from bench.report import Row, at_least

PATHS = ("on", "off")


async def servers(ctx: Context) -> dict[str, str]:
    urls = await ctx.http_servers()
    off = ctx.pool.url("nometrics")
    if off is None:
        upstream = urls["upstream"]
        agents = ["--agent", f"up={upstream}/events", "--agent", f"small={upstream}/small"]
        db = store_url(str(ctx.workdir / "proxy-nometrics.db"))
        spec = ["recorder", "--db", db, "--no-metrics", *agents]
        off = (await ctx.pool.start({"nometrics": spec}))["nometrics"]
    return {"on": urls["commit"], "off": off}


async def run(ctx: Context) -> list[Row]:
    urls = await servers(ctx)
    expected = ctx.plan.proxy_events
    rate: dict[str, list[float]] = {path: [] for path in PATHS}
    ttfe: dict[str, list[float]] = {path: [] for path in PATHS}
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
                rate[path].append(await throughput(path))
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
            note=f"{expected:,} mixed events per request; durability commit",
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
