"""``recorder import`` (and ``POST /import``) given hostile export files, on both databases:
each is refused with one line naming the line and the field, and leaves nothing behind; a
run imports whole or not at all, nothing is renumbered, and the fixed file imports."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from recorder.errors import RunClosed, StoreUnavailable
from recorder.store import open_store
from recorder.timetravel.transfer import import_lines
from tests.cli.conftest import run_main
from tests.servers import demo_upstream, recorder_at

Lines = list[dict[str, Any]]


def export(run_id: str = "r1", thread_id: str = "t1", events: int = 3) -> Lines:
    run = {
        "kind": "run",
        "runId": run_id,
        "threadId": thread_id,
        "agent": "demo",
        "status": "finished",
        "outcome": "success",
        "error": None,
        "parentRunId": None,
        "parentSeq": None,
        "parentInferred": False,
        "createdAt": 1_700_000_000.5,
        "violations": [],
        "eventCount": events,
        "input": json.dumps({"threadId": thread_id, "runId": run_id, "messages": []}),
    }
    frames = [{"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}]
    frames += [{"type": "CUSTOM", "name": "n", "value": i} for i in range(events - 2)]
    frames.append({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id})
    lines: Lines = [run]
    for seq, frame in enumerate(frames):
        lines.append(
            {
                "kind": "event",
                "runId": run_id,
                "seq": seq,
                "type": frame["type"],
                "origin": "upstream",
                "recordedAt": 1_700_000_001.0 + seq,
                "payload": json.dumps(frame, separators=(",", ":")),
            }
        )
    return lines


def edit(index: int, **changes: Any) -> Callable[[Lines], Lines]:
    def change(lines: Lines) -> Lines:
        line = dict(lines[index])
        for key, value in changes.items():
            if value is DROP:
                line.pop(key, None)
            else:
                line[key] = value
        return [*lines[:index], line, *lines[index + 1 :]]

    return change


DROP = object()

# (what is wrong, the change, the line and field the error must name)
BROKEN: list[tuple[str, Callable[[Lines], Lines], str]] = [
    ("run without runId", edit(0, runId=DROP), "line 1: runId"),
    ("run without threadId", edit(0, threadId=DROP), "line 1: threadId"),
    ("runId with NUL", edit(0, runId="r\x00"), "line 1: runId"),
    ("threadId with a newline", edit(0, threadId="t\n1"), "line 1: threadId"),
    ("runId with a slash", edit(0, runId="a/b"), "line 1: runId"),
    ("runId a number", edit(0, runId=7), "line 1: runId"),
    ("bogus status", edit(0, status="exploded"), "line 1: status"),
    ("no status", edit(0, status=DROP), "line 1: status"),
    ("createdAt text", edit(0, createdAt="yesterday"), "line 1: createdAt"),
    ("createdAt negative", edit(0, createdAt=-5), "line 1: createdAt"),
    ("parentSeq text", edit(0, parentSeq="x"), "line 1: parentSeq"),
    ("parentRunId empty", edit(0, parentRunId=""), "line 1: parentRunId"),
    ("parentInferred text", edit(0, parentInferred="yes"), "line 1: parentInferred"),
    ("bad base64 input", edit(0, input=DROP, inputB64="!!not base64!!"), "line 1: inputB64"),
    ("input a number", edit(0, input=123), "line 1: input"),
    ("input not JSON", edit(0, input="{not json"), "line 1: input"),
    ("input and inputB64", edit(0, inputB64="e30="), "line 1: input"),
    (
        "input nested 300 deep",
        edit(0, input='{"state":' + '{"a":' * 300 + "1" + "}" * 300 + "}"),
        "line 1: input",
    ),
    ("violations text", edit(0, violations="many"), "line 1: violations"),
    ("eventCount negative", edit(0, eventCount=-1), "line 1: eventCount"),
    ("file cut short", lambda lines: lines[:-1], "line 1: eventCount"),
    ("event without seq", edit(2, seq=DROP), "line 3: seq"),
    ("seq as text", edit(2, seq="1"), "line 3: seq"),
    ("seq as a boolean", edit(2, seq=True), "line 3: seq"),
    ("negative seq", edit(2, seq=-1), "line 3: seq"),
    ("huge seq", edit(2, seq=10**20), "line 3: seq"),
    ("duplicate seq", edit(3, seq=1), "line 4: seq"),
    ("gap in seqs", edit(2, seq=2), "line 3: seq"),
    ("event of another run", edit(2, runId="other"), "line 3: runId"),
    ("bad base64 payload", edit(2, payload=DROP, payloadB64="%%%"), "line 3: payloadB64"),
    ("no payload", edit(2, payload=DROP), "line 3: payload"),
    ("payload a number", edit(2, payload=5), "line 3: payload"),
    ("recordedAt text", edit(2, recordedAt="now"), "line 3: recordedAt"),
    ("recordedAt huge", edit(2, recordedAt=1e300), "line 3: recordedAt"),
    ("bogus origin", edit(2, origin="elsewhere"), "line 3: origin"),
    ("type a number", edit(2, type=5), "line 3: type"),
    ("unknown kind", edit(2, kind="note"), "line 3: kind"),
    ("event before any run", lambda lines: lines[1:], "line 1: kind"),
]

RAW: list[tuple[str, bytes, str]] = [
    ("not JSON", b'{"kind": "run", ', "line 1: not JSON"),
    ("an array", b"[1, 2, 3]\n", "line 1: not a JSON object"),
    ("invalid UTF-8", b'{"kind": "run", "runId": "\xff"}\n', "line 1: not JSON"),
]


def jsonl(lines: Lines) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


async def thread_count(db: str) -> int:
    store = await open_store(db)
    try:
        return len((await store.list_threads(limit=500)).items)
    finally:
        await store.close()


async def test_every_broken_file_is_one_line_naming_line_and_field_and_imports_nothing(
    db_url: str, tmp_path: Path
) -> None:
    assert (await run_main("migrate", "--db", db_url)).code == 0
    files = [(what, jsonl(change(export())), where) for what, change, where in BROKEN]
    for number, (what, content, where) in enumerate(files + RAW):
        path = tmp_path / f"broken-{number}.jsonl"
        path.write_bytes(content)
        done = await run_main("import", str(path), "--db", db_url)
        assert done.code == 2, (what, done)
        assert done.out == "", what
        assert done.err.count("\n") == 1 and where in done.err, (what, done.err)
        assert "Traceback" not in done.err and "INSERT" not in done.err, what
    assert await thread_count(db_url) == 0, "a refused file imported something"
    # the file fixed: imported whole, seqs as in the file, and once only
    good = tmp_path / "good.jsonl"
    good.write_bytes(jsonl(export()))
    done = await run_main("import", str(good), "--db", db_url, "--json")
    assert json.loads(done.out) == {
        "runsCreated": 1,
        "runsSkipped": 0,
        "eventsAdded": 3,
        "annotationsRestored": 0,
        "runsPurged": 0,
    }
    again = await run_main("import", str(good), "--db", db_url, "--json")
    assert json.loads(again.out) == {
        "runsCreated": 0,
        "runsSkipped": 1,
        "eventsAdded": 0,
        "annotationsRestored": 0,
        "runsPurged": 0,
    }
    store = await open_store(db_url)
    try:
        run = await store.get_run("r1")
        assert (run.status, run.outcome, run.event_count) == ("finished", "success", 3)
        assert [e.seq for e in await store.read_events("r1")] == [0, 1, 2]
    finally:
        await store.close()


async def test_a_run_broken_midway_imports_not_at_all_and_the_runs_before_it_do(
    db_url: str, tmp_path: Path
) -> None:
    assert (await run_main("migrate", "--db", db_url)).code == 0
    first, second = export("r1", "t1", 4), export("r2", "t2", 5)
    broken = edit(len(second) - 1, seq=9)(second)  # its last event leaves a gap
    path = tmp_path / "two.jsonl"
    path.write_bytes(jsonl(first + broken))
    done = await run_main("import", str(path), "--db", db_url)
    assert done.code == 2 and f"line {len(first) + len(second)}: seq" in done.err
    store = await open_store(db_url)
    try:
        assert (await store.get_run("r1")).event_count == 4
        assert [t.thread_id for t in (await store.list_threads()).items] == ["t1"]
    finally:
        await store.close()
    path.write_bytes(jsonl(first + second))
    done = await run_main("import", str(path), "--db", db_url, "--json")
    assert json.loads(done.out) == {
        "runsCreated": 1,
        "runsSkipped": 1,
        "eventsAdded": 5,
        "annotationsRestored": 0,
        "runsPurged": 0,
    }
    assert await thread_count(db_url) == 2


async def test_binary_payloads_travel_as_base64_and_come_back_byte_exact(
    db_url: str, tmp_path: Path
) -> None:
    assert (await run_main("migrate", "--db", db_url)).code == 0
    lines = export()
    lines[2] = {**lines[2], "payload": None}
    del lines[2]["payload"]
    lines[2]["payloadB64"] = base64.b64encode(b"\xff\xfe not utf-8").decode()
    path = tmp_path / "binary.jsonl"
    path.write_bytes(jsonl(lines))
    assert (await run_main("import", str(path), "--db", db_url)).code == 0
    store = await open_store(db_url)
    try:
        assert (await store.read_events("r1"))[1].payload == b"\xff\xfe not utf-8"
    finally:
        await store.close()


@pytest.mark.parametrize("what, change, where", BROKEN[:: len(BROKEN) // 6 or 1])
async def test_the_http_import_refuses_the_same_files(
    sqlite_url: str, what: str, change: Callable[[Lines], Lines], where: str
) -> None:
    async with demo_upstream() as up, recorder_at(sqlite_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            answer = await client.post("/import", content=jsonl(change(export())))
            assert answer.status_code == 422, (what, answer.text)
            assert where in answer.json()["detail"]
            assert (await client.get("/threads")).json()["threads"] == []
            fixed = await client.post("/import", content=jsonl(export()))
            assert fixed.status_code == 200 and fixed.json()["runsCreated"] == 1


async def test_the_same_file_imported_four_times_at_once_adds_each_event_once(
    db_url: str,
) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=60) as client:
            body = jsonl(export("big", "tb", 2500))  # three append batches
            answers = await asyncio.gather(
                *(client.post("/import", content=body) for _ in range(4))
            )
            codes = sorted(a.status_code for a in answers)
            assert codes[0] == 200 and set(codes) <= {200, 409}, [a.text for a in answers]
            created = [a.json()["runsCreated"] for a in answers if a.status_code == 200]
            assert sum(created) == 1
            run = (await client.get("/runs/big")).json()
            assert (run["eventCount"], run["status"]) == (2500, "finished")
            again = await client.post("/import", content=body)
            assert again.json() == {
                "runsCreated": 0,
                "runsSkipped": 1,
                "eventsAdded": 0,
                "annotationsRestored": 0,
                "runsPurged": 0,
            }


class _ReapedAfterCreate:
    """A store on which a reaper from another owner runs right after each run is created,
    with every heartbeat counted stale (as a long stall between create and append would)."""

    def __init__(self, store: Any, reaper_skips: str) -> None:
        self._store, self._skips = store, reaper_skips
        self.reaped: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def create_run(self, run: Any) -> Any:
        created = await self._store.create_run(run)
        stale = time.time() + 60
        self.reaped += await self._store.mark_incomplete(
            stale_before=stale, exclude_owner=self._skips
        )
        return created


async def test_a_reaper_running_while_a_run_is_imported_leaves_the_importer_s_run_alone(
    db_url: str,
) -> None:
    store = await open_store(db_url, migrate=True)
    try:
        body = jsonl(export("big", "tb", 2500)).splitlines()
        reaping = _ReapedAfterCreate(store, reaper_skips="this-process")
        report = await import_lines(cast(Any, reaping), body, owner="this-process")
        assert (report.runs_created, report.events_added) == (1, 2500)
        assert reaping.reaped == []
        run = await store.get_run("big")
        assert (run.status, run.event_count) == ("finished", 2500)
        # the same import under no owner: the reaper takes the run between its creation
        # and its events, which is why the importing process's owner is given
        other = jsonl(export("big2", "tb2", 5)).splitlines()
        with pytest.raises(RunClosed):
            await import_lines(cast(Any, reaping), other)
        assert reaping.reaped == ["big2"]
    finally:
        await store.close()


class _FailsToAppend:
    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append_batches(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the database went away")


async def test_an_import_failing_after_creating_its_run_leaves_no_run_running(
    db_url: str,
) -> None:
    store = await open_store(db_url, migrate=True)
    try:
        body = jsonl(export("r1", "t1", 4)).splitlines()
        with pytest.raises(StoreUnavailable):
            await import_lines(cast(Any, _FailsToAppend(store)), body, owner="this-process")
        run = await store.get_run("r1")
        assert (run.status, run.event_count) == ("incomplete", 0)
    finally:
        await store.close()
