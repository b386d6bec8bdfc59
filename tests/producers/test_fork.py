"""Forks of real agents through the recorder, with each strategy.

A conversation of three turns, driven by the real ``HttpAgent`` through the recorder: two
notes (each kept in the agent's state by a tool) and a question. Then a fork after the first
turn asks for another note. The branch must be exactly the history and state at the fork
point plus the new turn, and never hold a later turn:

- a ``new-thread`` fork gives that with both agents, the LangGraph one (its own memory per
  thread, a ``MemorySaver`` checkpointer) included; the branch then goes on as a thread of
  its own (the agent counts its turns from the branch);
- a ``same-thread`` fork gives it with the Pydantic AI agent, which rebuilds from the posted
  messages and state; the LangGraph agent loads its checkpoint for the thread instead, so its
  "branch" holds the later turns (its state follows the posted one: the branch contradicts
  itself). That failure is kept here as what same-thread means for such an agent, and why
  new-thread is the default.

Edits (an edited user message, a regenerated turn) rewind the LangGraph agent the same way.
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

PRODUCERS = ["langgraph", "pydantic-ai"]
ASKED = ["note: call Anna", "note: buy bread", "how many turns now?"]
LATER = ASKED[1:]
INSTEAD = "note: pay rent"


@pytest.fixture
async def recorder(sqlite_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    require(node_available(), "Node and @ag-ui/client")
    require(agents_installed(), "the real producers (pip install -e '.[agents]')")
    async with (
        serving(create_app("langgraph")) as langgraph,
        serving(create_app("pydantic-ai")) as pydantic_ai,
        # Both with the default strategy: a fork that names none goes into a new thread.
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


async def three_turns(rec: str, agent: str, thread: str) -> None:
    turns = [{"runId": f"{thread}-{n}", "user": text} for n, text in enumerate(ASKED, 1)]
    for turn in await node_conversation(
        f"{rec}/agents/{agent}", {"threadId": thread, "turns": turns}
    ):
        assert turn["error"] is None, turn["error"]


async def fork(client: httpx.AsyncClient, run: str, **options: Any) -> dict[str, Any]:
    """Fork through the recorder; the plan it followed (its dry run, then the fork itself)."""
    answer = await client.post(f"/runs/{run}/fork", json={**options, "dryRun": True})
    assert answer.status_code == 200, answer.text
    plan: dict[str, Any] = answer.json()
    options = {**options, "runId": plan["input"]["runId"], "threadId": plan["threadId"]}
    async with client.stream("POST", f"/runs/{run}/fork", json=options) as streamed:
        assert streamed.status_code == 200, await streamed.aread()
        await streamed.aread()
        assert streamed.headers["x-recorder-fork-strategy"] == plan["strategy"]
    assert (await client.get(f"/runs/{plan['input']['runId']}")).json()["status"] == "finished"
    return plan


async def state_of(client: httpx.AsyncClient, thread: str) -> dict[str, Any]:
    found: dict[str, Any] = (await client.get(f"/threads/{thread}/state")).json()
    return found


def assert_exact_branch(point: dict[str, Any], branch: dict[str, Any]) -> None:
    """The history at the point, then the new turn (a note kept by the tool), nothing later."""
    size = len(point["messages"])
    assert shape(branch["messages"][:size]) == shape(point["messages"])
    new = branch["messages"][size:]
    assert contents(new)[0] == INSTEAD and new[0]["role"] == "user"
    # (LangGraph's snapshot puts the tool's result after the answer it led to.)
    assert {"noted (2 notes)", "add_note answered noted (2 notes)."} <= set(contents(new))
    assert len(new) == 4
    assert not set(LATER) & set(contents(branch["messages"]))
    assert (
        branch["state"]["notes"]
        == [*point["state"]["notes"], "pay rent"]
        == ["call Anna", "pay rent"]
    )
    assert branch["pendingInterrupts"] == []


async def go_on(rec: str, agent: str, branch: dict[str, Any], thread: str) -> dict[str, Any]:
    """One more turn on the branch, by the real HttpAgent from what the branch holds."""
    (turn,) = await node_conversation(
        f"{rec}/agents/{agent}",
        {
            "threadId": thread,
            "messages": branch["messages"],
            "state": branch["state"],
            "turns": [{"runId": f"{thread}-next", "user": "how many turns?"}],
        },
    )
    assert turn["error"] is None, turn["error"]
    return dict(turn)


@pytest.mark.parametrize("agent", PRODUCERS)
async def test_a_new_thread_fork_is_exactly_the_point_plus_the_new_turn(
    recorder: tuple[str, httpx.AsyncClient], agent: str
) -> None:
    rec, client = recorder
    thread = f"{agent}-n"
    await three_turns(rec, agent, thread)
    point = (await client.get(f"/runs/{thread}-1/state")).json()
    assert point["state"]["notes"] == ["call Anna"]

    plan = await fork(client, f"{thread}-1", messages=[INSTEAD])  # no strategy: the default
    assert plan["strategy"] == "new-thread" and plan["threadId"] != thread
    branch = await state_of(client, plan["threadId"])
    assert_exact_branch(point, branch)
    if agent == "langgraph":
        assert branch["state"]["turns"] == point["state"]["turns"] + 1
    # The original thread is untouched, and knows its fork.
    assert (await state_of(client, thread))["state"]["notes"] == ["call Anna", "buy bread"]
    forks = (await client.get(f"/threads/{thread}")).json()["forks"]
    assert [f["threadId"] for f in forks] == [plan["threadId"]]

    # The branch goes on as a thread of its own: the agent's memory of it is the branch.
    after = await go_on(rec, agent, branch, plan["threadId"])
    assert contents(after["messages"])[-1] == "You said: how many turns?. That makes 3 turns."
    assert after["state"]["notes"] == ["call Anna", "pay rent"]
    assert view(await state_of(client, plan["threadId"])) == view(after)


async def test_a_same_thread_fork_is_exact_for_an_agent_that_rebuilds_from_the_input(
    recorder: tuple[str, httpx.AsyncClient],
) -> None:
    rec, client = recorder
    thread = "pydantic-ai-s"
    await three_turns(rec, "pydantic-ai", thread)
    point = (await client.get(f"/runs/{thread}-1/state")).json()
    plan = await fork(client, f"{thread}-1", messages=[INSTEAD], strategy="same-thread")
    assert (plan["strategy"], plan["threadId"], plan["input"]["parentRunId"]) == (
        "same-thread",
        thread,
        f"{thread}-1",
    )
    # The branch is the thread's latest run now: the thread's state is the branch's.
    branch = await state_of(client, thread)
    assert branch["runId"] == plan["input"]["runId"]
    assert_exact_branch(point, branch)
    after = await go_on(rec, "pydantic-ai", branch, thread)
    assert contents(after["messages"])[-1] == "You said: how many turns?. That makes 3 turns."


async def test_a_same_thread_fork_of_the_langgraph_agent_keeps_the_later_turns(
    recorder: tuple[str, httpx.AsyncClient],
) -> None:
    """The documented failure: why a stateful agent needs new-thread. Posted on its old
    thread, the history at the point meets the agent's checkpoint for that thread, which
    holds the later turns; ag-ui-langgraph keeps them in the conversation."""
    rec, client = recorder
    thread = "langgraph-s"
    await three_turns(rec, "langgraph", thread)
    point = (await client.get(f"/runs/{thread}-1/state")).json()
    plan = await fork(client, f"{thread}-1", messages=[INSTEAD], strategy="same-thread")
    assert plan["input"]["messages"][:-1] == point["messages"]  # the right history was posted
    branch = await state_of(client, thread)
    assert branch["runId"] == plan["input"]["runId"]
    # ...but the agent answered from its checkpoint: the later turns are in the branch.
    assert set(LATER) <= set(contents(branch["messages"]))
    assert len(branch["messages"]) > len(point["messages"]) + 4
    # Its state follows the posted one, so the branch contradicts itself: the notes say two,
    # the messages hold three.
    assert branch["state"]["notes"] == ["call Anna", "pay rent"]
    assert "note: buy bread" in contents(branch["messages"])


@pytest.mark.parametrize("agent", PRODUCERS)
async def test_edit_and_regenerate_rewind_the_agent(
    recorder: tuple[str, httpx.AsyncClient], agent: str
) -> None:
    rec, client = recorder
    thread = f"{agent}-e"
    await three_turns(rec, agent, thread)
    second = (await client.get(f"/runs/{thread}-2")).json()
    before_second = (await client.get(f"/runs/{thread}-1/state")).json()

    # The second note, edited from the end of the third turn: that turn runs again instead.
    edit = {"messageId": f"{thread}-2-user", "content": "note: buy milk"}
    plan = await fork(client, f"{thread}-3", edit=edit)
    assert (plan["parentRunId"], plan["parentSeq"], plan["strategy"]) == (
        f"{thread}-2",
        -1,
        "new-thread",
    )
    edited = await state_of(client, plan["threadId"])
    assert edited["state"]["notes"] == ["call Anna", "buy milk"]
    said = contents(edited["messages"])
    assert "note: buy milk" in said and not {"note: buy bread", ASKED[2]} & set(said)
    assert "add_note answered noted (2 notes)." in said
    size = len(before_second["messages"])
    assert shape(edited["messages"][:size]) == shape(second["input"]["messages"][:size])

    # The answer to the second note, regenerated: the same note again, the third turn gone.
    (answer,) = [
        m
        for m in (await client.get(f"/runs/{thread}-2/state")).json()["messages"]
        if m.get("content") == "add_note answered noted (2 notes)."
    ]
    assert answer["role"] == "assistant"
    plan = await fork(client, f"{thread}-3", regenerate=answer["id"])
    assert (plan["parentRunId"], plan["parentSeq"]) == (f"{thread}-2", -1)
    assert plan["input"]["messages"] == second["input"]["messages"]
    again = await state_of(client, plan["threadId"])
    assert again["state"]["notes"] == ["call Anna", "buy bread"]
    assert "add_note answered noted (2 notes)." in contents(again["messages"])
    assert ASKED[2] not in contents(again["messages"])
