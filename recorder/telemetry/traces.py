"""Each recorded run as an OpenTelemetry trace, sent over OTLP/HTTP (the ``otel`` extra).

Built from the log, after the run ended, on a task of its own: the client's stream never
waits for it. A run is one trace: a root span ``invoke_agent {agent}`` for the run, and
under it a ``chat`` span for each of the agent's text messages and an
``execute_tool {tool}`` span for each tool call (from TOOL_CALL_START to its
TOOL_CALL_RESULT, or to TOOL_CALL_END when the result is not in the run). Spans take their
times from when the events were recorded.

Attribute names follow the OpenTelemetry GenAI semantic conventions as of semantic
conventions v1.41.0 (``gen_ai.operation.name``, ``gen_ai.agent.name``,
``gen_ai.conversation.id``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ...); the
provider and model are not known to the recorder and are left out. Message content
(``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.tool.call.arguments``,
``gen_ai.tool.call.result``) is sent only with ``otel_capture_content``, as the conventions
ask. AG-UI's own ids go in ``agui.*`` attributes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from recorder import __version__
from recorder.telemetry.logs import EXPORT
from recorder.telemetry.observer import RunReport
from recorder.wire.events import RecordedEvent, decode

SCHEMA_URL = "https://opentelemetry.io/schemas/1.41.0"

ReadEvents = Callable[[str], Awaitable[Sequence[RecordedEvent]]]
ReadInput = Callable[[str], Awaitable[bytes | None]]


@dataclass(slots=True)
class SpanPlan:
    """A span to emit under the run's root span."""

    name: str
    start: float
    end: float
    attributes: dict[str, Any]
    content: list[str] = field(default_factory=list)  # text deltas or argument deltas
    result: str | None = None
    error: bool = False


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def plan_spans(events: Sequence[RecordedEvent], thread_id: str) -> list[SpanPlan]:
    """The message and tool call spans of a run, from its recorded events."""
    messages: dict[str, SpanPlan] = {}
    tools: dict[str, SpanPlan] = {}
    order: list[SpanPlan] = []
    for event in events:
        obj = decode(event.payload)
        if obj is None:
            continue
        kind, at = obj.get("type"), event.recorded_at
        if kind in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK"):
            message_id = obj.get("messageId")
            if not isinstance(message_id, str):
                continue
            span = messages.get(message_id)
            if span is None:
                role = obj.get("role")
                role = role if isinstance(role, str) else "assistant"
                span = messages[message_id] = SpanPlan(
                    "chat", at, at, _message_attributes(thread_id, message_id, role)
                )
                order.append(span)
            span.end = at
            if isinstance(obj.get("delta"), str):
                span.content.append(obj["delta"])
        elif kind == "TEXT_MESSAGE_END" and obj.get("messageId") in messages:
            messages[obj["messageId"]].end = at
        elif kind in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_CHUNK", "TOOL_CALL_END"):
            call_id = obj.get("toolCallId")
            if not isinstance(call_id, str):
                continue
            span = tools.get(call_id)
            if span is None:
                name = obj.get("toolCallName")
                name = name if isinstance(name, str) else ""
                attributes = _tool_attributes(thread_id, call_id, name)
                span = tools[call_id] = SpanPlan(f"execute_tool {name}".strip(), at, at, attributes)
                order.append(span)
            if span.result is None:
                span.end = at
            if kind != "TOOL_CALL_END" and isinstance(obj.get("delta"), str):
                span.content.append(obj["delta"])
        elif kind == "TOOL_CALL_RESULT" and obj.get("toolCallId") in tools:
            span = tools[obj["toolCallId"]]
            span.end = at
            content = obj.get("content")
            span.result = content if isinstance(content, str) else json.dumps(content)
    return order


def _message_attributes(thread_id: str, message_id: str, role: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.type": "text",
        "gen_ai.conversation.id": thread_id,
        "agui.message.id": message_id,
        "agui.message.role": role,
    }


def _tool_attributes(thread_id: str, call_id: str, name: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": thread_id,
    }


