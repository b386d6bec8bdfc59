"""Forks through the API: the strategies (a new thread by default, the agent's configured
one, or the request's), lineage across threads both ways, and the edits (a replaced or
patched state, an edited user message, a regenerated turn), each checked on the dry run's
exact RunAgentInput and on what the branch then records.

A real recorder on a loopback port in front of the demo agent (which rebuilds from the
posted messages, so both strategies give it the same branch).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import conversation, demo_upstream, post_run, recorder_at, user


@pytest.fixture
async def recorded(db_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    async with demo_upstream() as upstream:
        agents = {"demo": upstream, "same": {"url": upstream, "fork": "same-thread"}}
        async with (
            recorder_at(db_url, agents) as rec,
            httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as client,
        ):
            yield rec, client


async def plan(client: httpx.AsyncClient, run: str, **options: Any) -> httpx.Response:
    return await client.post(f"/runs/{run}/fork", json={**options, "dryRun": True})


async def planned(client: httpx.AsyncClient, run: str, **options: Any) -> dict[str, Any]:
    answer = await plan(client, run, **options)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def fork(client: httpx.AsyncClient, run: str, **options: Any) -> httpx.Headers:
    """Fork for real; the answer's headers, once its stream has ended."""
    async with client.stream("POST", f"/runs/{run}/fork", json=options) as answer:
        assert answer.status_code == 200, await answer.aread()
        await answer.aread()
        return answer.headers


async def state(client: httpx.AsyncClient, thread: str) -> dict[str, Any]:
    found: dict[str, Any] = (await client.get(f"/threads/{thread}/state")).json()
    return found


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in messages]


async def test_a_fork_goes_into_a_new_thread_that_knows_where_it_came_from(
    recorded: tuple[str, httpx.AsyncClient],
) -> None:
    rec, client = recorded
    r1, _r2, _r3 = await conversation(client, rec, "n1")
    at = await state(client, "n1")
    at_r1 = (await client.get(f"/runs/{r1}/state")).json()

    rome = [{"id": "rome", "content": "What about Rome?"}]
    the_plan = await planned(client, r1, messages=rome, runId="n1-b")
    assert (the_plan["strategy"], the_plan["threadId"]) == ("new-thread", "thread-n1-b")
    assert (the_plan["parentRunId"], the_plan["parentSeq"]) == (r1, None)
    posted = the_plan["input"]
    # A conversation the agent never had: the whole history at the point, no parentRunId.
    assert posted["threadId"] == "thread-n1-b" and "parentRunId" not in posted
    assert posted["messages"][:-1] == at_r1["messages"] and posted["state"] == at_r1["state"]
    assert posted["messages"][-1] == {"id": "rome", "role": "user", "content": "What about Rome?"}

    headers = await fork(client, r1, messages=rome, runId="n1-b")
    assert headers["x-recorder-fork-strategy"] == "new-thread"
    assert headers["x-recorder-thread-id"] == "thread-n1-b"
    run = (await client.get("/runs/n1-b")).json()
    assert (run["threadId"], run["parentRunId"], run["parentSeq"]) == ("thread-n1-b", r1, None)
    assert run["input"] == posted

    # Lineage both ways: the branch links to its origin, the origin lists its forks.
    branch = (await client.get("/threads/thread-n1-b")).json()
    assert branch["forkedFrom"] == {"threadId": "n1", "runId": r1, "seq": None}
    assert [r["runId"] for r in branch["runs"]] == ["n1-b"]
    origin = (await client.get("/threads/n1")).json()
    assert [f["threadId"] for f in origin["forks"]] == ["thread-n1-b"]
    assert origin["forks"][0]["forkedFrom"] == branch["forkedFrom"]
    assert origin["runCount"] == 3 and origin["forkedFrom"] is None
    listed = (await client.get("/threads")).json()["threads"]
    assert {t["threadId"]: t["forkedFrom"] for t in listed} == {
        "n1": None,
        "thread-n1-b": branch["forkedFrom"],
    }
    # The branch is the history at the point plus the new turn; the original is unchanged.
    now = await state(client, "thread-n1-b")
    assert now["messages"][: len(at_r1["messages"])] == at_r1["messages"]
    assert "What about Rome?" in contents(now["messages"])
    assert "delete report.txt please" not in contents(now["messages"])
    assert await state(client, "n1") == at

    # The dry run is the very input the fork posts (an appended text gets an id after the run).
    dry = await planned(client, r1, atSeq=12, messages=["And Oslo?"], runId="n1-c")
    assert dry["input"]["messages"][-1] == {
        "id": "n1-c-message-1",
        "role": "user",
        "content": "And Oslo?",
    }
    await fork(client, r1, atSeq=12, messages=["And Oslo?"], runId="n1-c")
    assert (await client.get("/runs/n1-c")).json()["input"] == dry["input"]

    # A thread named by the request: a new one, or the parent's (a same-thread fork).
    named = await planned(client, r1, threadId="n1-named", runId="x")
    assert (named["strategy"], named["input"]["threadId"]) == ("new-thread", "n1-named")
    same = await planned(client, r1, threadId="n1", runId="y")
    assert (same["strategy"], same["input"]["parentRunId"]) == ("same-thread", r1)
    # Never into a thread that exists, and never a strategy the thread contradicts.
    taken = await plan(client, r1, threadId="thread-n1-b")
    assert taken.status_code == 409
    assert taken.json()["detail"] == (
        "thread 'thread-n1-b' exists already: a fork into a new thread needs an id no thread has"
    )
    contradicted = await plan(client, r1, threadId="n1", strategy="new-thread")
    assert (
        contradicted.status_code == 422 and "the parent's thread" in contradicted.json()["detail"]
    )
    assert (await plan(client, r1, strategy="sideways")).status_code == 422


