"""How fast the projector folds a recorded stream, next to merely parsing it.

A mixed AG-UI stream, generated deterministically (seeded): text deltas, tool calls with
their results, and per 100 events one 2-10 KB STATE_SNAPSHOT and a few STATE_DELTAs, fed as
raw frames. Prints events/s for ``recorder.reference.projector.fold`` and for a loop that only
``orjson.loads`` the same frames, and their ratio (medians of several repetitions).

    .venv/bin/python bench/bench_fold.py [--events 100000] [--repeat 5] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from recorder.reference.projector import fold


def state_snapshot(rng: random.Random) -> dict[str, Any]:
    """A state of 2-10 KB: a few nested records, as agents keep them."""
    size = rng.randint(2_000, 10_000)
    state: dict[str, Any] = {"todos": [], "profile": {"name": "bench", "tags": ["a", "b"]}}
    while len(orjson.dumps(state)) < size:
        state["todos"].append(
            {"id": len(state["todos"]), "title": f"task {rng.random():.6f}", "done": False}
        )
    return state


def block(rng: random.Random, number: int) -> Iterator[dict[str, Any]]:
    """About 100 events: state, a tool call and its result, text, a few state deltas."""
    mid, tid = f"m{number}", f"t{number}"
    yield {"type": "STATE_SNAPSHOT", "snapshot": state_snapshot(rng)}
    yield {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}
    for _ in range(40):
        yield {
            "type": "TEXT_MESSAGE_CONTENT",
            "messageId": mid,
            "delta": f" word{rng.randint(0, 999)}",
        }
    yield {
        "type": "TOOL_CALL_START",
        "toolCallId": tid,
        "toolCallName": "search",
        "parentMessageId": mid,
    }
    for part in ('{"query": ', '"weather', " in ", 'Paris"', "}"):
        yield {"type": "TOOL_CALL_ARGS", "toolCallId": tid, "delta": part}
    yield {"type": "TOOL_CALL_END", "toolCallId": tid}
    yield {"type": "TEXT_MESSAGE_END", "messageId": mid}
    yield {
        "type": "TOOL_CALL_RESULT",
        "toolCallId": tid,
        "messageId": f"r{number}",
        "content": "sunny",
    }
    for i in range(3):
        yield {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "replace", "path": f"/todos/{i}/done", "value": True},
                {"op": "add", "path": "/profile/last", "value": number},
            ],
        }
    reply = f"a{number}"
    yield {"type": "TEXT_MESSAGE_START", "messageId": reply, "role": "assistant"}
    for _ in range(44):
        yield {
            "type": "TEXT_MESSAGE_CONTENT",
            "messageId": reply,
            "delta": f" tok{rng.randint(0, 99)}",
        }
    yield {"type": "TEXT_MESSAGE_END", "messageId": reply}


def stream(events: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    frames = [orjson.dumps({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})]
    number, clock = 0, 1_760_000_000_000
    while len(frames) < events - 1:
        for event in block(rng, number):
            clock += rng.randint(1, 40)
            frames.append(orjson.dumps({**event, "timestamp": clock}))
        number += 1
    frames = frames[: events - 1]
    frames.append(orjson.dumps({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}))
    return frames


def parse_only(frames: list[bytes]) -> None:
    loads = orjson.loads
    for frame in frames:
        loads(frame)


def project(frames: list[bytes]) -> None:
    fold(frames)


def rate(work: Callable[[list[bytes]], None], frames: list[bytes], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        work(frames)
        timings.append(time.perf_counter() - started)
    return len(frames) / statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    frames = stream(args.events, args.seed)
    size = sum(map(len, frames))
    print(f"{len(frames)} events, {size / len(frames):.0f} bytes per event on average")
    baseline = rate(parse_only, frames, args.repeat)
    folded = rate(project, frames, args.repeat)
    print(f"parse only (orjson.loads): {baseline:12,.0f} events/s")
    print(f"fold (parse + project):    {folded:12,.0f} events/s")
    print(f"fold / parse:              {folded / baseline:12.2f}")


if __name__ == "__main__":
    main()
