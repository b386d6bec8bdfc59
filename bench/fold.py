"""The fold: ``recorder.projector.fold`` on the mixed stream, against only parsing it.

``bench/bench_fold.py`` (its own script, with its own workload) provides ``project`` and
``parse_only``; they are used here when present so both measure the same thing, on this
package's "mixed" workload.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import orjson

from bench.context import Context
from bench.report import Row
from bench.workload import mixed_events

Work = Callable[[list[bytes]], None]


def parse_only(frames: list[bytes]) -> None:
    loads = orjson.loads
    for frame in frames:
        loads(frame)


def project(frames: list[bytes]) -> None:
    from recorder.projector import fold

    fold(frames)


def functions() -> tuple[Work, Work, str]:
    try:
        from bench import bench_fold

        work = (bench_fold.project, bench_fold.parse_only)
    except (ImportError, AttributeError):
        return project, parse_only, "measured in bench/fold.py"
    return work[0], work[1], "bench_fold.project vs bench_fold.parse_only"


def rate(work: Work, frames: list[bytes]) -> float:
    gc.collect()
    started = time.perf_counter()
    work(frames)
    return len(frames) / (time.perf_counter() - started)


async def run(ctx: Context) -> list[Row]:
    frames = mixed_events(ctx.plan.fold_events, seed=4)
    fold, parse, source = functions()
    fold(frames[:1000])  # warm-up
    ours: list[float] = []
    base: list[float] = []
    for _ in range(ctx.plan.rounds):
        ours.append(rate(fold, frames))
        base.append(rate(parse, frames))
    return [
        Row(
            "fold",
            "projector.fold vs orjson.loads only",
            "ev/s",
            ours,
            base,
            ">= 300k ev/s",
            lambda ours, _base, _ratio: ours >= 300_000,
            note=f"{len(frames):,} mixed events, in process ({source})",
        )
    ]
