"""Real AG-UI traffic from an independent implementation: folded, verified, recorded, replayed.

The expected results come from running the real @ag-ui/client on the same events.
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
from tests.conftest import ROOT, node_available, require
from tests.servers import project_oracle, recorder_at, scripted_upstream, serving, sse, view

VECTORS = ROOT.parent / "shared" / "vectors" / "ag-ui-dotnet-baselines"


def pairs() -> list[tuple[str, Path, Path]]:
    found = []
    for response in sorted(VECTORS.glob("*.Response.json")):
        request = response.with_name(response.name.replace(".Response.", ".Request."))
        found.append(
            (response.name.split("__")[0] + response.name.split("__")[-1][:7], request, response)
        )
    return found


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


@pytest.fixture(scope="module")
def vector_pairs() -> list[tuple[str, Path, Path]]:
    require(VECTORS.is_dir(), f"test vectors at {VECTORS}")
    found = pairs()
    assert len(found) >= 20
    return found


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
        f"v{i}": [b"data: " + orjson.dumps(e) + b"\n\n" for e in load(resp)]
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
                assert [orjson.dumps(e["event"]) for e in events["events"]] == sent
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


async def test_cli_fold_and_verify(vector_pairs: Any, tmp_path: Path) -> None:
    _name, request, response = next(p for p in vector_pairs if p[0].startswith("Step09"))
    code, out, _err = await run_cli("fold", str(response), "--input", str(request))
    assert code == 0
    folded = json.loads(out)
    assert set(folded) == {"messages", "state", "pendingInterrupts", "problems"}
    posted = load(request)
    expected = fold([orjson.dumps(e) for e in load(response)], messages=posted["messages"])
    assert folded == json.loads(orjson.dumps(expected.to_json()))
    assert folded["pendingInterrupts"], "Step09 ends in an interrupt"
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
