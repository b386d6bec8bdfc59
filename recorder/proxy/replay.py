"""Replaying journal records into the database, idempotently.

A journaled batch carries the seq of its first event, so a batch the run already holds
(its ``event_count`` is past it) is skipped: a pass cut short by a crash, or a write the
database committed after its deadline had passed, is not written twice. A run that exists
already with the same owner and creation time was created by an earlier pass; a status
already set is left alone. A run closed as ``incomplete`` meanwhile (by a reaper that saw
its heartbeat stop) is reopened: the journal holds the rest of it, its own status included.

A record the database refuses for good (a run id taken by another run meanwhile, a run
another process closed, a gap) is never dropped: it is copied to ``rejected.log`` beside
the journal, in the journal's format, logged and counted.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from recorder.errors import (
    Conflict,
    NotFound,
    NotMigrated,
    RecorderError,
    StoreError,
    StoreUnavailable,
)
from recorder.proxy.journal import MAGIC, Record, encode, orphans, read, recover, release
from recorder.store import Closing, EventStore, NewEvent, NewRun
from recorder.store.model import INCOMPLETE, RUNNING

LOG = logging.getLogger("recorder.journal")
_GROUP = 5000  # events per drained commit


def falls_back(exc: BaseException) -> bool:
    """Whether a store error means "the database cannot take writes now" (journal them) rather
    than "this write is wrong" (tell the caller)."""
    if isinstance(exc, NotMigrated):
        return False
    return isinstance(exc, StoreUnavailable) or type(exc) is StoreError


class Replay:
    """One pass of journal records into the database, skipping what it holds already."""

    def __init__(self, store: EventStore, directory: Path, refused: set[str] | None = None) -> None:
        self._store = store
        self._directory = directory
        # Appends of one pass are checked against these and committed in groups: the
        # database's counts are read once per run, then followed.
        self._counts: dict[str, int] = {}  # event_count of each run met, as of this pass
        # Runs whose creation the database refused: shared by the passes over one journal
        # (a pass cut short by the database leaves the rest of a refused run to the next,
        # past its create record).
        self.refused: set[str] = set() if refused is None else refused
        self._closed: set[str] = set()  # runs met closed
        self._incomplete: set[str] = set()  # runs met closed as incomplete
        self.rejected = 0
        self.owners: set[str] = set()

    async def run(self, path: Path, start: int, stop: int) -> int:
        """Replay the records between offsets ``start`` and ``stop``; where it got to (a
        commit of appends covers several records).

        The runs' counts are read afresh: writes that began before the outage may have
        committed since the last call.
        """
        self._counts.clear()
        group: list[tuple[str, int | None, list[NewEvent], Record]] = []
        size = 0
        for _end, record in read(path, start, stop):
            meta = record.meta
            if meta["op"] == "append":
                events = [
                    NewEvent(payload, kind, origin, when)
                    for payload, (kind, origin, when) in zip(
                        record.blobs, meta["events"], strict=True
                    )
                ]
                group.append((meta["run_id"], meta["first_seq"], events, record))
                size += len(events)
                if size < _GROUP:
                    continue
            await self._appends(group)
            group, size = [], 0
            if meta["op"] != "append":
                try:
                    await self._one(record)
                except RecorderError as exc:
                    if falls_back(exc):
                        raise
                    self._reject(record)  # refused for good: kept aside
        await self._appends(group)
        return stop

    async def _appends(self, group: list[tuple[str, int | None, list[NewEvent], Record]]) -> None:
        todo: list[tuple[str, list[NewEvent], Record]] = []
        for run_id, first, events, record in group:
            if run_id in self.refused:
                self._reject(record)
                continue
            count = await self._count(run_id)
            if count is None:
                self._reject(record)  # the run is not in the database
                continue
            if first is not None and count >= first + len(events):
                continue  # committed by an earlier pass, or after its deadline
            if run_id in self._closed or (first is not None and count != first):
                # Closed by someone else, or a gap: earlier events of the run are missing.
                self._reject(record)
                continue
            if run_id in self._incomplete:
                # Closed by a reaper while its writes were held in the journal, which has
                # the rest of it: reopened, it is closed again by its own records.
                await self._store.set_status(run_id, RUNNING)
                self._incomplete.discard(run_id)
            todo.append((run_id, events, record))
            self._counts[run_id] = count + len(events)
        if not todo:
            return
        try:
            await self._store.append_batches([(run_id, events) for run_id, events, _ in todo])
        except StoreError as exc:
            self._counts.clear()
            if falls_back(exc):
                raise
            for run_id, events, record in todo:  # one run's refusal must not stop the rest
                try:
                    await self._store.append_batches([(run_id, events)])
                except StoreError as one:
                    if falls_back(one):
                        raise
                    self._reject(record)

    async def _count(self, run_id: str) -> int | None:
        if run_id not in self._counts:
            try:
                run = await self._store.get_run(run_id)
            except NotFound:
                return None
            if run.owner is not None:
                self.owners.add(run.owner)
            if run.status == INCOMPLETE:
                self._incomplete.add(run_id)
            elif run.status != RUNNING:
                self._closed.add(run_id)
            self._counts[run_id] = run.event_count
        return self._counts[run_id]

    async def _one(self, record: Record) -> None:
        meta = record.meta
        op = meta["op"]
        if op == "create":
            await self._create(record)
        elif op == "status":
            if meta["run_id"] in self.refused:
                return self._reject(record)
            try:
                current = await self._store.get_run(meta["run_id"])
                if current.status == meta["status"] and current.status != RUNNING:
                    return None
                if meta["status"] == RUNNING or current.status == INCOMPLETE:
                    # (closed by a reaper while its end was held here: reopened, then
                    # closed by its own record)
                    await self._store.set_status(meta["run_id"], RUNNING)
                    if meta["status"] == RUNNING:
                        return None
                closing = Closing(
                    meta["run_id"],
                    meta["status"],
                    meta["outcome"],
                    meta["error"],
                    meta["violations"],
                    meta["summary"],
                    meta.get("at"),  # (journals of earlier versions: the replay's time)
                )
                await self._store.append_batches([(meta["run_id"], [])], [closing])
            except NotFound:
                self._reject(record)
        elif op == "summary":
            try:
                await self._store.set_summary(meta["thread_id"], meta["summary"])
            except NotFound:
                self._reject(record)
        return None

    async def _create(self, record: Record) -> None:
        meta = record.meta
        run = NewRun(
            run_id=meta["run_id"],
            thread_id=meta["thread_id"],
            agent=meta["agent"],
            input=record.blobs[0] if meta["has_input"] else None,
            parent_run_id=meta["parent_run_id"],
            parent_seq=meta["parent_seq"],
            parent_inferred=meta["parent_inferred"],
            origin=meta["origin"],
            owner=meta["owner"],
            created_at=meta["created_at"],
            infer_parent=meta["infer_parent"],
        )
        if run.owner is not None:
            self.owners.add(run.owner)
        try:
            await self._store.create_run(run)
            self._counts[run.run_id] = 0
        except Conflict:
            existing = await self._store.get_run(run.run_id)
            # Owners are unique per process, and a run's creation time is set once, before
            # its first write: the same three are this very run, created by an earlier pass
            # or by a write that committed past its deadline. Anything else is another run
            # that took the id (a duplicate posted during the outage, to this process too).
            same = (existing.owner, existing.thread_id, existing.created_at) == (
                run.owner,
                run.thread_id,
                run.created_at,
            )
            if not same:
                self.refused.add(run.run_id)
                self._reject(record)

    def _reject(self, record: Record) -> None:
        self.rejected += 1
        path = self._directory / "rejected.log"
        LOG.error("journal record refused by the database, kept in %s: %s", path, record.meta)
        with path.open("ab") as file:
            file.write(encode(record))


async def adopt(store: EventStore, directory: Path) -> set[str]:
    """Replay the journals left in ``directory`` by processes that are gone, then remove them;
    the owners of the runs they held (so that their runs still ``running`` can be closed).

    Raises ``JournalCorrupt`` for a damaged file (moved aside, kept), and the store's
    errors when the database fails meanwhile (the file stays for the next start).
    """
    owners: set[str] = set()
    for path, fd in orphans(directory):
        end = recover(path, fd)
        replay = Replay(store, directory)
        try:
            if end > len(MAGIC):
                await replay.run(path, len(MAGIC), end)
        except BaseException:
            os.close(fd)
            raise
        owners |= replay.owners
        if replay.rejected:
            LOG.error("%d journal records were refused; kept in %s", replay.rejected, directory)
        release(path, fd)
    return owners
