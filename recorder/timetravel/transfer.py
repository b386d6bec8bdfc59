"""Export and import: runs with their inputs and events as JSONL, lineage kept, byte-exact.

One line per run (``"kind": "run"``), followed by one line per event (``"kind": "event"``);
after a thread's runs, its annotations, when it has any (``"kind": "annotations"``: tags,
notes and scores, which importing puts back as they were).
Payloads and inputs travel as text when they are UTF-8 and as base64 otherwise, so the
bytes that come back are the bytes that went in. Importing is idempotent: a run that is
already there only takes the events it lacks.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from recorder.errors import Conflict, InputError, RunNotFound
from recorder.redaction import RUN_INPUT, Redactor, error_redacted, redact
from recorder.redaction.streamed import split_secrets
from recorder.store import Annotations, EventStore, Note, Redacted, Run, ThreadFilter
from recorder.store.model import INCOMPLETE, RUNNING, Closing, Score, Tag
from recorder.timetravel.export_lines import (
    RunLines,
    add_event,
    check_complete,
    parse_line,
    run_lines,
)
from recorder.wire.events import decode
from recorder.wire.jsontext import well_formed
from recorder.wire.said import Said, run_summary

_BATCH = 1000
_BUSY = 15.0  # seconds: a running run with a heartbeat this fresh has a writer


def _bytes_field(name: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {name + "B64": base64.b64encode(data).decode()}


async def check_threads(store: EventStore, thread_ids: Sequence[str]) -> None:
    """Raise ``ThreadNotFound`` for the first id that names no thread (before a stream starts)."""
    for thread_id in thread_ids:
        await store.get_thread(thread_id)


async def export_lines(
    store: EventStore, thread_ids: Sequence[str], agents: tuple[str, ...] | None = None
) -> AsyncIterator[bytes]:
    """Every run of the threads (all threads when none are named), each with its events."""
    if not thread_ids:
        thread_ids = await _all_threads(store, agents)
    for thread_id in dict.fromkeys(thread_ids):  # each once, in the order named
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
        saved = await store.annotations(thread_id)
        if saved.tags or saved.notes or saved.scores:
            yield orjson.dumps(_annotations_line(saved)) + b"\n"


def _annotations_line(saved: Annotations) -> dict[str, Any]:
    return {
        "kind": "annotations",
        "threadId": saved.thread_id,
        "tags": [
            {"runId": t.run_id, "key": t.key, "value": t.value, "updatedAt": t.updated_at}
            for t in saved.tags
        ],
        "notes": [
            {
                "noteId": n.note_id,
                "runId": n.run_id,
                "text": n.text,
                "author": n.author,
                "createdAt": n.created_at,
            }
            for n in saved.notes
        ],
        "scores": [
            {"runId": s.run_id, "value": s.value, "author": s.author, "updatedAt": s.updated_at}
            for s in saved.scores
        ],
    }


def _annotations(line: dict[str, Any]) -> Annotations:
    thread_id = str(line["threadId"])

    def run(item: dict[str, Any]) -> str | None:
        return None if item.get("runId") is None else str(item["runId"])

    return Annotations(
        thread_id,
        [
            Tag(thread_id, run(t), str(t["key"]), str(t["value"]), float(t["updatedAt"]))
            for t in line.get("tags") or []
        ],
        [
            Note(
                str(n["noteId"]),
                thread_id,
                run(n),
                str(n["text"]),
                None if n.get("author") is None else str(n["author"]),
                float(n["createdAt"]),
            )
            for n in line.get("notes") or []
        ],
        [
            Score(
                thread_id,
                run(s),
                float(s["value"]),
                None if s.get("author") is None else str(s["author"]),
                float(s["updatedAt"]),
            )
            for s in line.get("scores") or []
        ],
    )


async def _all_threads(store: EventStore, agents: tuple[str, ...] | None) -> list[str]:
    """Every thread (only those all of whose runs went through ``agents``, when given)."""
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
        "finishedAt": run.finished_at,
        "violations": run.violations,
        "eventCount": run.event_count,
        **_bytes_field("input", run.input),
    }


@dataclass(slots=True)
class ImportReport:
    runs_created: int = 0
    runs_skipped: int = 0
    events_added: int = 0
    annotations_restored: int = 0  # threads whose annotations were put back
    runs_purged: int = 0  # runs a purge erased after they were exported: not brought back


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
    owner: str | None = None,
) -> ImportReport:
    """Import an export. Each run is checked whole (its line and every event line) before
    any of it is written: a run imports whole or not at all, and a problem is an
    ``InputError`` naming its line and field; the runs before it stay imported, so the
    same file, fixed, imports the rest. With ``redactor``, inputs and events are redacted
    as the proxy redacts what it records. ``owner``: the importing process's owner, given
    to the runs it creates, so its own reaper leaves them alone while they are written."""
    report = ImportReport()
    erased = await _erased(store)
    current: RunLines | None = None
    number = 0
    async for raw in _each(lines):
        number += 1
        if not raw.strip():
            continue
        line = parse_line(raw, number)
        kind = line.get("kind")
        if kind == "run":
            if current is not None:
                await _write(store, current, report, redactor, owner, erased)
            current = run_lines(line, number)
        elif kind == "event":
            if current is None:
                raise InputError(f"line {number}: kind: an event before any run line")
            add_event(current, line, number)
        elif kind == "annotations":
            if current is not None:
                await _write(store, current, report, None, owner, erased)
                current = None
            try:
                saved = _annotations(line)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise InputError(f"line {number}: annotations: {exc!r}") from exc
            purged_at = erased.threads.get(saved.thread_id)
            if purged_at is not None:  # what was annotated before the erasure stays erased
                saved = Annotations(
                    saved.thread_id,
                    [t for t in saved.tags if t.updated_at > purged_at],
                    [n for n in saved.notes if n.created_at > purged_at],
                    [s for s in saved.scores if s.updated_at > purged_at],
                )
                if not (saved.tags or saved.notes or saved.scores):
                    continue
            await store.restore_annotations(saved)
            report.annotations_restored += 1
        else:
            raise InputError(
                f'line {number}: kind: must be "run", "event" or "annotations", got {kind!r}'
            )
    if current is not None:
        await _write(store, current, report, redactor, owner, erased)
    return report


@dataclass
class _Erased:
    runs: dict[str, float]  # run id -> when a purge erased it (the latest)
    threads: dict[str, float]  # thread id -> the same


async def _erased(store: EventStore) -> _Erased:
    """What purges erased, from their tombstones: an export made before an erasure must
    not bring it back."""
    runs: dict[str, float] = {}
    threads: dict[str, float] = {}
    for tombstone in await store.tombstones():
        for thread in tombstone.detail:
            thread_id = str(thread.get("threadId"))
            threads[thread_id] = max(threads.get(thread_id, 0.0), tombstone.at)
            for run in thread.get("runs", []):
                run_id = str(run.get("runId"))
                runs[run_id] = max(runs.get(run_id, 0.0), tombstone.at)
    return _Erased(runs, threads)


async def rebuild_summaries(store: EventStore, redactor: Redactor | None) -> int:
    """Each thread's summary (derived data) built again from its latest run, when that run
    has closed (a running one's recorder writes it when it closes); the number rebuilt."""
    count = 0
    latest: list[tuple[str, str]] = []  # (thread, its latest run), listed before any write
    cursor = None
    while True:
        listed = await store.list_threads(limit=500, cursor=cursor)
        latest += [(t.thread_id, t.latest_run_id) for t in listed.items if t.latest_run_id]
        if listed.cursor is None:
            break
        cursor = listed.cursor
    for thread_id, run_id in latest:
        run = await store.get_run(run_id)
        if run.status == RUNNING:
            continue
        text = await summary_of(store, run, redactor)
        if text is not None:
            await store.set_summary(thread_id, text)
            count += 1
    return count


async def summary_of(
    store: EventStore, run: Run, redactor: Redactor | None, *, redacting: bool = False
) -> str | None:
    """The summary a thread whose latest run is ``run`` keeps (what it said), redacted as
    a whole; ``redacting``: its input and each event redacted first, as the proxy would
    have stored them (a redaction of what was recorded without these rules)."""

    def stored(kind: str | None, payload: bytes) -> bytes:
        return redact(kind, payload, redactor).payload if redacting and redactor else payload

    posted = stored(RUN_INPUT, run.input) if run.input is not None else None
    said = Said.of(decode(posted) if posted is not None else None)
    done = -1
    while not said.full:
        page = await store.read_events(run.run_id, gt=done, limit=_BATCH)
        if not page:
            break
        for event in page:
            said.feed(stored(event.type, event.payload))
        done = page[-1].seq
    text = said.text()
    return None if text is None else _kept(text, redactor)


def _kept(text: str, redactor: Redactor | None) -> str:
    """A summary's text as it is kept: redacted as a whole (a secret split across deltas
    is whole in it)."""
    return well_formed(redactor.text(text) if redactor is not None else text)


async def _summary(store: EventStore, run: RunLines, redactor: Redactor | None) -> str | None:
    """The thread's summary as the proxy keeps it (what its latest run said), when the run
    is its thread's latest: searching threads by text finds imported ones."""
    if (await store.get_thread(run.run.thread_id)).latest_run_id != run.run.run_id:
        return None
    posted = decode(run.run.input) if run.run.input is not None else None
    text = run_summary(posted, (event.payload for event in run.events))
    return None if text is None else _kept(text, redactor)


def _redact(run: RunLines, redactor: Redactor) -> None:
    """The run's input, events and error as the proxy would have stored them."""
    if run.error:
        run.error = error_redacted(run.error, redactor)
    if run.run.input is not None:
        result = redact(RUN_INPUT, run.run.input, redactor)
        if result.fired:
            redacted = Redacted(result.fired, result.mac)
            run.run = replace(run.run, input=result.payload, input_redacted=redacted)
    originals = [event.payload for event in run.events]
    for i, event in enumerate(run.events):
        result = redact(event.type, event.payload, redactor)
        if result.fired:
            redacted = Redacted(result.fired, result.mac)
            run.events[i] = event._replace(payload=result.payload, redacted=redacted)
    # What deltas hold together, as a recorder redacts it behind a run it recorded.
    split = split_secrets(
        ((i, event.type, originals[i]) for i, event in enumerate(run.events)),
        redactor,
        stored={i: e.payload for i, e in enumerate(run.events) if e.redacted is not None},
    )
    for i, payload in split.payloads.items():
        event = run.events[i]
        before = event.redacted.rules if event.redacted is not None else ()
        rules = tuple(sorted({*before, *split.rules[i]}))
        redacted = Redacted(rules, redactor.mac(originals[i]))
        run.events[i] = event._replace(payload=payload, redacted=redacted)


async def _write(
    store: EventStore,
    run: RunLines,
    report: ImportReport,
    redactor: Redactor | None = None,
    owner: str | None = None,
    erased: _Erased | None = None,
) -> None:
    """Write one checked run: created with all its events and its status, or, when it is
    there already, only the events it lacks (and its status, if it was still running).
    The events and the close are one transaction, so a run created here is never seen
    closed halfway by a reaper (nor resumed twice). A run a purge erased after it was
    created (``erased``) is not brought back: counted, and left out."""
    check_complete(run)
    purged_at = None if erased is None else erased.runs.get(run.run.run_id)
    created = run.run.created_at
    if purged_at is not None and (created is None or created <= purged_at):
        report.runs_purged += 1
        return
    if redactor is not None:
        _redact(run, redactor)
    run_id = run.run.run_id
    try:
        existing = await store.get_run(run_id)
    except RunNotFound:
        existing = None
    if existing is None:
        await store.create_run(run.run if owner is None else replace(run.run, owner=owner))
        report.runs_created += 1
        have = 0
    else:
        report.runs_skipped += 1
        if existing.status != RUNNING:
            return  # complete already: takes nothing more
        if existing.heartbeat_at is not None and time.time() - existing.heartbeat_at < _BUSY:
            # Being recorded, or imported by another import, right now: events added here
            # as well would be added twice (each append takes the next seqs).
            raise Conflict(
                f"run {run_id!r} is being recorded or imported right now; import again once "
                "it has ended"
            )
        have = existing.event_count
    events = run.events[have:]
    batches = [(run_id, events[i : i + _BATCH]) for i in range(0, len(events), _BATCH)]
    closes = []
    if run.status != RUNNING:
        closes.append(
            Closing(
                run_id,
                run.status,
                run.outcome,
                run.error,
                run.violations,
                summary=await _summary(store, run, redactor),
                finished_at=run.finished_at,
            )
        )
    if not batches and not closes:
        return
    try:
        # (A run of no events too: its close, with its end time and summary, is the same.)
        await store.append_batches(batches, closes)
    except BaseException:
        if existing is None and owner is not None:
            # Created under this process's owner, which its reaper skips: close it here.
            with contextlib.suppress(Exception):
                await store.set_status(run_id, INCOMPLETE)
        raise
    report.events_added += len(events)