def input_messages(posted: Any) -> list[dict[str, Any]]:
    """The posted messages in the conventions' shape: role and a list of parts."""
    messages = posted.get("messages") if isinstance(posted, dict) else None
    shaped = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        parts: list[dict[str, Any]] = []
        if isinstance(content, str):
            parts.append({"type": "text", "content": content})
        elif isinstance(content, list):
            parts += [
                {"type": "text", "content": p["text"]}
                for p in content
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
        if message.get("role") == "tool":
            parts = [{"type": "tool_call_response", "id": message.get("toolCallId"),
                      "response": content}]  # fmt: skip
        shaped.append({"role": message.get("role"), "parts": parts})
    return shaped


def write_trace(
    tracer: Tracer,
    report: RunReport,
    events: Sequence[RecordedEvent],
    posted: Any,
    *,
    capture_content: bool,
) -> None:
    """Emit the run's spans (root first, then its children, all ended)."""
    end = report.end
    started = report.started_at
    finished = max([started + report.duration, *(e.recorded_at for e in events)])
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": end.thread_id,
        "agui.thread.id": end.thread_id,
        "agui.run.id": end.run_id,
        "agui.run.status": end.status,
        "agui.run.events": end.events,
    }
    if report.agent:
        attributes["gen_ai.agent.name"] = report.agent
    if end.outcome:
        attributes["agui.run.outcome"] = end.outcome
    if end.status == "error":
        attributes["error.type"] = end.code or "agent_error"
    if capture_content:
        attributes["gen_ai.input.messages"] = json.dumps(input_messages(posted))
    name = f"invoke_agent {report.agent}" if report.agent else "invoke_agent"
    root = tracer.start_span(
        name, kind=SpanKind.CLIENT, attributes=attributes, start_time=_ns(started)
    )
    if end.status == "error":
        root.set_status(Status(StatusCode.ERROR, end.error or end.code or "the run failed"))
    context = trace.set_span_in_context(root)
    for plan in plan_spans(events, end.thread_id):
        attrs = dict(plan.attributes)
        if capture_content:
            _add_content(attrs, plan)
        span = tracer.start_span(
            plan.name, context, SpanKind.INTERNAL, attrs, start_time=_ns(plan.start)
        )
        span.end(end_time=_ns(plan.end))
    root.end(end_time=_ns(finished))


def _add_content(attrs: dict[str, Any], plan: SpanPlan) -> None:
    text = "".join(plan.content)
    if attrs["gen_ai.operation.name"] == "chat":
        role = attrs["agui.message.role"]
        message = {"role": role, "parts": [{"type": "text", "content": text}]}
        attrs["gen_ai.output.messages"] = json.dumps([{**message, "finish_reason": "stop"}])
    else:
        attrs["gen_ai.tool.call.arguments"] = text
        if plan.result is not None:
            attrs["gen_ai.tool.call.result"] = plan.result


class TraceExport:
    """A sink for ended runs: each becomes a trace, exported in the background."""

    def __init__(
        self,
        endpoint: str,
        read_events: ReadEvents,
        read_input: ReadInput,
        *,
        headers: Mapping[str, str] | None = None,
        service_name: str = "agui-recorder",
        capture_content: bool = False,
    ) -> None:
        resource = Resource.create({"service.name": service_name, "service.version": __version__})
        self._provider = TracerProvider(resource=resource)
        exporter = OTLPSpanExporter(endpoint=endpoint, headers=dict(headers or {}))
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("agui-recorder", __version__, SCHEMA_URL)
        self._read_events = read_events
        self._read_input = read_input
        self._capture = capture_content
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, report: RunReport) -> None:
        task = asyncio.get_running_loop().create_task(
            self._export(report), name=f"trace-{report.end.run_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _export(self, report: RunReport) -> None:
        run_id = report.end.run_id
        try:
            events = await self._read_events(run_id)
            posted: Any = None
            if self._capture:
                raw = await self._read_input(run_id)
                with contextlib.suppress(ValueError):
                    posted = json.loads(raw) if raw else None
            write_trace(self._tracer, report, events, posted, capture_content=self._capture)
        except Exception as exc:  # a trace is never worth more than a log line
            EXPORT.warning(
                "trace not exported", extra={"fields": {"run": run_id, "reason": str(exc)}}
            )

    async def flush(self) -> None:
        """Wait for the traces being built, then for their export."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.to_thread(self._provider.force_flush)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.flush()
        await asyncio.to_thread(self._provider.shutdown)
