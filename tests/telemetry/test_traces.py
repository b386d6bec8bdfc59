"""OpenTelemetry export: a loopback OTLP/HTTP receiver decodes what the recorder sends (the
protobuf of opentelemetry-proto), and the spans of each recorded run are checked: one trace
per run, the run's span at its root, a span per message and per tool call under it, names
and attributes of the GenAI semantic conventions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from recorder.api import create_app
from recorder.config import Settings
from tests.servers import serving
from tests.telemetry.scripts import STEP, run_input, scripted_agent


@dataclass
class Received:
    spans: list[Span] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]


def plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def attributes(span: Any) -> dict[str, Any]:
    return {a.key: plain(a.value) for a in span.attributes}


def receiver(received: Received) -> Starlette:
    async def traces(request: Request) -> Response:
        assert request.headers["content-type"] == "application/x-protobuf"
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.body())
        received.headers.append(dict(request.headers))
        for resource_spans in export.resource_spans:
            received.resources.append(attributes(resource_spans.resource))
            for scope_spans in resource_spans.scope_spans:
                received.spans.extend(scope_spans.spans)
        body = ExportTraceServiceResponse().SerializeToString()
        return Response(body, media_type="application/x-protobuf")

    return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])


@asynccontextmanager
async def recording(db: str, **settings: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Received]]:
    received = Received()
    async with serving(receiver(received)) as collector, serving(scripted_agent()) as agent:
        agents = {"tools": f"{agent}/tools", "broken": f"{agent}/broken"}
        config = Settings(db=db, agents=agents, otel_endpoint=f"{collector}/v1/traces", **settings)
        app = create_app(config)
        async with (
            serving(app) as url,
            httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client,
        ):
            yield client, received
            await app.state.runtime.traces.flush()


async def test_each_run_is_a_trace_of_its_messages_and_tool_calls(sqlite_url: str) -> None:
    async with recording(
        sqlite_url, otel_capture_content=True, otel_headers={"x-tenant": "acme"}
    ) as (client, received):
        await client.post("/agents/tools", json=run_input("t1", "t1-r1"))
        await client.post("/agents/broken", json=run_input("t2", "t2-r1"))

    assert received.headers and all(h["x-tenant"] == "acme" for h in received.headers)
    assert received.resources[0]["service.name"] == "agui-recorder"
    (root,) = received.named("invoke_agent tools")
    (broken,) = received.named("invoke_agent broken")
    assert root.trace_id != broken.trace_id, "one trace per run"
    assert root.parent_span_id == b"" and root.kind == Span.SPAN_KIND_CLIENT
    assert attributes(root) | {"gen_ai.input.messages": None} == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "tools",
        "gen_ai.conversation.id": "t1",
        "agui.thread.id": "t1",
        "agui.run.id": "t1-r1",
        "agui.run.status": "finished",
        "agui.run.outcome": "success",
        "agui.run.events": 14,
        "gen_ai.input.messages": None,
    }
    posted = json.loads(attributes(root)["gen_ai.input.messages"])
    assert posted == [{"role": "user", "parts": [{"type": "text", "content": "Weather in Rome?"}]}]
    assert root.status.code != Status.STATUS_CODE_ERROR

    children = [s for s in received.spans if s.trace_id == root.trace_id and s is not root]
    assert sorted(s.name for s in children) == ["chat", "chat", "execute_tool weather"]
    assert all(s.parent_span_id == root.span_id for s in children)
    for span in children:
        assert root.start_time_unix_nano <= span.start_time_unix_nano
        assert span.start_time_unix_nano <= span.end_time_unix_nano <= root.end_time_unix_nano

    first, second = sorted(
        (s for s in children if s.name == "chat"), key=lambda s: s.start_time_unix_nano
    )
    said = attributes(first)
    assert said["gen_ai.operation.name"] == "chat" and said["gen_ai.conversation.id"] == "t1"
    assert said["agui.message.id"] == "t1-r1-m" and said["agui.message.role"] == "assistant"
    output = json.loads(said["gen_ai.output.messages"])
    assert output[0]["parts"] == [{"type": "text", "content": "Looking it up."}]
    assert json.loads(attributes(second)["gen_ai.output.messages"])[0]["parts"][0]["content"] == (
        "Sunny in Rome."
    )

    (tool,) = received.named("execute_tool weather")
    assert attributes(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "weather",
        "gen_ai.tool.call.id": "t1-r1-call",
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": "t1",
        "gen_ai.tool.call.arguments": '{"city":"Rome"}',
        "gen_ai.tool.call.result": "sunny",
    }
    # From TOOL_CALL_START to its result: four steps of the agent's.
    assert tool.end_time_unix_nano - tool.start_time_unix_nano >= 3 * STEP * 1e9
    assert first.end_time_unix_nano <= tool.start_time_unix_nano <= second.start_time_unix_nano

    assert broken.status.code == Status.STATUS_CODE_ERROR
    assert attributes(broken)["error.type"] == "upstream_incomplete"
    assert attributes(broken)["agui.run.status"] == "error"


async def test_content_is_sent_only_when_asked(sqlite_url: str) -> None:
    async with recording(sqlite_url) as (client, received):
        await client.post("/agents/tools", json=run_input("t1", "t1-r1"))
    assert len(received.spans) == 4
    for span in received.spans:
        names = set(attributes(span))
        assert not names & {
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        }
        assert "gen_ai.operation.name" in names
