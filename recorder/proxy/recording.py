"""The recording of one proxied response: read it, record it, forward it, close its runs.

A ``RunRecording`` owns the upstream's answer from the moment its head arrived. It is not
tied to the client's connection: when the client goes away the recording goes on (unless
``keep_reading_on_disconnect`` is off) to the end of the run, so the run can still be
replayed or attached to. Its phases:

    HEAD ─────────────────► RECORDING ─────────────────► CLOSING ───────────────► ENDED
    begin(), on the          the recording's own task:    a RUN_ERROR of ours      the client's
    request's task: the      the reader fills, the loop   when the last run has    stream ends,
    first chunk, recorded    records and forwards all     no end; every run's      the slot is
    while the client's       that is pending as one       status (and the          given back
    output is HELD           batch (one group commit)     thread's summary)
      │                        │
      └──► CLOSING             └──► CLOSING
      (the first chunk broke,    (the answer ended or broke; a limit or the store
       or a limit or the store    stopped it; the task was cancelled: the client left
       stopped the run)           with keep_reading_on_disconnect off, or a shutdown)

A task cancelled before it reached ENDED (a shutdown before its first step, a second
cancellation while CLOSING) is ended by its done callback: the client's stream ends, the
connection is let go and the slot is given back. The slot goes back exactly once.

The parts: ``FrameReader`` (reader.py) reads ahead at most ``READ_AHEAD`` frames;
``ResponseRuns`` (segments.py) says which run a frame belongs to, a response may carry
several, and closes them; ``GroupCommitter`` (committer.py) commits; ``ClientOutput``
(output.py) queues what the client has yet to read.

Durability "commit" (the default): a batch is forwarded only after the transaction holding
it committed, so the client never saw an event the log lacks. "buffered": a batch is
forwarded first (the client's task writes it out before the commit begins; the first
events too, whose commit then follows on a task of its own) and committed right behind
it; the next batch waits for that commit, so the client is at most one batch ahead of
the log.

While batches commit, the next is observed (checked, numbered, made into events): when
the stream outpaces the recording (large batches), each commit goes on in a task of its
own (which forwards the batch once it committed), so the database's work and the
recording's overlap. On SQLite up to two batches are handed over at a time
(``GroupCommitter.in_flight``): the recording goes on observing while the one before the
last is still committing, instead of waiting for it (on two cores a large batch's commit
took two to three times as long as observing it, and the loop sat idle in each wait).
Batches still commit and reach the client one at a time, in order: each one's task starts
its commit only once the batch before was committed and forwarded, and commits nothing
once that one failed. A batch observed is committed before anything else of its run is (a
cancelled recording commits what it had observed before its closing RUN_ERROR), so the
seqs forwarded are the seqs stored.

A run whose last events are the end of the answer (RUN_FINISHED or RUN_ERROR was observed,
and the reader has seen the answer close) is closed in the commit of that batch, if the
recording's task read it: one commit where its events and its status took two. Any other
run (one that ended in the first batch, whose commit the first event waits for, included)
is closed in CLOSING.

The ``RunWatch`` (``recorder.telemetry``) hears of the first event, of each committed part
of a batch, and of each run's end (once, when the recording ends).

The recorder's own RUN_ERROR codes: ``upstream_dropped``, ``upstream_idle``,
``upstream_incomplete``, ``frame_too_large``, ``limit_exceeded``, ``client_disconnected``,
``recorder_stopped`` (a shutdown cut the run off) and ``store_failure`` (the one frame
that is never in the log, since the log failed).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from recorder.config import Settings
from recorder.errors import StoreError, UpstreamError
from recorder.proxy.committer import GroupCommitter
from recorder.proxy.legs import Answer
from recorder.proxy.output import ClientOutput
from recorder.proxy.reader import FrameReader
from recorder.proxy.segments import (
    ResponseRuns,
    Segment,
    SegmentPhase,
    Summary,
    recorder_error,
)
from recorder.redaction import Redactor
from recorder.store import Closing, EventStore, NewEvent, NewRun
from recorder.telemetry import RunEnd, RunWatch
from recorder.wire.sse import FrameTooLarge, encode_frame, encode_frames

FIRST_WAIT = 0.05  # seconds the first events are awaited on the request's own task
# A batch this large commits in a task of its own while the next is observed: the stream
# outpaces the recording (a token stream's batches hold an event or two, and pay no task).
_OVERLAP_FROM = 32
# Frames observed between two turns given back to the loop: the batch in flight goes on
# (to the database, then to the client) while the next one is observed, not after it, and
# the other streams and requests wait a fraction of a millisecond at most.
_TURN_EVERY = 64


class Phase(enum.Enum):
    HEAD = "head"
    RECORDING = "recording"
    CLOSING = "closing"
    ENDED = "ended"


class Host(Protocol):
    """What a recording needs of the proxy that starts it."""

    store: EventStore
    settings: Settings
    committer: GroupCommitter
    owner: str
    redactor: Redactor | None
    stopping: bool  # the recorder is shutting down (its recordings are cancelled)

    def register(self, recording: RunRecording) -> None: ...
    def finished(self, run_id: str) -> None: ...
    def left_open(self, run: LeftOpen) -> None: ...


@dataclass(frozen=True, slots=True)
class LeftOpen:
    """A run whose recording ended while the store would not take its closing status."""

    run_id: str
    status: str
    outcome: str | None
    error: str | None
    violations: list[dict[str, object]]


class RunRecording:
    def __init__(self, host: Host, run: NewRun, summary: list[str], watch: RunWatch) -> None:
        """Everything but the answer, made while the agent works on the request: the
        answer comes with ``attach``."""
        self._host = host
        self._watch = watch
        self._silent = True  # no event of the agent's yet
        self._settings = host.settings
        self.run_id = run.run_id
        self.phase = Phase.HEAD
        self._reader: FrameReader
        self._runs = ResponseRuns(host.store, host.owner, run, Summary(summary, host.redactor))
        self._commits = _Commits(host.committer, self._settings.on_store_failure)
        self.output = ClientOutput(self._client_left)
        self.task: asyncio.Task[None]
        # The batches committing (and then forwarded), each in a task of its own that
        # waits for the one before, the last handed over at the right; and the parts of a
        # batch observed but not yet handed to a commit.
        self._inflight: deque[asyncio.Task[bool]] = deque()
        self._unsent: list[_Part] | None = None

    def attach(self, response: Answer) -> None:
        """The agent's answer, whose head arrived: what the recording reads."""
        self._reader = FrameReader(response, self._settings.max_frame_bytes)

    async def begin(self) -> None:
        """Record the first events on the request's task, then go on, on a task of its own.

        The first events usually follow the head closely: recording them here spares the
        first event several hand-overs between tasks. Whatever happens here, the task is
        started and registered (it gives the run's slot back).
        """
        go_on = False
        broke: BaseException | None = None
        try:
            try:
                frames = await self._reader.first(FIRST_WAIT)
            except (UpstreamError, FrameTooLarge) as exc:
                broke = exc  # closed by the recording task, as a broken stream
            else:
                go_on = not frames or await self._record(frames)
        finally:
            self.output.open()
            self.task = asyncio.create_task(self._run(go_on, broke), name=f"record-{self.run_id}")
            self.task.add_done_callback(self._ended)
            self._host.register(self)

    def _client_left(self) -> None:
        if not self._settings.keep_reading_on_disconnect and not self.task.done():
            self.task.cancel()

    # -- the phases ---------------------------------------------------------------------------

    async def _run(self, go_on: bool, broke: BaseException | None) -> None:
        try:
            if go_on:
                self.phase = Phase.RECORDING
                broke = await self._record_stream()
            self.phase = Phase.CLOSING
            if broke is not None:
                await self._close_with(*_broken(broke, self._settings.idle_timeout))
        except asyncio.CancelledError:
            self.phase = Phase.CLOSING
            await self._flush()
            if self._host.stopping:
                await self._close_with("the recorder stopped; recording ended", "recorder_stopped")
            else:
                await self._close_with(
                    "the client disconnected; recording stopped", "client_disconnected"
                )
            raise
        finally:
            self.phase = Phase.CLOSING
            with contextlib.suppress(Exception):  # (raised already, where it was settled)
                await self._settle()
            await self._reader.stop()
            try:
                await self._close_runs()
            except Exception:
                self._leave_open()
            await self.output.end()
            self._end()

    async def _record_stream(self) -> BaseException | None:
        """Record what the reader hands over until the answer is over or the run must stop;
        why the answer broke off, if it did."""
        self._reader.start(f"read-{self.run_id}")
        while (batch := await self._reader.take()) is not None:
            if not await self._record(batch, streaming=True):
                break
        await self._settle()
        return self._reader.failure()

    async def _close_runs(self) -> None:
        if self._runs.current.phase is SegmentPhase.OPEN and not self._commits.stopped:
            await self._close_with(
                "the upstream ended the stream without RUN_FINISHED or RUN_ERROR",
                "upstream_incomplete",
            )
        await self._runs.close_all(self._commits.failure)

    def _leave_open(self) -> None:
        """The store would not take the runs' closing (it is down): the proxy closes them
        once it is back (``Proxy.close_left_open``), not the next process to start."""
        for segment in self._runs.segments:
            if segment.phase is not SegmentPhase.CLOSED:
                status, error = segment.status(self._commits.failure)
                self._host.left_open(
                    LeftOpen(segment.run_id, status, segment.outcome, error, segment.problems)
                )

    def _end(self) -> None:
        self.phase = Phase.ENDED
        self._host.finished(self.run_id)
        failure = self._commits.failure
        for segment in self._runs.segments:
            status, error = segment.status(failure)
            if segment.phase is SegmentPhase.OPEN:  # cancelled before it could be closed
                status = "incomplete"
            self._watch.ended(
                RunEnd(
                    segment.run_id,
                    segment.thread_id,
                    status,
                    segment.outcome,
                    error,
                    segment.next_seq,
                    segment.size,
                    "store_failure" if failure is not None else segment.code,
                )
            )

    def _ended(self, _task: asyncio.Task[None]) -> None:
        if self.phase is Phase.ENDED:
            return
        self._reader.stop_now()
        self.output.end_now()
        self._end()

    # -- one batch ----------------------------------------------------------------------------

    async def _record(self, frames: list[bytes], streaming: bool = False) -> bool:
        """Record and forward one batch; False when the recording must stop here.

        ``streaming`` (a batch of the recording's own task, not the first on the request's):
        when the batch is large or more frames are waiting already, it commits in a task
        of its own (``_inflight``) while the next one is observed, once all but the last
        batch handed over before it are done; and when it ends its run
        and the answer, the run's close goes in its commit. The first batch's commit is the
        first event's wait (durability "commit"): its run, should it end there, is closed
        after it."""
        if self._silent:
            self._silent = False
            self._watch.first_event()
        runs = self._runs
        summary = runs.summary
        limit = self._settings.max_events_per_run
        segment = runs.current
        part = _Part(segment, segment.next_seq)
        parts = self._unsent = [part]
        for n, data in enumerate(frames, 1):
            if segment.phase is not SegmentPhase.OPEN and b"RUN_STARTED" in data:
                segment = await runs.next_run(data)
            if part.segment is not segment:
                part = _Part(segment, segment.next_seq)
                parts.append(part)
            if segment.next_seq >= limit:
                if not await self._settle():
                    return False
                self._unsent = None
                await self._commit_and_forward(parts)
                await self._close_with(f"the run exceeded {limit} events", "limit_exceeded")
                return False
            part.events.append(segment.observe(data, summary))
            part.datas.append(data)
            segment.next_seq += 1
            if not n % _TURN_EVERY:
                await asyncio.sleep(0)
        # With durability "buffered" the first events commit in a task of its own too,
        # after the client's task took them (the output holds them until the stream opens).
        first_buffered = not streaming and self._settings.durability == "buffered"
        overlap = first_buffered or (
            streaming and (len(frames) >= _OVERLAP_FROM or self._reader.waiting())
        )
        if not await self._settle(self._host.committer.in_flight - 1 if overlap else 0):
            return False  # the store failed: nothing more is committed
        close = await self._last_of(segment) if streaming else None
        self._unsent = None
        if overlap:
            before = self._inflight[-1] if self._inflight else None
            self._inflight.append(asyncio.create_task(self._after(before, parts, close)))
            await asyncio.sleep(0)  # it starts now, while the next batch is observed
            return True
        return await self._commit_and_forward(parts, close)

    async def _last_of(self, segment: Segment) -> Closing | None:
        """The close of ``segment``, the current run, when the batch just observed is the
        answer's last and the run has ended: it goes in the batch's commit (one commit
        where the events and the close took two). None otherwise: it is closed after."""
        if segment.phase is not SegmentPhase.ENDED or self._commits.failure is not None:
            return None
        if not await self._reader.ended():
            return None
        return self._runs.closing(segment, None, summary=True)

    async def _settle(self, leave: int = 0) -> bool:
        """Wait until at most ``leave`` batches in flight are left to commit and forward;
        False when the store failed one of them and the recording must stop. A
        cancellation of the waiter leaves them be."""
        inflight = self._inflight
        ok = True
        while len(inflight) > leave:
            task = inflight[0]  # (each waits for the one before it: the oldest ends first)
            try:
                ok = await asyncio.shield(task) and ok
            finally:
                if task.done():  # (a cancelled waiter leaves it for the next to wait on)
                    inflight.popleft()
        # One left in flight may have failed already: what is handed over behind it would
        # commit nothing, so the recording stops now.
        return ok and not any(map(_failed, inflight))

    async def _after(
        self, before: asyncio.Task[bool] | None, parts: list[_Part], close: Closing | None
    ) -> bool:
        """``_commit_and_forward`` once the batch handed over ``before`` is committed and
        forwarded; nothing (False) when that one failed."""
        if before is not None and not await asyncio.shield(before):
            return False
        return await self._commit_and_forward(parts, close)

    async def _flush(self) -> None:
        """Before a cancelled recording's RUN_ERROR: the batches in flight committed, then
        the events it had observed and not handed over (they are not forwarded: the client is
        gone, or going)."""
        stopped = not await self._settle()
        unsent, self._unsent = self._unsent or [], None
        for part in [] if stopped else unsent:
            if part.events and not await self._commits.append(part.segment.run_id, part.events):
                return

    async def _commit_and_forward(self, parts: list[_Part], close: Closing | None = None) -> bool:
        """Commit each part (the last with ``close``, its run's), then forward it; with
        durability "buffered", forward it first."""
        buffered = self._settings.durability == "buffered"
        last = parts[-1]
        for part in parts:
            if not part.events:
                continue
            out = encode_frames(part.datas, part.first_seq)
            if buffered:
                await self.output.put(out)
                # The client's task writes it out before the commit: a small commit on
                # SQLite runs on the loop without yielding, and would go first.
                await asyncio.sleep(0)
            closing = close if part is last else None
            stored = await self._commits.append(part.segment.run_id, part.events, closing)
            if stored:
                self._watch.recorded(part.segment.run_id, part.events)
                if closing is not None:
                    self._runs.closed(part.segment, closing)
            elif self._commits.stopped:
                message = f"the recorder could not store the run: {self._commits.failure}"
                await self.output.put(encode_frame(recorder_error(message, "store_failure")))
                return False
            if not buffered:
                await self.output.put(out)
            if part.segment is not self._runs.current:  # an earlier run of this response
                await self._runs.close(part.segment, self._commits.failure)
        return True

    async def _close_with(self, message: str, code: str) -> None:
        """End the current run with a RUN_ERROR of our own, recorded and forwarded.

        A run that already ended is left as it ended: a connection that breaks, stalls or is
        dropped by the client after RUN_FINISHED takes nothing from the run.
        """
        segment = self._runs.current
        ending = segment.end_with(message, code)
        if ending is not None:
            event, frame = ending
            await self._commits.append_own(segment.run_id, event)
            await self.output.put(frame)


