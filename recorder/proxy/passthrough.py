"""The part of an ``EventStore`` that a wrapper passes straight to the database: reads,
derived data, annotations and administrative writes. ``JournaledStore`` takes over the
recording writes and inherits the rest from here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recorder.store import (
    Annotations,
    EventStore,
    Note,
    Page,
    Redaction,
    Run,
    SearchDoc,
    SearchFilter,
    Thread,
    ThreadFilter,
)
from recorder.store.model import (
    Action,
    ChainReport,
    Heads,
    PurgeReport,
    PurgeSelection,
    Redacted,
    Rewrite,
    RewriteReport,
    Tombstone,
)
from recorder.wire.events import RecordedEvent


class Passthrough:
    """Every method the database answers as it is, on ``self.store``."""

    store: EventStore

    async def migrate(self) -> None:
        await self.store.migrate()

    async def set_error(self, run_id: str, error: str) -> None:
        await self.store.set_error(run_id, error)

    async def heartbeat(self, run_ids: Sequence[str], owner: str) -> None:
        await self.store.heartbeat(run_ids, owner)

    async def mark_incomplete(
        self,
        *,
        owner: str | None = None,
        stale_before: float | None = None,
        exclude_owner: str | None = None,
    ) -> list[str]:
        return await self.store.mark_incomplete(
            owner=owner, stale_before=stale_before, exclude_owner=exclude_owner
        )

    async def get_run(self, run_id: str, *, input: bool = True) -> Run:
        return await self.store.get_run(run_id, input=input)

    async def read_events(
        self, run_id: str, *, gt: int = -1, lte: int | None = None, limit: int | None = None
    ) -> list[RecordedEvent]:
        return await self.store.read_events(run_id, gt=gt, lte=lte, limit=limit)

    async def read_payloads(self, run_id: str, *, gt: int, lte: int) -> list[bytes]:
        return await self.store.read_payloads(run_id, gt=gt, lte=lte)

    async def read_after(
        self, position: int, *, limit: int | None = None, thread_id: str | None = None
    ) -> list[RecordedEvent]:
        return await self.store.read_after(position, limit=limit, thread_id=thread_id)

    async def max_position(self) -> int:
        return await self.store.max_position()

    async def list_runs(self, thread_id: str, *, inputs: bool = False) -> list[Run]:
        return await self.store.list_runs(thread_id, inputs=inputs)

    async def get_thread(self, thread_id: str) -> Thread:
        return await self.store.get_thread(thread_id)

    async def list_forks(self, thread_id: str) -> list[Thread]:
        return await self.store.list_forks(thread_id)

    async def list_redactions(self, run_id: str) -> list[Redaction]:
        return await self.store.list_redactions(run_id)

    async def list_threads(
        self, filters: ThreadFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        return await self.store.list_threads(filters, limit=limit, cursor=cursor)

    async def lineage(self, run_id: str, *, inputs: bool = True) -> list[Run]:
        return await self.store.lineage(run_id, inputs=inputs)

    async def save_checkpoint(
        self, run_id: str, seq: int, data: bytes, *, seen: Run | None = None
    ) -> None:
        await self.store.save_checkpoint(run_id, seq, data, seen=seen)

    async def rewrite_inputs(
        self,
        thread_id: str,
        inputs: Mapping[str, bytes],
        *,
        redacted: Mapping[str, Redacted] | None = None,
    ) -> int:
        return await self.store.rewrite_inputs(thread_id, inputs, redacted=redacted)

    async def drop_checkpoints(self, run_id: str | None = None) -> int:
        return await self.store.drop_checkpoints(run_id)

    async def nearest_checkpoint(self, run_id: str, seq: int) -> tuple[int, bytes] | None:
        return await self.store.nearest_checkpoint(run_id, seq)

    async def run_checkpoint(
        self, run_id: str, seq: int | None = None
    ) -> tuple[Run, tuple[int, bytes] | None]:
        return await self.store.run_checkpoint(run_id, seq)

    async def heads(self) -> Heads:
        return await self.store.heads()

    async def list_actions(
        self, *, limit: int = 100, before: int | None = None, action: str | None = None
    ) -> list[Action]:
        return await self.store.list_actions(limit=limit, before=before, action=action)

    async def purge(
        self, selection: PurgeSelection, *, actor: str, reason: str | None, dry_run: bool = False
    ) -> PurgeReport:
        return await self.store.purge(selection, actor=actor, reason=reason, dry_run=dry_run)

    async def record_action(
        self,
        actor: str,
        action: str,
        target: str | None,
        outcome: str,
        detail: dict[str, Any] | None = None,
    ) -> int:
        return await self.store.record_action(actor, action, target, outcome, detail)

    async def rewrite(
        self,
        run_id: str,
        payloads: Mapping[int, bytes],
        *,
        actor: str,
        reason: str | None,
        redacted: Mapping[int, Redacted] | None = None,
        if_head: bytes | None = None,
    ) -> RewriteReport:
        return await self.store.rewrite(
            run_id, payloads, actor=actor, reason=reason, redacted=redacted, if_head=if_head
        )

    async def tombstones(self) -> list[Tombstone]:
        return await self.store.tombstones()

    async def rewrites(self) -> list[Rewrite]:
        return await self.store.rewrites()

    async def verify_chains(
        self,
        thread_ids: Sequence[str] = (),
        run_ids: Sequence[str] = (),
        *,
        marks: Mapping[str, int] | None = None,
    ) -> ChainReport:
        return await self.store.verify_chains(thread_ids, run_ids, marks=marks)

    async def wait(self, timeout: float) -> None:
        await self.store.wait(timeout)

    # Search and annotations: derived data and notes beside the log, straight to the
    # database (nothing of a run's recording depends on them).

    async def search(
        self, filters: SearchFilter, *, limit: int = 20, cursor: str | None = None
    ) -> Page:
        return await self.store.search(filters, limit=limit, cursor=cursor)

    async def runs_to_index(
        self, limit: int, *, owner: str | None = None, closed_before: float = 0.0
    ) -> list[str]:
        return await self.store.runs_to_index(limit, owner=owner, closed_before=closed_before)

    async def index_run(
        self,
        run_id: str,
        thread_id: str,
        docs: Sequence[SearchDoc],
        *,
        replace: bool = True,
        done: bool = True,
        seen: Run | None = None,
    ) -> int:
        return await self.store.index_run(
            run_id, thread_id, docs, replace=replace, done=done, seen=seen
        )

    async def clear_index(self, thread_id: str | None = None) -> None:
        await self.store.clear_index(thread_id)

    async def set_tags(
        self, thread_id: str, run_id: str | None, tags: Mapping[str, str | None]
    ) -> None:
        await self.store.set_tags(thread_id, run_id, tags)

    async def add_note(self, note: Note) -> None:
        await self.store.add_note(note)

    async def remove_note(self, note_id: str) -> str:
        return await self.store.remove_note(note_id)

    async def set_score(
        self, thread_id: str, run_id: str | None, value: float | None, author: str | None
    ) -> None:
        await self.store.set_score(thread_id, run_id, value, author)

    async def annotations(self, thread_id: str) -> Annotations:
        return await self.store.annotations(thread_id)

    async def restore_annotations(self, saved: Annotations) -> None:
        await self.store.restore_annotations(saved)
