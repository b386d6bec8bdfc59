"""A Pydantic AI agent behind its own AG-UI adapter, on a scripted ``FunctionModel``.

The model reads the newest part of the conversation and answers from a fixed script:

- a tool result came back: it answers with what the result says;
- "weather" (a city may follow "in"): it calls ``get_weather``; "weather in A and B" calls it
  twice in one response (parallel calls);
- a frontend tool offered in the input whose name appears in the text: it calls that tool
  (beside any weather calls), and the run ends for the client to execute it;
- "note ...": it calls ``add_note``, which writes the note into the AG-UI state (``StateDeps``)
  and sends a STATE_SNAPSHOT and a STATE_DELTA back through its return metadata;
- "delete ...": it calls ``delete_file``, which needs approval, so the run ends in an
  interrupt that the next run resumes;
- "think": it streams a thinking part before its answer (REASONING_* events);
- anything else: it repeats the text, saying how many user turns it has seen.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import EventType, StateDeltaEvent, StateSnapshotEvent
from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests, RunContext, Tool, ToolReturn
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.ui import StateDeps
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

WEATHER = {"Paris": ("clear", 21), "Rome": ("sunny", 26), "Oslo": ("snow", -3)}


class Notes(BaseModel):
    """The agent's AG-UI state."""

    notes: list[str] = []


def words(text: str) -> list[str]:
    """Text as streamed deltas: one word (with its leading space) per delta."""
    parts = text.split(" ")
    return [parts[0], *(" " + p for p in parts[1:])]


def user_text(part: UserPromptPart) -> tuple[str, list[str]]:
    """The text of a user prompt and the URLs of any images in it."""
    if isinstance(part.content, str):
        return part.content, []
    texts = [c for c in part.content if isinstance(c, str)]
    images = [c.url for c in part.content if isinstance(c, ImageUrl)]
    return " ".join(texts), images


def user_turns(messages: list[ModelMessage]) -> int:
    return sum(
        1
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    )


def tool_call(index: int, name: str, args: dict[str, Any]) -> dict[int, DeltaToolCall]:
    return {index: DeltaToolCall(name=name, json_args=json.dumps(args))}


async def script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    """The scripted model: see the module docstring."""
    last = messages[-1]
    results = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if results:
        for text in answer_results(results):
            yield text
        return
    prompts = [p for p in last.parts if isinstance(p, UserPromptPart)]
    text, images = user_text(prompts[-1]) if prompts else ("", [])
    lowered = text.lower()
    offered = [t.name for t in info.function_tools if t.name not in OWN_TOOLS]
    calls = [(name, {"value": text.rsplit(" ", 1)[-1]}) for name in offered if name in lowered]
    if "weather" in lowered:
        cities = re.findall(r"\b(Paris|Rome|Oslo)\b", text) or ["Paris"]
        calls += [("get_weather", {"city": city}) for city in cities]
    if calls:
        for i, (name, args) in enumerate(calls):
            yield tool_call(i, name, args)
    elif lowered.startswith("note"):
        yield tool_call(0, "add_note", {"text": text[4:].strip(" :")})
    elif "delete" in lowered:
        yield tool_call(0, "delete_file", {"filename": "report.txt"})
    else:
        if "think" in lowered:
            for piece in words(f"The user wrote {len(text)} characters; answer plainly."):
                yield {0: DeltaThinkingPart(content=piece)}
        seen = f" I see {len(images)} image(s)." if images else ""
        for piece in words(f"You said: {text}.{seen} That makes {user_turns(messages)} turns."):
            yield piece


def answer_results(results: list[ToolReturnPart]) -> list[str]:
    sentences = []
    for result in results:
        content = result.content
        if result.tool_name == "get_weather" and isinstance(content, dict):
            sentences.append(
                f"It is {content['sky']} and {content['celsius']} °C in {content['city']}."
            )
        elif result.tool_name == "delete_file":
            sentences.append(f"Done: {result.model_response_str()}.")
        else:
            sentences.append(f"{result.tool_name} answered {result.model_response_str()}.")
    return words(" ".join(sentences))


def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    sky, celsius = WEATHER.get(city, ("cloudy", 15))
    return {"city": city, "sky": sky, "celsius": celsius}


def add_note(ctx: RunContext[StateDeps[Notes]], text: str) -> ToolReturn:
    """Keep a note in the shared state."""
    before = len(ctx.deps.state.notes)
    ctx.deps.state.notes.append(text)
    return ToolReturn(
        return_value=f"noted ({before + 1} notes)",
        metadata=[
            StateSnapshotEvent(
                type=EventType.STATE_SNAPSHOT, snapshot={"notes": ctx.deps.state.notes[:-1]}
            ),
            StateDeltaEvent(
                type=EventType.STATE_DELTA,
                delta=[{"op": "add", "path": "/notes/-", "value": text}],
            ),
        ],
    )


def delete_file(filename: str) -> str:
    """Delete a file (asks the user first)."""
    return f"deleted {filename}"


OWN_TOOLS = {"get_weather", "add_note", "delete_file"}


def build_agent() -> Agent[StateDeps[Notes], str | DeferredToolRequests]:
    return Agent(
        FunctionModel(stream_function=script, model_name="scripted"),
        deps_type=StateDeps[Notes],
        output_type=[str, DeferredToolRequests],
        name="pydantic-ai-scripted",
        tools=[
            Tool(get_weather, takes_ctx=False),
            Tool(add_note, takes_ctx=True),
            Tool(delete_file, takes_ctx=False, requires_approval=True),
        ],
    )


def create_app() -> Starlette:
    agent = build_agent()

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent, deps=StateDeps(Notes()))

    return Starlette(routes=[Route("/", run, methods=["POST"])])
