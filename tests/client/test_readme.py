"""The README's client example runs as printed against a real recorder."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from tests.servers import conversation, demo_upstream, recorder_at

README = Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    section = README.read_text().split("### Python client", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


async def test_the_readme_example(sqlite_url: str) -> None:
    code = example()
    assert len([line for line in code.splitlines() if line.strip()]) == 5
    async with demo_upstream() as upstream, recorder_at(sqlite_url, {"demo": upstream}) as rec:
        async with httpx.AsyncClient(trust_env=False, timeout=60) as http:
            await conversation(http, rec, "thread-1")
        scope: dict[str, Any] = {}
        source = code.replace("http://127.0.0.1:8000", rec)
        await asyncio.to_thread(exec, compile(source, "README.md", "exec"), scope)
    assert scope["latest"].run_id == "thread-1-r3" and scope["latest"].boundary == "end"
    assert scope["plan"].input["messages"][-1]["content"] == "What about Rome?"
    assert scope["events"][0]["type"] == "RUN_STARTED"
    assert scope["events"][-1]["type"] == "RUN_FINISHED"
