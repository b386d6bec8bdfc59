"""``LocalBackend``: the CLI's questions answered from the database, as the API answers them.

Read commands open the database as it is: a missing SQLite file is an error naming the
commands that create one, never an empty new database, and nothing is migrated. Only
``import`` (``create=True``) may create and migrate one. A fork runs the proxy in this
process, so it needs the agent's URL in this command's settings.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from recorder.client.transport import agent_answer
from recorder.config import Settings
from recorder.errors import InputError, NotMigrated, RecorderError, StoreUnavailable
from recorder.models import (
    AuditLog,
    ChainVerification,
    Checkpoint,
    EventPage,
    ForkOptions,
    ForkPlan,
    ImportReport,
    Note,
    PurgeBody,
    PurgeResult,
    Receipt,
    ReindexReport,
    Run,
    SearchPage,
    State,
    StateDiff,
    StreamedEvent,
    ThreadAnnotations,
    ThreadDetail,
    ThreadHistory,
    ThreadPage,
    Verification,
)
from recorder.proxy.proxy import Relay
from recorder.redaction import Redactor
from recorder.runtime import Runtime
from recorder.store import EventStore, open_store, shown_url
from recorder.timetravel import annotating, audit, receipts, views
from recorder.timetravel import search as search_answers
from recorder.timetravel.audit import CLI, audited
from recorder.timetravel.diff import diff as state_diff
from recorder.timetravel.fork import ForkPlan as Plan
from recorder.timetravel.fork import fork_request, plan_fork
from recorder.timetravel.history import History
from recorder.timetravel.indexing import Indexer
from recorder.timetravel.replay import ThreadStream, stream_run
from recorder.timetravel.transfer import check_threads, export_lines, import_lines
from recorder.wire.sse import FrameSplitter


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for other databases and in-memory ones)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).resolve()


def describe_database(url: str) -> str:
    """The URL without its password; a SQLite file by its absolute path."""
    path = sqlite_file(url)
    if path is not None:
        return f"sqlite+aiosqlite:///{path}"
    return shown_url(url)


async def open_database(settings: Settings, *, create: bool) -> EventStore:
    url = settings.db
    path = sqlite_file(url)
    if path is not None and not create and not path.exists():
        raise StoreUnavailable(
            f"no database at {path}: `recorder migrate --db {url}` creates one "
            "(so does `recorder serve`)"
        )
    store = await open_store(url, migrate=create, read_deadline=settings.read_deadline)
    try:
        await store.max_position()
    except NotMigrated as exc:  # a database no recorder made
        await store.close()
        raise StoreUnavailable(
            f"the database {describe_database(url)} has no recorder tables: "
            f"`recorder migrate --db {url}` creates them"
        ) from exc
    except RecorderError:
        await store.close()
        raise
    return store


class LocalBackend:
    def __init__(self, settings: Settings, store: EventStore) -> None:
        self.settings = settings
        self.store = store
        self._history = History(store, checkpoint_every=settings.checkpoint_every)

    @classmethod
    async def open(cls, settings: Settings, *, create: bool = False) -> LocalBackend:
        return cls(settings, await open_database(settings, create=create))

    async def close(self) -> None:
        await self.store.close()

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
        page = await views.list_threads(
            self.store,
            agent=agent,
            status=status,
            since=since,
            until=until,
            text=text,
            limit=limit,
            cursor=cursor,
            tags=tuple((tags or {}).items()),
        )
        return ThreadPage.model_validate(page)

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
        await self._index_pending()
        page = await search_answers.search(
            self.store,
            text=text,
            syntax=syntax,
            agent=agent,
            kind=kind,
            tool=tool,
            status=status,
            error_code=error_code,
            since=since,
            until=until,
            thread_id=thread_id,
            run_id=run_id,
            limit=limit,
            cursor=cursor,
            tags=tuple((tags or {}).items()),
        )
        return SearchPage.model_validate(page)

    async def diff(
        self,
        run_id: str,
        *,
        from_seq: int = -1,
        to_seq: int | None = None,
        to_run: str | None = None,
    ) -> StateDiff:
        answer = await state_diff(
            self.store, self._history, run_id, from_seq=from_seq, to_seq=to_seq, to_run=to_run
        )
        return StateDiff.model_validate(answer)

    async def reindex(self) -> ReindexReport:
        return ReindexReport(runs=await Indexer(self.store).reindex())

    async def _index_pending(self) -> None:
        """Index the closed runs the index lacks before searching: what a recorder had no
        time to index (stopped, or crashed, right after its runs closed) is found all the
        same. Derived data, as a checkpoint a first query builds; with search indexing off
        (the settings), search finds what ``reindex`` indexed, as a server's does."""
        if not self.settings.search_index:
            return
        with contextlib.suppress(RecorderError):  # (a database it cannot write: as it is)
            await Indexer(self.store).index_pending()

    async def annotations(self, thread_id: str) -> ThreadAnnotations:
        saved = await annotating.thread_annotations(self.store, thread_id)
        return ThreadAnnotations.model_validate(saved)

    async def set_tags(
        self,
        tags: Mapping[str, str | None],
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> ThreadAnnotations:
        saved = await annotating.set_tags(self.store, tags, thread_id=thread_id, run_id=run_id)
        return ThreadAnnotations.model_validate(saved)

    async def add_note(
        self,
        text: str,
        *,
        author: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> Note:
        note = await annotating.add_note(
            self.store, text, author, thread_id=thread_id, run_id=run_id
        )
        return Note.model_validate(note)

    async def remove_note(self, note_id: str) -> ThreadAnnotations:
        saved = await annotating.remove_note(self.store, note_id)
        return ThreadAnnotations.model_validate(saved)

    async def set_score(
        self,
        value: float | None,
        *,
        author: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> ThreadAnnotations:
        saved = await annotating.set_score(
            self.store, value, author, thread_id=thread_id, run_id=run_id
        )
        return ThreadAnnotations.model_validate(saved)

    async def thread(self, thread_id: str) -> ThreadDetail:
        return ThreadDetail.model_validate(await views.thread_detail(self.store, thread_id))

    async def run(self, run_id: str) -> Run:
        return Run.model_validate(await views.run_detail(self.store, run_id))

    async def events(self, run_id: str, *, after_seq: int = -1, limit: int = 1000) -> EventPage:
        page = await views.events_page(self.store, run_id, after_seq=after_seq, limit=limit)
        return EventPage.model_validate(page)

    async def thread_state(
        self, thread_id: str, *, run_id: str | None = None, seq: int | None = None
    ) -> State:
        at = await views.thread_state(self.store, self._history, thread_id, run_id=run_id, seq=seq)
        return State.model_validate(at)

    async def run_state(self, run_id: str, *, seq: int | None = None) -> State:
        return State.model_validate(
            await views.run_state(self.store, self._history, run_id, seq=seq)
        )

    async def history(self, thread_id: str, *, limit: int = 100) -> list[Checkpoint]:
        found = await views.thread_history(self.store, self._history, thread_id, limit=limit)
        return ThreadHistory.model_validate(found).checkpoints

    async def verify(self, run_id: str) -> Verification:
        return Verification.model_validate(await views.verify_run(self.store, run_id))

    async def replay_run(
        self, run_id: str, *, after_seq: int = -1, live: bool = True
    ) -> AsyncIterator[StreamedEvent]:
        await self.store.get_run(run_id)
        views.check_after_seq(after_seq)
        async for event in _events(stream_run(self.store, run_id, after_seq=after_seq, live=live)):
            yield event

    async def replay_thread(
        self, thread_id: str, *, compact: bool = False, live: bool = True
    ) -> AsyncIterator[StreamedEvent]:
        await self.store.get_thread(thread_id)
        stream = ThreadStream(self.store, self._history, live=live)
        async for event in _events(stream.frames(thread_id, compact=compact)):
            yield event

    async def plan_fork(self, run_id: str, options: ForkOptions, /) -> ForkPlan:
        plan = await self._plan(run_id, options)
        return ForkPlan.model_validate(views.plan_view(plan))

    async def fork(self, run_id: str, options: ForkOptions, /) -> AsyncIterator[StreamedEvent]:
        plan = await self._plan(run_id, options)
        if plan.agent not in self.settings.agents:
            raise InputError(
                f"run {run_id!r} was recorded through agent {plan.agent!r}, whose URL this "
                f"command does not know: give --agent {plan.agent}=URL (or RECORDER_AGENTS="
                f"{plan.agent}=URL, or a config file), or fork through the server with --url"
            )
        runtime = await Runtime.start(self.settings, self.store)
        try:
            parent = (plan.parent_run_id, plan.parent_seq)
            detail = {"runId": plan.input.get("runId"), "threadId": plan.thread_id}
            async with audited(self.store, CLI, "fork", run_id, detail):
                result = await runtime.proxy.start(
                    plan.agent,
                    plan.body,
                    {},
                    parent=parent,
                    new_thread=plan.strategy == "new-thread",
                )
            if isinstance(result, Relay):
                raise agent_answer(result.status, result.body)
            async for event in _events(result.chunks):
                yield event
        finally:
            await runtime.close()

    async def _plan(self, run_id: str, options: ForkOptions) -> Plan:
        """The fork's plan; its strategy from this command's agent settings, as a server
        takes it from its own."""
        request = fork_request(options)
        settings = self.settings
        return await plan_fork(
            self.store, self._history, run_id, request, settings.agents, settings.max_body_bytes
        )

    async def export_jsonl(self, thread_ids: Iterable[str] = ()) -> AsyncIterator[bytes]:
        ids = list(thread_ids)
        await check_threads(self.store, ids)
        async for line in export_lines(self.store, ids):
            yield line

    async def import_jsonl(
        self, data: bytes | Iterable[bytes] | AsyncIterable[bytes]
    ) -> ImportReport:
        lines = data.splitlines() if isinstance(data, bytes) else data
        rules = self.settings.redaction
        redactor = Redactor.from_config(rules) if rules.rules else None
        async with audited(self.store, CLI, "import", None) as noted:
            report = await import_lines(self.store, lines, redactor)
            noted.update(views.import_view(report))
        return ImportReport.model_validate(views.import_view(report))

    async def verify_chains(
        self, thread_ids: Iterable[str] = (), run_ids: Iterable[str] = ()
    ) -> ChainVerification:
        answer = await audit.verify(self.store, list(thread_ids), list(run_ids))
        return ChainVerification.model_validate(answer)

    async def receipt(self) -> Receipt:
        return Receipt.model_validate(await receipts.receipt(self.store, self.settings.audit_key))

    async def check_receipt(self, receipt: bytes) -> ChainVerification:
        body = receipts.read_receipt(receipt)
        answer = await receipts.check_receipt(self.store, body, self.settings.audit_key)
        return ChainVerification.model_validate(answer)

    async def audit_log(
        self, *, limit: int = 100, before: int | None = None, action: str | None = None
    ) -> AuditLog:
        answer = await audit.audit_log(self.store, limit=limit, before=before, action=action)
        return AuditLog.model_validate(answer)

    async def purge(self, body: PurgeBody) -> PurgeResult:
        chosen = audit.selection(body.thread_ids, body.older_than, body.agent)
        answer = await audit.purge(
            self.store, chosen, actor=CLI, reason=body.reason, dry_run=body.dry_run
        )
        return PurgeResult.model_validate(answer)

    async def retention(self, *, dry_run: bool = False) -> list[PurgeResult]:
        settings = self.settings
        if settings.retention is None and not settings.retention_agents:
            raise InputError("no retention is set (retention, retention_agents)")
        answers = await audit.apply_retention(self.store, settings, dry_run=dry_run)
        return [PurgeResult.model_validate(answer) for answer in answers]


async def _events(chunks: AsyncIterator[bytes]) -> AsyncIterator[StreamedEvent]:
    """The events of an SSE byte stream (as a server's client would parse them)."""
    splitter = FrameSplitter()
    async for chunk in chunks:
        for frame in splitter.feed(chunk):
            yield StreamedEvent(frame.data, frame.id)
    for frame in splitter.close():
        yield StreamedEvent(frame.data, frame.id)
