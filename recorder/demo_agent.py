"""The built-in scripted AG-UI demo agent, built with the ``ag-ui-protocol`` models and encoder.

POST a RunAgentInput; it answers with a stream that exercises the protocol: state snapshot
and deltas, a reasoning span, text, a backend tool call with its result, and, when the user
asks to delete something, an interrupt (confirmation) that the next run resumes.

``forwardedProps.demo`` tunes it for tests and benchmarks: ``{"delay": seconds between
events, "extra": N more text deltas, "fail": "drop"|"stall"|"garbage"}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
from ag_ui.core import (
    EventType,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import BaseEvent
from ag_ui.encoder import EventEncoder
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse


def create_demo_app() -> FastAPI:
    app = FastAPI(title="agui-recorder demo agent", docs_url=None, redoc_url=None)

    @app.post("/")
    async def run(request: Request) -> Response:
        try:
            data = orjson.loads(await request.body())
            thread_id, run_id = str(data["threadId"]), str(data["runId"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return JSONResponse({"detail": "expected a RunAgentInput"}, status_code=422)
        try:
            options = _options(data)
            # Made whole before answering: an input it cannot take gets a 422, not a
            # stream that breaks off.
            events = list(script(data, thread_id, run_id, options["extra"]))
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            detail = f"the demo agent cannot answer this input: {str(exc)[:200]}"
            return JSONResponse({"detail": detail}, status_code=422)
        return StreamingResponse(_stream(events, options), media_type="text/event-stream")

    return app


def _options(data: dict[str, Any]) -> dict[str, Any]:
    """``forwardedProps.demo``: ``delay`` (seconds between events), ``extra`` (text deltas
    added), ``fail`` (``drop``, ``stall``, ``garbage``)."""
    props = data.get("forwardedProps") or {}
    if not isinstance(props, dict):
        raise TypeError("forwardedProps must be an object")
    given = props.get("demo") or {}
    if not isinstance(given, dict):
        raise TypeError("forwardedProps.demo must be an object")
    delay, extra, fail = given.get("delay", 0), given.get("extra", 0), given.get("fail")
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= 60:
        raise ValueError("forwardedProps.demo.delay must be 0 to 60 seconds")
    if isinstance(extra, bool) or not isinstance(extra, int) or not 0 <= extra <= 1_000_000:
        raise ValueError("forwardedProps.demo.extra must be a whole number, 0 to 1000000")
    if fail is not None and fail not in ("drop", "stall", "garbage"):
        raise ValueError("forwardedProps.demo.fail must be drop, stall or garbage")
    return {"delay": float(delay), "extra": extra, "fail": fail}


async def _stream(events: list[BaseEvent], options: dict[str, Any]) -> AsyncIterator[bytes]:
    encoder = EventEncoder()
    delay, fail = options["delay"], options["fail"]
    for index, event in enumerate(events):
        if fail == "drop" and index == len(events) // 2:
            raise ConnectionResetError("demo agent dropped the stream")
        if fail == "stall" and index == len(events) // 2:
            await asyncio.sleep(3600)
        if fail == "garbage" and index == 2:
            yield b"data: this is not json\n\n"
        yield encoder.encode(event).encode()
        if delay:
            await asyncio.sleep(delay)


def script(
    data: dict[str, Any], thread_id: str, run_id: str, extra: int = 0
) -> Iterator[BaseEvent]:
    """The events of one run, chosen from the input: a resume, a delete request, or a chat turn."""
    yield RunStartedEvent(type=EventType.RUN_STARTED, thread_id=thread_id, run_id=run_id)
    state = data.get("state")
    turns = state.get("turns", 0) if isinstance(state, dict) else 0
    turns = turns if isinstance(turns, int) else 0
    if data.get("resume"):
        yield from _resumed(data, run_id, turns)
        return
    text = _last_user_text(data.get("messages") or [])
    yield StateSnapshotEvent(
        type=EventType.STATE_SNAPSHOT, snapshot={"turns": turns, "topic": text[:40], "todo": []}
    )
    yield from _reasoning(run_id, f"The user said {text!r}; decide what to do.")
    if "delete" in text.lower():
        yield from _interrupting(thread_id, run_id, text)
        return
    yield from _say(f"{run_id}-a1", f"You said: {text}. Let me check the weather.", extra)
    call = f"{run_id}-call1"
    yield ToolCallStartEvent(
        type=EventType.TOOL_CALL_START,
        tool_call_id=call,
        tool_call_name="get_weather",
        parent_message_id=f"{run_id}-a1",
    )
    for part in ('{"city":', '"Paris"}'):
        yield ToolCallArgsEvent(type=EventType.TOOL_CALL_ARGS, tool_call_id=call, delta=part)
    yield ToolCallEndEvent(type=EventType.TOOL_CALL_END, tool_call_id=call)
    yield ToolCallResultEvent(
        type=EventType.TOOL_CALL_RESULT,
        message_id=f"{run_id}-tool1",
        tool_call_id=call,
        content='{"sky":"clear","celsius":21}',
    )
    yield from _say(f"{run_id}-a2", "It is clear and 21 °C in Paris.")
    yield _delta(
        {"op": "replace", "path": "/turns", "value": turns + 1},
        {"op": "add", "path": "/todo/-", "value": "weather checked"},
    )
    yield RunFinishedEvent(
        type=EventType.RUN_FINISHED,
        thread_id=thread_id,
        run_id=run_id,
        outcome=RunFinishedSuccessOutcome(type="success"),
    )


def _interrupting(thread_id: str, run_id: str, text: str) -> Iterator[BaseEvent]:
    yield from _say(f"{run_id}-a1", "Deleting needs your confirmation.")
    call = f"{run_id}-del"
    yield ToolCallStartEvent(
        type=EventType.TOOL_CALL_START,
        tool_call_id=call,
        tool_call_name="delete_file",
        parent_message_id=f"{run_id}-a1",
    )
    yield ToolCallArgsEvent(
        type=EventType.TOOL_CALL_ARGS, tool_call_id=call, delta='{"filename":"report.txt"}'
    )
    yield ToolCallEndEvent(type=EventType.TOOL_CALL_END, tool_call_id=call)
    yield RunFinishedEvent(
        type=EventType.RUN_FINISHED,
        thread_id=thread_id,
        run_id=run_id,
        outcome=RunFinishedInterruptOutcome(
            type="interrupt",
            interrupts=[
                Interrupt(
                    id=f"{run_id}-confirm",
                    reason="confirmation",
                    message="Delete report.txt?",
                    tool_call_id=call,
                )
            ],
        ),
    )


def _resumed(data: dict[str, Any], run_id: str, turns: int) -> Iterator[BaseEvent]:
    entry = data["resume"][0] if isinstance(data["resume"], list) and data["resume"] else {}
    approved = isinstance(entry, dict) and entry.get("status") == "resolved"
    call = _pending_tool_call(data.get("messages") or [])
    if call is not None:
        yield ToolCallResultEvent(
            type=EventType.TOOL_CALL_RESULT,
            message_id=f"{run_id}-tool1",
            tool_call_id=call,
            content='{"deleted":true}' if approved else '{"deleted":false}',
        )
    yield from _say(f"{run_id}-a1", "Deleted report.txt." if approved else "Kept report.txt.")
    yield _delta({"op": "add", "path": "/turns", "value": turns + 1})
    yield RunFinishedEvent(
        type=EventType.RUN_FINISHED,
        thread_id=str(data["threadId"]),
        run_id=run_id,
        outcome=RunFinishedSuccessOutcome(type="success"),
    )


def _delta(*ops: dict[str, Any]) -> StateDeltaEvent:
    return StateDeltaEvent.model_validate({"type": "STATE_DELTA", "delta": list(ops)})


def _say(message_id: str, text: str, extra: int = 0) -> Iterator[BaseEvent]:
    yield TextMessageStartEvent(
        type=EventType.TEXT_MESSAGE_START, message_id=message_id, role="assistant"
    )
    words = text.split(" ")
    for i, word in enumerate(words):
        delta = word if i == 0 else " " + word
        yield TextMessageContentEvent(
            type=EventType.TEXT_MESSAGE_CONTENT, message_id=message_id, delta=delta
        )
    for i in range(extra):
        yield TextMessageContentEvent(
            type=EventType.TEXT_MESSAGE_CONTENT, message_id=message_id, delta=f" token{i}"
        )
    yield TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, message_id=message_id)


def _reasoning(run_id: str, text: str) -> Iterator[BaseEvent]:
    span = f"{run_id}-think"
    yield ReasoningStartEvent(type=EventType.REASONING_START, message_id=span)
    yield ReasoningMessageStartEvent(
        type=EventType.REASONING_MESSAGE_START, message_id=f"{span}-m", role="reasoning"
    )
    yield ReasoningMessageContentEvent(
        type=EventType.REASONING_MESSAGE_CONTENT, message_id=f"{span}-m", delta=text
    )
    yield ReasoningMessageEndEvent(type=EventType.REASONING_MESSAGE_END, message_id=f"{span}-m")
    yield ReasoningEndEvent(type=EventType.REASONING_END, message_id=span)


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(
                    p.get("text", "")
                    for p in content
                    if isinstance(p, dict) and p.get("type") == "text"
                )
    return ""


def _pending_tool_call(messages: list[Any]) -> str | None:
    answered = {
        m.get("toolCallId") for m in messages if isinstance(m, dict) and m.get("role") == "tool"
    }
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            for call in message.get("toolCalls") or []:
                if isinstance(call, dict) and call.get("id") not in answered:
                    return str(call.get("id"))
    return None
