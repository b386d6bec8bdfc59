"""The scripted conversations each producer is driven through, by the tests and by
``python -m tests.vectors.record`` alike.

A turn is what ``tests/interop/client.mjs conversation`` takes: the user's message, a result
for open frontend tool calls, a resume payload for pending interrupts, frontend tools to
offer. Run ids are ``<thread>-<n>``; with ``lineage`` every turn after the first names the
previous run as its ``parentRunId``, otherwise the recorder infers it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib.util import find_spec
from typing import Any

from starlette.types import ASGIApp

# The packages of the ``agents`` extra that the producers import.
AGENT_PACKAGES = ("pydantic_ai", "ag_ui", "ag_ui_langgraph", "langgraph", "langchain_core")

BACKGROUND_TOOL = {
    "name": "change_background",
    "description": "Change the page's background colour (runs in the browser).",
    "parameters": {
        "type": "object",
        "properties": {"value": {"type": "string", "description": "a CSS colour"}},
        "required": ["value"],
    },
}
PICTURE = [
    {"type": "text", "text": "What is in this picture?"},
    {"type": "image", "source": {"type": "url", "value": "https://example.com/cat.png"}},
]


@dataclass(frozen=True)
class Scenario:
    name: str
    turns: tuple[dict[str, Any], ...]
    state: dict[str, Any] = field(default_factory=dict)
    lineage: bool = False

    def thread(self, producer: str) -> str:
        return f"{producer}-{self.name}"

    def conversation(self, producer: str) -> dict[str, Any]:
        """The input of ``client.mjs conversation`` for this scenario."""
        thread = self.thread(producer)
        turns = []
        for n, turn in enumerate(self.turns, 1):
            spec = {"runId": f"{thread}-{n}", **turn}
            if self.lineage and n > 1:
                spec["parentRunId"] = f"{thread}-{n - 1}"
            turns.append(spec)
        return {"threadId": thread, "state": self.state, "turns": turns}


PYDANTIC_AI = (
    Scenario(
        "MultiTurn",
        ({"user": "hello there"}, {"user": "think about it, then answer"}, {"user": "thanks"}),
        lineage=True,
    ),
    Scenario(
        "BackendTools",
        ({"user": "what is the weather in Paris?"}, {"user": "and the weather in Rome and Oslo?"}),
    ),
    Scenario(
        "FrontendTools",
        (
            {"user": "please change_background to teal", "tools": [BACKGROUND_TOOL]},
            {"toolResult": "background changed", "tools": [BACKGROUND_TOOL]},
        ),
    ),
    Scenario(
        "MixedTools",
        (
            {
                "user": "weather in Oslo, then change_background to white",
                "tools": [BACKGROUND_TOOL],
            },
            {"toolResult": "background changed", "tools": [BACKGROUND_TOOL]},
        ),
    ),
    Scenario(
        "State",
        ({"user": "note: call Anna"}, {"user": "note: buy bread"}),
        state={"notes": ["water the plants"]},
    ),
    Scenario(
        "Approval",
        ({"user": "delete report.txt please"}, {"resume": {"approved": True}}),
    ),
    Scenario("Multimodal", ({"user": PICTURE},)),
)

LANGGRAPH = (
    Scenario(
        "MultiTurn",
        ({"user": "hello there"}, {"user": "think about it, then answer"}, {"user": "thanks"}),
        lineage=True,
    ),
    Scenario(
        "BackendTools",
        ({"user": "what is the weather in Paris?"}, {"user": "and the weather in Rome and Oslo?"}),
    ),
    Scenario("State", ({"user": "note: call Anna"}, {"user": "note: buy bread"})),
    Scenario(
        "Interrupt",
        ({"user": "delete report.txt please"}, {"resume": {"approved": True}}),
    ),
)

DEMO = (
    Scenario(
        "WeatherThenDelete",
        (
            {"user": "What's the weather?"},
            {"user": "delete report.txt please"},
            {"resume": {"approved": True}},
        ),
        state={"turns": 0},
        lineage=True,
    ),
)

SCENARIOS: dict[str, tuple[Scenario, ...]] = {
    "pydantic-ai": PYDANTIC_AI,
    "langgraph": LANGGRAPH,
    "demo": DEMO,
}

APPS = {
    "pydantic-ai": "tests.producers.pydantic_agent",
    "langgraph": "tests.producers.langgraph_agent",
    "demo": "recorder.demo_agent",
}


def agents_installed() -> bool:
    """Whether the ``agents`` extra (the real producers' libraries) is installed."""
    return all(find_spec(name) is not None for name in AGENT_PACKAGES)


def create_app(producer: str) -> ASGIApp:
    """A fresh server of ``producer`` (an empty memory for the stateful ones)."""
    module = importlib.import_module(APPS[producer])
    factory = module.create_demo_app if producer == "demo" else module.create_app
    app: ASGIApp = factory()
    return app
