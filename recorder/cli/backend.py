"""The one interface every data command uses, and the choice between its two sides.

``Backend`` is the client library's own interface: a running server is asked through
``AsyncRecorderClient`` itself, and the database through ``LocalBackend``, which answers
from the same functions the API's routes call (``recorder.timetravel.views``) and builds
the same models. So ``--db`` and ``--url`` give the same answers, errors included.

A new question: answer it in ``recorder.timetravel.views``, route it in ``recorder.api``,
add it to ``AsyncRecorderClient``, to ``Backend`` and to ``LocalBackend``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Protocol

from recorder.cli.local import LocalBackend, describe_database
from recorder.client import AsyncRecorderClient
from recorder.client.transport import shown
from recorder.config import Settings
from recorder.errors import ConfigError
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
    ThreadPage,
    Verification,
)


class Backend(Protocol):
    async def threads(
        self,
        *,
        agent: str | None = ...,
        status: str | None = ...,
        since: str | None = ...,
        until: str | None = ...,
        text: str | None = ...,
        limit: int = ...,
        cursor: str | None = ...,
        tags: Mapping[str, str] | None = ...,
    ) -> ThreadPage: ...
    async def thread(self, thread_id: str) -> ThreadDetail: ...
    async def run(self, run_id: str) -> Run: ...
    async def events(self, run_id: str, *, after_seq: int = ..., limit: int = ...) -> EventPage: ...
    async def thread_state(
        self, thread_id: str, *, run_id: str | None = ..., seq: int | None = ...
    ) -> State: ...
    async def run_state(self, run_id: str, *, seq: int | None = ...) -> State: ...
    async def history(self, thread_id: str, *, limit: int = ...) -> list[Checkpoint]: ...
    async def verify(self, run_id: str) -> Verification: ...
    def replay_run(
        self, run_id: str, *, after_seq: int = ..., live: bool = ...
    ) -> AsyncIterator[StreamedEvent]: ...
    def replay_thread(
        self, thread_id: str, *, compact: bool = ..., live: bool = ...
    ) -> AsyncIterator[StreamedEvent]: ...
    async def plan_fork(self, run_id: str, options: ForkOptions, /) -> ForkPlan: ...
    def fork(self, run_id: str, options: ForkOptions, /) -> AsyncIterator[StreamedEvent]: ...
    def export_jsonl(self, thread_ids: Iterable[str] = ...) -> AsyncIterator[bytes]: ...
    async def import_jsonl(
        self, data: bytes | Iterable[bytes] | AsyncIterable[bytes]
    ) -> ImportReport: ...
    async def verify_chains(
        self, thread_ids: Iterable[str] = ..., run_ids: Iterable[str] = ...
    ) -> ChainVerification: ...
    async def receipt(self) -> Receipt: ...
    async def check_receipt(self, receipt: bytes) -> ChainVerification: ...
    async def audit_log(
        self, *, limit: int = ..., before: int | None = ..., action: str | None = ...
    ) -> AuditLog: ...
    async def purge(self, body: PurgeBody) -> PurgeResult: ...
    async def retention(self, *, dry_run: bool = ...) -> list[PurgeResult]: ...
    async def search(
        self,
        text: str = ...,
        *,
        syntax: bool = ...,
        agent: str | None = ...,
        kind: str | None = ...,
        tool: str | None = ...,
        status: str | None = ...,
        error_code: str | None = ...,
        since: str | None = ...,
        until: str | None = ...,
        thread_id: str | None = ...,
        run_id: str | None = ...,
        limit: int = ...,
        cursor: str | None = ...,
        tags: Mapping[str, str] | None = ...,
    ) -> SearchPage: ...
    async def reindex(self) -> ReindexReport: ...
    async def diff(
        self,
        run_id: str,
        *,
        from_seq: int = ...,
        to_seq: int | None = ...,
        to_run: str | None = ...,
    ) -> StateDiff: ...
    async def annotations(self, thread_id: str) -> ThreadAnnotations: ...
    async def set_tags(
        self,
        tags: Mapping[str, str | None],
        *,
        thread_id: str | None = ...,
        run_id: str | None = ...,
    ) -> ThreadAnnotations: ...
    async def add_note(
        self,
        text: str,
        *,
        author: str | None = ...,
        thread_id: str | None = ...,
        run_id: str | None = ...,
    ) -> Note: ...
    async def remove_note(self, note_id: str) -> ThreadAnnotations: ...
    async def set_score(
        self,
        value: float | None,
        *,
        author: str | None = ...,
        thread_id: str | None = ...,
        run_id: str | None = ...,
    ) -> ThreadAnnotations: ...


@asynccontextmanager
async def open_backend(
    settings: Settings, *, db_given: bool, url_given: bool, create: bool = False
) -> AsyncIterator[tuple[Backend, str]]:
    """The server (``--url``, or RECORDER_URL unless ``--db`` is given) or the database;
    with a sentence saying which, for ``-v``. ``create``: the database may be created."""
    if db_given and url_given:
        raise ConfigError("give --db or --url, not both")
    if settings.url and not db_given:
        async with AsyncRecorderClient(settings.url, token=settings.api_token) as client:
            yield client, f"asked the recorder at {shown(settings.url)}"
        return
    local = await LocalBackend.open(settings, create=create)
    try:
        yield local, f"read the database {describe_database(settings.db)}"
    finally:
        await local.close()
