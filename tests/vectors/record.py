"""Record real AG-UI traffic into ``tests/vectors/<producer>/``.

    python -m tests.vectors.record [PRODUCER ...]     (default: every producer)

Each producer (the demo agent, the Pydantic AI agent, the LangGraph agent of
``tests/producers``) is served on a loopback port behind a tee, and the real
``@ag-ui/client`` HttpAgent drives it through the scenarios of
``tests.producers.scenarios``. Every run becomes a pair of files:

- ``NN_Scenario__Turn_TT.Request.json``: the RunAgentInput the HttpAgent posted (indented);
- ``NN_Scenario__Turn_TT.Response.json``: the events the producer streamed, as a JSON array
  with one event per line, each line the frame's ``data`` exactly as the producer sent it.

``recorded-with.json`` lists the versions that produced them. Needs the ``agents`` extra,
Node and ``npm ci --prefix tests/interop``; everything runs offline.
"""

from __future__ import annotations

import asyncio
import json
import platform
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tests.conftest import INTEROP, node_available
from tests.producers.scenarios import SCENARIOS, agents_installed, create_app
from tests.servers import Exchange, Tee, node_conversation, serving

HERE = Path(__file__).resolve().parent
PACKAGES = ("ag-ui-protocol", "pydantic-ai-slim", "ag-ui-langgraph", "langgraph", "langchain-core")


def response_json(exchange: Exchange) -> bytes:
    """The events as a JSON array, one frame's bytes per line, untouched."""
    return b"[\n" + b",\n".join(exchange.frames()) + b"\n]\n"


def request_json(exchange: Exchange) -> bytes:
    return (json.dumps(exchange.body(), indent=2, ensure_ascii=False) + "\n").encode()


async def record(producer: str) -> int:
    """Record every scenario of ``producer``; the number of runs written."""
    folder = HERE / producer
    if folder.is_dir():
        shutil.rmtree(folder)
    folder.mkdir()
    written = 0
    async with serving(create_app(producer)) as agent:
        tee = Tee(agent + "/")
        async with serving(tee.app()) as teed:
            for index, scenario in enumerate(SCENARIOS[producer], 1):
                turns = await node_conversation(teed + "/", scenario.conversation(producer))
                for number, turn in enumerate(turns, 1):
                    if turn["error"] is not None:
                        raise SystemExit(f"{turn['runId']}: the client failed: {turn['error']}")
                    exchange = tee.by_run(turn["runId"])
                    stem = f"{index:02d}_{scenario.name}__Turn_{number:02d}"
                    (folder / f"{stem}.Request.json").write_bytes(request_json(exchange))
                    (folder / f"{stem}.Response.json").write_bytes(response_json(exchange))
                    written += 1
    return written


def versions() -> dict[str, Any]:
    client = json.loads((INTEROP / "node_modules/@ag-ui/client/package.json").read_text())
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    return {
        "python": platform.python_version(),
        "node": node.stdout.strip(),
        "@ag-ui/client": client["version"],
        **{name: version(name) for name in PACKAGES},
    }


async def main(producers: list[str]) -> None:
    unknown = sorted(set(producers) - set(SCENARIOS))
    if unknown:
        raise SystemExit(
            f"unknown producer(s): {', '.join(unknown)}; known: {', '.join(SCENARIOS)}"
        )
    if not node_available():
        raise SystemExit("needs Node and the reference client: npm ci --prefix tests/interop")
    if not agents_installed():
        raise SystemExit("needs the real producers: pip install -e '.[agents]'")
    for producer in producers:
        print(f"{producer}: {await record(producer)} runs recorded")
    (HERE / "recorded-with.json").write_text(json.dumps(versions(), indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or list(SCENARIOS)))
