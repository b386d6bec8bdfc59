"""Errors the recorder cannot explain: a 500 that says "internal error" with an id, and
nothing more (no SQL, parameters, driver message or traceback); the log line carries the
id and the detail."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from recorder.api import create_app
from recorder.config import Settings
from recorder.errors import StoreError
from recorder.store import EventStore, open_store
from tests.servers import demo_upstream, serving

LEAK = "INSERT INTO runs (run_id) VALUES ($1) -- secret-param; Traceback (most recent call)"


class BrokenStore:
    """A real store whose reads and run creation fail as a bug or an unknown driver error."""

    def __init__(self, inner: EventStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def get_run(self, run_id: str) -> Any:
        raise RuntimeError(LEAK)

    async def list_threads(self, *args: Any, **kwargs: Any) -> Any:
        try:
            raise ValueError(LEAK)
        except ValueError as exc:
            raise StoreError("the database failed to complete the operation") from exc

    async def create_run(self, run: Any) -> Any:
        raise KeyError(LEAK)


async def test_a_500_says_internal_error_with_an_id_the_log_carries(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    inner = await open_store(db_url, migrate=True)
    try:
        async with demo_upstream() as up:
            settings = Settings(db=db_url, agents={"demo": up})
            app = create_app(settings, store=BrokenStore(inner))  # type: ignore[arg-type]
            with caplog.at_level(logging.ERROR, logger="recorder.api"):
                async with serving(app) as rec, httpx.AsyncClient(base_url=rec) as client:
                    answers = [
                        await client.get("/runs/r"),
                        await client.get("/threads"),
                        await client.post("/agents/demo", json={"threadId": "t", "runId": "r"}),
                    ]
                    assert (await client.get("/healthz")).status_code == 200
    finally:
        await inner.close()
    logged = {getattr(r, "fields", {}).get("error_id"): r for r in caplog.records}
    for answer in answers:
        assert answer.status_code == 500
        body = answer.json()
        assert set(body) == {"detail", "errorId"}
        assert body["detail"].startswith("internal error (id ")
        assert answer.headers.get("x-error-id", body["errorId"]) == body["errorId"]
        for leaked in ("INSERT", "secret-param", "Traceback", "$1"):
            assert leaked not in answer.text
        record = logged[body["errorId"]]
        assert record.exc_info is not None  # the detail is in the log, not the answer
