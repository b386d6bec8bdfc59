"""The fold: ``recorder.reference.projector.fold`` on the mixed stream, against only parsing it.

The two workloads are ``bench/bench_fold.py``'s (also a script of its own), measured here
on this package's "mixed" workload.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from bench.bench_fold import parse_only, project
from bench.context import Context
from bench.report import Row
from bench.workload import mixed_events

Work = Callable[[list[bytes]], None]


def rate(work: Work, frames: list[bytes]) -> float:
    gc.collect()
    started = time.perf_counter()
    work(frames)
    return len(frames) / (time.perf_counter() - started)


async def run(ctx: Context) -> list[Row]:
    frames = mixed_events(ctx.plan.fold_events, seed=4)
    project(frames[:1000])  # warm-up
    ours: list[float] = []
    base: list[float] = []
    for _ in range(ctx.plan.rounds):
        ours.append(rate(project, frames))
        base.append(rate(parse_only, frames))
    return [
        Row(
            "fold",
            "projector.fold vs orjson.loads only",
            "ev/s",
            ours,
            base,
            ">= 300k ev/s",
            lambda ours, _base, _ratio: ours >= 300_000,
            note=(
                f"{len(frames):,} mixed events, in process "
                "(bench_fold.project vs bench_fold.parse_only)"
            ),
        )
    ]
