"""Logs: a line per ended run, start and stop, an access log, errors with the id their 500
answer carries; text or JSON; and ``recorder serve``'s flags, run as a user runs them."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from recorder.api import create_app
from recorder.config import Settings
from recorder.store import EventStore, open_store
from recorder.telemetry.logs import JsonFormatter, TextFormatter, configure
from tests.cli.conftest import RECORDER, clean_env
from tests.servers import free_port, serving
from tests.telemetry.scripts import run_input, scripted_agent

LOGGERS = ("recorder", "uvicorn", "uvicorn.error", "uvicorn.access", "")  # "": the root


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """The recorder's logs as JSON lines in a buffer; the loggers restored afterwards."""
    saved = [(logging.getLogger(n), logging.getLogger(n).handlers[:]) for n in LOGGERS]
    levels = [(logger, logger.level, logger.propagate) for logger, _ in saved]
    buffer = io.StringIO()
    configure("info", "json", stream=buffer)
    try:
        yield buffer
    finally:
        for logger, handlers in saved:
            logger.handlers = handlers
        for logger, level, propagate in levels:
            logger.setLevel(level)
            logger.propagate = propagate


def lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_another_librarys_warning_is_a_line_of_the_same_format(log_lines: io.StringIO) -> None:
    """asyncpg's pool warns with a traceback during an outage: one JSON line too, never a
    stray traceback among them; a library's info stays out."""
    pool = logging.getLogger("asyncpg.pool")
    try:
        raise ConnectionRefusedError("connect call failed")
    except ConnectionRefusedError:
        pool.warning("Failed to restore the pool connection floor; retrying", exc_info=True)
    logging.getLogger("httpx").info("HTTP Request: POST http://agent/")
    (line,) = lines(log_lines)
    assert (line["logger"], line["level"]) == ("asyncpg.pool", "WARNING")
    assert "ConnectionRefusedError" in json.dumps(line)
    # A handler someone else put on the root (a log shipper) is kept; ours replaced.
    shipper = logging.NullHandler()
    logging.getLogger().addHandler(shipper)
    configure("info", "json", stream=log_lines)
    ours = [h for h in logging.getLogger().handlers if getattr(h, "recorder_configured", False)]
    assert shipper in logging.getLogger().handlers and len(ours) == 1


async def test_one_line_per_ended_run(sqlite_url: str, log_lines: io.StringIO) -> None:
    async with serving(scripted_agent()) as agent:
        agents = {"tools": f"{agent}/tools", "broken": f"{agent}/broken"}
        app = create_app(Settings(db=sqlite_url, agents=agents, access_log=True))
        async with (
            serving(app) as url,
            httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client,
        ):
            await client.post("/agents/tools", json=run_input("t1", "t1-r1"))
            await client.post("/agents/broken", json=run_input("t2", "t2-r1"))
            tools = (await client.get("/runs/t1-r1")).json()
    logged = lines(log_lines)
    runs = {line["run"]: line for line in logged if line["message"] == "run ended"}
    assert set(runs) == {"t1-r1", "t2-r1"}
    done = runs["t1-r1"]
    assert done["level"] == "INFO" and done["logger"] == "recorder.runs"
    assert (done["thread"], done["agent"], done["status"], done["outcome"]) == (
        "t1",
        "tools",
        "finished",
        "success",
    )
    assert done["events"] == tools["eventCount"] and done["bytes"] > 0
    assert 0 < done["first_event_ms"] < done["duration_ms"]
    assert done["code"] is None and done["error"] is None
    broken = runs["t2-r1"]
    assert (broken["level"], broken["status"], broken["code"]) == (
        "WARNING",
        "error",
        "upstream_incomplete",
    )
    messages = [line["message"] for line in logged]
    assert messages[0] == "recorder started" and messages[-1] == "recorder stopped"
    started = logged[0]
    assert started["agents"] == "broken,tools" and started["metrics"] == "/metrics"
    access = [line for line in logged if line["logger"] == "recorder.access"]
    assert [(a["method"], a["path"], a["status"]) for a in access] == [
        ("POST", "/agents/tools", 200),
        ("POST", "/agents/broken", 200),
        ("GET", "/runs/t1-r1", 200),
    ]
    assert all(a["duration_ms"] > 0 and a["client"].startswith("127.0.0.1:") for a in access)


