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


async def run(ctx: Context) -> list[Row]:
    urls = dict(await ctx.http_servers())
    anchors, skipped = await ctx.anchors()
    urls |= anchors
    targets = {
        "direct": urls["upstream"] + "/small",
        "bare": urls["bare"] + "/agents/small",
        "commit": urls["commit"] + "/agents/small",
        "buffered": urls["buffered"] + "/agents/small",
    }
    targets |= {name: url + "/agents/small" for name, url in anchors.items() if name != "pg2"}
    paths = tuple(targets)
    medians: dict[str, list[float]] = {path: [] for path in paths}
    # A benchmark run before this one (proxy's 200 streams) may have left the recorders
    # checkpointing and indexing: their work, not what a first event costs.
    for name in ("commit", "buffered", "commit-pg"):
        if ctx.pool.url(name):
            await ctx.pool.idle(name, timeout=300)
    async with new_client() as client:

        async def first_event(path: str) -> float:
            frames, first, _elapsed, run_id = await read_stream(
                client, "POST", targets[path], run_input()
            )
            if frames < 1:
                raise StreamError(f"{path}: no frame")
            if path in ("commit", "buffered", "pg"):
                await settled(client, urls[path], run_id)
            return first * 1000

        for _ in range(5):  # warm-up
            for path in paths:
                await first_event(path)
        for _ in range(ctx.plan.rounds):
            samples: dict[str, list[float]] = {path: [] for path in paths}
            for _ in range(ctx.plan.ttfe_requests):
                for path in paths:
                    samples[path].append(await first_event(path))
            for path in paths:
                medians[path].append(statistics.median(samples[path]))
    added = [r - d for r, d in zip(medians["commit"], medians["direct"], strict=True)]
    bare_added = [b - d for b, d in zip(medians["bare"], medians["direct"], strict=True)]
    return [
        *_anchored(medians, skipped),
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


def _anchored(medians: dict[str, list[float]], skipped: dict[str, str]) -> list[Row]:
    """The recorder (SQLite, and PostgreSQL) against nginx passing the same run through:
    the time each adds to the first event over what a production proxy adds."""

    def row(name: str, path: str, limit: float | None) -> Row:
        """``limit``: the target, in ms added over nginx (None: a row of context)."""
        target = "" if limit is None else f"added <= {limit} ms over nginx"
        made = Row("ttfe", name, "ms", target=target)
        why = skipped.get("nginx") or skipped.get(path, "")
        if why:
            made.skipped = why
            return made
        made.ours, made.base = medians[path], medians["nginx"]
        if limit is not None:
            made.check = lambda ours, base, _ratio: ours - base <= limit
        added = [o - b for o, b in zip(made.ours, made.base, strict=True)]
        made.note = f"added over nginx {statistics.median(added):.2f} ms"
        return made

    context = Row("ttfe", "nginx vs direct (context)", "ms")
    if "nginx" in skipped:
        context.skipped = skipped["nginx"]
    else:
        context.ours, context.base = medians["nginx"], medians["direct"]
    return [
        row("recorder (SQLite) vs nginx", "commit", 0.5),
        row("recorder (PostgreSQL) vs nginx", "pg", 2.0),
        # What the commit before the first event costs it: the same recorder with
        # durability "buffered", whose first events go out before their commit (the run's
        # creation is committed before the agent is called all the same).
        row("what-if: recorder (SQLite, buffered) vs nginx (context)", "buffered", None),
        context,
    ]
