"""Real producers recorded end to end: Pydantic AI's and LangGraph's own AG-UI servers (and
the demo agent) behind the recorder, driven by the real ``@ag-ui/client`` HttpAgent.

A tee between the recorder and the producer keeps what the producer really sent, so the
checks are against the producer's bytes: the recording is byte-exact, the recorder's state
at every seq of every run equals the reference client's fold of the same events, and each
thread's state equals what the HttpAgent shows after each turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import node_available, require
from tests.producers.scenarios import SCENARIOS, Scenario, agents_installed, create_app
from tests.servers import (
    Tee,
    node_conversation,
    project_oracle,
    recorder_at,
    serving,
    sse_data,
    view,
)

pytestmark = pytest.mark.node


@dataclass
class Recorded:
    producer: str
    rec: str
    tee: Tee
    client: httpx.AsyncClient


@pytest.fixture
async def through_recorder(
    request: pytest.FixtureRequest, sqlite_url: str
) -> AsyncIterator[Recorded]:
    producer: str = request.param
    require(node_available(), "Node and @ag-ui/client")
    if producer != "demo":
        require(agents_installed(), "the real producers (pip install -e '.[agents]')")
    async with serving(create_app(producer)) as agent:
        tee = Tee(agent + "/")
        async with (
            serving(tee.app()) as teed,
            recorder_at(sqlite_url, {producer: teed + "/"}) as rec,
            httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as client,
        ):
            yield Recorded(producer, rec, tee, client)


async def drive(recorded: Recorded, producer: str, scenario: Scenario) -> list[dict[str, Any]]:
    turns = await node_conversation(
        f"{recorded.rec}/agents/{producer}", scenario.conversation(producer)
    )
    for turn in turns:
        assert turn["error"] is None, (turn["runId"], turn["error"])
    return turns


async def check_run(recorded: Recorded, run_id: str, turn: dict[str, Any]) -> dict[str, Any]:
    """Byte-exact recording and the run's end state; an oracle case for every seq."""
    client = recorded.client
    run = (await client.get(f"/runs/{run_id}")).json()
    assert (run["status"], run["violations"]) in (("finished", []), ("interrupted", [])), run
    exchange = recorded.tee.by_run(run_id)
    assert exchange.status == 200
    assert run["input"] == exchange.body(), "the input stored is the one the agent got"
    async with client.stream("GET", f"/runs/{run_id}/stream", params={"live": "false"}) as answer:
        stored = sse_data(await answer.aread())
    sent = exchange.frames()
    assert sent, "the producer sent events"
    assert stored == sent, "every frame's data is stored exactly as the producer sent it"
    events = (await client.get(f"/runs/{run_id}/events", params={"limit": 10000})).json()
    assert [e["origin"] for e in events["events"]] == ["upstream"] * len(sent)
    assert view((await client.get(f"/runs/{run_id}/state")).json()) == view(turn)
    start = run["input"]
    return {
        "messages": start.get("messages") or [],
        "state": start.get("state") or {},
        "events": [e["event"] for e in events["events"]],
        "everyPrefix": True,
    }


async def every_seq(client: httpx.AsyncClient, run_id: str, events: list[Any]) -> list[Any]:
    """The recorder's view of the run after each seq, from -1 (its input) to the end."""
    views = []
    for seq in range(-1, len(events)):
        answer = await client.get(f"/runs/{run_id}/state", params={"seq": seq})
        views.append(view(answer.json()))
    return views


PRODUCERS = ["pydantic-ai", "langgraph", "demo"]


@pytest.mark.parametrize("through_recorder", PRODUCERS, indirect=True)
async def test_recorded_exactly_and_folded_like_the_reference_client(
    through_recorder: Recorded,
) -> None:
    recorded = through_recorder
    producer = recorded.producer
    cases, states = [], []
    for scenario in SCENARIOS[producer]:
        turns = await drive(recorded, producer, scenario)
        for turn in turns:
            cases.append(await check_run(recorded, turn["runId"], turn))
            states.append(await every_seq(recorded.client, turn["runId"], cases[-1]["events"]))
        thread = scenario.thread(producer)
        shown = (await recorded.client.get(f"/threads/{thread}/state")).json()
        assert shown["runId"] == turns[-1]["runId"]
        assert view(shown) == view(turns[-1]), "the thread shows what the frontend shows"
    judged = await project_oracle(cases)
    assert sum(len(s) for s in states) > 40
    for case, ours, theirs in zip(cases, states, judged, strict=True):
        assert len(ours) == len(theirs)
        for seq, (mine, reference) in enumerate(zip(ours, theirs, strict=True), start=-1):
            assert reference["error"] is None or seq < len(case["events"]) - 1, reference
            assert mine == view(reference), (case["events"][0], seq)
