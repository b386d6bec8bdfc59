"""A scripted agent for the telemetry tests, at ``POST /{script}``.

``tools``: a text message and a tool call the agent runs itself (its result in the stream);
``frontend``: a tool call left for the frontend (its result comes in the next run's input);
``answer``: a plain text answer; ``broken``: a stream that ends without a terminal event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

STEP = 0.02  # seconds between frames, so that spans and tool calls have a length


def frame(event: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(event) + b"\n\n"


def message(mid: str, *deltas: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": d} for d in deltas),
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
    ]


def tool_call(call: str, name: str, parent: str, *args: str) -> list[dict[str, Any]]:
    start = {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": name}
    return [
        {**start, "parentMessageId": parent},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": a} for a in args),
        {"type": "TOOL_CALL_END", "toolCallId": call},
    ]


def script(name: str, thread: str, run: str) -> list[dict[str, Any]]:
    started = {"type": "RUN_STARTED", "threadId": thread, "runId": run}
    finished = {"type": "RUN_FINISHED", "threadId": thread, "runId": run}
    if name == "tools":
        result = {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{run}-tool",
            "toolCallId": f"{run}-call",
            "content": "sunny",
            "role": "tool",
        }
        return [
            started,
            *message(f"{run}-m", "Looking ", "it up."),
            *tool_call(f"{run}-call", "weather", f"{run}-m", '{"city":', '"Rome"}'),
            result,
            *message(f"{run}-m2", "Sunny in Rome."),
            finished,
        ]
    if name == "frontend":
        return [
            started,
            *tool_call(f"{run}-call", "change_background", f"{run}-m", '{"value":"red"}'),
            finished,
        ]
    if name == "answer":
        return [started, *message(f"{run}-m", "Done."), finished]
    if name == "broken":
        return [started, *message(f"{run}-m", "Half")]
    raise AssertionError(name)


def scripted_agent() -> Starlette:
    async def handle(request: Request) -> Response:
        posted = orjson.loads(await request.body())
        events = script(request.path_params["name"], posted["threadId"], posted["runId"])

        async def body() -> AsyncIterator[bytes]:
            for event in events:
                yield frame(event)
                await asyncio.sleep(STEP)

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/{name}", handle, methods=["POST"])])


def run_input(
    thread: str, run: str, messages: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": messages or [{"id": f"{run}-u", "role": "user", "content": "Weather in Rome?"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
