"""The API describes itself: every answer follows the schema /openapi.json declares for it,
and a client generated from that document by a real generator calls the endpoints."""

from __future__ import annotations

import copy
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tests.servers import conversation, demo_upstream, recorder_at

TOKEN = "s3cret"
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def strict(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with every object that lists its properties closed (``additionalProperties:
    false`` unless it says otherwise): an answer holding a field its model does not declare
    fails, as one missing a required field does."""
    spec = copy.deepcopy(spec)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(spec["components"])
    return spec


class Judge:
    """Checks real answers against the document, and which operations were seen."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = strict(spec)
        self.seen: set[tuple[str, str, str]] = set()

    def check(self, method: str, template: str, response: httpx.Response) -> None:
        operation = self.spec["paths"][template][method.lower()]
        status = str(response.status_code)
        assert status in operation["responses"], (method, template, status, response.text)
        documented = operation["responses"][status].get("content", {})
        media = response.headers.get("content-type", "").split(";")[0].strip()
        assert media in documented, (method, template, status, media, list(documented))
        self.seen.add((method.lower(), template, status))
        if media != "application/json":
            return
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.spec["components"],
            **documented[media]["schema"],
        }
        jsonschema.validate(response.json(), schema)


@pytest.fixture
async def served(db_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}, api_token=TOKEN, retention="3650d") as rec,
        httpx.AsyncClient(
            base_url=rec, timeout=60, trust_env=False, headers={"authorization": f"Bearer {TOKEN}"}
        ) as http,
    ):
        await conversation(http, rec, "o1")
        yield rec, http