class FailingStore:
    """A real store whose ``failing`` methods raise what no part of the recorder expects."""

    def __init__(self, store: EventStore, *failing: str) -> None:
        self._store = store
        self._failing = failing

    def __getattr__(self, name: str) -> Any:
        if name in self._failing:

            async def fail(*_args: Any, **_kwargs: Any) -> Any:
                raise RuntimeError(f"{name} exploded at /secret/path.py")

            return fail
        return getattr(self._store, name)


async def test_an_unexpected_error_answers_500_with_the_id_of_its_log_line(
    sqlite_url: str, log_lines: io.StringIO
) -> None:
    real = await open_store(sqlite_url, migrate=True)
    store: Any = FailingStore(real, "get_thread", "create_run")
    try:
        settings = Settings(db=sqlite_url, agents={"a": "http://127.0.0.1:9/"})
        async with (
            serving(create_app(settings, store=store)) as url,
            httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client,
        ):
            api = await client.get("/threads/t1")
            proxied = await client.post("/agents/a", json=run_input("t1", "r1"))
    finally:
        await real.close()
    errors = [line for line in lines(log_lines) if line["message"] == "internal error"]
    assert len(errors) == 2
    for answer, line in zip((api, proxied), errors, strict=True):
        assert answer.status_code == 500
        body = answer.json()
        assert body["errorId"] == line["error_id"] and len(body["errorId"]) == 16
        assert body["errorId"] in body["detail"]
        assert "exploded" not in answer.text and "Traceback" not in answer.text
        assert line["level"] == "ERROR" and line["error"] == "RuntimeError"
        assert "exploded at /secret/path.py" in line["exception"]
    assert api.headers["x-error-id"] == api.json()["errorId"]
    assert (errors[0]["method"], errors[0]["path"]) == ("GET", "/threads/t1")
    assert (errors[1]["method"], errors[1]["path"]) == ("POST", "/agents/a")


def test_text_and_json_formats() -> None:
    record = logging.LogRecord("recorder.runs", logging.INFO, __file__, 1, "run ended", (), None)
    record.fields = {"run": "r 1", "events": 3, "code": None, "error": 'said "no"'}
    text = TextFormatter().format(record)
    assert text.endswith(
        ' INFO recorder.runs run ended run="r 1" events=3 code=- error="said \\"no\\""'
    )
    parsed = json.loads(JsonFormatter().format(record))
    assert parsed["run"] == "r 1" and parsed["events"] == 3 and parsed["code"] is None
    assert parsed["time"].endswith("Z") and parsed["level"] == "INFO"


async def test_serve_logs_json_lines_at_the_level_asked(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'served.db'}"

    async def serve(*flags: str) -> list[str]:
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            RECORDER,
            *("serve", "--port", str(port), "--db", db, "--demo-agent", *flags),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=clean_env(),
        )
        assert proc.stdout is not None and proc.stderr is not None
        try:
            await asyncio.wait_for(proc.stdout.readline(), 60)  # "listening"
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
                body = run_input(f"t-{port}", f"r-{port}")
                answer = await c.post("/agents/demo", json=body)
                assert answer.status_code == 200
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
        return (await proc.stderr.read()).decode().splitlines()

    logged = [json.loads(line) for line in await serve("--log-format", "json", "--access-log")]
    messages = [line["message"] for line in logged]
    assert messages[0] == "recorder started" and messages[-1] == "recorder stopped"
    assert "run ended" in messages and "request" in messages
    quiet = await serve("--log-level", "error", "--log-format", "text")
    assert quiet == []
