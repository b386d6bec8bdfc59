"""SSE replay: ``GET /runs/{id}/stream`` of a recorded run, against the upstream read directly.

The run is recorded through the recorder first (the same events the upstream sends); then
each round reads the replay and the upstream's stream with the same client.
"""

from __future__ import annotations

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context
from bench.report import Row, at_least


async def run(ctx: Context) -> list[Row]:
    urls = await ctx.http_servers()
    expected = ctx.plan.proxy_events
    direct = urls["upstream"] + "/events"
    ours: list[float] = []
    base: list[float] = []
    async with new_client() as client:
        _frames, _first, _elapsed, run_id = await read_stream(
            client, "POST", urls["commit"] + "/agents/up", run_input()
        )
        await settled(client, urls["commit"], run_id)
        replay = f"{urls['commit']}/runs/{run_id}/stream"
        await read_stream(client, "GET", replay)  # warm-up
        await read_stream(client, "POST", direct, run_input())
        for _ in range(ctx.plan.rounds):
            frames, _first, elapsed, _run = await read_stream(client, "GET", replay)
            if frames < expected:
                raise StreamError(f"replay: {frames} frames of {expected}")
            ours.append(frames / elapsed)
            frames, _first, elapsed, _run = await read_stream(client, "POST", direct, run_input())
            base.append(frames / elapsed)
    return [
        Row(
            "replay",
            "GET /runs/{id}/stream vs upstream direct",
            "ev/s",
            ours,
            base,
            ">= 0.8x",
            at_least(0.8),
            note=f"a recorded {expected:,}-event run (SQLite), read by the same client",
        )
    ]
