"""The proxy's writes, riding through database outages on a local journal.

``JournaledStore`` is the store the proxy records through. While the database takes its
writes, they go straight to it (the journal costs one task per commit and nothing else).
When a write cannot be committed (the database is unreachable, fails, or takes longer
than ``store_deadline``), that write and every later one go to the journal instead,
flushed to disk before the caller goes on: a frame the client sees is durable somewhere,
and a run is durable before its agent is called. Writes keep their order: once the
journal holds anything, everything goes there until it has been drained.

The drain runs in the background. It waits for the database to answer, then replays the
journal in order; once it has caught up with the writers (checked and switched with no
await in between, so no write slips past), the journal is truncated and writes go to the
database again. The live runs' clients see none of it.

Replaying (``replay.py``) is idempotent: a crash midway, or a write the database
committed after its deadline, is not written twice. The drain waits for such late writes
to end before it replays anything, so none can commit behind it.

Bounds: past ``journal_max_bytes`` of journal, or ``journal_max_outage`` seconds after the
outage began, new runs and new events are refused (``StoreUnavailable``), so the proxy's
``on_store_failure`` applies to them; statuses and summaries are still journaled, so that
every run it holds can be closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from recorder.config import Settings
from recorder.errors import (
    ConfigError,
    Conflict,
    StoreError,
    StoreUnavailable,
)
from recorder.proxy.journal import (
    DATABASE_NOTE,
    JournalFile,
    Record,
    journal_directory,
    left_beside,
)
from recorder.proxy.passthrough import Passthrough
from recorder.proxy.replay import Replay, adopt, falls_back
from recorder.store import (
    Appended,
    Closing,
    EventStore,
    NewEvent,
    NewRun,
    Run,
    shown_url,
)
from recorder.store.closing import check_closes
from recorder.store.model import (
    RUNNING,
    TERMINAL,
)
from recorder.telemetry import NO_OBSERVER, Observer

T = TypeVar("T")
LOG = logging.getLogger("recorder.journal")
_GROUP = 5000  # events per drained commit
_RETRY = (0.2, 0.5, 1.0, 2.0)  # seconds between attempts to reach the database
_LAST_DRAIN = 10.0  # seconds a closing recorder gives its journal to reach the database


class _Fallback(Exception):
    """The database did not take the write: journal it."""


class JournaledStore(Passthrough):
    """An ``EventStore`` whose writes fall back on a journal; reads go to the database
    (``Passthrough``)."""

    def __init__(
        self,
        store: EventStore,
        journal: JournalFile,
        *,
        deadline: float,
        max_bytes: int,
        max_outage: float,
    ) -> None:
        self.url = store.url
        self.store = store
        self.journal = journal
        self._deadline = deadline
        self._max_bytes = max_bytes
        self._max_outage = max_outage
        self._survives = store.append_survives_cancel
        self._next: dict[str, int] = {}  # each live run's next seq, known to this process
        # Runs of this process whose creation the replay refused (their id was taken by
        # another run meanwhile): nothing more of theirs is written, anywhere.
        self._refused: set[str] = set()
        self._abandoned: set[asyncio.Task[Any]] = set()
        self._drain: asyncio.Task[None] | None = None
        self._drained = journal.start  # the offset up to which the journal was replayed
        self.degraded_since: float | None = None
        self.reason: str | None = None
        self.rejected = 0
        self.private = False  # the directory is a temporary one of this process's
        self.observer: Observer = NO_OBSERVER  # hears of the journal's size

    @property
    def append_survives_cancel(self) -> bool:
        return self._survives

    @property
    def degraded(self) -> bool:
        """The journal holds writes the database has yet to take."""
        return self.degraded_since is not None

    def health(self) -> dict[str, Any]:
        """The journal's state, as ``/healthz`` reports it (``JournalHealth``)."""
        first = self.journal.first_at
        return {
            "bytes": self.journal.size,
            "records": self.journal.records,
            "commits": self.journal.commits,
            "ageSeconds": round(time.time() - first, 3) if first is not None else 0.0,
            "reason": self.reason,
            "rejected": self.rejected,
        }

    # -- writes ----------------------------------------------------------------------------

    async def create_run(self, run: NewRun) -> Run:
        if run.run_id in self._next:
            # Still being recorded by this process: a second run of that id would share
            # its seqs in the journal (the database refuses it too, when it is up).
            raise Conflict(f"run {run.run_id!r} already exists")
        if run.created_at is None:  # one time for the run, whichever way it is written
            run = dataclasses.replace(run, created_at=time.time())
        if not self.degraded:
            try:
                created = await self._direct(self.store.create_run(run))
            except _Fallback:
                pass
            else:
                self._next[run.run_id] = 0
                return created
        self._within_bounds()
        when = run.created_at or time.time()  # (set above)
        meta = {
            "op": "create",
            "run_id": run.run_id,
            "thread_id": run.thread_id,
            "agent": run.agent,
            "parent_run_id": run.parent_run_id,
            "parent_seq": run.parent_seq,
            "parent_inferred": run.parent_inferred,
            "origin": run.origin,
            "owner": run.owner,
            "created_at": when,
            "infer_parent": run.infer_parent,
            "has_input": run.input is not None,
        }
        await self._journal([Record(meta, () if run.input is None else (run.input,))])
        self._next[run.run_id] = 0
        return _journaled_run(run, when)

    async def append(self, run_id: str, events: Sequence[NewEvent]) -> list[Appended]:
        return (await self.append_batches([(run_id, events)]))[0]

    async def append_batches(
        self,
        batches: Sequence[tuple[str, Sequence[NewEvent]]],
        closes: Sequence[Closing] = (),
    ) -> list[list[Appended]]:
        """As the store's; a journaled event's ``position`` is 0 (it gets one when drained).
        Journaled, the closes follow the events as records of their own, replayed in order
        (one commit each, as when they were written apart)."""
        self._check_refused([run_id for run_id, _events in batches])
        if not self.degraded:
            try:
                results = await self._direct(self.store.append_batches(batches, closes))
            except _Fallback:
                pass
            else:
                for (run_id, _events), appended in zip(batches, results, strict=True):
                    if appended:
                        self._next[run_id] = appended[-1].seq + 1
                for close in closes:
                    self._next.pop(close.run_id, None)
                return results
        check_closes(closes)
        self._within_bounds()
        now = time.time()
        records: list[Record] = []
        results = []
        for run_id, events in batches:
            first = self._next.get(run_id)
            meta = {
                "op": "append",
                "run_id": run_id,
                "first_seq": first,
                "events": [
                    [e.type, e.origin, now if e.recorded_at is None else e.recorded_at]
                    for e in events
                ],
            }
            records.append(Record(meta, tuple(e.payload for e in events)))
            start = first or 0
            results.append([Appended(seq, 0) for seq in range(start, start + len(events))])
            if first is not None:
                self._next[run_id] = first + len(events)
        for close in closes:
            self._next.pop(close.run_id, None)
            records.append(Record(_status_meta(close, now)))
        await self._journal(records)
        return results

    async def set_status(
        self,
        run_id: str,
        status: str,
        *,
        outcome: str | None = None,
        error: str | None = None,
        violations: list[dict[str, object]] | None = None,
        summary: str | None = None,
    ) -> None:
        self._check_refused([run_id])
        if status in TERMINAL:
            self._next.pop(run_id, None)
        if not self.degraded:
            try:
                write = self.store.set_status(
                    run_id,
                    status,
                    outcome=outcome,
                    error=error,
                    violations=violations,
                    summary=summary,
                )
                return await self._direct(write)
            except _Fallback:
                pass
        closing = Closing(run_id, status, outcome, error, violations, summary)
        await self._journal([Record(_status_meta(closing, time.time()))])

    async def set_summary(self, thread_id: str, summary: str) -> None:
        if not self.degraded:
            try:
                return await self._direct(self.store.set_summary(thread_id, summary))
            except _Fallback:
                pass
        await self._journal([Record({"op": "summary", "thread_id": thread_id, "summary": summary})])

    def _check_refused(self, run_ids: Sequence[str]) -> None:
        """A run the replay refused goes no further: after the drain its writes would go
        straight into the run that holds its id (``Conflict``: the recording stops)."""
        if not self._refused:
            return
        for run_id in run_ids:
            if run_id in self._refused:
                raise Conflict(
                    f"run {run_id!r} was refused when the journal reached the database: its "
                    "id belongs to another run"
                )

    # -- the database, or else the journal -------------------------------------------------

    async def _direct(self, write: Coroutine[Any, Any, T]) -> T:
        """``write``, committed by the database within the deadline; else ``_Fallback``.

        Its first step runs right here: a write that completes without waiting (SQLite's
        small commits, on the event loop) costs nothing more than it did. One that has to
        wait goes on as a task of its own, so that the deadline can release the caller;
        one past the deadline is left to finish (or fail) on its own, and the drain waits
        for it before replaying anything.
        """
        try:
            try:
                waiting_on = write.send(None)
            except StopIteration as done:
                value: T = done.value
                return value
            task: asyncio.Task[T] = asyncio.ensure_future(_go_on(write, waiting_on))
            finished, _ = await asyncio.wait((task,), timeout=self._deadline)
            if not finished:
                self._abandoned.add(task)
                task.add_done_callback(_forget(self._abandoned))
                raise _Fallback(f"the database took more than {self._deadline:g} s to commit")
            return task.result()
        except StoreError as exc:
            if falls_back(exc):
                raise _Fallback(str(exc)) from exc
            raise

    def _within_bounds(self) -> None:
        held = self.journal.size
        if held >= self._max_bytes:
            raise StoreUnavailable(
                f"the database is unavailable and the journal is full ({held} bytes)"
            )
        since = self.degraded_since
        if since is not None and time.time() - since > self._max_outage:
            raise StoreUnavailable(
                f"the database has been unavailable for over {self._max_outage:g} s"
            )

    async def _journal(self, records: list[Record]) -> None:
        if self.degraded_since is None:
            self.degraded_since = time.time()
            self.reason = "the database is unavailable"
            LOG.warning("database unavailable: journaling writes to %s", self.journal.path)
        if self._drain is None or self._drain.done():
            self._drain = asyncio.create_task(self._drain_when_back(), name="journal-drain")
        try:
            await self.journal.append(records)
        except OSError as exc:
            raise StoreUnavailable(
                "the database is unavailable and the journal cannot be written"
            ) from exc
        self.observer.journal_size(self.journal.size)

    # -- the drain -------------------------------------------------------------------------

    async def _drain_when_back(self) -> None:
        attempt = 0
        while True:
            await asyncio.sleep(_RETRY[min(attempt, len(_RETRY) - 1)])
            was = self._drained
            if await self._drain_once():
                return
            attempt = 0 if self._drained > was else attempt + 1

    async def _drain_once(self) -> bool:
        """Replay what the journal holds; True once it is empty and writes go to the
        database again."""
        replay = Replay(self.store, self.journal.path.parent, self._refused)
        try:
            while self._drained < self.journal.synced:
                # A write abandoned at its deadline is in ``_abandoned`` before its record
                # is in the journal: once they have all ended, none of the records up to
                # here can be committed twice.
                await self._settle_abandoned()
                self._drained = await replay.run(
                    self.journal.path, self._drained, self.journal.synced
                )
        except StoreError as exc:
            if not falls_back(exc):
                LOG.exception("the journal could not be drained")
            self.reason = "the database is unavailable"
            return False
        finally:
            self.rejected += replay.rejected
        self.reason = "the journal is being written to the database"
        if self._drained < self.journal.synced or not self.journal.idle:
            return False
        # No await since the check: no write can land between it and the switch.
        self.journal.truncate()
        self.observer.journal_size(0)
        self._drained = self.journal.start
        self.degraded_since = self.reason = None
        LOG.warning("database back: the journal was drained")
        return True

    async def _settle_abandoned(self) -> None:
        """Let writes left past their deadline end, so none commits behind the drain."""
        pending = list(self._abandoned)
        if not pending:
            return
        if not self._survives:
            for task in pending:
                task.cancel()  # a cancelled PostgreSQL write rolls back
        await asyncio.wait(pending)

    async def close(self) -> None:
        """Stop draining; one last attempt first, so that a recorder stopped once its
        database is back leaves nothing behind (what is left is replayed at the next start)."""
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain
        if self.degraded:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._drain_once(), _LAST_DRAIN)
        with contextlib.suppress(Exception):
            await self._settle_abandoned()
        self.journal.close(remove=not self.degraded)
        directory = self.journal.path.parent
        if self.private:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                if not any(directory.glob("journal-*")):  # nothing is left to replay
                    (directory / DATABASE_NOTE).unlink(missing_ok=True)
                directory.rmdir()  # only when empty (a rejected.log is kept)


