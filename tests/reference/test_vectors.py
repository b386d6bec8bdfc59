"""Real AG-UI traffic: folded, verified, recorded, replayed.

Two sources: the project's own vectors in ``tests/vectors/`` (real producers, recorded by
``python -m tests.vectors.record``; always present), and, as an optional extra where it is
present, the .NET SDK's recorded baselines in ``../shared/vectors/``. The expected results
come from running the real @ag-ui/client on the same events.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from recorder.reference.check import verify_frames
from recorder.reference.projector import fold
from tests.conftest import DOTNET_VECTORS, VECTORS, node_available, require
from tests.servers import project_oracle, recorder_at, scripted_upstream, serving, sse, view

Pair = tuple[str, Path, Path]


def pairs(folder: Path) -> list[Pair]:
    """(name, request, response) for every ``*.Response.json`` under ``folder``."""
    found = []
    for response in sorted(folder.rglob("*.Response.json")):
        request = response.with_name(response.name.replace(".Response.", ".Request."))
        name = response.relative_to(folder).as_posix().removesuffix(".Response.json")
        found.append((name, request, response))
    return found


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def frames(response: Path) -> list[bytes]:
    """Each event's bytes: the project's vectors keep the producer's bytes, one per line."""
    if response.is_relative_to(VECTORS):
        lines = response.read_bytes().splitlines()
        assert lines[0] == b"[" and lines[-1] == b"]", response
        return [line.removesuffix(b",") for line in lines[1:-1]]
    return [orjson.dumps(e) for e in load(response)]


@pytest.fixture(scope="module", params=["project", "dotnet"])
def vector_pairs(request: pytest.FixtureRequest) -> list[Pair]:
    if request.param == "dotnet":
        # An optional extra: not part of the repository, so absent on a plain clone.
        if not DOTNET_VECTORS.is_dir():
            pytest.skip(f"the optional .NET vectors are not present at {DOTNET_VECTORS}")
        found = pairs(DOTNET_VECTORS)
        assert len(found) >= 20
        return found
    found = pairs(VECTORS)
    assert len(found) >= 24
    return found


def test_project_vectors_keep_the_producers_bytes() -> None:
    for name, _request, response in pairs(VECTORS):
        assert [orjson.loads(f) for f in frames(response)] == load(response), name


def test_project_vectors_cover_what_the_readme_says() -> None:
    found = pairs(VECTORS)
    assert {name.split("/")[0] for name, _q, _r in found} == {"demo", "pydantic-ai", "langgraph"}
    requests = [load(q) for _n, q, _r in found]
    responses = [load(r) for _n, _q, r in found]
    types = {e["type"] for events in responses for e in events}
    lifecycle = {"RUN_STARTED", "RUN_FINISHED", "STEP_STARTED", "STEP_FINISHED"}
    text = {"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"}
    tools = {"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"}
    reasoning = {"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT"}
    reasoning |= {"REASONING_MESSAGE_END", "REASONING_END"}
    state = {"STATE_SNAPSHOT", "STATE_DELTA", "MESSAGES_SNAPSHOT"}
    assert lifecycle | text | tools | reasoning | state | {"RAW", "CUSTOM"} <= types
    outcomes = [events[-1].get("outcome") or {} for events in responses]
    assert any(o.get("type") == "interrupt" for o in outcomes)
    assert any(o.get("pendingToolCallIds") for o in outcomes)
    assert any(sum(e["type"] == "TOOL_CALL_START" for e in events) > 1 for events in responses)
    assert any(q.get("resume") for q in requests)
    assert any(q.get("parentRunId") for q in requests)
    assert any(q.get("tools") for q in requests)
    assert any(q.get("state") for q in requests)
    messages = [m for q in requests for m in q["messages"]]
    assert any(isinstance(m.get("content"), list) for m in messages), "multimodal input"
    assert {"user", "assistant", "tool", "reasoning"} <= {m["role"] for m in messages}


async def test_fold_and_verify_agree_with_the_reference(vector_pairs: Any) -> None:
    require(node_available(), "Node and @ag-ui/client")
    cases = []
    for _name, request, response in vector_pairs:
        posted = load(request)
        cases.append(
            {
                "messages": posted.get("messages", []),
                "state": posted.get("state") or {},
                "events": load(response),
            }
        )
    judged = await project_oracle(cases)
    for (name, _req, _resp), case, theirs in zip(vector_pairs, cases, judged, strict=True):
        assert theirs["error"] is None, name
        assert verify_frames(case["events"]) == [], name
        ours = fold(
            [orjson.dumps(e) for e in case["events"]],
            messages=case["messages"],
            state=case["state"],
        )
        assert view(ours.to_json()) == view(theirs), name