async def test_a_fork_without_a_thread_takes_the_agents_strategy(
    recorded: tuple[str, httpx.AsyncClient],
) -> None:
    rec, client = recorded
    agents = (await client.get("/agents")).json()["agents"]
    assert agents == [
        {"name": "demo", "fork": "new-thread"},
        {"name": "same", "fork": "same-thread"},
    ]
    await post_run(
        client,
        f"{rec}/agents/same",
        {"threadId": "s1", "runId": "s1-r1", "messages": [user("What's the weather?", "u1")]},
    )
    the_plan = await planned(client, "s1-r1", messages=["and Rome?"], runId="s1-f")
    assert (the_plan["strategy"], the_plan["threadId"]) == ("same-thread", "s1")
    assert the_plan["input"]["parentRunId"] == "s1-r1"
    headers = await fork(client, "s1-r1", messages=["and Rome?"], runId="s1-f")
    assert headers["x-recorder-fork-strategy"] == "same-thread"
    assert headers["x-recorder-thread-id"] == "s1"
    tree = (await client.get("/threads/s1")).json()
    assert [c["runId"] for c in tree["runs"][0]["children"]] == ["s1-f"] and tree["forks"] == []
    # The request's strategy wins over the agent's.
    other = await planned(client, "s1-r1", strategy="new-thread", runId="run-abc")
    assert (other["strategy"], other["threadId"]) == ("new-thread", "thread-abc")


async def test_state_replaced_or_patched(recorded: tuple[str, httpx.AsyncClient]) -> None:
    rec, client = recorded
    r1, _r2, _r3 = await conversation(client, rec, "p1")
    at = (await client.get(f"/runs/{r1}/state")).json()["state"]
    assert at["todo"] == ["weather checked"]

    replaced = await planned(client, r1, state={"todo": []})
    assert replaced["input"]["state"] == {"todo": []}
    add = [{"op": "add", "path": "/todo/-", "value": "buy milk"}]
    patched = await planned(client, r1, statePatch=add)
    assert patched["input"]["state"] == {**at, "todo": ["weather checked", "buy milk"]}
    bad = await plan(client, r1, statePatch=[{"op": "replace", "path": "/nope/x", "value": 1}])
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("statePatch does not apply to the state at the point")
    both = await plan(client, r1, state={}, statePatch=add)
    assert (both.status_code, both.json()["detail"]) == (
        422,
        "give a state or a statePatch, not both",
    )
    turns = [{"op": "replace", "path": "/turns", "value": 41}]
    await fork(client, r1, statePatch=turns, messages=["Hi"], runId="p1-patched")
    run = (await client.get("/runs/p1-patched")).json()
    assert run["input"]["state"] == {**at, "turns": 41}
    # The agent was given the patched state, and counted on from it.
    assert (await state(client, run["threadId"]))["state"]["turns"] == 42


async def test_an_edited_user_message_runs_its_turn_again(
    recorded: tuple[str, httpx.AsyncClient],
) -> None:
    rec, client = recorded
    r1, r2, r3 = await conversation(client, rec, "e1")
    given = (await client.get(f"/runs/{r2}")).json()["input"]
    asked = f"{r2}-u"
    assert given["messages"][-1]["id"] == asked

    edit = {"messageId": asked, "content": "What about tomorrow?"}
    the_plan = await planned(client, r3, edit=edit, runId="e1-edit")
    # The turn that sent it starts again: r2's own input, the message changed, r2's state.
    assert (the_plan["parentRunId"], the_plan["parentSeq"]) == (r2, -1)
    changed = {**given["messages"][-1], "content": "What about tomorrow?"}
    assert the_plan["input"]["messages"] == [*given["messages"][:-1], changed]
    assert the_plan["input"]["state"] == given["state"]

    await fork(client, r3, edit=edit, runId="e1-edit")
    branch = await state(client, the_plan["threadId"])
    said = contents(branch["messages"])
    assert "What about tomorrow?" in said
    assert not {"delete report.txt please", "Deleted report.txt."} & set(said)
    assert branch["messages"][: len(given["messages"]) - 1] == given["messages"][:-1]
    assert (await client.get(f"/threads/{the_plan['threadId']}")).json()["forkedFrom"] == {
        "threadId": "e1",
        "runId": r2,
        "seq": -1,
    }

    answer = f"{r1}-a2"
    refused = await plan(client, r3, edit={"messageId": answer, "content": "x"})
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        f"message {answer!r} is an assistant message: only user messages are edited "
        "(regenerate an assistant message instead)"
    )
    missing = await plan(client, r1, edit=edit)  # r2's question does not exist yet at r1
    assert (missing.status_code, missing.json()["detail"]) == (
        422,
        f"no message {asked!r} in the history of run {r1!r} at its end",
    )
    appended = await plan(client, r3, edit=edit, messages=["more"])
    assert appended.status_code == 422 and "cannot be appended" in appended.json()["detail"]


