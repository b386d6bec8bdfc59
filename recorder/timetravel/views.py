"""The answers to the questions the API and the CLI ask of recorded data, one function each.

Each returns a plain dict in the shape of its model in ``recorder.models`` (camelCase, times
as aware datetimes): the API sends it as it is, serialized by orjson (a state can run to
megabytes, and validating it into a model first would cost more than sending it), and the
CLI's database backend validates it into the model, so that a question asked of the
database and of a server gets the same answer. Inputs are checked here, once, for both.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from recorder.errors import InputError, RunNotFound
from recorder.models import RUN_STATUSES, ForkPlan
from recorder.reference.check import verify_frames
from recorder.reference.projector import Parts
from recorder.store import EventStore, Redaction, Run, Thread, ThreadFilter
from recorder.timetravel.fork import ForkPlan as Plan
from recorder.timetravel.history import History, Located
from recorder.timetravel.transfer import ImportReport
from recorder.wire.events import RecordedEvent, decode
from recorder.wire.jsontext import dump

_PAGE = 2000
_MAX_EPOCH = 1e11  # seconds: past the year 5000, and within every database's range


def moment(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def run_view(run: Run, *, with_input: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {
        "runId": run.run_id,
        "threadId": run.thread_id,
        "agent": run.agent,
        "status": run.status,
        "outcome": run.outcome,
        "error": run.error,
        "parentRunId": run.parent_run_id,
        "parentSeq": run.parent_seq,
        "parentInferred": run.parent_inferred,
        "origin": run.origin,
        "eventCount": run.event_count,
        "createdAt": moment(run.created_at),
        "finishedAt": moment(run.finished_at),
        "durationMs": None
        if run.finished_at is None
        else round((run.finished_at - run.created_at) * 1000, 3),
        "violations": run.violations,
    }
    if with_input:
        view["input"] = decode(run.input) if run.input is not None else None
    return view


def thread_view(thread: Thread) -> dict[str, Any]:
    source = thread.source
    return {
        "threadId": thread.thread_id,
        "agent": thread.agent,
        "createdAt": moment(thread.created_at),
        "updatedAt": moment(thread.updated_at),
        "runCount": thread.run_count,
        "latestRunId": thread.latest_run_id,
        "latestStatus": thread.latest_status,
        "summary": (thread.summary or "")[-280:] or None,
        "forkedFrom": None
        if source is None
        else {"threadId": source.thread_id, "runId": source.run_id, "seq": source.seq},
    }


def event_view(event: RecordedEvent) -> dict[str, Any]:
    parsed = decode(event.payload)
    return {
        "position": event.position,
        "seq": event.seq,
        "runId": event.run_id,
        "type": event.type,
        "origin": event.origin,
        "recordedAt": moment(event.recorded_at),
        "event": parsed,
        "raw": None if parsed is not None else event.payload.decode("utf-8", "replace"),
    }


def run_tree(runs: list[Run]) -> list[dict[str, Any]]:
    """The runs as a forest: each node holds its children (forks and follow-ups)."""
    nodes = {r.run_id: {**run_view(r, with_input=False), "children": []} for r in runs}
    roots: list[dict[str, Any]] = []
    for run in runs:
        parent = nodes.get(run.parent_run_id or "")
        (parent["children"] if parent is not None else roots).append(nodes[run.run_id])
    return roots


def plan_view(plan: Plan) -> dict[str, Any]:
    view = ForkPlan(
        agent=plan.agent,
        input={},
        parent_run_id=plan.parent_run_id,
        parent_seq=plan.parent_seq,
        strategy=plan.strategy,
        thread_id=plan.thread_id,
    ).to_json()
    # The input as it is: pydantic would walk it (and refuse a state nested 300 deep).
    return {**view, "input": plan.input}


def import_view(report: ImportReport) -> dict[str, Any]:
    return {
        "runsCreated": report.runs_created,
        "runsSkipped": report.runs_skipped,
        "eventsAdded": report.events_added,
        "annotationsRestored": report.annotations_restored,
        "runsPurged": report.runs_purged,
    }


def parse_time(value: str | None, name: str) -> float | None:
    """Epoch seconds or an ISO-8601 time (naive: UTC)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds) or abs(seconds) > _MAX_EPOCH:
            raise InputError(f"{name} must be epoch seconds within 10^11, got {value!r}")
        return seconds
    try:
        when = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InputError(
            f"{name} must be an ISO-8601 time or epoch seconds, got {value!r}"
        ) from exc
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


