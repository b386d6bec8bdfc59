"""Export and import: runs with their inputs and events as JSONL, lineage kept, byte-exact.

One line per run (``"kind": "run"``), followed by one line per event (``"kind": "event"``).
Payloads and inputs travel as text when they are UTF-8 and as base64 otherwise, so the
bytes that come back are the bytes that went in. Importing is idempotent: a run that is
already there only takes the events it lacks.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from recorder.errors import InputError, RunNotFound
from recorder.redaction import RUN_INPUT, Redactor, redact
from recorder.store import EventStore, NewEvent, NewRun, Redacted, Run, ThreadFilter
from recorder.store.model import IMPORT, RUNNING, STATUSES

_BATCH = 1000


def _bytes_field(name: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {name + "B64": base64.b64encode(data).decode()}


def _read_bytes(line: dict[str, Any], name: str) -> bytes | None:
    if isinstance(line.get(name + "B64"), str):
        return base64.b64decode(line[name + "B64"])
    value = line.get(name)
    return None if value is None else str(value).encode("utf-8")


async def check_threads(store: EventStore, thread_ids: Sequence[str]) -> None:
    """Raise ``ThreadNotFound`` for the first id that names no thread (before a stream starts)."""
    for thread_id in thread_ids:
        await store.get_thread(thread_id)


async def export_lines(
    store: EventStore, thread_ids: Sequence[str], agents: tuple[str, ...] | None = None
) -> AsyncIterator[bytes]:
    """Every run of the threads (all threads when none are named: only those of ``agents``
    when given), each with its events."""
    if not thread_ids:
        thread_ids = await _all_threads(store, agents)
    for thread_id in thread_ids:
        for run in await store.list_runs(thread_id, inputs=True):
            yield orjson.dumps(_run_line(run)) + b"\n"
            done = -1
            while True:
                page = await store.read_events(run.run_id, gt=done, limit=_BATCH)
                if not page:
                    break
                for event in page:
                    line = {
                        "kind": "event",
                        "runId": event.run_id,
                        "seq": event.seq,
                        "type": event.type,
                        "origin": event.origin,
                        "recordedAt": event.recorded_at,
                        **_bytes_field("payload", event.payload),
                    }
                    yield orjson.dumps(line) + b"\n"
                done = page[-1].seq


async def _all_threads(store: EventStore, agents: tuple[str, ...] | None) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = await store.list_threads(ThreadFilter(agents=agents), limit=500, cursor=cursor)
        ids.extend(t.thread_id for t in page.items)
        if page.cursor is None:
            return ids
        cursor = page.cursor


def _run_line(run: Run) -> dict[str, Any]:
    return {
        "kind": "run",
        "runId": run.run_id,
        "threadId": run.thread_id,
        "agent": run.agent,
        "status": run.status,
        "outcome": run.outcome,
        "error": run.error,
        "parentRunId": run.parent_run_id,
        "parentSeq": run.parent_seq,
        "parentInferred": run.parent_inferred,
        "createdAt": run.created_at,
        "violations": run.violations,
        "eventCount": run.event_count,
        **_bytes_field("input", run.input),
    }


@dataclass(slots=True)
class ImportReport:
    runs_created: int = 0
    runs_skipped: int = 0
    events_added: int = 0


async def split_lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """Lines from a byte stream cut anywhere (an upload read as it arrives)."""
    rest = b""
    async for chunk in chunks:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line
    if rest:
        yield rest


async def _each(lines: Iterable[bytes] | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(lines, AsyncIterable):
        async for line in lines:
            yield line
    else:
        for line in lines:
            yield line


async def import_lines(
    store: EventStore,
    lines: Iterable[bytes] | AsyncIterable[bytes],
    redactor: Redactor | None = None,
) -> ImportReport:
    """Import an export; with ``redactor``, inputs and events are redacted as the proxy
    redacts what it records."""
    importer = _Importer(store, redactor)
    number = 0
    try:
        async for raw in _each(lines):
            number += 1
            if raw.strip():
                await importer.feed(_parse(raw, number), number)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"line {number}: not a line of a recorder export ({exc!r})") from exc
    await importer.close_run()
    return importer.report


def _parse(raw: bytes, number: int) -> dict[str, Any]:
    try:
        line = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"line {number}: not JSON ({exc})") from exc
    if not isinstance(line, dict):
        raise InputError(f"line {number}: not a JSON object")
    return line


class _Importer:
    """Reads an export line by line: a run line opens a run, its event lines follow."""

    def __init__(self, store: EventStore, redactor: Redactor | None = None) -> None:
        self.store = store
        self.redactor = redactor
        self.report = ImportReport()
        self.current: dict[str, Any] | None = None
        self.have = 0  # events the current run already holds
        self.pending: list[NewEvent] = []

    async def feed(self, line: dict[str, Any], number: int) -> None:
        kind = line.get("kind")
        if kind == "run":
            await self.close_run()
            self.current = line
            self.have = await _open_run(self.store, line, self.report, self.redactor)
        elif kind == "event":
            if self.current is None or line.get("runId") != self.current["runId"]:
                raise InputError(f"line {number}: an event outside its run")
            if int(line["seq"]) >= self.have:
                self.pending.append(_event(line, self.redactor))
                if len(self.pending) >= _BATCH:
                    await self.flush()
        else:
            raise InputError(f"line {number}: unknown kind {kind!r}")

    async def flush(self) -> None:
        if self.current is not None and self.pending:
            await self.store.append(self.current["runId"], self.pending)
            self.report.events_added += len(self.pending)
        self.pending = []

    async def close_run(self) -> None:
        line = self.current
        if line is None:
            return
        run = await self.store.get_run(line["runId"])
        if run.status != RUNNING:
            self.pending = []
            return
        await self.flush()
        status = line.get("status")
        if status in STATUSES and status != RUNNING:
            await self.store.set_status(
                line["runId"],
                status,
                outcome=line.get("outcome"),
                error=line.get("error"),
                violations=line.get("violations") or [],
            )


def _event(line: dict[str, Any], redactor: Redactor | None) -> NewEvent:
    payload = _read_bytes(line, "payload") or b""
    kind = line.get("type")
    redacted = None
    if redactor is not None:
        result = redact(kind if isinstance(kind, str) else None, payload, redactor)
        payload, redacted = result.payload, _redacted(result.fired, result.mac)
    return NewEvent(
        payload,
        kind,
        str(line.get("origin") or IMPORT),
        float(line["recordedAt"]) if line.get("recordedAt") is not None else None,
        redacted,
    )


def _redacted(fired: tuple[str, ...], mac: str | None) -> Redacted | None:
    return Redacted(fired, mac) if fired else None


async def _open_run(
    store: EventStore, line: dict[str, Any], report: ImportReport, redactor: Redactor | None
) -> int:
    try:
        existing = await store.get_run(line["runId"])
    except RunNotFound:
        existing = None
    if existing is not None:
        report.runs_skipped += 1
        if existing.status != RUNNING:
            return 1 << 62  # complete already: take nothing more
        return existing.event_count
    posted, input_redacted = _read_bytes(line, "input"), None
    if redactor is not None and posted is not None:
        result = redact(RUN_INPUT, posted, redactor)
        posted, input_redacted = result.payload, _redacted(result.fired, result.mac)
    await store.create_run(
        NewRun(
            run_id=line["runId"],
            thread_id=line["threadId"],
            agent=line.get("agent"),
            input=posted,
            input_redacted=input_redacted,
            parent_run_id=line.get("parentRunId"),
            parent_seq=line.get("parentSeq"),
            parent_inferred=bool(line.get("parentInferred")),
            origin=IMPORT,
            created_at=line.get("createdAt"),
        )
    )
    report.runs_created += 1
    return 0
