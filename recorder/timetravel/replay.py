"""Replay: a run's exact frames (with resume and live tail), and a thread as one valid stream.

Single-run replay is exact: the recorded frames, ``id: <seq>`` each, nothing added.

A thread cannot be replayed by concatenating frames: a run's starting messages (the posted
input) are in no frame, and a fork repeats its parent's message ids. So the thread stream
follows the current branch (root to latest run) and, right after each RUN_STARTED, adds a
MESSAGES_SNAPSHOT and a STATE_SNAPSHOT of that run's starting point (``origin=recorder``;
frames we add carry no ``id:``). An ancestor is cut at its child's fork point; a run that
does not end with a terminal event is closed with a RUN_ERROR; frames the reference client
would reject (garbage, lifecycle violations) are left out, so a fresh client accepts the
whole stream and folds it into the thread's current messages and state.

A client that lost the thread stream resumes it with the last ``run:seq`` id it saw
(``Last-Event-ID``, as an ``EventSource`` sends on its own): the stream is made as for a
fresh client (the reference client's checks see every frame) and what the client had
received is left out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from recorder.errors import StoreUnavailable
from recorder.reference.check import StreamCheck
from recorder.store import EventStore, Run
from recorder.store.model import RUNNING
from recorder.timetravel.history import History
from recorder.wire.events import RecordedEvent, decode
from recorder.wire.jsontext import dump
from recorder.wire.sse import encode_frame

_PAGE = 1000
# Only the reference client's own metadata key: make the snapshot authoritative for every
# activity type, so activity messages of earlier runs do not linger (reference 3.3).
_AUTHORITATIVE = {"@ag-ui/client": {"authoritativeActivityTypes": None}}


async def stream_run(
    store: EventStore, run_id: str, *, after_seq: int = -1, live: bool = True, poll: float = 0.5
) -> AsyncIterator[bytes]:
    """The run's frames after ``after_seq``, then (``live``) new ones until the run ends."""
    async for page in _pages(store, run_id, after_seq, live, poll):
        yield b"".join(encode_frame(e.payload, e.seq) for e in page)


async def _pages(
    store: EventStore,
    run_id: str,
    after_seq: int,
    live: bool,
    poll: float,
    upto: int | None = None,
) -> AsyncIterator[list[RecordedEvent]]:
    done = after_seq
    while True:
        try:
            page = await store.read_events(run_id, gt=done, lte=upto, limit=_PAGE)
            if not page and live:
                run = await store.get_run(run_id)
                if run.status != RUNNING:
                    # The status changes after the last append: one more read catches the tail.
                    tail = await store.read_events(run_id, gt=done)
                    if tail:
                        yield tail
                    return
                await store.wait(poll)
        except StoreUnavailable:
            if not live:
                raise
            # Following a live run through an outage: its recorder closes it when the
            # database is back (``Proxy.close_left_open``), and this stream ends with it.
            await asyncio.sleep(poll)
            continue
        if page:
            done = page[-1].seq
            yield page
        elif not live:
            return


