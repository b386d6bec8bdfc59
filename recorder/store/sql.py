"""The SQL event store: one body per operation, the database deciding only how it runs.

Why bodies are generators. The two databases are driven in opposite ways: SQLite's
recording path is synchronous ``sqlite3`` (a small transaction runs right on the event
loop, where a hop to a thread would cost more than the transaction; a large one runs whole
on a writer thread), and PostgreSQL is asyncpg, where every statement is an ``await``. A
body written against a cursor would have to exist twice, once ``def`` and once ``async
def``, which is how this store used to keep two copies of its recording path. So each
operation's body (``writes.py``, ``reads.py``) is written once, as plain code that yields
its statements (``statements.py``) and is sent their results: it never sees a connection.
``SQLiteDatabase`` drives it with a loop of ``conn.execute``; ``PostgresDatabase`` with a
loop of ``await``. Driving costs a generator step per statement, far below a statement.

Who does what. A public method here opens the transaction (``Database.write`` or
``Database.read``, inside the one error boundary, ``errors.store_errors``); the body does
the work. Each database owns its connections and how a transaction runs on them: where
(loop or thread), its locks (PostgreSQL's append lock), how SQL is rendered (placeholders,
``FOR UPDATE``), how events are inserted (blocks of rows
that share what they can, ``statements.EventBlock``) and how other
processes hear of commits (``NOTIFY``). SQLAlchemy describes the schema for Alembic and
parses URLs; no statement of the store goes through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol, TypeVar

from recorder.errors import RunNotFound, StoreError
from recorder.store import (
    annotation,
    calls,
    chain,
    closing,
    governance,
    reads,
    search,
    verify,
    writes,
)
from recorder.store.calls import HeadCache
from recorder.store.deltas import Recent, RecentInputs, delta
from recorder.store.errors import Failure, store_errors
from recorder.store.inputs import (
    CHUNK_CACHE_BYTES,
    INLINE_BELOW,
    ChunkCache,
    InputTree,
    LastTrees,
)
from recorder.store.model import (
    TERMINAL,
    Action,
    Annotations,
    Appended,
    ChainReport,
    Closing,
    Heads,
    NewEvent,
    NewRun,
    Note,
    Page,
    PurgeReport,
    PurgeSelection,
    Redacted,
    Redaction,
    Rewrite,
    RewriteReport,
    Run,
    SearchDoc,
    SearchFilter,
    Thread,
    ThreadFilter,
    Tombstone,
)
from recorder.store.statements import Body
from recorder.wire.events import RecordedEvent

T = TypeVar("T")


class Database(Protocol):
    """How bodies run on one database (``sqlite.py``, ``postgres.py``).

    ``write`` runs a body in one write transaction (committed, or rolled back if it
    raises); ``read`` runs one outside a write transaction. Both take a function that makes
    the body, so a transaction that has to start over gets a fresh one. ``events`` and
    ``size`` say how much a write carries (SQLite runs small ones on the event loop).
    ``alone``: the body is one statement, which the database may run outside a transaction
    of its own making (PostgreSQL: one round trip instead of three), once: it is sent again
    on another connection, when its connection is found broken, only if ``idempotent``.
    ``one_trip``: the database has the functions of ``calls.py`` (PostgreSQL, migrated).
    ``small`` (a read): a few rows found by key, which SQLite reads on the event loop.
    ``patient`` (a read): one that may take long on a healthy database (it walks the whole
    log), given no read deadline.
    ``scrub`` leaves no byte of what was deleted or overwritten in the database's own
    files where it can (SQLite: its WAL checkpointed and emptied), after a purge or rewrite.
    """

    url: str
    dialect: str
    append_survives_cancel: bool
    one_trip: bool

    def classify(self, exc: BaseException) -> Failure | None: ...
    async def write(
        self,
        body: Callable[[], Body[T]],
        *,
        events: int = 0,
        size: int = 0,
        alone: bool = False,
        idempotent: bool = False,
    ) -> T: ...
    async def read(
        self, body: Callable[[], Body[T]], *, small: bool = False, patient: bool = False
    ) -> T: ...
    async def migrate(self) -> None: ...
    async def scrub(self) -> None: ...
    async def listen(self, wake: asyncio.Event) -> None: ...
    async def close(self) -> None: ...


_PAYLOAD = operator.itemgetter(0)  # a NewEvent's payload
_FEW_EVENTS = 256  # a read of at most this many events counts as small
_ADDED_AT_MOST = 64 * 1024  # past what a run's input holds (doubled), no delta is tried


class SqlStore:
    """The ``EventStore`` on a SQL database (the contract is documented on the port)."""

    def __init__(
        self,
        database: Database,
        *,
        checkpoint_deltas: bool | None = None,
        chunk_cache_bytes: int = CHUNK_CACHE_BYTES,
    ) -> None:
        self.database = database
        # A closed run's last checkpoint kept as a delta from its input (``save_checkpoint``):
        # by default on PostgreSQL, where each row of a tree costs about 90 bytes of header
        # and index entry and a read trip is cheap beside the read budget; on SQLite trees
        # (rows cost a few bytes there, and reading a delta's input first doubles a read).
        self._checkpoint_deltas = (
            database.dialect == "postgresql" if checkpoint_deltas is None else checkpoint_deltas
        )
        self.url = database.url
        self._wake = asyncio.Event()
        self._listening = False
        self._chunks = ChunkCache(chunk_cache_bytes)
        self._recent = RecentInputs()
        self._checkpoint_trees = LastTrees()
        self._input_trees = LastTrees()  # a thread's input kept as a tree last
        self._heads = HeadCache()

    @property
    def chunk_cache(self) -> ChunkCache:
        """The chunks this process read or wrote lately (``chunk_cache_bytes`` at most)."""
        return self._chunks

    @property
    def append_survives_cancel(self) -> bool:
        return self.database.append_survives_cancel

    async def close(self) -> None:
        await self.database.close()

    async def migrate(self) -> None:
        with store_errors(self.database.classify):
            await self.database.migrate()

    # -- writing ---------------------------------------------------------------------------

    async def create_run(self, run: NewRun) -> Run:
        taken = f"run {run.run_id!r} already exists"
        kept = self._keep(run)
        created: Run | None = None
        if self.database.one_trip and calls.can_create(run, kept):
            call = partial(calls.create_run, run, kept, time.time())
            created = await self._write(call, 1, 0, taken, alone=True, idempotent=True)
            if created is None:  # the delta's base is gone: a tree (or whole) after all
                kept = writes.Kept(
                    tree=self._tree_after(self._input_trees, run.thread_id, run.input)
                )
        if created is None:
            # A tree or a delta usually adds a little to what is stored: a small transaction.
            size = 0 if kept.tree is not None or kept.delta is not None else len(run.input or b"")
            dialect = self.database.dialect
            created = await self._write(
                lambda: writes.create_run(run, kept, dialect), 1, size, taken
            )
        if self.database.one_trip:
            genesis = chain.run_genesis(run.thread_id, run.run_id)
            self._heads.update({run.run_id: writes.Head(0, genesis)})
        if kept.tree is not None:
            self._chunks.put(kept.tree.chunks.values())
        if run.input is not None and len(run.input) >= INLINE_BELOW:
            self._recent.put(
                Recent(run.run_id, run.thread_id, created.created_at, kept.depth, run.input)
            )
        return created

    def _keep(self, run: NewRun) -> writes.Kept:
        """How to keep the run's input: as a delta from a recent input of its thread when
        they have enough in common, else whole or as a tree."""
        posted = run.input
        if posted is None or len(posted) < INLINE_BELOW:
            return writes.Kept()
        base = self._recent.base(run.thread_id)
        if base is not None:
            changes = delta(base.data, posted)
            if changes is not None:
                return writes.Kept(
                    base=base.run_id,
                    base_created=base.created_at,
                    delta=changes,
                    depth=base.depth + 1,
                )
        return writes.Kept(tree=self._tree_after(self._input_trees, run.thread_id, posted))

    def _tree_after(self, trees: LastTrees, key: str, data: bytes | None) -> InputTree | None:
        """``data`` as a tree (None when kept whole), cut from the tree kept last under
        ``key`` in ``trees``, and kept there in its place: a thread's next input repeats
        the history before it, its next checkpoint the messages, so only what came since
        is cut and hashed."""
        tree = writes.input_tree(data, self._chunks.get, trees.get(key))
        if tree is not None:
            trees.put(key, tree)
        return tree

    async def append(self, run_id: str, events: Sequence[NewEvent]) -> list[Appended]:
        return (await self.append_batches([(run_id, events)]))[0]

    async def append_batches(
        self,
        batches: Sequence[tuple[str, Sequence[NewEvent]]],
        closes: Sequence[Closing] = (),
    ) -> list[list[Appended]]:
        count = size = 0
        for _run_id, events in batches:
            count += len(events)
            size += sum(map(len, map(_PAYLOAD, events)))  # (loops in C)
        closing.check_closes(closes)
        dialect = self.database.dialect
        if not self.database.one_trip:
            result = await self._write(
                lambda: closing.then_close(writes.append_batches(batches), closes, dialect),
                count,
                size,
            )
            self._wake.set()
            return result
        run_ids = [run_id for run_id, _events in batches]
        closed = [close.run_id for close in closes]
        try:
            heads = self._heads.known(run_ids)
            found = None
            if (
                heads is not None
                and calls.can_append(batches, closes)
                and not any(e.redacted for _r, es in batches for e in es)
            ):
                call = partial(calls.append_batches, batches, heads, closes)
                found = await self._write(call, count, size, alone=True, idempotent=True)
            if heads is None or found is None:
                # A head unknown, or stale: the statements read the run's own.
                heads = {}
                appending = partial(writes.append_batches, batches, heads)
                found = await self._write(
                    lambda: closing.then_close(appending(), closes, dialect), count, size
                )
        except BaseException:
            self._heads.forget(run_ids + closed)  # whether it was written is not known here
            raise
        self._heads.update(heads)
        self._heads.forget(closed)
        self._wake.set()
        return found

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
        if status in TERMINAL and self.database.dialect == "postgresql":
            # One round trip; a run without a thread row is closed the usual way.
            self._heads.forget([run_id])
            close = partial(closing.close_alone, run_id, status, outcome, error, violations)
            if await self._write(lambda: close(summary), alone=True, idempotent=True):
                self._wake.set()
                return
        await self._write(
            lambda: closing.set_status(run_id, status, outcome, error, violations, summary)
        )
        self._wake.set()

    async def set_error(self, run_id: str, error: str) -> None:
        await self._write(lambda: closing.set_error(run_id, error))

    async def set_summary(self, thread_id: str, summary: str) -> None:
        await self._write(lambda: closing.set_summary(thread_id, summary))

    async def heartbeat(self, run_ids: Sequence[str], owner: str) -> None:
        # One run per transaction: a group commit locks several run rows in its own order,
        # and a heartbeat locking them in another order could deadlock with it.
        for run_id in run_ids:
            await self._write(partial(writes.heartbeat, run_id, owner))

    async def mark_incomplete(
        self,
        *,
        owner: str | None = None,
        stale_before: float | None = None,
        exclude_owner: str | None = None,
    ) -> list[str]:
        closed = await self._write(
            lambda: closing.mark_incomplete(owner, stale_before, exclude_owner)
        )
        if closed:
            self._heads.forget(closed)
            self._wake.set()
        return closed

    async def save_checkpoint(
        self, run_id: str, seq: int, data: bytes, *, seen: Run | None = None
    ) -> None:
        dialect = self.database.dialect
        changes = await self._from_input(run_id, seq, data, seen)
        if changes is not None:
            await self._write(
                lambda: writes.save_checkpoint(
                    run_id, seq, changes, None, dialect, seen, from_input=True
                ),
                0,
                len(changes),
            )
            return
        # The checkpoint written before this one in its thread (the run's previous one, or
        # its parent's last) holds the same messages, and more come at their end: what
        # they share is not cut and hashed again.
        thread = seen.thread_id if seen is not None else run_id
        tree = self._tree_after(self._checkpoint_trees, thread, data)
        size = 0 if tree is not None else len(data)
        saved = await self._write(
            lambda: writes.save_checkpoint(run_id, seq, data, tree, dialect, seen), 0, size
        )
        if saved and tree is not None:
            self._chunks.put(tree.chunks.values())
            # Joined ahead of its first read (the state at this point, asked for soon
            # after, as a reload does): its nodes shared with the tree before are already.
            reads.join_ahead(tree.root, self._chunks)

    async def _from_input(
        self, run_id: str, seq: int, data: bytes, seen: Run | None
    ) -> bytes | None:
        """The checkpoint at a closed run's last event as a delta from the run's posted
        input, where deltas are kept and it has one: the input holds the messages and the
        state the run started from, so the delta holds about what the run added."""
        if (
            not self._checkpoint_deltas
            or len(data) < INLINE_BELOW  # kept whole: read without the input
            or seen is None
            or seen.status not in TERMINAL
            or seq != seen.event_count - 1
            or seen.input_rewritten_at is not None  # a redacted input: kept on its own
        ):
            return None
        # The input as this store wrote it, if that run is the one ``seen`` is (not one
        # purged since and posted again under its id); the save checks the rest.
        recent = self._recent.latest(seen.thread_id)
        if recent is not None and recent.run_id == run_id and recent.created_at == seen.created_at:
            posted: bytes | None = recent.data
        else:
            try:
                posted = (await self.get_run(run_id)).input
            except RunNotFound:
                return None
        if posted is None or len(data) > 2 * len(posted) + _ADDED_AT_MOST:
            return None  # a run that added most of it: the delta would be most of it too
        return delta(posted, data, moves=True)

    async def drop_checkpoints(self, run_id: str | None = None) -> int:
        return await self._write(lambda: writes.drop_checkpoints(run_id))

    # -- governance ------------------------------------------------------------------------

    async def purge(
        self, selection: PurgeSelection, *, actor: str, reason: str | None, dry_run: bool = False
    ) -> PurgeReport:
        dialect = self.database.dialect
        report = await self._write(
            lambda: governance.purge(selection, actor, reason, dry_run, dialect)
        )
        if not dry_run:
            for thread in report.threads:  # no delta is taken from a purged input
                self._recent.forget(thread.thread_id)
            await self._scrub()
        return report

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
        size = sum(len(p) for p in payloads.values())
        dialect = self.database.dialect
        report = await self._write(
            lambda: governance.rewrite(run_id, payloads, actor, reason, dialect, redacted, if_head),
            len(payloads),
            size,
        )
        self._wake.set()
        await self._scrub()
        return report

    async def rewrite_inputs(
        self,
        thread_id: str,
        inputs: Mapping[str, bytes],
        *,
        redacted: Mapping[str, Redacted] | None = None,
    ) -> int:
        kept = {run_id: writes.whole_or_tree(data) for run_id, data in inputs.items()}
        size = sum(map(len, inputs.values()))
        dialect = self.database.dialect
        try:
            rewritten = await self._write(
                lambda: governance.rewrite_inputs(
                    thread_id, kept, dialect, self._chunks, redacted or {}
                ),
                len(inputs),
                size,
            )
            await self._scrub()
            return rewritten
        finally:
            self._recent.forget(thread_id)
            for _whole, tree in kept.values():
                if tree is not None:
                    self._chunks.put(tree.chunks.values())

    async def record_action(
        self,
        actor: str,
        action: str,
        target: str | None,
        outcome: str,
        detail: dict[str, Any] | None = None,
    ) -> int:
        return await self._write(
            lambda: governance.record_action(actor, action, target, outcome, detail)
        )

    async def list_actions(
        self, *, limit: int = 100, before: int | None = None, action: str | None = None
    ) -> list[Action]:
        return await self._read(lambda: governance.list_actions(limit, before, action))

    async def tombstones(self) -> list[Tombstone]:
        return await self._read(governance.tombstones)

    async def rewrites(self) -> list[Rewrite]:
        return await self._read(governance.rewrites)

    async def verify_chains(
        self,
        thread_ids: Sequence[str] = (),
        run_ids: Sequence[str] = (),
        *,
        marks: Mapping[str, int] | None = None,
    ) -> ChainReport:
        wanted = dict(marks or {})
        return await self._read(lambda: verify.verify(thread_ids, run_ids, wanted), patient=True)

    async def heads(self) -> Heads:
        return await self._read(lambda: verify.heads(time.time()), patient=True)

    # -- reading ---------------------------------------------------------------------------

    async def get_run(self, run_id: str, *, input: bool = True) -> Run:
        return await self._read(lambda: reads.get_run(run_id, input, self._chunks), small=True)

    async def read_events(
        self, run_id: str, *, gt: int = -1, lte: int | None = None, limit: int | None = None
    ) -> list[RecordedEvent]:
        # A few events (what a state answer folds past its checkpoint) are read inline.
        few = (lte is not None and lte - gt <= _FEW_EVENTS) or (
            limit is not None and limit <= _FEW_EVENTS
        )
        return await self._read(lambda: reads.read_events(run_id, gt, lte, limit), small=few)

    async def read_payloads(self, run_id: str, *, gt: int, lte: int) -> list[bytes]:
        few = lte - gt <= _FEW_EVENTS
        return await self._read(lambda: reads.read_payloads(run_id, gt, lte), small=few)

    async def read_after(
        self, position: int, *, limit: int | None = None, thread_id: str | None = None
    ) -> list[RecordedEvent]:
        return await self._read(lambda: reads.read_after(position, limit, thread_id))

    async def max_position(self) -> int:
        return await self._read(reads.max_position, small=True)

    async def list_runs(self, thread_id: str, *, inputs: bool = False) -> list[Run]:
        return await self._read(lambda: reads.list_runs(thread_id, inputs, self._chunks))

    async def get_thread(self, thread_id: str) -> Thread:
        return await self._read(lambda: reads.get_thread(thread_id), small=True)

    async def list_redactions(self, run_id: str) -> list[Redaction]:
        return await self._read(lambda: reads.list_redactions(run_id))

    async def list_forks(self, thread_id: str) -> list[Thread]:
        return await self._read(lambda: reads.list_forks(thread_id))

    async def list_threads(
        self, filters: ThreadFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        wanted = filters or ThreadFilter()
        return await self._read(lambda: reads.list_threads(wanted, limit, cursor))

    async def lineage(self, run_id: str, *, inputs: bool = True) -> list[Run]:
        return await self._read(lambda: reads.lineage(run_id, inputs, self._chunks))

    async def nearest_checkpoint(self, run_id: str, seq: int) -> tuple[int, bytes] | None:
        return await self._read(
            lambda: reads.nearest_checkpoint(run_id, seq, self._chunks), small=True
        )

    async def run_checkpoint(
        self, run_id: str, seq: int | None = None
    ) -> tuple[Run, tuple[int, bytes] | None]:
        return await self._read(lambda: reads.run_checkpoint(run_id, seq, self._chunks), small=True)

    # -- annotations -----------------------------------------------------------------------

    async def set_tags(
        self, thread_id: str, run_id: str | None, tags: Mapping[str, str | None]
    ) -> None:
        now = time.time()
        await self._write(lambda: annotation.set_tags(thread_id, run_id, tags, now))

    async def add_note(self, note: Note) -> None:
        await self._write(lambda: annotation.add_note(note))

    async def remove_note(self, note_id: str) -> str:
        return await self._write(lambda: annotation.remove_note(note_id))

    async def set_score(
        self, thread_id: str, run_id: str | None, value: float | None, author: str | None
    ) -> None:
        now = time.time()
        await self._write(lambda: annotation.set_score(thread_id, run_id, value, author, now))

    async def annotations(self, thread_id: str) -> Annotations:
        return await self._read(lambda: annotation.get(thread_id))

    async def restore_annotations(self, saved: Annotations) -> None:
        await self._write(lambda: annotation.restore(saved))

    # -- the search index ------------------------------------------------------------------

    async def search(
        self, filters: SearchFilter, *, limit: int = 20, cursor: str | None = None
    ) -> Page:
        dialect = self.database.dialect
        return await self._read(lambda: search.search(dialect, filters, limit, cursor))

    async def runs_to_index(
        self, limit: int, *, owner: str | None = None, closed_before: float = 0.0
    ) -> list[str]:
        return await self._read(lambda: search.pending_runs(limit, owner, closed_before))

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
        dialect, now = self.database.dialect, time.time()
        prepared = [(doc, search.document_terms(dialect, doc)) for doc in docs]
        size = 1 << 30  # never a small write: SQLite runs it on its thread, off the loop
        return await self._write(
            lambda: search.index_run(
                dialect, run_id, thread_id, prepared, replace, done, now, seen
            ),
            len(docs),
            size,
        )

    async def clear_index(self, thread_id: str | None = None) -> None:
        dialect = self.database.dialect
        await self._write(lambda: search.clear_index(dialect, thread_id), 0, 1 << 30)

    async def wait(self, timeout: float) -> None:
        if not self._listening:
            self._listening = True
            await self.database.listen(self._wake)
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    # -- private ---------------------------------------------------------------------------

    async def _write(
        self,
        body: Callable[[], Body[T]],
        events: int = 1,
        size: int = 0,
        duplicate: str | None = None,
        *,
        alone: bool = False,
        idempotent: bool = False,
    ) -> T:
        with store_errors(self.database.classify, duplicate=duplicate):
            return await self.database.write(
                body, events=events, size=size, alone=alone, idempotent=idempotent
            )

    async def _scrub(self) -> None:
        """What was just deleted or overwritten out of the files too, where it can be: best
        effort (what it cannot do now, the next checkpoint does; the change is committed)."""
        with contextlib.suppress(StoreError):
            with store_errors(self.database.classify):
                await self.database.scrub()

    async def _read(
        self, body: Callable[[], Body[T]], *, small: bool = False, patient: bool = False
    ) -> T:
        with store_errors(self.database.classify):
            return await self.database.read(body, small=small, patient=patient)