async def _go_on(write: Coroutine[Any, Any, T], waiting_on: Any) -> T:
    """Run ``write`` on from where its first step stopped, waiting on ``waiting_on``.

    This is what a task does with a coroutine's steps: wait for the future it yielded (a
    bare ``yield``, None, is one turn of the loop), then resume it; the coroutine reads the
    future's outcome (a result, an error, a cancellation) itself when resumed.
    """
    while True:
        if waiting_on is None:
            await asyncio.sleep(0)
        else:
            # Taken over from the step that yielded it, as a task's step does.
            waiting_on._asyncio_future_blocking = False
            with contextlib.suppress(BaseException):
                await waiting_on
        try:
            waiting_on = write.send(None)
        except StopIteration as done:
            value: T = done.value
            return value


def _forget(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    def done(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: an abandoned write's failure is expected

    return done


def _journaled_run(run: NewRun, when: float) -> Run:
    return Run(
        run_id=run.run_id,
        thread_id=run.thread_id,
        agent=run.agent,
        status=RUNNING,
        input=run.input,
        parent_run_id=run.parent_run_id,
        parent_seq=run.parent_seq,
        parent_inferred=run.parent_inferred,
        origin=run.origin,
        outcome=None,
        error=None,
        violations=[],
        event_count=0,
        created_at=when,
        finished_at=None,
        heartbeat_at=when,
        owner=run.owner,
    )


async def recover(settings: Settings, store: EventStore) -> None:
    """Replay the journals that processes now gone left for this database, then close their
    runs still ``running`` (they will never end) as ``incomplete``.

    Raises ``JournalCorrupt`` for a damaged journal (moved aside and kept), the store's
    errors when the database fails meanwhile (the journal stays for the next start).
    """
    directory, private = journal_directory(settings.journal_dir, store.url)
    if private:
        directory.rmdir()
        return
    for owner in sorted(await adopt(store, directory)):
        await store.mark_incomplete(owner=owner)
    if settings.journal_dir is None and not directory.name.endswith(".journal"):
        # Kept by database URL, as spelled: a crash's journal under another spelling of
        # this database would be missed without a word.
        for other, url in left_beside(directory):
            LOG.warning(
                "journals left by a recorder that stopped are in %s (for %s): if that is this "
                "database, start once with journal_dir set to it to replay them",
                other,
                url or "a database not named there",
            )


async def open_journaled(settings: Settings, store: EventStore) -> JournaledStore:
    """The journaled store for ``store``, once the journals of processes that are gone are
    replayed (``recover``), with a journal of this process's own."""
    await recover(settings, store)
    directory, private = journal_directory(settings.journal_dir, store.url)
    try:
        journal = JournalFile.create(directory)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the journal in {directory} ({exc.strerror or exc}): "
            "set journal_dir to a writable directory, or journal = false"
        ) from exc
    if settings.journal_dir is None and not private and not directory.name.endswith(".journal"):
        with contextlib.suppress(OSError):  # (what the warning above names it by)
            (directory / DATABASE_NOTE).write_text(shown_url(store.url) + "\n")
    journaled = JournaledStore(
        store,
        journal,
        deadline=settings.store_deadline,
        max_bytes=settings.journal_max_bytes,
        max_outage=settings.journal_max_outage,
    )
    journaled.private = private
    return journaled


def _status_meta(closing: Closing, now: float) -> dict[str, Any]:
    """A journal record's ``status`` op: ``set_status``'s arguments, and when it was set
    (a run that ended during an outage keeps its end time, not the replay's)."""
    return {
        "op": "status",
        "run_id": closing.run_id,
        "status": closing.status,
        "outcome": closing.outcome,
        "error": closing.error,
        "violations": closing.violations,
        "summary": closing.summary,
        "at": closing.finished_at if closing.finished_at is not None else now,
    }
