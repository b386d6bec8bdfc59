"""The runs of one upstream response: which run each frame belongs to, and how each run closes.

An agent may stream several runs in one response: a RUN_STARTED after a run's terminal
event begins the next run, created then (its parent: the run before, unless it names one).
The part of the response that belongs to one run is a ``Segment``:

    OPEN ──RUN_FINISHED or RUN_ERROR (the agent's, or one of the recorder's)──► ENDED
      │                                                                          │
      └──────────────────────────── its status is written ─────────────────► CLOSED

An ENDED run still takes the frames that follow it, up to a new run's RUN_STARTED (they
are recorded with the run they came in); the recorder never adds a RUN_ERROR to it. A
CLOSED run is never written again. A run whose last frames share a batch with a later
run's is closed as soon as that batch is committed; every other run when the response is
over.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson

from recorder.errors import Conflict
from recorder.redaction import Redactor
from recorder.reference.check import StreamCheck
from recorder.store import Closing, EventStore, NewEvent, NewRun, Redacted
from recorder.store.model import RECORDER, UPSTREAM
from recorder.wire.events import decode
from recorder.wire.ids import id_problem
from recorder.wire.jsontext import well_formed
from recorder.wire.said import SUMMARY_LIMIT, Said
from recorder.wire.sse import encode_frame

_STATUS = {"interrupt": "interrupted", "cancelled": "cancelled", "error": "error"}
# A NewEvent made without the named tuple's generated ``__new__`` (a third of the cost):
# the proxy makes one per streamed event. Every field given, in order.
_new_event = partial(tuple.__new__, NewEvent)


def recorder_error(message: str, code: str) -> bytes:
    """A RUN_ERROR of the recorder's own (``code`` says what happened, e.g. ``upstream_idle``)."""
    return orjson.dumps({"type": "RUN_ERROR", "message": message, "code": code})


def parsed(data: bytes) -> dict[str, Any] | None:
    """The frame as the JSON object it holds (read as ``JSON.parse`` would), or None: what
    a run's check is given (the frame's bytes, when None)."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return decode(data)
    return obj if type(obj) is dict else None


def _redacted(fired: tuple[str, ...], mac: str | None) -> Redacted | None:
    return Redacted(fired, mac) if fired else None


class SegmentPhase(enum.Enum):
    OPEN = "open"
    ENDED = "ended"
    CLOSED = "closed"


class Summary(Said):
    """The text said in a thread (posted messages, then streamed deltas), up to a limit:
    ``Said``, fed by ``Segment.observe`` from the objects it parsed already."""

    __slots__ = ("redactor",)

    def __init__(self, parts: list[str], redactor: Redactor | None = None) -> None:
        super().__init__(parts)
        # Redaction applies to the stored events and, here, to the text as a whole too: a
        # secret split across two deltas is whole in it.
        self.redactor = redactor

    def text(self) -> str | None:
        said = super().text()
        if said is None:
            return None
        return well_formed(self.redactor.text(said) if self.redactor is not None else said)


@dataclass(slots=True)
class Segment:
    """The part of one upstream response that belongs to one run."""

    run_id: str
    thread_id: str
    phase: SegmentPhase = SegmentPhase.OPEN
    next_seq: int = 0
    outcome: str | None = None  # once ENDED: RUN_FINISHED's outcome type, or "error"
    error: str | None = None
    code: str | None = None  # the code of the RUN_ERROR of the recorder's that ended it
    size: int = 0  # bytes of event data
    check: StreamCheck = field(default_factory=StreamCheck)
    problems: list[dict[str, Any]] = field(default_factory=list)

    def observe(self, data: bytes, summary: Summary) -> NewEvent:
        """The frame ``data`` (the next of this run) as an event to record; a terminal event
        ends the run, a lifecycle violation is noted, text goes to ``summary``."""
        self.size += len(data)
        obj = parsed(data)
        redactor = summary.redactor
        if obj is None:
            self._check(data)
            if redactor is None:
                return NewEvent(data, None)
            result, _ = redactor.event(None, None, data)
            return NewEvent(result.payload, None, redacted=_redacted(result.fired, result.mac))
        kind = obj.get("type")
        if type(kind) is not str:
            kind = None
        event = _new_event((data, kind, UPSTREAM, None, None))
        stored = obj  # the event as recorded (what the summary keeps)
        # Redaction first: the check strips what the schema does not describe from the
        # object it is given, and what it strips is stored all the same.
        if redactor is not None:
            done = redactor.redacted(kind, obj, data)
            if done is not None:
                result, stored = done
                event = NewEvent(result.payload, kind, redacted=Redacted(result.fired, result.mac))
        violation = self.check.feed(obj)  # (``_check``, inline: it runs once per token)
        if violation is not None:
            self.problems.append({"seq": self.next_seq, "message": violation.message})
        if kind == "TEXT_MESSAGE_CONTENT" or kind == "TEXT_MESSAGE_CHUNK":
            delta = stored.get("delta")
            if type(delta) is str and summary.size < SUMMARY_LIMIT:
                summary.parts.append(delta)
                summary.size += len(delta)
        elif kind == "RUN_FINISHED":
            self.phase = SegmentPhase.ENDED
            outcome = obj.get("outcome")
            self.outcome = (
                well_formed(str(outcome.get("type", "success")))
                if isinstance(outcome, dict)
                else "success"
            )
        elif kind == "RUN_ERROR":
            self.phase = SegmentPhase.ENDED
            self.outcome = "error"
            self.error = well_formed(str(stored.get("message", "")))
        return event

    def _check(self, frame: dict[str, Any] | bytes) -> None:
        violation = self.check.feed(frame)
        if violation is not None:
            self.problems.append({"seq": self.next_seq, "message": violation.message})

    def end_with(self, message: str, code: str) -> tuple[NewEvent, bytes] | None:
        """End an OPEN run with a RUN_ERROR of the recorder's: the event to record and the
        frame to forward. None for a run that already ended: it stays as it ended."""
        if self.phase is not SegmentPhase.OPEN:
            return None
        data = recorder_error(message, code)
        self.phase, self.outcome, self.error = SegmentPhase.ENDED, "error", message
        self.code = code
        self.size += len(data)
        seq = self.next_seq
        self.next_seq += 1
        return NewEvent(data, "RUN_ERROR", RECORDER), encode_frame(data, seq)

    def status(self, store_failure: str | None) -> tuple[str, str | None]:
        """The run's final status and error."""
        if store_failure is not None:
            return "error", f"store failure: {store_failure}"
        return _STATUS.get(self.outcome or "", "finished"), self.error


