"""What a branch from a past point gets from an agent that keeps its own memory per thread.

The history at an earlier point, posted again with a new user turn through the recorder:

- on the SAME ``threadId``, the LangGraph agent loads its checkpoint for that thread, so the
  "branch" still holds the later turns (what a same-thread fork gets from such an agent);
- on a NEW ``threadId``, it starts from exactly the posted history, so the branch is that
  history plus the new turn (what a new-thread fork relies on);
- an agent that rebuilds from the posted messages (Pydantic AI) gives the exact branch on
  the same thread too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.conftest import node_available, require
from tests.producers.scenarios import agents_installed, create_app
from tests.servers import node_conversation, recorder_at, serving, view

pytestmark = pytest.mark.node

ASKED = ["first question", "second question", "third question"]
LATER = ASKED[1:]
INSTEAD = "a different second question"


@pytest.fixture
async def recorder(sqlite_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    require(node_available(), "Node and @ag-ui/client")
    require(agents_installed(), "the real producers (pip install -e '.[agents]')")
    async with (
        serving(create_app("langgraph")) as langgraph,
        serving(create_app("pydantic-ai")) as pydantic_ai,
        recorder_at(
            sqlite_url, {"langgraph": langgraph + "/", "pydantic-ai": pydantic_ai + "/"}
        ) as rec,
        httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as client,
    ):
        yield rec, client


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in messages]


def shape(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(m["id"], m["role"], m.get("content")) for m in messages]


async def history_then_branch(
    rec: str, client: httpx.AsyncClient, agent: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Three turns on a thread, then the history after the first posted again with another
    second turn, on the same thread and on a new one. (the point, same-thread, new-thread)"""
    url = f"{rec}/agents/{agent}"
    turns = [{"runId": f"{agent}-{n}", "user": text} for n, text in enumerate(ASKED, 1)]
    for turn in await node_conversation(url, {"threadId": agent, "turns": turns}):
        assert turn["error"] is None
    point = (await client.get(f"/runs/{agent}-1/state")).json()
    assert contents(point["messages"])[0] == ASKED[0] and len(point["messages"]) == 2

    async def branch(thread: str, run: str) -> dict[str, Any]:
        history = {"messages": point["messages"], "state": point["state"]}
        (answer,) = await node_conversation(
            url, {"threadId": thread, **history, "turns": [{"runId": run, "user": INSTEAD}]}
        )
        assert answer["error"] is None
        assert view((await client.get(f"/threads/{thread}/state")).json()) == view(answer)
        return dict(answer)

    same = await branch(agent, f"{agent}-same")
    new = await branch(f"{agent}-new", f"{agent}-new")
    return point, same, new


async def test_langgraph_same_thread_branch_keeps_later_turns_new_thread_does_not(
    recorder: tuple[str, httpx.AsyncClient],
) -> None:
    rec, client = recorder
    point, same, new = await history_then_branch(rec, client, "langgraph")

    # Same thread: the agent's checkpoint wins over the posted history; its model saw the
    # later turns too.
    assert all(text in contents(same["messages"]) for text in LATER)
    assert f"You said: {INSTEAD}. That makes 4 turns." in contents(same["messages"])
    assert len(same["messages"]) == 8
    run = (await client.get("/runs/langgraph-same")).json()
    assert (run["parentRunId"], run["parentInferred"]) == ("langgraph-3", True)

    # New thread: exactly the history at the point, then the new turn.
    assert shape(new["messages"][:2]) == shape(point["messages"])
    assert contents(new["messages"])[2:] == [INSTEAD, f"You said: {INSTEAD}. That makes 2 turns."]
    assert not any(text in contents(new["messages"]) for text in LATER)
    assert new["state"]["turns"] == 2


async def test_an_agent_that_rebuilds_from_the_posted_messages_branches_on_the_same_thread(
    recorder: tuple[str, httpx.AsyncClient],
) -> None:
    rec, client = recorder
    point, same, new = await history_then_branch(rec, client, "pydantic-ai")
    for branch in (same, new):
        assert shape(branch["messages"][:2]) == shape(point["messages"])
        assert contents(branch["messages"])[2:] == [
            INSTEAD,
            f"You said: {INSTEAD}. That makes 2 turns.",
        ]
