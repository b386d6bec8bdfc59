"""Time to first event: a one-chunk run (RUN_STARTED, RUN_FINISHED), direct and proxied.

Requests go one at a time over kept-alive connections, the paths interleaved; each round's
figure is the median over its requests. Timed: from sending the request to the first
complete frame.
"""

from __future__ import annotations

import statistics

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context
from bench.report import Row

PATHS = ("direct", "bare", "commit")


async def run(ctx: Context) -> list[Row]:
    urls = await ctx.http_servers()
    targets = {
        "direct": urls["upstream"] + "/small",
        "bare": urls["bare"] + "/agents/small",
        "commit": urls["commit"] + "/agents/small",
    }
    medians: dict[str, list[float]] = {path: [] for path in PATHS}
    async with new_client() as client:

        async def first_event(path: str) -> float:
            frames, first, _elapsed, run_id = await read_stream(
                client, "POST", targets[path], run_input()
            )
            if frames < 1:
                raise StreamError(f"{path}: no frame")
            if path == "commit":
                await settled(client, urls[path], run_id)
            return first * 1000

        for _ in range(5):  # warm-up
            for path in PATHS:
                await first_event(path)
        for _ in range(ctx.plan.rounds):
            samples: dict[str, list[float]] = {path: [] for path in PATHS}
            for _ in range(ctx.plan.ttfe_requests):
                for path in PATHS:
                    samples[path].append(await first_event(path))
            for path in PATHS:
                medians[path].append(statistics.median(samples[path]))
    added = [r - d for r, d in zip(medians["commit"], medians["direct"], strict=True)]
    bare_added = [b - d for b, d in zip(medians["bare"], medians["direct"], strict=True)]
    return [
        Row(
            "ttfe",
            "recorder vs direct",
            "ms",
            medians["commit"],
            medians["direct"],
            "added <= 1.0 ms",
            lambda ours, base, _ratio: ours - base <= 1.0,
            note=(
                f"median of {ctx.plan.ttfe_requests} requests per round; added by the recorder "
                f"{statistics.median(added):.2f} ms [{min(added):.2f}-{max(added):.2f}], "
                f"by the bare proxy {statistics.median(bare_added):.2f} ms"
            ),
        ),
        Row(
            "ttfe",
            "bare pass-through vs direct (context)",
            "ms",
            medians["bare"],
            medians["direct"],
        ),
    ]