class ResponseRuns:
    """The segments of one response, the first being the posted run; creates the later ones
    and writes every run's closing status."""

    def __init__(self, store: EventStore, owner: str, first: NewRun, summary: Summary) -> None:
        self._store = store
        self._owner = owner
        self._agent = first.agent  # a later run came through the same agent
        self.current = Segment(first.run_id, first.thread_id)
        self.segments = [self.current]
        self.summary = summary
        self._summary_kept = False  # written with a run's close already (``closed``)

    async def next_run(self, data: bytes) -> Segment:
        """The segment for ``data``, a frame that came after the current run ended: a new run
        when it is a RUN_STARTED with a fresh run id, else the current one."""
        current = self.current
        obj = decode(data)
        if obj is None or obj.get("type") != "RUN_STARTED":
            return current
        given_thread = obj.get("threadId")
        if given_thread is None:
            given_thread = current.thread_id
        given = obj.get("parentRunId")
        if any(id_problem(v) for v in (obj.get("runId"), given_thread)) or (
            given is not None and id_problem(given)
        ):
            # Ids a posted input could not carry (no URL reads them back, no export of
            # them imports): the frames stay with the run they came in.
            return current
        run = NewRun(
            run_id=obj["runId"],
            thread_id=given_thread,
            agent=self._agent,
            parent_run_id=given if given is not None else current.run_id,
            parent_inferred=given is None,
            owner=self._owner,
        )
        try:
            await self._store.create_run(run)
        except Conflict:
            return current  # a repeated run id: keep it with the run it came in
        self.current = Segment(run.run_id, given_thread)
        self.segments.append(self.current)
        return self.current

    def closing(
        self, segment: Segment, store_failure: str | None, *, summary: bool = False
    ) -> Closing:
        """The run's close as the store takes it; with ``summary``, its thread's summary
        goes with it (the first run's: the summary is of what the response said)."""
        status, error = segment.status(store_failure)
        text = self.summary.text() if summary and segment is self.segments[0] else None
        return Closing(segment.run_id, status, segment.outcome, error, segment.problems, text)

    def closed(self, segment: Segment, closing: Closing) -> None:
        """``closing`` was committed (with the run's last events, say)."""
        segment.phase = SegmentPhase.CLOSED
        if closing.summary is not None:
            self._summary_kept = True

    async def close(
        self, segment: Segment, store_failure: str | None, *, summary: bool = False
    ) -> None:
        """Write the run's status (with its thread's summary, in the same commit), once."""
        if segment.phase is SegmentPhase.CLOSED:
            return
        closing = self.closing(segment, store_failure, summary=summary)
        await self._store.set_status(
            closing.run_id,
            closing.status,
            outcome=closing.outcome,
            error=closing.error,
            violations=closing.violations,
            summary=closing.summary,
        )
        self.closed(segment, closing)  # (not before: one the store refused stays open)

    async def close_all(self, store_failure: str | None) -> None:
        """Close every run not closed yet; the thread's summary goes with the first run's
        status (one commit), or alone when that run was closed already."""
        first = self.segments[0]
        if first.phase is SegmentPhase.CLOSED and not self._summary_kept:
            summary = self.summary.text()
            if summary is not None:
                await self._store.set_summary(first.thread_id, summary)
            self._summary_kept = True
        for segment in self.segments:
            await self.close(segment, store_failure, summary=not self._summary_kept)
