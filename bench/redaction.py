"""What redaction at record time costs the proxy: the same recorder with the built-in rules
on (email, card, token, ip, phone, everywhere) and off (the default), side by side, on the
"mixed" workload. Its text holds nothing to redact, as nearly all traffic does: what is
measured is the no-match path, one search of each string per event.

The recorder's CPU time per event (user + system, from /proc) is measured over the same
requests: it moves far less than throughput on a shared machine."""

from __future__ import annotations

import statistics

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context
from bench.report import Row, at_least
from bench.telemetry import cpu_seconds

PATHS = ("on", "off")
NAMES = {"on": "redacting", "off": "plain"}  # the servers in the pool
REQUESTS = 3  # throughput requests per path and round


async def servers(ctx: Context) -> dict[str, str]:
    started = await ctx.paired({"redacting": ["--redaction"], "plain": []})
    return {path: started[name] for path, name in NAMES.items()}


async def run(ctx: Context) -> list[Row]:
    urls = await servers(ctx)
    expected = ctx.plan.proxy_events
    rate: dict[str, list[float]] = {path: [] for path in PATHS}
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

        for path in PATHS:  # warm-up
            await throughput(path)
        for _ in range(ctx.plan.rounds):
            for path in PATHS:
                before = cpu_seconds(ctx, NAMES[path])
                rates = [await throughput(path) for _ in range(REQUESTS)]
                spent = cpu_seconds(ctx, NAMES[path]) - before
                rate[path].append(statistics.median(rates))
                cpu[path].append(spent / (REQUESTS * expected) * 1e6)
    return [
        Row(
            "redaction",
            "proxy throughput, built-in redaction on vs off",
            "ev/s",
            rate["on"],
            rate["off"],
            ">= 0.9x",
            at_least(0.9),
            note=(
                f"{expected:,} mixed events per request (nothing in them to redact), median "
                f"of {REQUESTS} per round; durability commit"
            ),
        ),
        Row(
            "redaction",
            "recorder CPU per event, built-in redaction on vs off",
            "us",
            cpu["on"],
            cpu["off"],
            "-",
            None,
            note=f"user + system time of the recorder process over the {REQUESTS} requests",
        ),
    ]
