"""In-process recording (``recorder.asgi``) vs the agent's app alone and vs the proxy.

Three ways to the same upstream endpoints: the app directly; the app wrapped by
``RecordingMiddleware`` in its own process (recorded, no network hop); the app behind the
recording proxy (one more hop). Time to first event on the one-chunk run, then throughput on
the "mixed" workload; the paths interleave within each round.
"""

from __future__ import annotations

import statistics

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context, store_url
from bench.report import Row

PATHS = ("direct", "inprocess", "proxy")


async def servers(ctx: Context) -> dict[str, str]:
    urls = await ctx.http_servers()
    inprocess = ctx.pool.url("inprocess")
    if inprocess is None:
        db = store_url(str(ctx.workdir / "inprocess.db"))
        args = ["inprocess", "--db", db, "--events", str(ctx.plan.proxy_events)]
        inprocess = (await ctx.pool.start({"inprocess": [*args, "--seed", "1"]}))["inprocess"]
    return {**urls, "inprocess": inprocess}


async def run(ctx: Context) -> list[Row]:
    urls = await servers(ctx)
    small = {
        "direct": urls["upstream"] + "/small",
        "inprocess": urls["inprocess"] + "/small",
        "proxy": urls["commit"] + "/agents/small",
    }
    events = {
        "direct": urls["upstream"] + "/events",
        "inprocess": urls["inprocess"] + "/events",
        "proxy": urls["commit"] + "/agents/up",
    }
    api = {"inprocess": urls["inprocess"] + "/recorder", "proxy": urls["commit"]}
    expected = ctx.plan.proxy_events
    ttfe: dict[str, list[float]] = {path: [] for path in PATHS}
    rate: dict[str, list[float]] = {path: [] for path in PATHS}
    async with new_client() as client:

        async def first_event(path: str) -> float:
            frames, first, _elapsed, run_id = await read_stream(
                client, "POST", small[path], run_input()
            )
            if frames < 1:
                raise StreamError(f"{path}: no frame")
            if path in api:
                await settled(client, api[path], run_id)
            return first * 1000

        async def throughput(path: str) -> float:
            frames, _first, elapsed, run_id = await read_stream(
                client, "POST", events[path], run_input()
            )
            if frames < expected:
                raise StreamError(f"{path}: {frames} frames of {expected}")
            if path in api:
                await settled(client, api[path], run_id)
            return expected / elapsed

        for _ in range(5):  # warm-up
            for path in PATHS:
                await first_event(path)
        for path in PATHS:
            await throughput(path)
        for _ in range(ctx.plan.rounds):
            samples: dict[str, list[float]] = {path: [] for path in PATHS}
            for _ in range(ctx.plan.ttfe_requests):
                for path in PATHS:
                    samples[path].append(await first_event(path))
            for path in PATHS:
                ttfe[path].append(statistics.median(samples[path]))
                rate[path].append(await throughput(path))
    added = [i - d for i, d in zip(ttfe["inprocess"], ttfe["direct"], strict=True)]
    proxy_added = [p - d for p, d in zip(ttfe["proxy"], ttfe["direct"], strict=True)]
    return [
        Row(
            "inprocess",
            "ttfe: recorded in process vs the app alone",
            "ms",
            ttfe["inprocess"],
            ttfe["direct"],
            "added <= 1.0 ms",
            lambda ours, base, _ratio: ours - base <= 1.0,
            note=(
                f"median of {ctx.plan.ttfe_requests} requests per round; added in process "
                f"{statistics.median(added):.2f} ms [{min(added):.2f}-{max(added):.2f}], "
                f"by the proxy {statistics.median(proxy_added):.2f} ms"
            ),
        ),
        Row(
            "inprocess",
            "ttfe: recorded in process vs through the proxy",
            "ms",
            ttfe["inprocess"],
            ttfe["proxy"],
            "< 1x",
            lambda _ours, _base, ratio: ratio < 1.0,
        ),
        # Context: in process, the app and the recording share one process (one core);
        # behind the proxy the agent runs in a process of its own, on the other core.
        Row(
            "inprocess",
            "throughput: recorded in process vs the app alone (context)",
            "ev/s",
            rate["inprocess"],
            rate["direct"],
            note=(
                f"{expected:,} mixed events per request, one per chunk; the app and the "
                "recording share one process, so their costs add up"
            ),
        ),
        Row(
            "inprocess",
            "throughput: recorded in process vs through the proxy (context)",
            "ev/s",
            rate["inprocess"],
            rate["proxy"],
            note="behind the proxy, the agent's process and the recorder's run on two cores",
        ),
    ]