async def test_vectors_recorded_through_the_proxy(sqlite_url: str, vector_pairs: Any) -> None:
    require(node_available(), "Node and @ag-ui/client")
    bodies = {
        f"v{i}": [b"data: " + frame + b"\n\n" for frame in frames(resp)]
        for i, (_n, _q, resp) in enumerate(vector_pairs)
    }

    def script(name: str) -> Any:
        return lambda _request: sse(bodies[name])

    upstream = scripted_upstream({name: script(name) for name in bodies})
    async with serving(upstream) as up:
        agents = {name: f"{up}/{name}" for name in bodies}
        async with (
            recorder_at(sqlite_url, agents) as rec,
            httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as client,
        ):
            cases, ours = [], []
            for i, (name, request, response) in enumerate(vector_pairs):
                posted = {**load(request), "threadId": f"t{i}", "runId": f"r{i}"}
                answer = await client.post(f"/agents/v{i}", json=posted)
                assert answer.status_code == 200, name
                run = (await client.get(f"/runs/r{i}")).json()
                assert run["status"] in ("finished", "interrupted"), name
                assert run["violations"] == [], name
                events = (await client.get(f"/runs/r{i}/events", params={"limit": 10000})).json()
                sent = [b[6:-2] for b in bodies[f"v{i}"]]
                async with client.stream("GET", f"/runs/r{i}/stream?live=false") as stored:
                    replayed = [
                        line[6:]
                        for line in (await stored.aread()).split(b"\n")
                        if line.startswith(b"data: ")
                    ]
                assert replayed == sent, name
                assert [e["event"] for e in events["events"]] == load(response), name
                ours.append(view((await client.get(f"/runs/r{i}/state")).json()))
                cases.append(
                    {
                        "messages": posted.get("messages", []),
                        "state": posted.get("state") or {},
                        "events": load(response),
                    }
                )
    judged = await project_oracle(cases)
    for (name, _q, _r), mine, theirs in zip(vector_pairs, ours, judged, strict=True):
        assert mine == view(theirs), name


async def run_cli(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "recorder.cli.main",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(stdin)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_cli_fold_and_verify(tmp_path: Path) -> None:
    # A run of the Pydantic AI agent that ends waiting for approval of a tool call.
    (request,) = (VECTORS / "pydantic-ai").glob("*_Approval__Turn_01.Request.json")
    response = request.with_name(request.name.replace(".Request.", ".Response."))
    code, out, _err = await run_cli("fold", str(response), "--input", str(request))
    assert code == 0
    folded = json.loads(out)
    assert set(folded) == {"messages", "state", "pendingInterrupts", "problems"}
    posted = load(request)
    expected = fold([orjson.dumps(e) for e in load(response)], messages=posted["messages"])
    assert folded == json.loads(orjson.dumps(expected.to_json()))
    assert folded["pendingInterrupts"], "the run ends in an interrupt"
    # The same events as JSONL on stdin, and as an SSE capture.
    jsonl = b"\n".join(orjson.dumps(e) for e in load(response))
    code, out, _ = await run_cli("fold", "-", "--input", str(request), stdin=jsonl)
    assert code == 0 and json.loads(out) == folded
    capture = tmp_path / "capture.sse"
    capture.write_bytes(b"".join(b"data: " + orjson.dumps(e) + b"\r\n\r\n" for e in load(response)))
    code, out, _ = await run_cli("fold", str(capture), "--input", str(request))
    assert code == 0 and json.loads(out) == folded

    code, out, _ = await run_cli("verify", str(response))
    assert code == 0 and out.startswith("ok")
    broken = [e for e in load(response) if e["type"] != "TOOL_CALL_END"]
    bad = tmp_path / "broken.json"
    bad.write_bytes(orjson.dumps(broken))
    code, out, _ = await run_cli("verify", str(bad))
    assert code == 1
    assert out.startswith("Cannot send 'RUN_FINISHED' while tool calls are still active:")