class ThreadStream:
    """The thread's current branch as one stream a fresh client accepts."""

    def __init__(self, store: EventStore, history: History, *, live: bool = True) -> None:
        self.store = store
        self.history = history
        self.live = live
        # The reference client's own checks in its order (compatibility, enforcement,
        # chunks, lifecycle): a frame it would reject is left out of the stream.
        self.check = StreamCheck()
        # Resuming: the frames up to this recorded one (run, seq) were received; until it
        # is passed, frames are checked but not sent.
        self._resume: tuple[str, int] | None = None

    async def frames(
        self, thread_id: str, *, compact: bool = False, after: tuple[str, int] | None = None
    ) -> AsyncIterator[bytes]:
        """The stream; with ``after`` (a run's id and seq, as in the frames' ``id:``), only
        what follows that frame. A point that is not on the stream's current branch (a
        fork on the thread moved it since) resumes nothing: the whole stream is sent, as
        to a fresh client (every run starts with its snapshots, so nothing is counted
        twice)."""
        thread = await self.store.get_thread(thread_id)
        if thread.latest_run_id is None:
            return
        # Without inputs: a run's starting point is read only where a projection needs it.
        branch = await self.store.lineage(thread.latest_run_id, inputs=False)
        branch = [r for r in branch if r.thread_id == thread_id] or branch[-1:]
        streamed = branch
        if compact:  # only a live run (after the settled one, if any) is streamed as recorded
            latest = branch[-1]
            streamed = [latest] if latest.status == RUNNING else []
        if after is not None and any(r.run_id == after[0] for r in streamed):
            self._resume = after
        if compact:
            async for chunk in self._compact(branch):
                yield chunk
            return
        for index, run in enumerate(branch):
            cut = branch[index + 1].parent_seq if index + 1 < len(branch) else None
            async for chunk in self._run(run, cut, last=index == len(branch) - 1):
                yield chunk

    async def _compact(self, branch: list[Run]) -> AsyncIterator[bytes]:
        """The settled runs as one: a start, the snapshots of their end and a finish; then
        a live run as recorded (a lone live run has nothing settled before it: it is all
        that is streamed, never closed as if it had finished)."""
        latest = branch[-1]
        settled = latest
        if latest.status == RUNNING:
            if len(branch) == 1:
                async for chunk in self._run(latest, None, last=True):
                    yield chunk
                return
            settled = branch[-2]
        at = await self.history.project(settled)
        frames: list[dict[str, Any]] = [
            {
                "type": "RUN_STARTED",
                "threadId": settled.thread_id,
                "runId": f"{settled.run_id}~compact",
            },
            {"type": "MESSAGES_SNAPSHOT", "messages": at.messages, "metadata": _AUTHORITATIVE},
            {"type": "STATE_SNAPSHOT", "snapshot": at.state},
            _finished(settled, at.pending_interrupts),
        ]
        yield self._emit_all(frames)
        if latest.status == RUNNING and latest is not settled:
            async for chunk in self._run(latest, None, last=True):
                yield chunk

    async def _run(self, run: Run, cut: int | None, *, last: bool) -> AsyncIterator[bytes]:
        start = await self.history.starting_point(run)
        opened = False
        terminal = False
        live = self.live and last
        resumes_here = self._resume is not None and self._resume[0] == run.run_id
        async for page in _pages(self.store, run.run_id, -1, live, 0.5, upto=cut):
            out: list[bytes] = []
            for event in page:
                if resumes_here and self._resume is not None and event.seq > self._resume[1]:
                    self._resume = None  # past what the client had: send from here
                at_resume = resumes_here and self._resume == (run.run_id, event.seq)
                obj = decode(event.payload)
                if obj is None:
                    continue
                kind = obj.get("type")
                if not opened and kind != "RUN_STARTED":
                    out.append(self._emit(_started(run)))
                    out.append(self._snapshots(start.messages, start.state))
                    opened = True
                if kind == "RUN_STARTED" and opened and not terminal:
                    continue  # a second start inside one recorded run: not replayable as such
                if self.check.feed(obj) is not None:
                    continue
                if self._resume is None:
                    out.append(encode_frame(event.payload, f"{run.run_id}:{event.seq}"))
                elif at_resume:
                    self._resume = None  # the client's last frame: what it adds is new
                if kind == "RUN_STARTED":
                    opened, terminal = True, False
                    out.append(self._snapshots(start.messages, start.state))
                elif kind in ("RUN_FINISHED", "RUN_ERROR"):
                    terminal = True
            if out:
                yield b"".join(out)
        if resumes_here:
            self._resume = None  # the client had every recorded frame of this run
        tail: list[bytes] = []
        if not opened:
            tail.append(self._emit(_started(run)))
            tail.append(self._snapshots(start.messages, start.state))
        if not terminal:
            reason = "cut at the fork point" if cut is not None else f"run is {run.status}"
            tail.append(
                self._emit(
                    {"type": "RUN_ERROR", "message": f"replay: {reason}", "code": "replay_closed"}
                )
            )
        if tail:
            yield b"".join(tail)

    def _snapshots(self, messages: list[dict[str, Any]], state: Any) -> bytes:
        return self._emit_all(
            [
                {"type": "MESSAGES_SNAPSHOT", "messages": messages, "metadata": _AUTHORITATIVE},
                {"type": "STATE_SNAPSHOT", "snapshot": state},
            ]
        )

    def _emit_all(self, frames: list[dict[str, Any]]) -> bytes:
        return b"".join(self._emit(f) for f in frames)

    def _emit(self, frame: dict[str, Any]) -> bytes:
        self.check.feed(frame)
        return b"" if self._resume is not None else encode_frame(dump(frame))


def _started(run: Run) -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": run.thread_id, "runId": run.run_id}


def _finished(run: Run, interrupts: list[dict[str, Any]]) -> dict[str, Any]:
    outcome: dict[str, Any] = {"type": "success"}
    if interrupts:
        outcome = {"type": "interrupt", "interrupts": interrupts}
    return {
        "type": "RUN_FINISHED",
        "threadId": run.thread_id,
        "runId": f"{run.run_id}~compact",
        "outcome": outcome,
    }
