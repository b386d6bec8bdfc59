"""``AsyncRecorderClient``: every question the HTTP API answers, as typed results."""

from __future__ import annotations

import math
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from recorder.client import transport
from recorder.errors import InputError, RecorderError, RunNotFound, ThreadNotFound
from recorder.models import (
    Agent,
    AgentList,
    AuditLog,
    ChainVerification,
    Checkpoint,
    Event,
    EventPage,
    ForkBody,
    ForkOptions,
    ForkPlan,
    Health,
    ImportReport,
    Note,
    PurgeBody,
    PurgeResult,
    Receipt,
    ReindexReport,
    Run,
    SearchHit,
    SearchPage,
    State,
    StateDiff,
    StreamedEvent,
    Thread,
    ThreadAnnotations,
    ThreadDetail,
    ThreadHistory,
    ThreadPage,
    Verification,
)
from recorder.wire.jsontext import parse

M = TypeVar("M", bound=BaseModel)
Lines = bytes | Iterable[bytes] | AsyncIterable[bytes]
_PURGES = TypeAdapter(list[PurgeResult])


class AsyncRecorderClient:
    """A client for the recorder at ``base_url`` (e.g. ``http://127.0.0.1:8000``).

    Use it as an async context manager, or call ``aclose()``. ``token`` is the server's API
    token, if it has one. ``transport`` is for tests (an ``httpx.ASGITransport``, say).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            transport=transport,
            trust_env=False,
        )
        # A stream may stay quiet for as long as its agent thinks.
        self._stream_timeout = httpx.Timeout(timeout, read=None)

    async def __aenter__(self) -> AsyncRecorderClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the service -------------------------------------------------------------------------

    async def health(self) -> Health:
        return await self._get(Health, "/healthz")

    async def agents(self) -> list[Agent]:
        return (await self._get(AgentList, "/agents")).agents

    # -- threads and runs --------------------------------------------------------------------

    async def threads(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
        text: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> ThreadPage:
        """One page of threads, most recently updated first; ``next_cursor`` fetches the next.
        ``tags``: key/value pairs each on the thread or one of its runs."""
        params = {"agent": agent, "status": status, "since": since, "until": until, "q": text}
        tag = _tag_filters(tags)
        return await self._get(
            ThreadPage, "/threads", limit=limit, cursor=cursor, tag=tag, **params
        )

    async def iter_threads(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
        text: str | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[Thread]:
        """Every matching thread, page after page."""
        cursor = None
        while True:
            page = await self.threads(
                agent=agent,
                status=status,
                since=since,
                until=until,
                text=text,
                limit=page_size,
                cursor=cursor,
            )
            for thread in page.threads:
                yield thread
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def thread(self, thread_id: str) -> ThreadDetail:
        return await self._get(ThreadDetail, f"/threads/{_thread(thread_id)}")

    async def run(self, run_id: str) -> Run:
        return await self._get(Run, f"/runs/{_run(run_id)}")

    async def events(self, run_id: str, *, after_seq: int = -1, limit: int = 1000) -> EventPage:
        """One page of the run's recorded events after ``after_seq``."""
        path = f"/runs/{_run(run_id)}/events"
        return await self._get(EventPage, path, afterSeq=after_seq, limit=limit)

    async def iter_events(
        self, run_id: str, *, after_seq: int = -1, page_size: int = 1000
    ) -> AsyncIterator[Event]:
        """Every recorded event of the run after ``after_seq``, page after page."""
        while True:
            page = await self.events(run_id, after_seq=after_seq, limit=page_size)
            for event in page.events:
                yield event
            if page.next_after_seq is None:
                return
            after_seq = page.next_after_seq

    # -- state and history -------------------------------------------------------------------

    async def thread_state(
        self, thread_id: str, *, run_id: str | None = None, seq: int | None = None
    ) -> State:
        """The thread at a point of one of its runs (default: the end of its latest run)."""
        path = f"/threads/{_thread(thread_id)}/state"
        return await self._get(State, path, runId=run_id, seq=seq)

    async def run_state(self, run_id: str, *, seq: int | None = None) -> State:
        """Messages, state and pending interrupts after event ``seq`` (default: the end)."""
        return await self._get(State, f"/runs/{_run(run_id)}/state", seq=seq)

    async def history(self, thread_id: str, *, limit: int = 100) -> list[Checkpoint]:
        """The thread at every run boundary, newest first: each run's end, then its start
        (what its agent was given), with the (run, seq) of the point."""
        path = f"/threads/{_thread(thread_id)}/history"
        return (await self._get(ThreadHistory, path, limit=limit)).checkpoints

    async def verify(self, run_id: str) -> Verification:
        """The reference client's lifecycle checks over the run's recorded events."""
        return await self._get(Verification, f"/runs/{_run(run_id)}/verify")

    # -- streams -----------------------------------------------------------------------------

    async def replay_run(
        self, run_id: str, *, after_seq: int = -1, live: bool = True
    ) -> AsyncIterator[StreamedEvent]:
        """The run's recorded events after ``after_seq`` exactly as recorded, then (``live``)
        new ones until the run ends."""
        params = {"afterSeq": after_seq, "live": _flag(live)}
        async with self._stream("GET", f"/runs/{_run(run_id)}/stream", params=params) as answer:
            async for event in transport.events(answer):
                yield event

    async def replay_thread(
        self, thread_id: str, *, compact: bool = False, live: bool = True
    ) -> AsyncIterator[StreamedEvent]:
        """The thread's current branch as one stream a fresh AG-UI client folds into the
        thread's messages and state (``compact``: one synthetic run of snapshots)."""
        params = {"compact": _flag(compact), "live": _flag(live)}
        path = f"/threads/{_thread(thread_id)}/stream"
        async with self._stream("GET", path, params=params) as answer:
            async for event in transport.events(answer):
                yield event

    # -- fork --------------------------------------------------------------------------------

    async def plan_fork(
        self, run_id: str, options: ForkOptions | None = None, /, **fields: Any
    ) -> ForkPlan:
        """A dry run of ``fork``: the RunAgentInput it would post, and to which agent."""
        body = _fork_body(options, fields, dry_run=True)
        response = await self._send("POST", f"/runs/{_run(run_id)}/fork", json=body)
        return _validated(ForkPlan, response.content)

    async def fork(
        self, run_id: str, options: ForkOptions | None = None, /, **fields: Any
    ) -> AsyncIterator[StreamedEvent]:
        """Fork a new run from a point of ``run_id`` (``ForkOptions``, or its fields as
        keywords: ``at_seq``, ``messages``, ``state``, ...) and stream it as it is recorded."""
        body = _fork_body(options, fields, dry_run=False)
        async with self._stream("POST", f"/runs/{_run(run_id)}/fork", json=body) as answer:
            async for event in transport.events(answer):
                yield event

    # -- export and import -------------------------------------------------------------------

    async def export_jsonl(self, thread_ids: Iterable[str] = ()) -> AsyncIterator[bytes]:
        """The threads (default: all) as JSONL lines: each run, then its events."""
        params = {"threadId": list(thread_ids)}
        async with self._stream("GET", "/export", params=params) as answer:
            async for line in transport.lines(answer):
                yield line

    async def import_jsonl(self, data: Lines) -> ImportReport:
        """Import an export (bytes, or its lines); importing twice adds nothing."""
        content = data if isinstance(data, bytes) else _upload(data)
        headers = {"content-type": "application/x-ndjson"}
        response = await self._send("POST", "/import", content=content, headers=headers)
        return _validated(ImportReport, response.content)

    # -- governance --------------------------------------------------------------------------

    async def verify_chains(
        self, thread_ids: Iterable[str] = (), run_ids: Iterable[str] = ()
    ) -> ChainVerification:
        """Recompute the hash chains of these threads and runs (every thread when none)."""
        params = {"threadId": list(thread_ids), "runId": list(run_ids)}
        response = await self._send("GET", "/audit/verify", params=params)
        return _validated(ChainVerification, response.content)

    async def receipt(self) -> Receipt:
        """The log's heads now, signed with the server's ``audit_key`` when it has one."""
        return await self._get(Receipt, "/audit/receipt")

    async def check_receipt(self, receipt: bytes) -> ChainVerification:
        """Whether the log up to ``receipt`` (as ``receipt()`` gave it) is unchanged."""
        headers = {"content-type": "application/json"}
        response = await self._send("POST", "/audit/verify", content=receipt, headers=headers)
        return _validated(ChainVerification, response.content)

    async def audit_log(
        self, *, limit: int = 100, before: int | None = None, action: str | None = None
    ) -> AuditLog:
        """Write and admin actions, newest first."""
        return await self._get(AuditLog, "/audit/log", limit=limit, before=before, action=action)

    async def purge(self, body: PurgeBody) -> PurgeResult:
        """Delete threads with everything of theirs (``dry_run``: list what would go)."""
        response = await self._send("POST", "/admin/purge", json=body.to_json())
        return _validated(PurgeResult, response.content)

    async def retention(self, *, dry_run: bool = False) -> list[PurgeResult]:
        """One pass of the server's retention settings (``dry_run``: list what would go)."""
        params = {"dryRun": "true" if dry_run else "false"}
        response = await self._send("POST", "/admin/retention", params=params)
        return _PURGES.validate_json(response.content)

    async def diff(
        self,
        run_id: str,
        *,
        from_seq: int = -1,
        to_seq: int | None = None,
        to_run: str | None = None,
    ) -> StateDiff:
        """From after event ``from_seq`` of the run (-1: its start) to after ``to_seq`` (None:
        the end) of ``to_run`` (None: the same run): the state's RFC 6902 patch and the
        messages added, removed and changed."""
        point = {"toRun": to_run, "toSeq": to_seq} if to_run is not None else {"to": to_seq}
        path = f"/runs/{_run(run_id)}/diff"
        return await self._get(StateDiff, path, **{"from": from_seq}, **point)

    # -- search ------------------------------------------------------------------------------

    async def search(
        self,
        text: str = "",
        *,
        syntax: bool = False,
        agent: str | None = None,
        kind: str | None = None,
        tool: str | None = None,
        status: str | None = None,
        error_code: str | None = None,
        since: str | None = None,
        until: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> SearchPage:
        """One page of hits in recorded content, best first; ``next_cursor`` for more.
        ``tags``: key/value pairs each on the hit's thread or run."""
        params = {
            "q": text,
            "syntax": "true" if syntax else None,
            "agent": agent,
            "kind": kind,
            "tool": tool,
            "status": status,
            "errorCode": error_code,
            "since": since,
            "until": until,
            "threadId": thread_id,
            "runId": run_id,
        }
        tag = _tag_filters(tags)
        return await self._get(SearchPage, "/search", limit=limit, cursor=cursor, tag=tag, **params)

    async def iter_search(self, /, text: str = "", **filters: Any) -> AsyncIterator[SearchHit]:
        """Every hit, page after page (the same filters as ``search``)."""
        cursor = None
        while True:
            page = await self.search(text, cursor=cursor, **filters)
            for hit in page.hits:
                yield hit
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def reindex(self) -> ReindexReport:
        """Drop the search index and build it again from the log (no time limit: a large
        log takes a while)."""
        response = await self._send("POST", "/search/reindex", timeout=None)
        return _validated(ReindexReport, response.content)

    # -- annotations -------------------------------------------------------------------------

    async def annotations(self, thread_id: str) -> ThreadAnnotations:
        """The thread's tags, notes and score, and its runs' (``runs``)."""
        path = f"/threads/{_thread(thread_id)}/annotations"
        return await self._get(ThreadAnnotations, path)

    async def set_tags(
        self,
        tags: Mapping[str, str | None],
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> ThreadAnnotations:
        """Set tags on a thread or a run (a None value removes that tag)."""
        path = _target(thread_id, run_id) + "/tags"
        response = await self._send("PATCH", path, json=dict(tags))
        return _validated(ThreadAnnotations, response.content)

    async def add_note(
        self,
        text: str,
        *,
        author: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> Note:
        """Add a note to a thread or a run."""
        body = {"text": text, "author": author}
        response = await self._send("POST", _target(thread_id, run_id) + "/notes", json=body)
        return _validated(Note, response.content)

    async def remove_note(self, note_id: str) -> ThreadAnnotations:
        """Forget a note; its thread's annotations after."""
        response = await self._send("DELETE", f"/notes/{_seg(note_id)}")
        return _validated(ThreadAnnotations, response.content)

    async def set_score(
        self,
        value: float | None,
        *,
        author: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> ThreadAnnotations:
        """Score a thread or a run (None removes its score)."""
        path = _target(thread_id, run_id) + "/score"
        if value is None:
            response = await self._send("DELETE", path)
        elif not math.isfinite(value):  # (JSON has no NaN nor infinity to send it as)
            raise InputError("a score must be a finite number")
        else:
            response = await self._send("PUT", path, json={"value": value, "author": author})
        return _validated(ThreadAnnotations, response.content)

    # -- plumbing ----------------------------------------------------------------------------

    async def _get(self, model: type[M], path: str, **params: Any) -> M:
        query = {k: v for k, v in params.items() if v is not None}
        response = await self._send("GET", path, params=query)
        return _validated(model, response.content)

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise transport.unreachable(self.base_url, exc) from exc
        await transport.check(response)
        return response

    @asynccontextmanager
    async def _stream(self, method: str, path: str, **kwargs: Any) -> AsyncIterator[httpx.Response]:
        request = self._http.build_request(method, path, timeout=self._stream_timeout, **kwargs)
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise transport.unreachable(self.base_url, exc) from exc
        try:
            await transport.check(response)
            yield response
        except httpx.TransportError as exc:
            raise transport.unreachable(self.base_url, exc) from exc
        finally:
            await response.aclose()


def _seg(value: str) -> str:
    """A path segment: ids may hold any character."""
    return quote(value, safe="")


# Ids no URL can carry as a segment (a URL resolves dots away, and an empty one names
# another route): the recorder records none, so none is found, as with the database.
_UNROUTABLE = ("", ".", "..")


def _thread(thread_id: str) -> str:
    if thread_id in _UNROUTABLE:
        raise ThreadNotFound(thread_id)
    return _seg(thread_id)


def _run(run_id: str) -> str:
    if run_id in _UNROUTABLE:
        raise RunNotFound(run_id)
    return _seg(run_id)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _fork_body(options: ForkOptions | None, fields: dict[str, Any], *, dry_run: bool) -> Any:
    given = (options or ForkOptions()).model_dump(by_alias=False, exclude_unset=True)
    try:
        body = ForkBody.model_validate({**given, **fields, "dry_run": dry_run})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise InputError(f"fork options: {problems}") from exc
    return body.model_dump(mode="json", by_alias=True, exclude_unset=True)


async def _upload(lines: Iterable[bytes] | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(lines, AsyncIterable):
        async for line in lines:
            yield line
    else:
        for line in lines:
            yield line


def _target(thread_id: str | None, run_id: str | None) -> str:
    if run_id is not None and thread_id is not None:
        raise InputError("name a thread or a run, not both (a run's annotations are its own)")
    if run_id is not None:
        return f"/runs/{_run(run_id)}"
    if thread_id is None:
        raise InputError("name a thread or a run")
    return f"/threads/{_thread(thread_id)}"


def _tag_filters(tags: Mapping[str, str] | None) -> list[str] | None:
    return [f"{key}:{value}" for key, value in tags.items()] if tags else None


def _validated(model: type[M], content: bytes) -> M:
    """The answer as ``model``; pydantic's own JSON reader refuses half a surrogate pair,
    which an answer may hold (it holds what the agent streamed), so that is read as the
    recorder reads it."""
    try:
        return model.model_validate_json(content)
    except ValidationError as exc:
        if exc.errors()[0]["type"] != "json_invalid":
            raise _not_ours(model, content, exc) from exc
    try:
        return model.model_validate(parse(content))
    except (ValueError, ValidationError) as exc:  # not JSON at all (a page), or not this
        raise _not_ours(model, content, exc) from exc


def _not_ours(model: type[BaseModel], content: bytes, exc: Exception) -> RecorderError:
    """An answer that is not the recorder's (another server at that URL, a proxy's page,
    or a recorder of another version): what it is not, and why."""
    excerpt = content[:80].decode("utf-8", "replace").strip()
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the answer"
        why = f"{where}: {first['msg']}"
    else:
        why = "not JSON"
    return RecorderError(
        f"the server's answer is not a recorder's {model.__name__} ({why}; is the URL a "
        f"recorder's, of this version?): {excerpt!r}"
    )
