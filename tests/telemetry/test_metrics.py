"""Prometheus metrics of a real recorder (uvicorn on loopback) recording a scripted agent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from recorder.api import RecorderApp, create_app
from recorder.config import Settings
from recorder.store import NewRun
from tests.servers import free_port, serving, sse_data
from tests.telemetry.scripts import STEP, run_input, scripted_agent

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@asynccontextmanager
async def recorder(db: str, agents: dict[str, str], **settings: Any) -> AsyncIterator[
    tuple[httpx.AsyncClient, RecorderApp]
]:  # fmt: skip
    app = create_app(Settings(db=db, agents=agents, heartbeat_interval=0.5, **settings))
    async with (
        serving(app) as url,
        httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client,
    ):
        yield client, app


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(client: httpx.AsyncClient, **kwargs: Any) -> Samples:
    answer = await client.get("/metrics", **kwargs)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return parse(answer.text)


async def post(client: httpx.AsyncClient, agent: str, body: dict[str, Any]) -> bytes:
    answer = await client.post(f"/agents/{agent}", json=body)
    assert answer.status_code == 200, answer.text
    return answer.content


async def test_runs_events_tool_calls_and_errors_are_counted(sqlite_url: str) -> None:
    async with serving(scripted_agent()) as agent:
        agents = {
            "tools": f"{agent}/tools",
            "front": f"{agent}/frontend",
            "answer": f"{agent}/answer",
            "broken": f"{agent}/broken",
            "gone": f"http://127.0.0.1:{free_port()}/",
        }
        async with recorder(sqlite_url, agents) as (client, app):
            before = await scrape(client)
            assert value(before, "recorder_journal_bytes") == 0
            assert value(before, "recorder_live_runs") == 0

            await post(client, "tools", run_input("t1", "t1-r1"))
            await post(client, "front", run_input("t2", "t2-r1"))
            result = {"id": "t2-tool", "role": "tool", "toolCallId": "t2-r1-call", "content": "ok"}
            await post(client, "answer", run_input("t2", "t2-r2", [result]))
            await post(client, "gone", run_input("t3", "t3-r1"))
            await post(client, "broken", run_input("t4", "t4-r1"))
            samples = await scrape(client)

            runs = {
                run: (await client.get(f"/runs/{run}")).json()
                for run in ("t1-r1", "t2-r1", "t2-r2", "t3-r1", "t4-r1")
            }
            replay = await client.get("/runs/t1-r1/stream", params={"live": "false"})
            stored = sse_data(replay.content)  # every event's data, byte for byte
            app.state.runtime.telemetry.journal_size(4096)
            journal = await scrape(client)

    for agent_name in ("tools", "front", "answer", "gone", "broken"):
        assert value(samples, "recorder_runs_started_total", agent=agent_name) == 1
    assert value(samples, "recorder_runs_ended_total", agent="tools", status="finished") == 1
    assert value(samples, "recorder_runs_ended_total", agent="gone", status="error") == 1
    assert value(samples, "recorder_runs_ended_total", agent="broken", status="error") == 1
    assert value(samples, "recorder_live_runs") == 0

    tools_run = runs["t1-r1"]
    assert (
        value(samples, "recorder_events_recorded_total", agent="tools") == tools_run["eventCount"]
    )
    assert len(stored) == tools_run["eventCount"]
    assert value(samples, "recorder_bytes_recorded_total", agent="tools") == sum(map(len, stored))
    total = sum(run["eventCount"] for run in runs.values())
    assert value(samples, "recorder_commit_batch_events_sum") == total
    assert value(samples, "recorder_commit_seconds_count") >= 5

    assert value(samples, "recorder_agent_first_event_seconds_count", agent="tools") == 1
    assert value(samples, "recorder_run_duration_seconds_count", agent="tools") == 1
    frames = tools_run["eventCount"]
    assert value(samples, "recorder_run_duration_seconds_sum", agent="tools") >= (frames - 1) * STEP

    # TOOL_CALL_START, two ARGS, END, then the RESULT: four steps of the agent's.
    weather = {"agent": "tools", "tool": "weather"}
    assert value(samples, "recorder_tool_call_seconds_count", **weather) == 1
    assert value(samples, "recorder_tool_call_seconds_sum", **weather) >= 3 * STEP
    # The frontend's result came with the next run's input.
    background = {"agent": "front", "tool": "change_background"}
    assert value(samples, "recorder_tool_call_seconds_count", **background) == 1

    gone = {"agent": "gone", "code": "upstream_unreachable"}
    assert value(samples, "recorder_upstream_errors_total", **gone) == 1
    broken = {"agent": "broken", "code": "upstream_incomplete"}
    assert value(samples, "recorder_upstream_errors_total", **broken) == 1
    assert (
        value(samples, "recorder_upstream_errors_total", agent="tools", code="upstream_idle") == 0
    )
    assert value(journal, "recorder_journal_bytes") == 4096


async def test_the_chunk_cache_is_measured(sqlite_url: str) -> None:
    posted = orjson.dumps(
        {"messages": [{"id": str(n), "content": "words " * 50} for n in range(40)]}
    )
    async with recorder(sqlite_url, {}, chunk_cache_mb=1) as (client, app):
        store = app.state.runtime.store
        assert value(await scrape(client), "recorder_chunk_cache_bytes") == 0
        await store.create_run(NewRun("r1", "t1", input=posted))  # kept as a tree of chunks
        samples = await scrape(client)
        cached = store.chunk_cache.size
    assert 0 < cached <= 1024 * 1024
    assert value(samples, "recorder_chunk_cache_bytes") == cached


async def test_metrics_need_the_api_token(sqlite_url: str) -> None:
    async with recorder(sqlite_url, {}, api_token="s3cret") as (client, _app):
        assert (await client.get("/metrics")).status_code == 401
        samples = await scrape(client, headers={"authorization": "Bearer s3cret"})
    assert ("recorder_live_runs", frozenset()) in samples


async def test_metrics_at_an_address_of_their_own(sqlite_url: str) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    async with (
        recorder(sqlite_url, {}, metrics_address=address, api_token="s3cret") as (client, _app),
        httpx.AsyncClient(trust_env=False) as plain,
    ):
        answer = await plain.get(f"http://{address}/metrics")
        assert answer.status_code == 200
        assert "recorder_runs_started_total" in answer.text
        auth = {"authorization": "Bearer s3cret"}
        assert (await client.get("/metrics", headers=auth)).status_code == 404
    async with httpx.AsyncClient(trust_env=False) as plain:
        try:
            await plain.get(f"http://{address}/metrics", timeout=2)
        except httpx.ConnectError:
            pass
        else:
            raise AssertionError("the metrics server outlived the recorder")


async def test_metrics_off(sqlite_url: str) -> None:
    async with serving(scripted_agent()) as agent:
        agents = {"answer": f"{agent}/answer"}
        async with recorder(sqlite_url, agents, metrics=False) as (client, app):
            assert (await client.get("/metrics")).status_code == 404
            assert app.state.runtime.metrics is None
            await post(client, "answer", run_input("t1", "t1-r1"))
            run = (await client.get("/runs/t1-r1")).json()
    assert run["status"] == "finished"
