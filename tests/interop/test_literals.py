"""Literals only JSON.parse reads, and patches the reference's run fails on, end to end.

A real HttpAgent (``client.mjs``) runs through the recording proxy: what it shows must be
what the recorder's state endpoint projects, the log must hold the agent's bytes, and a run
the client fails must be flagged. ``recorder fold`` and ``verify`` read the same literals
from files and inputs, and never crash on an input no client could post.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import node_available, require
from tests.servers import node_client, recorder_at, scripted_upstream, serving, sse

pytestmark = pytest.mark.node

RUN = b'{"type":"RUN_STARTED","threadId":"t-lit","runId":"%s"}'
DONE = b'{"type":"RUN_FINISHED","threadId":"t-lit","runId":"%s"}'
LITERALS = [
    b'{"type":"TEXT_MESSAGE_START","messageId":"m1"}',
    b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"x\\ud83d"}',
    b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"\\ude00y \\udbff"}',
    b'{"type":"TEXT_MESSAGE_END","messageId":"m1"}',
    b'{"type":"STATE_SNAPSHOT","snapshot":{"inf":1e400,"n":9007199254740993,"s":"\\udc00"}}',
    b'{"type":"STATE_DELTA","delta":[{"op":"move","from":"","path":"/b"},'
    b'{"op":"replace","path":"","value":{"z":1,"n":9007199254740993,"inf":-1e400}}]}',
    b'{"type":"STATE_DELTA","delta":[{"op":"copy","from":"/valueOf","path":"/f"},'
    b'{"op":"replace","path":"/f","value":2}]}',
    b'{"type":"THINKING_START"}',
    b'{"type":"THINKING_TEXT_MESSAGE_START"}',
    b'{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"minted"}',
    b'{"type":"THINKING_TEXT_MESSAGE_END"}',
    b'{"type":"THINKING_END"}',
    b'{"type":"REASONING_START","messageId":"thinking-1"}',
    b'{"type":"REASONING_END","messageId":"thinking-1"}',
]
FAILING = [b'{"type":"STATE_DELTA","delta":[{"op":"copy","from":"/toString","path":"/f"}]}']


def frames(run_id: str, body: list[bytes]) -> list[bytes]:
    return [RUN % run_id.encode(), *body, DONE % run_id.encode()]


async def test_the_proxy_records_and_projects_what_the_client_shows(sqlite_url: str) -> None:
    require(node_available(), "Node and @ag-ui/client")
    scripts = {
        name: lambda _request, body=body: sse([b"data: " + f + b"\n\n" for f in body])
        for name, body in {
            "lit": frames("r-lit", LITERALS),
            "bad": frames("r-bad", FAILING),
        }.items()
    }
    async with serving(scripted_upstream(scripts)) as upstream:
        agents = {"lit": f"{upstream}/lit", "bad": f"{upstream}/bad"}
        async with (
            recorder_at(sqlite_url, agents) as rec,
            httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as http,
        ):
            # The client posts a message holding half a pair, which orjson alone refused.
            start = {
                "threadId": "t-lit",
                "runId": "r-lit",
                "messages": [{"id": "u1", "role": "user", "content": "hi \ud83d"}],
                "state": {"start": 1},
            }
            shown = await node_client("run", f"{rec}/agents/lit", start)
            assert shown["error"] is None
            ours = (await http.get("/runs/r-lit/state")).json()
            view = {k: ours[k] for k in ("messages", "state", "pendingInterrupts")}
            assert _renamed(view) == _renamed(
                {k: shown[k] for k in ("messages", "state", "pendingInterrupts")}
            )
            assert shown["state"] == {"z": 1, "n": 9007199254740992, "inf": None, "f": 2}
            run = (await http.get("/runs/r-lit")).json()
            assert run["status"] == "finished" and run["violations"] == []
            replayed = (await http.get("/runs/r-lit/stream")).content
            data = [line[6:] for line in replayed.split(b"\n") if line.startswith(b"data: ")]
            assert data == frames("r-lit", LITERALS)  # the log keeps the agent's bytes

            failed = await node_client("run", f"{rec}/agents/bad", {**start, "runId": "r-bad"})
            assert failed["error"] == "function toString() { [native code] } could not be cloned."
            flagged = (await http.get("/runs/r-bad")).json()["violations"]
            assert [v["seq"] for v in flagged] == [1]
            assert flagged[0]["message"].startswith("Cannot apply STATE_DELTA")


def _renamed(value: Any) -> Any:
    """Minted ids (random UUIDs in the client, derived ones here) named by first appearance."""
    from tests.interop.fuzz.judge import UUID

    names: dict[str, str] = {}
    text = json.dumps(value, sort_keys=True)
    return UUID.sub(lambda m: names.setdefault(m.group(), f"minted-{len(names)}"), text)


async def run_cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "recorder.cli.main",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.parametrize("layout", ["array", "jsonl", "sse"])
async def test_the_cli_reads_literals_only_json_parse_reads(layout: str, tmp_path: Path) -> None:
    body = frames("r", LITERALS)
    files = {
        "array": b"[" + b",\n".join(body) + b"]",
        "jsonl": b"\n".join(body) + b"\n",
        "sse": b"".join(b"data: " + f + b"\n\n" for f in body),
    }
    path = tmp_path / "stream"
    path.write_bytes(files[layout])
    posted = tmp_path / "input.json"
    posted.write_bytes(
        b'{"messages":[{"id":"u1","role":"user","content":"\\ud83d"}],"state":1e400}'
    )
    code, out, err = await run_cli("fold", str(path), "--input", str(posted))
    assert code == 0, err
    folded = json.loads(out)
    assert folded["messages"][0] == {"id": "u1", "role": "user", "content": "\ud83d"}
    assert folded["messages"][1]["content"] == "x\U0001f600y \udbff"
    assert folded["state"] == {"z": 1, "n": 9007199254740992, "inf": None, "f": 2}
    assert folded["problems"] == []
    code, out, err = await run_cli("verify", str(path))
    assert (code, out.strip()) == (0, f"ok: {len(body)} events"), err


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ("[null]", "messages[0] is not an object"),
        ('["hello"]', "messages[0] is not an object"),
        ('{"id": "u1"}', "messages is not an array"),
    ],
)
async def test_the_cli_folds_an_input_no_client_could_post(
    messages: str, problem: str, tmp_path: Path
) -> None:
    path = tmp_path / "stream.jsonl"
    path.write_bytes(b"\n".join(frames("r", LITERALS[:4])))
    posted = tmp_path / "input.json"
    posted.write_text(f'{{"messages": {messages}, "state": {{}}}}')
    code, out, err = await run_cli("fold", str(path), "--input", str(posted))
    assert code == 0 and "Traceback" not in err
    folded = json.loads(out)
    assert folded["problems"][0]["index"] == -1 and problem in folded["problems"][0]["message"]
    assert folded["messages"][-1]["content"] == "x\U0001f600y \udbff"
