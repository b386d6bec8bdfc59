"""The recording proxy: forward a run to its agent, stream it back, tee every frame into the log.

One ``RunRecording`` task per proxied response owns the upstream stream. It is not tied to
the client's connection: when the client goes away the recording goes on (by default) to
the end of the run, so the run can still be replayed or attached to.

Durability ("commit", the default): a frame is forwarded only after the transaction holding
it committed, so the client never saw an event the log lacks. Frames that arrive while a
commit runs are committed together next (group commit), which keeps throughput up.
"buffered": frames are forwarded as they arrive and committed right behind them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from recorder.config import Settings
from recorder.errors import (
    AgentNotFound,
    BodyTooLarge,
    Conflict,
    InputError,
    StoreError,
    TooManyRuns,
    UpstreamError,
)
from recorder.proxy.committer import GroupCommitter
from recorder.proxy.upstream import Response, UpstreamClient
from recorder.reference.check import StreamCheck
from recorder.store import EventStore, NewEvent, NewRun
from recorder.store.model import RECORDER
from recorder.wire.events import decode
from recorder.wire.jsontext import parse, well_formed
from recorder.wire.sse import Frame, FrameSplitter, FrameTooLarge, encode_frame

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host"}
_SUMMARY_LIMIT = 20_000
_READ_AHEAD = 2000  # frames the reader may hold before it waits for them to be taken
_OUT_BATCHES = 4  # recorded batches waiting for a slow client before recording waits
_FIRST_WAIT = 0.05  # seconds the first events are awaited on the request's own task


def parse_run_input(body: bytes, max_bytes: int | None = None) -> dict[str, Any]:
    """The posted RunAgentInput as a dict, if it names a thread and a run; else InputError."""
    if max_bytes is not None and len(body) > max_bytes:
        raise BodyTooLarge(f"request body is {len(body)} bytes; the limit is {max_bytes}")
    try:
        obj = parse(body)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise InputError("request body must be a JSON object (a RunAgentInput)")
    for key in ("threadId", "runId"):
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            raise InputError(f"RunAgentInput.{key} must be a non-empty string")
        if value != well_formed(value):  # half a surrogate pair: no database stores it
            raise InputError(f"RunAgentInput.{key} must not hold half of a surrogate pair")
    return obj


def forwarded_headers(headers: Mapping[str, str], settings: Settings) -> dict[str, str]:
    """Headers that pass to the upstream: an allow list plus prefixes; never stored."""
    allowed = {h.lower() for h in settings.forward_headers}
    prefixes = tuple(p.lower() for p in settings.forward_header_prefixes)
    out = {
        k: v
        for k, v in headers.items()
        if k.lower() not in _HOP_BY_HOP and (k.lower() in allowed or k.lower().startswith(prefixes))
    }
    out["content-type"] = "application/json"
    out["accept"] = "text/event-stream"  # the recorder records SSE; never ask for protobuf
    return out


def recorder_error(message: str, code: str) -> bytes:
    return orjson.dumps({"type": "RUN_ERROR", "message": message, "code": code})


@dataclass(slots=True)
class Relay:
    """A complete non-stream answer for the client (an upstream error relayed, say)."""

    status: int
    body: bytes
    content_type: str


@dataclass(slots=True)
class Stream:
    run_id: str
    chunks: AsyncIterator[bytes]
    # Tells the producer the client is gone (closing ``chunks`` does, once it has started).
    leave: Callable[[], None] | None = None


class Proxy:
    def __init__(
        self, store: EventStore, settings: Settings, client: UpstreamClient, owner: str
    ) -> None:
        self.store = store
        self.settings = settings
        self.client = client
        self.owner = owner
        self.committer = GroupCommitter(store)
        self.active: dict[str, RunRecording] = {}
        self._slots = asyncio.Semaphore(settings.max_concurrent_runs)

    def upstream(self, agent: str) -> str:
        try:
            return self.settings.agents[agent].url
        except KeyError:
            raise AgentNotFound(agent) from None

    async def start(
        self,
        agent: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        parent: tuple[str, int | None] | None = None,
    ) -> Relay | Stream:
        """Begin a proxied run. ``parent`` (run id, seq) is set by forks."""
        url = self.upstream(agent)
        posted = parse_run_input(body, self.settings.max_body_bytes)
        if self._slots.locked():
            raise TooManyRuns(
                f"{self.settings.max_concurrent_runs} runs are already being recorded; retry later"
            )
        await self._slots.acquire()
        run: NewRun | None = None
        try:
            run = await self._create_run(agent, posted, body, parent)
            return await self._open(url, run, posted, headers)
        finally:
            # A recording registers itself once its task exists, and gives the slot back
            # when it ends; anything else gives it back here.
            if run is None or run.run_id not in self.active:
                self._slots.release()

    async def close(self) -> None:
        for recording in list(self.active.values()):
            recording.task.cancel()
        await asyncio.gather(*(r.task for r in self.active.values()), return_exceptions=True)
        await self.committer.close()

    async def _create_run(
        self, agent: str, posted: dict[str, Any], body: bytes, parent: tuple[str, int | None] | None
    ) -> NewRun:
        thread_id, run_id = posted["threadId"], posted["runId"]
        parent_id, parent_seq = parent if parent is not None else (None, None)
        if parent is None and isinstance(posted.get("parentRunId"), str):
            parent_id = posted["parentRunId"]
        run = NewRun(
            run_id=run_id,
            thread_id=thread_id,
            agent=agent,
            input=body,
            parent_run_id=parent_id,
            parent_seq=parent_seq,
            infer_parent=parent_id is None,
            owner=self.owner,
        )
        await self.store.create_run(run)
        return run

    async def _open(
        self, url: str, run: NewRun, posted: dict[str, Any], headers: Mapping[str, str]
    ) -> Relay | Stream:
        try:
            response = await self.client.post(
                url, run.input or b"", forwarded_headers(headers, self.settings)
            )
        except UpstreamError as exc:
            message = f"upstream agent unreachable: {exc}"
            await self._fail_early(run, message, "upstream_unreachable")
            return Stream(run.run_id, _once(recorder_error(message, "upstream_unreachable"), 0))
        content_type = response.headers.get("content-type", "")
        if response.status >= 300 or not content_type.startswith("text/event-stream"):
            payload = await _read_capped(response, 1 << 20)
            if response.status >= 300:
                error = f"upstream answered HTTP {response.status}: {payload[:500]!r}"
                await self._fail_early(run, error, "upstream_http_error")
                return Relay(response.status, payload, content_type or "text/plain")
            error = f"upstream answered content type {content_type!r}, not text/event-stream"
            await self._fail_early(run, error, "upstream_bad_content_type")
            return Relay(502, orjson.dumps({"detail": error}), "application/json")
        recording = RunRecording(self, run, response, _message_texts(posted))
        await recording.begin()
        return Stream(run.run_id, recording.output(), recording.client_left)

    async def _fail_early(self, run: NewRun, message: str, code: str) -> None:
        await self.committer.append(
            run.run_id, [NewEvent(recorder_error(message, code), "RUN_ERROR", RECORDER)]
        )
        await self.store.set_status(run.run_id, "error", outcome="error", error=message)

    def _finished(self, run_id: str) -> None:
        if self.active.pop(run_id, None) is not None:
            self._slots.release()


@dataclass(slots=True)
class _Segment:
    """The part of one upstream response that belongs to one run."""

    run_id: str
    thread_id: str
    check: StreamCheck = field(default_factory=StreamCheck)
    next_seq: int = 0
    terminal: str | None = None  # "RUN_FINISHED" or "RUN_ERROR" once seen
    outcome: str | None = None
    error: str | None = None
    problems: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = False


class RunRecording:
    def __init__(self, proxy: Proxy, run: NewRun, response: Response, summary: list[str]) -> None:
        self.proxy = proxy
        self.settings = proxy.settings
        self.response = response
        self.segment = _Segment(run.run_id, run.thread_id)
        self.segments = [self.segment]
        self._out: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=_OUT_BATCHES)
        self._client_gone = False
        self._pending: list[Frame] = []
        self._arrived = asyncio.Event()
        self._taken = asyncio.Event()
        self._store_failed: str | None = None
        self._summary = summary
        self._summary_size = sum(map(len, summary))
        self._splitter = FrameSplitter(self.settings.max_frame_bytes)
        self._early: BaseException | None = None
        self._held: list[bytes] | None = None  # output while begin() runs, before any reader
        self._ran = False
        self.task: asyncio.Task[None]

    async def begin(self) -> None:
        """Record the first events on the request's task, then go on, on a task of its own.

        The first events usually follow the head closely: recording them here spares the
        first event several hand-overs between tasks. The rest is read and recorded on the
        recording's own task, which is not the client's: it outlives a disconnect. Whatever
        happens here, that task is started and registered (it gives the run's slot back).
        """
        go_on = False
        self._held = []  # nobody reads the output yet: it is handed over as one chunk
        try:
            try:
                frames = self._splitter.feed(await self._first_chunk())
            except (UpstreamError, FrameTooLarge) as exc:
                self._early = exc  # reported by the recording task, as a broken stream
                frames = []
            go_on = self._early is None and (not frames or await self._record(frames))
        finally:
            held, self._held = self._held, None
            if held:
                self._out.put_nowait(b"".join(held))
            run_id = self.segments[0].run_id
            self.task = asyncio.create_task(self.run(go_on), name=f"record-{run_id}")
            self.task.add_done_callback(self._ended)
            self.proxy.active[run_id] = self

    async def _first_chunk(self) -> bytes:
        """What the upstream sends within ``_FIRST_WAIT`` (an agent that is slower to start
        does not hold the client's response head back for long)."""
        return await self.response.read_within(_FIRST_WAIT) or b""

    # -- the client's side -----------------------------------------------------------------

    async def output(self) -> AsyncIterator[bytes]:
        try:
            while (chunk := await self._out.get()) is not None:
                yield chunk
        finally:
            self.client_left()

    def client_left(self) -> None:
        """The client is gone (or done): stop queueing output; by default keep recording."""
        if self._client_gone:
            return
        self._client_gone = True
        while not self._out.empty():
            self._out.get_nowait()
        if not self.settings.keep_reading_on_disconnect and not self.task.done():
            self.task.cancel()

    async def _emit(self, data: bytes | None) -> None:
        if self._client_gone:
            return
        if self._held is not None:
            if data is not None:
                self._held.append(data)
            return
        await self._out.put(data)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A recording task cancelled before its first step never ran ``run()``'s cleanup."""
        if self._ran:
            return
        self.response.close()
        self.proxy._finished(self.segments[0].run_id)
        if not self._client_gone:
            while not self._out.empty():
                self._out.get_nowait()
            self._out.put_nowait(None)

    # -- the upstream's side ---------------------------------------------------------------

    async def run(self, go_on: bool = True) -> None:
        self._ran = True
        reader: asyncio.Task[None] | None = None
        try:
            if self._early is not None:
                await self._upstream_failed(self._early)
            elif go_on:
                reader = asyncio.create_task(self._read(), name=f"read-{self.segment.run_id}")
                # However the reader ends (done, broken, cancelled), the loop must wake.
                reader.add_done_callback(lambda _task: self._arrived.set())
                await self._record_until(reader)
                if reader.done() and not reader.cancelled() and reader.exception() is not None:
                    await self._upstream_failed(reader.exception())
        except asyncio.CancelledError:
            await self._close_with(
                "the client disconnected; recording stopped", "client_disconnected"
            )
            raise
        finally:
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader
            self.response.close()
            with contextlib.suppress(Exception):
                await self._finish()
            await self._emit(None)
            self.proxy._finished(self.segments[0].run_id)

    async def _read(self) -> None:
        splitter = self._splitter
        while chunk := await self.response.readany():
            frames = splitter.feed(chunk)
            if frames:
                self._pending.extend(frames)
                self._arrived.set()
                if len(self._pending) >= _READ_AHEAD:
                    # Backpressure: memory stays bounded whatever the run's length or the
                    # client's pace, and a fast upstream is committed and forwarded while
                    # it streams instead of being read whole first.
                    self._taken.clear()
                    await self._taken.wait()
        self._pending.extend(splitter.close())

    async def _record_until(self, reader: asyncio.Task[None]) -> None:
        # Check before waiting: a wake-up that came while a batch was being recorded is
        # never lost, and frames that came meanwhile form the next (group) commit.
        while True:
            if self._pending:
                batch, self._pending = self._pending, []
                self._taken.set()
                if not await self._record(batch):
                    return
            elif reader.done():
                return
            else:
                await self._arrived.wait()
                self._arrived.clear()

    async def _record(self, frames: list[Frame]) -> bool:
        """Record and forward one batch; False when the run must stop here."""
        groups: list[tuple[_Segment, list[NewEvent], list[bytes]]] = []
        for frame in frames:
            segment = await self._segment_for(frame.data)
            if not groups or groups[-1][0] is not segment:
                groups.append((segment, [], []))
            if segment.next_seq >= self.settings.max_events_per_run:
                await self._record_groups(groups)
                await self._close_with(
                    f"the run exceeded {self.settings.max_events_per_run} events", "limit_exceeded"
                )
                return False
            event = self._observe(segment, frame.data)
            groups[-1][1].append(event)
            groups[-1][2].append(encode_frame(frame.data, segment.next_seq))
            segment.next_seq += 1
        return await self._record_groups(groups)

    async def _record_groups(
        self, groups: list[tuple[_Segment, list[NewEvent], list[bytes]]]
    ) -> bool:
        for segment, events, encoded in groups:
            if not events:
                continue
            out = b"".join(encoded)
            if self.settings.durability == "buffered":
                await self._emit(out)
            ok = await self._commit(segment.run_id, events)
            if not ok and self.settings.on_store_failure == "error":
                message = f"the recorder could not store the run: {self._store_failed}"
                await self._emit(encode_frame(recorder_error(message, "store_failure")))
                return False
            if self.settings.durability == "commit":
                await self._emit(out)
            if segment is not self.segment:  # an earlier run of this response is complete
                await self._finish_segment(segment)
        return True

    async def _commit(self, run_id: str, events: list[NewEvent]) -> bool:
        if self._store_failed is not None and self.settings.on_store_failure == "continue":
            return False
        try:
            await self.proxy.committer.append(run_id, events)
            return True
        except StoreError as exc:
            self._store_failed = str(exc)
            return False

    async def _segment_for(self, data: bytes) -> _Segment:
        """Runs may share a response: a RUN_STARTED after a terminal event opens the next."""
        current = self.segment
        if current.terminal is None or b"RUN_STARTED" not in data:
            return current
        obj = decode(data)
        if obj is None or obj.get("type") != "RUN_STARTED" or not isinstance(obj.get("runId"), str):
            return current
        if any(isinstance(v, str) and v != well_formed(v) for v in obj.values()):
            return current  # ids no database can store: the frames stay with this run
        given_thread = obj.get("threadId")
        thread_id = given_thread if isinstance(given_thread, str) else current.thread_id
        given = obj.get("parentRunId")
        run = NewRun(
            run_id=obj["runId"],
            thread_id=thread_id,
            agent=None,
            parent_run_id=given if isinstance(given, str) else current.run_id,
            parent_inferred=not isinstance(given, str),
            owner=self.proxy.owner,
        )
        try:
            await self.proxy.store.create_run(run)
        except Conflict:
            return current  # a repeated run id: keep it with the run it came in
        self.segment = _Segment(run.run_id, thread_id)
        self.segments.append(self.segment)
        return self.segment

    def _observe(self, segment: _Segment, data: bytes) -> NewEvent:
        obj = decode(data)
        violation = segment.check.feed(obj if obj is not None else data)
        if violation is not None:
            segment.problems.append({"seq": segment.next_seq, "message": violation.message})
        if obj is None:
            return NewEvent(data, None)
        kind = obj.get("type")
        kind = kind if isinstance(kind, str) else None
        if kind == "RUN_FINISHED":
            segment.terminal = kind
            outcome = obj.get("outcome")
            segment.outcome = (
                well_formed(str(outcome.get("type", "success")))
                if isinstance(outcome, dict)
                else "success"
            )
        elif kind == "RUN_ERROR":
            segment.terminal = kind
            segment.outcome = "error"
            segment.error = well_formed(str(obj.get("message", "")))
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK"):
            delta = obj.get("delta")
            if isinstance(delta, str) and self._summary_size < _SUMMARY_LIMIT:
                self._summary.append(delta)
                self._summary_size += len(delta)
        return NewEvent(data, kind)

    async def _upstream_failed(self, exc: BaseException | None) -> None:
        if isinstance(exc, FrameTooLarge):
            await self._close_with(str(exc), "frame_too_large")
        elif isinstance(exc, TimeoutError):
            await self._close_with(
                f"the upstream sent nothing for {self.settings.idle_timeout:g} s", "upstream_idle"
            )
        else:
            await self._close_with(
                f"the upstream stream broke: {exc}"
                if isinstance(exc, UpstreamError)
                else f"the upstream stream broke: {type(exc).__name__}: {exc}",
                "upstream_dropped",
            )

    async def _close_with(self, message: str, code: str) -> None:
        """End the current run with a RUN_ERROR of our own, recorded and forwarded.

        A run that already ended is left as it ended: a connection that breaks, stalls or is
        dropped by the client after RUN_FINISHED takes nothing from the run.
        """
        segment = self.segment
        if segment.terminal is not None:
            return
        data = recorder_error(message, code)
        event = NewEvent(data, "RUN_ERROR", RECORDER)
        segment.terminal, segment.outcome, segment.error = "RUN_ERROR", "error", message
        seq = segment.next_seq
        segment.next_seq += 1
        with contextlib.suppress(StoreError):
            await self.proxy.committer.append(segment.run_id, [event])
        await self._emit(encode_frame(data, seq))

    async def _finish(self) -> None:
        store_ok = self._store_failed is None or self.settings.on_store_failure == "continue"
        if self.segment.terminal is None and store_ok:
            await self._close_with(
                "the upstream ended the stream without RUN_FINISHED or RUN_ERROR",
                "upstream_incomplete",
            )
        first = self.segments[0]
        summary = well_formed("".join(self._summary)[:_SUMMARY_LIMIT]) if self._summary else None
        if summary is not None and first.closed:  # closed when a later run began
            await self.proxy.store.set_summary(first.thread_id, summary)
            summary = None
        for segment in self.segments:
            # The summary goes with the first run's status: closing it is one commit.
            await self._finish_segment(segment, summary if segment is first else None)

    async def _finish_segment(self, segment: _Segment, summary: str | None = None) -> None:
        if segment.closed:
            return
        segment.closed = True
        status = {"interrupt": "interrupted", "cancelled": "cancelled", "error": "error"}.get(
            segment.outcome or "", "finished"
        )
        error = segment.error
        if self._store_failed is not None:
            status, error = "error", f"store failure: {self._store_failed}"
        await self.proxy.store.set_status(
            segment.run_id,
            status,
            outcome=segment.outcome,
            error=error,
            violations=segment.problems,
            summary=summary,
        )


def _message_texts(posted: dict[str, Any]) -> list[str]:
    """The text of the posted messages, for searching threads by what was said."""
    texts: list[str] = []
    messages = posted.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content + "\n")
        elif isinstance(content, list):
            texts.extend(
                p["text"] + "\n"
                for p in content
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            )
    return texts


async def _read_capped(response: Response, limit: int) -> bytes:
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
    return f"recorder-{uuid.uuid4().hex[:12]}-{int(time.time())}"
