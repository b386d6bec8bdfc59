"""The recording proxy: forward a run to its agent, stream it back, tee every frame into the log.

``Proxy.start`` checks the posted RunAgentInput (``request.py``), takes one of
``max_concurrent_runs`` slots, creates the run and posts it to the agent: over HTTP to its
URL (``upstream.py``), or to an ASGI app of this process (``inprocess.py``), by the agent's
leg (``legs.py``). What comes back is one of:

- a ``Stream``: the agent answered with an event stream, now recorded by a
  ``RunRecording`` (``recording.py``) that outlives the client's connection; or a stream
  of one RUN_ERROR of the recorder's (``upstream_unreachable``) when the agent could not
  be reached;
- a ``Relay``: the agent answered something else (non-2xx, another content type), relayed
  as one answer; the run is closed as an error.

Either way the run is in the log, and its slot is given back exactly once: by the
recording when it ends, else before ``start`` returns. The ``observer`` hears of every run
(``recorder.telemetry``): when it begins, its batches, its end.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from recorder.config import Settings
from recorder.errors import (
    AgentNotFound,
    StoreError,
    StoreUnavailable,
    TooManyRuns,
    UpstreamError,
)
from recorder.proxy.committer import GroupCommitter
from recorder.proxy.legs import AgentLeg, Answer, HttpLeg
from recorder.proxy.recording import LeftOpen, RunRecording
from recorder.proxy.request import parse_run_input
from recorder.proxy.segments import recorder_error
from recorder.proxy.upstream import UpstreamClient
from recorder.redaction import Redactor
from recorder.store import Closing, EventStore, NewEvent, NewRun, Redacted
from recorder.store.model import RECORDER
from recorder.telemetry import NO_OBSERVER, Observer, RunEnd, RunWatch
from recorder.wire.said import message_texts
from recorder.wire.sse import encode_frame

_RELAY_LIMIT = 1 << 20  # bytes of a non-stream answer relayed to the client


@dataclass(frozen=True, slots=True)
class Relay:
    """A complete non-stream answer for the client (an upstream error relayed, say)."""

    status: int
    body: bytes
    content_type: str
    run_id: str  # the run recorded with the error


@dataclass(frozen=True, slots=True)
class Stream:
    run_id: str
    chunks: AsyncIterator[bytes]
    # Tells the producer the client is gone (closing ``chunks`` does, once it has started).
    leave: Callable[[], None] | None = None


class Proxy:
    def __init__(
        self,
        store: EventStore,
        settings: Settings,
        client: UpstreamClient,
        owner: str,
        observer: Observer = NO_OBSERVER,
    ) -> None:
        self.store = store
        self.settings = settings
        self.client = client
        self.owner = owner
        self.observer = observer
        self.committer = GroupCommitter(store, observer)
        # Redaction of what is stored (never of what is forwarded): None without rules.
        self.redactor = (
            Redactor.from_config(settings.redaction) if settings.redaction.rules else None
        )
        self.active: dict[str, RunRecording] = {}
        # Agents served by this process (``recorder.asgi``), by name: they come first.
        self.local: dict[str, AgentLeg] = {}
        self._slots = asyncio.Semaphore(settings.max_concurrent_runs)
        # Runs whose recording ended while the store was down: closed once it is back.
        self.unclosed: dict[str, LeftOpen] = {}
        self.stopping = False

    def upstream(self, agent: str) -> AgentLeg:
        """How to reach ``agent``; ``AgentNotFound`` when no agent has that name."""
        leg = self.local.get(agent)
        if leg is not None:
            return leg
        try:
            return HttpLeg(self.client, self.settings.agents[agent], self.settings)
        except KeyError:
            raise AgentNotFound(agent) from None

    async def start(
        self,
        agent: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        parent: tuple[str, int | None] | None = None,
        leg: AgentLeg | None = None,
        new_thread: bool = False,
        streaming: Callable[[str], Awaitable[None]] | None = None,
    ) -> Relay | Stream:
        """Begin a proxied run. ``parent`` (run id, seq) is set by forks, and
        ``new_thread`` by those that must start their thread; ``leg`` reaches the agent
        another way than its name says (an in-process app, with this request's own scope).

        ``streaming(run_id)`` is awaited as soon as the agent's answer is known to be an
        event stream, before its first events are recorded: a caller can send the head of
        its answer then, which the client reads while they are committed."""
        leg = leg or self.upstream(agent)
        posted = parse_run_input(body, self.settings.max_body_bytes)
        if self._slots.locked():
            raise TooManyRuns(
                f"{self.settings.max_concurrent_runs} runs are already being recorded; retry later"
            )
        await self._slots.acquire()
        run: NewRun | None = None
        try:
            run, stored = await self._create_run(agent, posted, body, parent, new_thread)
            watch = self.observer.run(agent, run.run_id, posted)
            return await self._open(leg, run, body, stored, headers, watch, streaming)
        finally:
            # A recording registers itself once its task exists, and gives the slot back
            # when it ends; anything else gives it back here.
            if run is None or run.run_id not in self.active:
                self._slots.release()

    async def close(self) -> None:
        self.stopping = True  # (the recordings cancelled now say so in their RUN_ERROR)
        for recording in list(self.active.values()):
            recording.task.cancel()
        await asyncio.gather(*(r.task for r in self.active.values()), return_exceptions=True)
        await self.committer.close()

    def register(self, recording: RunRecording) -> None:
        """``recording`` holds its run's slot until ``finished``."""
        self.active[recording.run_id] = recording

    def finished(self, run_id: str) -> None:
        if self.active.pop(run_id, None) is not None:
            self._slots.release()

    def left_open(self, run: LeftOpen) -> None:
        self.unclosed[run.run_id] = run

    async def close_left_open(self) -> list[str]:
        """Close the runs a store outage left ``running`` (``left_open``): a RUN_ERROR of
        the recorder's ends a run whose log has no terminal event (a live attach to it
        ends with it), then its status. The ids closed; ``StoreUnavailable`` when the
        store is still down (the rest wait for the next call)."""
        closed: list[str] = []
        for run_id, run in list(self.unclosed.items()):
            try:
                await self._close_left(run)
            except StoreUnavailable:
                raise
            except StoreError:
                pass  # gone, or closed by another process since: nothing left to do
            else:
                closed.append(run_id)
            del self.unclosed[run_id]
        return closed

    async def _close_left(self, left: LeftOpen) -> None:
        run = await self.store.get_run(left.run_id)
        if run.status != "running":
            return
        status, outcome, error = left.status, left.outcome, left.error
        last = await self.store.read_events(left.run_id, gt=run.event_count - 2)
        if not last or last[-1].type not in ("RUN_FINISHED", "RUN_ERROR"):
            status, outcome = "error", "error"
            error = error or "store failure: the database is unavailable"
            message = f"the recorder could not store the run: {error}"
            event = NewEvent(recorder_error(message, "store_failure"), "RUN_ERROR", RECORDER)
            await self.committer.append(left.run_id, [event])
        await self.store.set_status(
            left.run_id, status, outcome=outcome, error=error, violations=left.violations
        )

    async def _create_run(
        self,
        agent: str,
        posted: dict[str, Any],
        body: bytes,
        parent: tuple[str, int | None] | None,
        new_thread: bool = False,
    ) -> tuple[NewRun, dict[str, Any]]:
        """The run, created; and its input as stored (redacted when a rule fired)."""
        thread_id, run_id = posted["threadId"], posted["runId"]
        parent_id, parent_seq = parent if parent is not None else (None, None)
        if parent is None and isinstance(posted.get("parentRunId"), str):
            parent_id = posted["parentRunId"]
        stored, redacted = posted, None
        if self.redactor is not None:
            result, stored = self.redactor.run_input(body, posted)
            if result.fired:
                body, redacted = result.payload, Redacted(result.fired, result.mac)
        run = NewRun(
            run_id=run_id,
            thread_id=thread_id,
            agent=agent,
            created_at=time.time(),
            input=body,
            input_redacted=redacted,
            parent_run_id=parent_id,
            parent_seq=parent_seq,
            infer_parent=parent_id is None,
            owner=self.owner,
            new_thread=new_thread,
        )
        await self.store.create_run(run)
        return run, stored

    async def _open(
        self,
        leg: AgentLeg,
        run: NewRun,
        body: bytes,
        stored: dict[str, Any],
        headers: Mapping[str, str],
        watch: RunWatch,
        streaming: Callable[[str], Awaitable[None]] | None = None,
    ) -> Relay | Stream:
        """Post ``body`` (as the client sent it) to the agent; ``stored`` is the input as
        recorded (redacted), whose messages begin the thread's searchable text."""
        prepared: list[RunRecording] = []

        def sent() -> None:  # the recording is made while the agent works on the request
            prepared.append(RunRecording(self, run, message_texts(stored), watch))

        try:
            response = await leg.post(body, headers, sent)
        except UpstreamError as exc:
            message = f"upstream agent unreachable: {exc}"
            await self._fail_early(run, message, "upstream_unreachable", watch)
            return Stream(run.run_id, _once(recorder_error(message, "upstream_unreachable"), 0))
        content_type = response.headers.get("content-type", "")
        if response.status >= 300 or not content_type.startswith("text/event-stream"):
            payload = await _read_capped(response, _RELAY_LIMIT)
            if 300 <= response.status < 400:
                # Followed, it would send the client or the recorder where no setting
                # says to: the agent's configured URL is what needs changing.
                where = response.headers.get("location")
                error = (
                    f"upstream answered HTTP {response.status}, a redirect"
                    + (f" to {where[:300]!r}" if where else "")
                    + "; redirects are not followed: set the agent's URL to where it points"
                )
                await self._fail_early(run, error, "upstream_redirect", watch)
                return Relay(502, orjson.dumps({"detail": error}), "application/json", run.run_id)
            if response.status >= 300:
                error = f"upstream answered HTTP {response.status}: {_excerpt(payload)}"
                await self._fail_early(run, error, "upstream_http_error", watch)
                return Relay(response.status, payload, content_type or "text/plain", run.run_id)
            error = f"upstream answered content type {content_type!r}, not text/event-stream"
            await self._fail_early(run, error, "upstream_bad_content_type", watch)
            return Relay(502, orjson.dumps({"detail": error}), "application/json", run.run_id)
        recording = prepared[0] if prepared else RunRecording(self, run, [], watch)
        recording.attach(response)
        if streaming is not None:
            try:
                await streaming(run.run_id)
            except BaseException:
                # Begun all the same, as for a client that left: the recording outlives
                # its client, and gives the run's slot back when it ends.
                await recording.begin()
                recording.output.leave()
                raise
        await recording.begin()
        return Stream(run.run_id, recording.output.chunks(), recording.output.leave)

    async def _fail_early(self, run: NewRun, message: str, code: str, watch: RunWatch) -> None:
        """Close a run that never streamed: its one event is a RUN_ERROR of ours."""
        data = recorder_error(message, code)
        close = Closing(run.run_id, "error", outcome="error", error=message)
        try:
            await self.committer.append(run.run_id, [NewEvent(data, "RUN_ERROR", RECORDER)], close)
        finally:
            end = RunEnd(run.run_id, run.thread_id, "error", "error", message, 1, len(data), code)
            watch.ended(end)


def _excerpt(body: bytes, limit: int = 300) -> str:
    """An answer's body as one line of text for a run's error (its start, when long)."""
    text = " ".join(body[: limit * 4].decode("utf-8", "replace").split())
    if not text:
        return "(no body)"
    return text if len(text) <= limit else text[:limit] + "..."


async def _read_capped(response: Answer, limit: int) -> bytes:
    data = b""
    try:
        while chunk := await response.readany():
            data += chunk
            if len(data) >= limit:
                break
    except UpstreamError:
        pass  # what arrived before the break is what there is to relay
    finally:
        response.close()
    return data[:limit]


async def _once(data: bytes, seq: int) -> AsyncIterator[bytes]:
    yield encode_frame(data, seq)


def new_owner() -> str:
    """A name for this process, unique among those sharing a database (its runs' owner)."""
    return f"recorder-{uuid.uuid4().hex[:12]}-{int(time.time())}"