async def test_every_answer_follows_its_declared_schema(served: Any) -> None:
    rec, http = served
    judge = Judge((await http.get("/openapi.json")).json())
    thread, run = "o1", "o1-r2"
    empty = {"threadId": "e1", "runId": "e1-r1", "messages": []}
    gets: list[tuple[str, str, dict[str, Any]]] = [
        ("/healthz", "/healthz", {}),
        ("/metrics", "/metrics", {}),
        ("/agents", "/agents", {}),
        ("/threads", "/threads", {"limit": 1}),
        ("/threads", "/threads", {"status": "weird"}),
        ("/threads", "/threads", {"limit": 0}),
        (f"/threads/{thread}", "/threads/{thread_id}", {}),
        ("/threads/nope", "/threads/{thread_id}", {}),
        (f"/threads/{thread}/state", "/threads/{thread_id}/state", {}),
        (f"/threads/{thread}/state", "/threads/{thread_id}/state", {"runId": run, "seq": 3}),
        (f"/threads/{thread}/state", "/threads/{thread_id}/state", {"runId": "x"}),
        (f"/threads/{thread}/history", "/threads/{thread_id}/history", {}),
        (f"/threads/{thread}/stream", "/threads/{thread_id}/stream", {"live": "false"}),
        ("/threads/nope/stream", "/threads/{thread_id}/stream", {}),
        (f"/runs/{run}", "/runs/{run_id}", {}),
        ("/runs/nope", "/runs/{run_id}", {}),
        (f"/runs/{run}/events", "/runs/{run_id}/events", {"afterSeq": 2, "limit": 3}),
        (f"/runs/{run}/state", "/runs/{run_id}/state", {"seq": 4}),
        (f"/runs/{run}/state", "/runs/{run_id}/state", {"seq": 999}),
        (f"/runs/{run}/verify", "/runs/{run_id}/verify", {}),
        (f"/runs/{run}/redactions", "/runs/{run_id}/redactions", {}),
        ("/runs/nope/redactions", "/runs/{run_id}/redactions", {}),
        (f"/runs/{run}/stream", "/runs/{run_id}/stream", {"afterSeq": 5}),
        ("/export", "/export", {"threadId": thread}),
        ("/export", "/export", {"threadId": "nope"}),
        ("/audit/verify", "/audit/verify", {"threadId": thread}),
        ("/audit/verify", "/audit/verify", {"threadId": "nope"}),
        ("/audit/receipt", "/audit/receipt", {}),
        ("/audit/log", "/audit/log", {"limit": 5}),
        ("/audit/log", "/audit/log", {"limit": 0}),
    ]
    for path, template, params in gets:
        judge.check("GET", template, await http.get(path, params=params))
    judge.check("GET", "/threads", await http.get(rec + "/threads", headers={"authorization": ""}))

    fork = "/runs/{run_id}/fork"
    judge.check("POST", fork, await http.post(f"/runs/{run}/fork", json={"dryRun": True}))
    judge.check("POST", fork, await http.post(f"/runs/{run}/fork", json={"atSeq": "x"}))
    judge.check("POST", fork, await http.post(f"/runs/{run}/fork", json={"messages": ["hi"]}))
    judge.check("POST", fork, await http.post("/runs/nope/fork", json={}))
    export = (await http.get("/export", params={"threadId": thread})).content
    judge.check("POST", "/import", await http.post("/import", content=export))
    judge.check("POST", "/import", await http.post("/import", content=b"{not json"))
    receipt = (await http.get("/audit/receipt")).content
    judge.check("POST", "/audit/verify", await http.post("/audit/verify", content=receipt))
    judge.check("POST", "/audit/verify", await http.post("/audit/verify", content=b"[]"))
    purge = {"threadIds": [thread], "dryRun": True}
    judge.check("POST", "/admin/purge", await http.post("/admin/purge", json=purge))
    judge.check("POST", "/admin/purge", await http.post("/admin/purge", json={}))
    retention = "/admin/retention"
    judge.check("POST", retention, await http.post(retention, params={"dryRun": "true"}))
    connect = "/agents/{name}/connect"
    posted = {"threadId": "o1", "runId": "o1-next", "messages": []}
    judge.check("POST", connect, await http.post("/agents/demo/connect", json=posted))
    judge.check("POST", connect, await http.post("/agents/demo/connect", json={"runId": "x"}))
    judge.check("POST", connect, await http.post("/agents/nope/connect", json=posted))
    judge.check("POST", connect, await http.post("/agents/demo/connect", content=b"{}"))
    judge.check("POST", "/agents/{name}", await http.post("/agents/demo", json=empty))
    judge.check("POST", "/agents/{name}", await http.post("/agents/demo", json=empty))  # 409
    judge.check("POST", "/agents/{name}", await http.post("/agents/nope", json=empty))
    judge.check("POST", "/agents/{name}", await http.post("/agents/demo", content=b"[]"))

    searched = [
        {"q": "hello"},
        {"q": '"x', "syntax": "true"},
        {"q": "-x", "syntax": "true"},
        {"kind": "bad"},
        {"tag": "team:a", "limit": 1},
    ]
    for params in searched:
        judge.check("GET", "/search", await http.get("/search", params=params))
    judge.check("POST", "/search/reindex", await http.post("/search/reindex"))
    notes = "/threads/{thread_id}/notes"
    judge.check(
        "GET", "/threads/{thread_id}/annotations", await http.get("/threads/o1/annotations")
    )
    judge.check("GET", "/threads/{thread_id}/annotations", await http.get("/threads/x/annotations"))
    judge.check(
        "PATCH", "/threads/{thread_id}/tags", await http.patch("/threads/o1/tags", json={"a": "b"})
    )
    judge.check(
        "PATCH", "/threads/{thread_id}/tags", await http.patch("/threads/o1/tags", json=[1])
    )
    judge.check(
        "PATCH", "/runs/{run_id}/tags", await http.patch(f"/runs/{run}/tags", json={"a": None})
    )
    judge.check("PATCH", "/runs/{run_id}/tags", await http.patch("/runs/x/tags", json={"a": "b"}))
    added = await http.post("/threads/o1/notes", json={"text": "hi", "author": "me"})
    judge.check("POST", notes, added)
    judge.check("POST", notes, await http.post("/threads/o1/notes", json={"text": ""}))
    judge.check(
        "POST", "/runs/{run_id}/notes", await http.post(f"/runs/{run}/notes", json={"text": "x"})
    )
    judge.check(
        "POST", "/runs/{run_id}/notes", await http.post("/runs/x/notes", json={"text": "x"})
    )
    note_id = added.json()["noteId"]
    judge.check("DELETE", "/notes/{note_id}", await http.delete(f"/notes/{note_id}"))
    judge.check("DELETE", "/notes/{note_id}", await http.delete(f"/notes/{note_id}"))
    for target, template in (
        (f"/threads/{thread}", "/threads/{thread_id}"),
        (f"/runs/{run}", "/runs/{run_id}"),
    ):
        judge.check(
            "PUT", template + "/score", await http.put(target + "/score", json={"value": 1})
        )
        judge.check(
            "PUT", template + "/score", await http.put(target + "/score", json={"value": "x"})
        )
        judge.check("DELETE", template + "/score", await http.delete(target + "/score"))
    judge.check("DELETE", "/runs/{run_id}/score", await http.delete("/runs/x/score"))

    diff = "/runs/{run_id}/diff"
    judge.check("GET", diff, await http.get(f"/runs/{run}/diff", params={"from": 1, "to": 3}))
    judge.check("GET", diff, await http.get(f"/runs/{run}/diff", params={"toRun": "o1-r1"}))
    judge.check("GET", diff, await http.get(f"/runs/{run}/diff", params={"from": 999}))
    judge.check("GET", diff, await http.get("/runs/nope/diff"))

    # Every operation the document lists was seen answering, successfully and not.
    operations = {(m, p) for p, ops in judge.spec["paths"].items() for m in ops}
    assert {(m, p) for m, p, s in judge.seen if s == "200"} == operations
    statuses = {s for _m, _p, s in judge.seen}
    assert statuses >= {"200", "401", "404", "409", "422"}