async def list_threads(
    store: EventStore,
    *,
    agent: str | None = None,
    status: str | None = None,
    since: str | None = None,
    until: str | None = None,
    text: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    tags: tuple[tuple[str, str], ...] = (),
    agents: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """A page of threads; ``agents``: only threads all of whose runs went through them."""
    if status is not None and status not in RUN_STATUSES:
        raise InputError(f"status must be one of {', '.join(RUN_STATUSES)}")
    if not 1 <= limit <= 500:
        raise InputError(f"limit must be 1 to 500, got {limit}")
    filters = ThreadFilter(
        agent,
        status,
        parse_time(since, "since"),
        parse_time(until, "until"),
        text,
        tags=tags,
        agents=agents,
    )
    page = await store.list_threads(filters, limit=limit, cursor=cursor)
    return {"threads": [thread_view(t) for t in page.items], "nextCursor": page.cursor}


async def thread_detail(store: EventStore, thread_id: str) -> dict[str, Any]:
    thread = await store.get_thread(thread_id)
    runs = await store.list_runs(thread_id)
    forks = await store.list_forks(thread_id)
    return {
        **thread_view(thread),
        "runs": run_tree(runs),
        "forks": [thread_view(fork) for fork in forks],
    }


async def run_detail(store: EventStore, run_id: str) -> dict[str, Any]:
    return run_view(await store.get_run(run_id))


async def events_page(
    store: EventStore, run_id: str, *, after_seq: int = -1, limit: int = 1000
) -> dict[str, Any]:
    check_after_seq(after_seq)
    if not 1 <= limit <= 10_000:
        raise InputError(f"limit must be 1 to 10000, got {limit}")
    run = await store.get_run(run_id, input=False)
    events = await store.read_events(run_id, gt=after_seq, limit=limit)
    more = bool(events) and events[-1].seq < run.event_count - 1
    return {
        "runId": run_id,
        "events": [event_view(e) for e in events],
        "nextAfterSeq": events[-1].seq if more else None,
    }


# The largest seq a parameter may name: the largest the ``seq`` column holds (a 32-bit
# integer on PostgreSQL, which refuses to even compare it with a larger number), far past
# any run's last event (``max_events_per_run``).
MAX_SEQ = (1 << 31) - 1


def check_after_seq(after_seq: int, name: str = "afterSeq") -> None:
    if not -1 <= after_seq <= MAX_SEQ:
        raise InputError(f"{name} must be -1 to {MAX_SEQ}, got {after_seq}")


def frame_id(value: str) -> tuple[str, int]:
    """A thread stream's frame id, ``<runId>:<seq>`` (as ``Last-Event-ID`` sends it back)."""
    run_id, colon, seq = value.rpartition(":")
    try:
        after = int(seq) if colon and run_id else None
    except ValueError:
        after = None
    if after is None:
        raise InputError(f"Last-Event-ID must be <runId>:<seq>, got {value[:60]!r}")
    check_after_seq(after, "Last-Event-ID's seq")
    return run_id, after


def check_seq(run: Run, seq: int | None) -> None:
    """A point inside the run: -1 (before its first event) to its last event."""
    if seq is not None and not -1 <= seq < run.event_count:
        raise InputError(
            f"seq {seq} is outside run {run.run_id!r} (events 0..{run.event_count - 1}; "
            "-1 is before the first)"
        )


async def run_state(
    store: EventStore, history: History, run_id: str, *, seq: int | None = None
) -> dict[str, Any]:
    """Messages, state and pending interrupts after event ``seq`` (default: the end)."""
    head, located = await _run_point(history, run_id, seq)
    return {**head, **(await _projected(history, located))}


async def run_state_body(
    store: EventStore, history: History, run_id: str, *, seq: int | None = None
) -> bytes:
    """``run_state`` written as a response body."""
    return b"".join(await run_state_parts(store, history, run_id, seq=seq))


async def run_state_parts(
    store: EventStore, history: History, run_id: str, *, seq: int | None = None
) -> Parts:
    """``run_state`` written, in pieces to send in order (``History.answer_parts``)."""
    head, located = await _run_point(history, run_id, seq)
    return await history.answer_parts(located, head)


async def thread_state(
    store: EventStore,
    history: History,
    thread_id: str,
    *,
    run_id: str | None = None,
    seq: int | None = None,
) -> dict[str, Any]:
    """The thread at a point of one of its runs (default: the end of its latest run)."""
    head, located = await _thread_point(store, history, thread_id, run_id, seq)
    if located is None:
        return _without_runs(head)
    return {**head, **(await _projected(history, located))}


async def thread_state_body(
    store: EventStore,
    history: History,
    thread_id: str,
    *,
    run_id: str | None = None,
    seq: int | None = None,
) -> bytes:
    """``thread_state`` written as a response body."""
    parts = await thread_state_parts(store, history, thread_id, run_id=run_id, seq=seq)
    return b"".join(parts)


async def thread_state_parts(
    store: EventStore,
    history: History,
    thread_id: str,
    *,
    run_id: str | None = None,
    seq: int | None = None,
) -> Parts:
    """``thread_state`` written, in pieces to send in order (``History.answer_parts``)."""
    head, located = await _thread_point(store, history, thread_id, run_id, seq)
    if located is None:
        return [dump(_without_runs(head))]
    return await history.answer_parts(located, head)


async def _run_point(
    history: History, run_id: str, seq: int | None
) -> tuple[dict[str, Any], Located]:
    # Without its input: a checkpoint usually answers (read with the run, in one query),
    # and the projection reads the input only when it folds from the run's start.
    located = await history.locate(run_id, seq)
    check_seq(located.run, seq)
    return {"threadId": located.run.thread_id, "runId": run_id, "seq": seq}, located


async def _thread_point(
    store: EventStore, history: History, thread_id: str, run_id: str | None, seq: int | None
) -> tuple[dict[str, Any], Located | None]:
    thread = await store.get_thread(thread_id)
    if run_id == "":  # named, and empty: no run has that id (not "the latest")
        raise RunNotFound(run_id)
    run_id = run_id or thread.latest_run_id
    if run_id is None:
        if seq is not None:
            raise InputError(f"thread {thread_id!r} has no runs: there is no seq {seq}")
        return {"threadId": thread_id, "runId": None, "seq": None}, None
    located = await history.locate(run_id, seq)
    if located.run.thread_id != thread_id:
        raise InputError(f"run {run_id!r} is not in thread {thread_id!r}")
    check_seq(located.run, seq)
    return {"threadId": thread_id, "runId": run_id, "seq": seq}, located


def _without_runs(head: dict[str, Any]) -> dict[str, Any]:
    return {**head, "messages": [], "state": {}, "pendingInterrupts": [], "problems": []}


async def _projected(history: History, located: Located) -> dict[str, Any]:
    return (await history.project(located.run, located.seq, located=located)).to_json()


async def thread_history(
    store: EventStore, history: History, thread_id: str, *, limit: int = 100
) -> dict[str, Any]:
    """The thread at every run boundary, newest first: each run's end (when it has events)
    and its start (what its agent was given), as LangGraph lists a thread's checkpoints."""
    if not 1 <= limit <= 1000:
        raise InputError(f"limit must be 1 to 1000, got {limit}")
    await store.get_thread(thread_id)
    points = [
        (run, seq)
        # Without their inputs: a run's end is its checkpoint, and its start (the posted
        # input) is read for the points listed only.
        for run in reversed(await store.list_runs(thread_id))
        for seq in ([run.event_count - 1, -1] if run.event_count else [-1])
    ]
    checkpoints = [await _checkpoint(history, run, seq) for run, seq in points[:limit]]
    return {"threadId": thread_id, "checkpoints": checkpoints}


async def _checkpoint(history: History, run: Run, seq: int) -> dict[str, Any]:
    at = await history.project(run, seq)
    return {
        "runId": run.run_id,
        "seq": seq,
        "boundary": "start" if seq == -1 else "end",
        "status": run.status,
        "createdAt": moment(run.created_at),
        "parentRunId": run.parent_run_id,
        "parentSeq": run.parent_seq,
        "messages": at.messages,
        "state": at.state,
        "pendingInterrupts": at.pending_interrupts,
    }


async def verify_run(store: EventStore, run_id: str) -> dict[str, Any]:
    """The reference client's checks over the run's recorded events, in order."""
    run = await store.get_run(run_id, input=False)
    frames: list[bytes] = []
    done = -1
    while True:
        page = await store.read_events(run_id, gt=done, limit=_PAGE)
        if not page:
            break
        frames.extend(e.payload for e in page)
        done = page[-1].seq
    return verification(run.run_id, frames)


def verification(run_id: str | None, frames: list[bytes]) -> dict[str, Any]:
    found = verify_frames(frames)
    return {
        "runId": run_id,
        "eventCount": len(frames),
        "ok": not found,
        "violations": [{"index": v.index, "type": v.type, "message": v.message} for v in found],
    }


def redactions_view(run_id: str, redactions: list[Redaction]) -> dict[str, Any]:
    return {
        "runId": run_id,
        "redactions": [
            {
                "seq": r.seq,
                "rules": list(r.rules),
                "originalMac": r.mac,
                "recordedAt": moment(r.recorded_at),
            }
            for r in redactions
        ],
    }