async def test_regenerate_runs_the_turn_that_produced_a_message_again(
    recorded: tuple[str, httpx.AsyncClient],
) -> None:
    rec, client = recorded
    r1, _r2, r3 = await conversation(client, rec, "g1")
    first = (await client.get(f"/runs/{r1}")).json()["input"]
    the_plan = await planned(client, r3, regenerate=f"{r1}-a2", runId="g1-again")
    assert (the_plan["parentRunId"], the_plan["parentSeq"]) == (r1, -1)
    # Exactly what r1 was given, in a new thread.
    assert the_plan["input"]["messages"] == first["messages"]
    assert the_plan["input"]["state"] == first["state"]
    await fork(client, r3, regenerate=f"{r1}-a2", runId="g1-again")
    again = await state(client, the_plan["threadId"])
    original = (await client.get(f"/runs/{r1}/state")).json()
    assert contents(again["messages"]) == contents(original["messages"])
    assert again["state"] == original["state"]

    # A resumed turn runs again with the same resume answers.
    resumed = (await client.get(f"/runs/{r3}")).json()["input"]
    redo = await planned(client, r3, regenerate=f"{r3}-a1")
    assert (redo["parentRunId"], redo["parentSeq"]) == (r3, -1)
    assert redo["input"]["messages"] == resumed["messages"]
    assert redo["input"]["resume"] == resumed["resume"]

    refused = await plan(client, r3, regenerate=f"{r1}-u")
    assert refused.status_code == 422 and "only an assistant message" in refused.json()["detail"]
    both = await plan(client, r3, regenerate=f"{r1}-a2", edit={"messageId": "x", "content": "y"})
    assert both.status_code == 422
    # An answer the client gave in the first input was produced by no recorded run.
    given = {"id": "given", "role": "assistant", "content": "Hello from before"}
    body = {"threadId": "g2", "runId": "g2-r1", "messages": [given, user("Hi", "g2-u")]}
    await post_run(client, f"{rec}/agents/demo", body)
    lonely = await plan(client, "g2-r1", regenerate="given")
    assert lonely.status_code == 422 and "no turn to regenerate" in lonely.json()["detail"]


async def test_a_recorder_without_the_agent_says_how_to_give_it(
    recorded: tuple[str, httpx.AsyncClient], db_url: str
) -> None:
    rec, client = recorded
    await conversation(client, rec, "a1")
    async with (
        recorder_at(db_url, {}) as other,
        httpx.AsyncClient(base_url=other, timeout=60, trust_env=False) as elsewhere,
    ):
        planned = await plan(elsewhere, "a1-r1", messages=["Hi"])  # planning needs no agent
        assert planned.status_code == 200 and planned.json()["strategy"] == "new-thread"
        refused = await elsewhere.post("/runs/a1-r1/fork", json={"messages": ["Hi"]})
        assert (refused.status_code, refused.json()["detail"]) == (
            404,
            "run 'a1-r1' was recorded through agent 'demo', whose URL this recorder does not "
            "know: start it with --agent demo=URL (or RECORDER_AGENTS=demo=URL, or a config "
            "file)",
        )


async def test_lineage_across_threads_survives_export_and_import(
    recorded: tuple[str, httpx.AsyncClient], tmp_path: Path
) -> None:
    rec, client = recorded
    r1, _r2, _r3 = await conversation(client, rec, "x1")
    await fork(client, r1, atSeq=5, messages=["Rome?"], threadId="x1-branch")
    exported = (await client.get("/export")).content
    # Newest threads first: the branch comes before the thread it came from.
    assert exported.index(b'"threadId":"x1-branch"') < exported.index(b'"threadId":"x1"')
    copy = f"sqlite+aiosqlite:///{tmp_path / 'copy.db'}"
    async with (
        recorder_at(copy, {}) as other,
        httpx.AsyncClient(base_url=other, timeout=60, trust_env=False) as there,
    ):
        imported = await there.post(
            "/import", content=exported, headers={"content-type": "application/x-ndjson"}
        )
        assert imported.status_code == 200, imported.text
        branch = (await there.get("/threads/x1-branch")).json()
        assert branch["forkedFrom"] == {"threadId": "x1", "runId": r1, "seq": 5}
        origin = (await there.get("/threads/x1")).json()
        assert [f["threadId"] for f in origin["forks"]] == ["x1-branch"]