@dataclass(slots=True)
class _Part:
    """The frames of one batch that belong to one run (from its seq ``first_seq`` on)."""

    segment: Segment
    first_seq: int
    events: list[NewEvent] = field(default_factory=list)
    datas: list[bytes] = field(default_factory=list)


class _Commits:
    """Batches handed to the group committer, and the store's first failure.

    On a failure, ``on_store_failure`` "error" stops the recording (its client gets a
    ``store_failure`` RUN_ERROR, and never an event the log lacks); "continue" offers the
    store nothing more and goes on forwarding. Either way the runs close as errors.
    """

    def __init__(self, committer: GroupCommitter, on_failure: str) -> None:
        self._committer = committer
        self._continue = on_failure == "continue"
        self.failure: str | None = None

    @property
    def stopped(self) -> bool:
        """The store failed and the recording must stop."""
        return self.failure is not None and not self._continue

    async def append(
        self, run_id: str, events: list[NewEvent], close: Closing | None = None
    ) -> bool:
        """Commit ``events`` (and ``close``); False when they are not in the log."""
        if self.failure is not None and self._continue:
            return False
        try:
            await self._committer.append(run_id, events, close)
            return True
        except StoreError as exc:
            self.failure = str(exc)
            return False

    async def append_own(self, run_id: str, event: NewEvent) -> None:
        """Commit a RUN_ERROR of the recorder's, if the store lets it."""
        with contextlib.suppress(StoreError):
            await self._committer.append(run_id, [event])


def _failed(task: asyncio.Task[bool]) -> bool:
    """Whether a batch's task is done and committed nothing (its store failed)."""
    return task.done() and not task.cancelled() and task.exception() is None and not task.result()


def _broken(exc: BaseException, idle_timeout: float) -> tuple[str, str]:
    """The message and code of the RUN_ERROR that closes a run whose answer broke off."""
    if isinstance(exc, FrameTooLarge):
        return str(exc), "frame_too_large"
    if isinstance(exc, TimeoutError):
        return f"the upstream sent nothing for {idle_timeout:g} s", "upstream_idle"
    if isinstance(exc, UpstreamError):
        return f"the upstream stream broke: {exc}", "upstream_dropped"
    return f"the upstream stream broke: {type(exc).__name__}: {exc}", "upstream_dropped"