def test_every_documented_error_is_an_error_detail() -> None:
    from recorder.api import create_app
    from recorder.config import Settings

    spec = create_app(Settings(db="sqlite+aiosqlite:///:memory:")).openapi()
    ref = {"$ref": "#/components/schemas/ErrorDetail"}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, answer in operation["responses"].items():
                assert answer.get("content"), (method, path, status)
                for media in answer["content"].values():
                    assert media.get("schema"), (method, path, status)
                if status[0] in "45":
                    assert answer["content"] == {"application/json": {"schema": ref}}


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[Any]:
    """A client package generated from the document by openapi-python-client."""
    from recorder.api import create_app
    from recorder.config import Settings

    spec = tmp_path / "openapi.json"
    spec.write_text(json.dumps(create_app(Settings(db="sqlite+aiosqlite:///:memory:")).openapi()))
    config = tmp_path / "generator.json"
    # JSONL is bytes to a generator that knows no JSONL (its documented escape hatch).
    config.write_text(
        json.dumps({"content_type_overrides": {"application/x-ndjson": "application/octet-stream"}})
    )
    package = tmp_path / "generated_recorder_client"
    done = subprocess.run(
        [
            str(BIN / "openapi-python-client"),
            "generate",
            "--path",
            str(spec),
            "--output-path",
            str(package),
            "--meta",
            "none",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(package.name)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.split(".")[0] == package.name]:
            del sys.modules[name]


async def test_a_generated_client_calls_the_api(served: Any, generated: Any) -> None:
    rec, _http = served
    api = importlib.import_module(f"{generated.__name__}.api")
    threads = importlib.import_module(f"{generated.__name__}.api.threads")
    runs = importlib.import_module(f"{generated.__name__}.api.runs")
    transfer = importlib.import_module(f"{generated.__name__}.api.transfer")
    health = importlib.import_module(f"{generated.__name__}.api.health")
    models = importlib.import_module(f"{generated.__name__}.models")
    types = importlib.import_module(f"{generated.__name__}.types")
    assert api is not None

    def op(group: Any, prefix: str) -> Any:
        (name,) = [
            m.name for m in pkgutil.iter_modules(group.__path__) if m.name.startswith(prefix)
        ]
        return importlib.import_module(f"{group.__name__}.{name}")

    client = generated.AuthenticatedClient(base_url=rec, token=TOKEN)
    async with client as client:
        assert (await op(health, "healthz").asyncio(client=client)).ok is True
        page = await op(threads, "list_threads").asyncio(client=client, limit=5)
        assert [t.thread_id for t in page.threads] == ["o1"]
        assert page.threads[0].latest_status == "finished"
        detail = await op(threads, "get_thread").asyncio("o1", client=client)
        assert [r.run_id for r in detail.runs] == ["o1-r1"]
        assert detail.runs[0].children[0].run_id == "o1-r2"
        missing = await op(threads, "get_thread").asyncio("nope", client=client)
        assert isinstance(missing, models.ErrorDetail) and "nope" in missing.detail
        state = await op(threads, "thread_state").asyncio(
            "o1", client=client, run_id="o1-r1", seq=0
        )
        assert (state.run_id, state.seq) == ("o1-r1", 0)
        history = await op(threads, "thread_history").asyncio("o1", client=client)
        assert [c.boundary for c in history.checkpoints][:2] == ["end", "start"]
        events = await op(runs, "run_events").asyncio("o1-r1", client=client, after_seq=1, limit=2)
        assert [e.seq for e in events.events] == [2, 3] and events.next_after_seq == 3
        run = await op(runs, "get_run").asyncio("o1-r2", client=client)
        assert run.parent_run_id == "o1-r1" and run.status == "interrupted"
        verified = await op(runs, "verify_run").asyncio("o1-r2", client=client)
        assert verified.ok is True and verified.event_count == run.event_count
        plan = await op(runs, "fork_run").asyncio(
            "o1-r1", client=client, body=models.ForkBody(at_seq=3, dry_run=True)
        )
        assert plan.parent_run_id == "o1-r1" and plan.parent_seq == 3
        exported = await op(transfer, "export").asyncio_detailed(client=client, thread_id=["o1"])
        assert exported.status_code == 200 and exported.content.count(b"\n") > 3
        report = await op(transfer, "import").asyncio(
            client=client, body=types.File(payload=exported.content)
        )
        assert (report.runs_created, report.runs_skipped, report.events_added) == (0, 3, 0)
