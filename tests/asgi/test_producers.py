"""The real producers (Pydantic AI's AG-UI adapter, ag-ui-langgraph) recorded in process:
``RecordingMiddleware`` wraps each producer's own app, served by uvicorn, and the real
``@ag-ui/client`` HttpAgent talks to the producer's endpoint as it would without the
recorder. Checked as the proxy is (tests/producers/test_recording.py): every frame stored
as the producer sent it, and the recorder's state at every seq of every run equal to the
reference client's fold."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recorder.asgi import RecordingMiddleware
from tests.conftest import node_available, require
from tests.producers.scenarios import SCENARIOS, agents_installed, create_app
from tests.producers.test_recording import Recorded, check_run, every_seq
from tests.servers import Exchange, node_conversation, project_oracle, serving, view

pytestmark = pytest.mark.node


@dataclass
class AppTee:
    """Between the recorder and the producer's app, in process: keeps what the app got and
    what it sent, byte for byte."""

    app: ASGIApp
    exchanges: list[Exchange] = field(default_factory=list)

    def by_run(self, run_id: str) -> Exchange:
        (found,) = [e for e in self.exchanges if e.body().get("runId") == run_id]
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = Exchange(b"", 0)
        self.exchanges.append(exchange)

        async def receive_kept() -> Message:
            message = await receive()
            exchange.request += message.get("body", b"")
            return message

        async def send_kept(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
            elif message["type"] == "http.response.body":
                exchange.response += message.get("body", b"")
            await send(message)

        await self.app(scope, receive_kept, send_kept)


@pytest.fixture
async def in_process(request: pytest.FixtureRequest, sqlite_url: str) -> AsyncIterator[Recorded]:
    producer: str = request.param
    require(node_available(), "Node and @ag-ui/client")
    require(agents_installed(), "the real producers (pip install -e '.[agents]')")
    tee = AppTee(create_app(producer))
    app = RecordingMiddleware(tee, agents={producer: "/"}, db=sqlite_url)
    async with (
        serving(app) as url,
        httpx.AsyncClient(base_url=f"{url}/recorder", timeout=60, trust_env=False) as client,
    ):
        # (``rec``: the producer's own endpoint, which the frontend calls.)
        yield Recorded(producer, url, tee, client)  # type: ignore[arg-type]  # (a tee in process)


@pytest.mark.parametrize("in_process", ["pydantic-ai", "langgraph"], indirect=True)
async def test_recorded_in_process_exactly_and_folded_like_the_reference_client(
    in_process: Recorded,
) -> None:
    recorded = in_process
    producer = recorded.producer
    cases: list[dict[str, Any]] = []
    states = []
    for scenario in SCENARIOS[producer]:
        turns = await node_conversation(f"{recorded.rec}/", scenario.conversation(producer))
        for turn in turns:
            assert turn["error"] is None, (turn["runId"], turn["error"])
            cases.append(await check_run(recorded, turn["runId"], turn))
            states.append(await every_seq(recorded.client, turn["runId"], cases[-1]["events"]))
        thread = scenario.thread(producer)
        shown = (await recorded.client.get(f"/threads/{thread}/state")).json()
        assert view(shown) == view(turns[-1]), "the thread shows what the frontend shows"
        runs = (await recorded.client.get(f"/threads/{thread}")).json()["runs"]
        assert {run["agent"] for run in runs} == {producer}
    judged = await project_oracle(cases)
    assert sum(len(s) for s in states) > 20
    for case, ours, theirs in zip(cases, states, judged, strict=True):
        assert len(ours) == len(theirs)
        for seq, (mine, reference) in enumerate(zip(ours, theirs, strict=True), start=-1):
            assert mine == view(reference), (case["events"][0], seq)
