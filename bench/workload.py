"""Deterministic (seeded) AG-UI workloads, described in bench/README.md.

"mixed": per 100 events, about 80 text deltas in messages of 10-40 deltas, a tool call
(start, 3-6 argument deltas, end, result), one STATE_SNAPSHOT of 2-10 KB and three
STATE_DELTAs; ~170 bytes per event on average.
"""

from __future__ import annotations

import random
from typing import Any

import orjson


def mixed_events(
    count: int, *, seed: int = 1, run_id: str = "run-1", thread_id: str = "thread-1"
) -> list[bytes]:
    rng = random.Random(seed)
    out: list[bytes] = [
        orjson.dumps({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id})
    ]
    state: dict[str, Any] = {"items": [], "counter": 0}
    msg = 0
    while len(out) < count - 1:
        block = len(out)
        msg += 1
        mid = f"m{msg}"
        out.append(
            orjson.dumps({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
        )
        for _ in range(rng.randint(10, 40)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
            out.append(
                orjson.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": words})
            )
        out.append(orjson.dumps({"type": "TEXT_MESSAGE_END", "messageId": mid}))
        if msg % 3 == 0:
            call = f"c{msg}"
            out.append(
                orjson.dumps(
                    {
                        "type": "TOOL_CALL_START",
                        "toolCallId": call,
                        "toolCallName": "search",
                        "parentMessageId": mid,
                    }
                )
            )
            for part in (
                '{"query":',
                f'"{rng.choice(WORDS)}',
                f' {rng.choice(WORDS)}"',
                ',"limit":5}',
            ):
                out.append(
                    orjson.dumps({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": part})
                )
            out.append(orjson.dumps({"type": "TOOL_CALL_END", "toolCallId": call}))
            content = orjson.dumps(
                [{"title": rng.choice(WORDS) * 3, "score": rng.random()} for _ in range(3)]
            ).decode()
            out.append(
                orjson.dumps(
                    {
                        "type": "TOOL_CALL_RESULT",
                        "messageId": f"r{msg}",
                        "toolCallId": call,
                        "content": content,
                    }
                )
            )
        if block // 100 != len(out) // 100:
            state = {
                "items": [
                    {"id": i, "text": " ".join(rng.choice(WORDS) for _ in range(8))}
                    for i in range(rng.randint(25, 120))
                ],
                "counter": msg,
            }
            out.append(orjson.dumps({"type": "STATE_SNAPSHOT", "snapshot": state}))
            for _ in range(3):
                out.append(
                    orjson.dumps(
                        {
                            "type": "STATE_DELTA",
                            "delta": [
                                {
                                    "op": "replace",
                                    "path": "/counter",
                                    "value": rng.randint(0, 1000),
                                },
                                {
                                    "op": "add",
                                    "path": "/items/-",
                                    "value": {"id": -1, "text": rng.choice(WORDS)},
                                },
                            ],
                        }
                    )
                )
    out = _close_open(out[: count - 1])
    out.append(orjson.dumps({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}))
    return out


def _close_open(frames: list[bytes]) -> list[bytes]:
    """Cutting at ``count`` can leave a message or tool call open: close it, as an agent would."""
    last = orjson.loads(frames[-1])
    kind = last["type"]
    if kind in ("TEXT_MESSAGE_START", "TOOL_CALL_START"):
        frames[-1] = orjson.dumps({"type": "CUSTOM", "name": "padding", "value": None})
    elif kind == "TEXT_MESSAGE_CONTENT":
        frames[-1] = orjson.dumps({"type": "TEXT_MESSAGE_END", "messageId": last["messageId"]})
    elif kind == "TOOL_CALL_ARGS":
        frames[-1] = orjson.dumps({"type": "TOOL_CALL_END", "toolCallId": last["toolCallId"]})
    return frames


WORDS = (
    "agent",
    "token",
    "stream",
    "state",
    "delta",
    "message",
    "tool",
    "call",
    "result",
    "snapshot",
    "protocol",
    "recorder",
    "replay",
    "fork",
    "branch",
    "thread",
    "run",
    "event",
    "frame",
    "commit",
    "durable",
    "append",
    "log",
    "query",
    "history",
    "Paris",
    "weather",
    "clear",
    "sunny",
    "rain",
    "cloud",
    "wind",
)


def sse_body(frames: list[bytes]) -> list[bytes]:
    return [b"data: " + f + b"\n\n" for f in frames]
