"""An ``ag-ui-langgraph`` agent over a LangGraph graph with a scripted chat model.

The graph is the usual tool loop (``chat`` -> ``tools`` -> ``chat``) compiled with
``MemorySaver``, so the agent keeps its own memory per ``threadId`` as LangGraph agents do:
what it answers depends on its checkpoint, not only on the messages posted.

The scripted model reads the last message:

- a tool result: it answers with the result;
- "weather" (cities Paris, Rome, Oslo; several give parallel calls): it calls ``get_weather``;
- "note ...": it calls ``add_note``, which updates the graph state's ``notes``;
- "delete ...": it calls ``delete_file``, which stops on a LangGraph ``interrupt()`` for a
  confirmation; the next run resumes it with ``resume``;
- "think": it streams a reasoning block before its answer;
- anything else: it repeats the text and counts the user turns in its checkpoint.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode
from langgraph.types import Command, interrupt

WEATHER = {"Paris": ("clear", 21), "Rome": ("sunny", 26), "Oslo": ("snow", -3)}


class ChatState(MessagesState):
    notes: list[str]
    turns: int


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(
        str(block.get("text", "")) if isinstance(block, dict) else str(block) for block in content
    )


def pieces(text: str) -> list[str]:
    parts = text.split(" ")
    return [parts[0], *(" " + p for p in parts[1:])]


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answer is chosen from the conversation (see the module docstring)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def decide(self, messages: list[BaseMessage]) -> tuple[list[dict[str, Any]], str, str]:
        """(tool calls, reasoning, text) for the next answer."""
        last = messages[-1]
        if isinstance(last, ToolMessage):
            results = []
            for message in reversed(messages):
                if not isinstance(message, ToolMessage):
                    break
                results.insert(0, f"{message.name} answered {text_of(message)}.")
            return [], "", " ".join(results)
        text = text_of(last)
        lowered = text.lower()
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        if "weather" in lowered:
            cities = re.findall(r"\b(Paris|Rome|Oslo)\b", text) or ["Paris"]
            return (
                [self.call(turn, i, "get_weather", {"city": c}) for i, c in enumerate(cities)],
                "",
                "",
            )
        if lowered.startswith("note"):
            return [self.call(turn, 0, "add_note", {"text": text[4:].strip(" :")})], "", ""
        if "delete" in lowered:
            return [self.call(turn, 0, "delete_file", {"filename": "report.txt"})], "", ""
        reasoning = f"The user wrote {len(text)} characters." if "think" in lowered else ""
        return [], reasoning, f"You said: {text}. That makes {turn} turns."

    @staticmethod
    def call(turn: int, index: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"call-{turn}-{index}", "name": name, "args": args, "type": "tool_call"}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        calls, _reasoning, text = self.decide(messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text, tool_calls=calls))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from self.chunks(messages)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self.chunks(messages):
            if run_manager is not None:
                await run_manager.on_llm_new_token(text_of(chunk.message), chunk=chunk)
            yield chunk

    def chunks(self, messages: list[BaseMessage]) -> Iterator[ChatGenerationChunk]:
        calls, reasoning, text = self.decide(messages)
        if reasoning:
            for piece in pieces(reasoning):
                block = {"type": "reasoning", "reasoning": piece, "index": 0}
                yield ChatGenerationChunk(message=AIMessageChunk(content=[block]))
        if text:
            for piece in pieces(text):
                yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        for index, call in enumerate(calls):
            # As providers stream them: the call's id and name first, then its arguments.
            arguments = json.dumps(call["args"])
            opening = {"id": call["id"], "name": call["name"], "args": ""}
            yield tool_chunk(index, **opening)
            for start in range(0, len(arguments), 12):
                yield tool_chunk(index, id=None, name=None, args=arguments[start : start + 12])


def tool_chunk(index: int, **fields: Any) -> ChatGenerationChunk:
    part = {**fields, "index": index, "type": "tool_call_chunk"}
    return ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[part]))


@tool
def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    sky, celsius = WEATHER.get(city, ("cloudy", 15))
    return {"city": city, "sky": sky, "celsius": celsius}


@tool
def add_note(
    text: str,
    state: Annotated[dict[str, Any], InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command[Any]:
    """Keep a note in the graph state."""
    notes = [*state.get("notes", []), text]
    answer = ToolMessage(f"noted ({len(notes)} notes)", tool_call_id=tool_call_id, name="add_note")
    return Command(update={"notes": notes, "messages": [answer]})


@tool
def delete_file(filename: str) -> str:
    """Delete a file once the user confirms."""
    decision = interrupt({"question": f"Delete {filename}?", "filename": filename})
    approved = isinstance(decision, dict) and decision.get("approved") is True
    return f"deleted {filename}" if approved else f"kept {filename}"


TOOLS = [get_weather, add_note, delete_file]


def build_graph() -> Any:
    model = ScriptedChatModel()

    async def chat(state: ChatState) -> dict[str, Any]:
        answer = await model.ainvoke(state["messages"])
        update: dict[str, Any] = {"messages": [answer]}
        if not getattr(answer, "tool_calls", None):
            update["turns"] = state.get("turns", 0) + 1
        return update

    def route(state: ChatState) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else END

    graph = StateGraph(ChatState)
    graph.add_node("chat", chat)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "chat")
    graph.add_conditional_edges("chat", route, ["tools", END])
    graph.add_edge("tools", "chat")
    return graph.compile(checkpointer=MemorySaver())


def create_app() -> FastAPI:
    """A fresh agent with an empty memory."""
    app = FastAPI()
    agent = LangGraphAgent(
        name="langgraph-scripted", graph=build_graph(), emit_interrupt_outcome=True
    )
    add_langgraph_fastapi_endpoint(app, agent, "/")
    return app
