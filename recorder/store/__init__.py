"""The event store: the port (``EventStore``) and ``open_store``, where a database is chosen.

Errors every method may raise besides those it names (``recorder.errors``):
``StoreUnavailable`` when the database cannot be reached, opened or written (gone, full,
locked by another process for too long); ``InputError`` for a value the database cannot
hold (text with a NUL character on PostgreSQL, a number out of range); ``StoreError`` for
anything else the database reports. Their messages never carry the driver's text, which
stays on the chained cause. A method that raises has changed nothing.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from recorder.errors import ConfigError
from recorder.store.errors import store_errors
from recorder.store.inputs import CHUNK_CACHE_BYTES
from recorder.store.model import (
    Action,
    Annotations,
    Appended,
    ChainProblem,
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
    SearchHit,
    Thread,
    ThreadFilter,
    ThreadSource,
    Tombstone,
)
from recorder.store.postgres import PostgresDatabase
from recorder.store.sql import Database, SqlStore
from recorder.store.sqlite import SQLiteDatabase
from recorder.wire.events import RecordedEvent


class EventStore(Protocol):
    """An append-only log of AG-UI frames, keyed by thread and run.

    Every write is one transaction: it happens whole or not at all.
    """

    url: str
    """The database URL the store was opened with."""

    @property
    def append_survives_cancel(self) -> bool:
        """True when an append that has begun commits or fails whole even if its caller
        is cancelled (SQLite); False when cancelling the caller rolls it back (PostgreSQL)."""
        ...

    async def close(self) -> None:
        """Wait for a write in progress, then release every connection and thread."""
        ...

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (Alembic); does nothing when it is there.

        Recorders starting together on one PostgreSQL database migrate it once.
        """
        ...

    async def create_run(self, run: NewRun) -> Run:
        """Record a new run, ``running``, with no events; returns it as ``get_run`` would.

        Its thread is created if it is new (with the run's agent), and the run becomes the
        thread's latest (``run_count`` + 1, ``updated_at`` = the run's ``created_at``,
        which defaults to now; ``heartbeat_at`` starts there too). The posted input is kept
        byte for byte. With ``infer_parent`` and no ``parent_run_id``, the parent is the
        thread's latest run before this one (``parent_inferred``), read in the same
        transaction: runs created at once on one thread form a chain, each with its own
        parent. A thread created by this call from a given (not inferred) parent keeps that
        parent and ``parent_seq`` as its ``source``: where it branched off (a fork into a
        new thread).

        Raises ``Conflict`` if the run id is taken (whatever the thread; also when many
        create it at once: one wins), ``InputError`` if an id contains a NUL character.
        """
        ...

    async def append(self, run_id: str, events: Sequence[NewEvent]) -> list[Appended]:
        """``append_batches([(run_id, events)])``: where each event landed, in order."""
        ...

    async def append_batches(
        self,
        batches: Sequence[tuple[str, Sequence[NewEvent]]],
        closes: Sequence[Closing] = (),
    ) -> list[list[Appended]]:
        """Append every batch in one transaction; for each batch, where its events landed.
        ``closes``: runs closed in that same transaction, after the events, each as
        ``set_status`` closes it (a run's last events and its close are one commit).

        A run's events get ``seq`` 0, 1, 2, ... with no gap, in the order given (batches of
        one run in one call follow each other). ``position`` is global: contiguous within
        the call, and increasing in commit order across concurrent appends, so a reader
        following ``read_after`` never passes over an event that commits late. Payloads
        are stored byte for byte; ``recorded_at`` defaults to the commit's time; a type
        loses any NUL character. Each run's ``event_count`` grows and its heartbeat is
        refreshed.

        Raises ``RunNotFound`` for an unknown run and ``RunClosed`` for a run whose status
        is not ``running``; then no batch is written and no run closed. ``InputError`` for
        a closing status that is not terminal.
        """
        ...

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
        """Give the run ``status``; a terminal one (anything but ``running``) also sets
        ``finished_at`` to now.

        ``outcome``, ``error`` and ``violations`` replace the run's when given; ``summary``,
        when given, becomes its thread's summary in the same transaction (closing a run
        is one commit). Text loses any NUL character.

        Raises ``RunNotFound`` (and no summary changes), ``InputError`` for a status that
        is not one of ``model.STATUSES``.
        """
        ...

    async def heartbeat(self, run_ids: Sequence[str], owner: str) -> None:
        """Mark the runs as alive and owned by ``owner`` (``heartbeat_at`` = now).

        A run whose heartbeat is under a second old is left as it is (an append just
        refreshed it); unknown ids are ignored. Each run is its own transaction.
        """
        ...

    async def mark_incomplete(
        self,
        *,
        owner: str | None = None,
        stale_before: float | None = None,
        exclude_owner: str | None = None,
    ) -> list[str]:
        """Close runs left ``running`` by a process that is gone: status ``incomplete``,
        ``finished_at`` now. Returns their ids, sorted.

        All running runs by default; only those owned by ``owner``, not owned by
        ``exclude_owner`` (runs without an owner count as not owned by it), and whose
        heartbeat is missing or older than ``stale_before`` (epoch seconds), when given.
        One transaction.
        """
        ...

    async def get_run(self, run_id: str, *, input: bool = True) -> Run:
        """The run, with its posted input (``input=False``: without, ``Run.input`` None,
        which spares rebuilding a large one). Raises ``RunNotFound``."""
        ...

    async def read_events(
        self, run_id: str, *, gt: int = -1, lte: int | None = None, limit: int | None = None
    ) -> list[RecordedEvent]:
        """The run's events with ``gt < seq <= lte``, by ascending seq, at most ``limit``.

        An unknown run has no events (no error).
        """
        ...

    async def read_payloads(self, run_id: str, *, gt: int, lte: int) -> list[bytes]:
        """The payloads of ``read_events(run_id, gt=gt, lte=lte)``, alone: what a fold
        past a checkpoint reads, without building a record per event.

        An unknown run has none (no error).
        """
        ...

    async def read_after(
        self, position: int, *, limit: int | None = None, thread_id: str | None = None
    ) -> list[RecordedEvent]:
        """Events of every run (or of ``thread_id``'s) with a position above ``position``,
        by ascending position, at most ``limit``.

        Positions become visible in order: calling again with the last position seen
        never skips an event, however the appends interleave.
        """
        ...

    async def max_position(self) -> int:
        """The highest position recorded; 0 when there are no events."""
        ...

    async def list_runs(self, thread_id: str, *, inputs: bool = False) -> list[Run]:
        """The thread's runs, oldest first (by ``created_at``, then run id); their posted
        inputs (``Run.input``, which can be large) only with ``inputs=True``, else None.

        An unknown thread has no runs (no error).
        """
        ...

    async def get_thread(self, thread_id: str) -> Thread:
        """The thread, with the status of its latest run and its ``source`` (the point it
        branched off at, if it did; ``source.thread_id`` is None while that run is not
        recorded here). Raises ``ThreadNotFound``."""
        ...

    async def list_redactions(self, run_id: str) -> list[Redaction]:
        """What redaction did to the run's stored input (seq -1) and events, by seq. An
        unknown run has none (no error)."""
        ...

    async def list_forks(self, thread_id: str) -> list[Thread]:
        """The threads that branched off a run of this thread (whose ``source`` is one of
        its runs), oldest first (by ``created_at``, then thread id). An unknown thread has
        none (no error)."""
        ...

    async def list_threads(
        self, filters: ThreadFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        """A page of threads, most recently updated first (ties: by thread id, descending).

        Filters: ``agent`` (any of the thread's runs was recorded for it), ``status`` (of
        its latest run), ``since``/``until`` (``updated_at``, inclusive), ``text`` (in the
        summary, ignoring case; ``%`` and ``_`` are plain characters). ``Page.cursor``
        fetches the next page with the same filters; None when there is none. Raises
        ``InputError`` for a cursor this store did not give.
        """
        ...

    async def lineage(self, run_id: str, *, inputs: bool = True) -> list[Run]:
        """The run's chain of parents, root first, the run itself last (with their posted
        inputs unless ``inputs=False``).

        The chain ends at a parent that was never recorded here (another system's run).
        Raises ``RunNotFound`` if the run itself is unknown.
        """
        ...

    async def set_error(self, run_id: str, error: str) -> None:
        """Replace the error a closed run ended with (its redaction after the fact).

        Raises ``RunNotFound`` (for a run still recording too: its close writes it).
        """
        ...

    async def set_summary(self, thread_id: str, summary: str) -> None:
        """Make ``summary`` (without any NUL character) the thread's searchable summary.

        Raises ``ThreadNotFound``.
        """
        ...

    async def save_checkpoint(
        self, run_id: str, seq: int, data: bytes, *, seen: Run | None = None
    ) -> None:
        """Keep ``data``, a snapshot derived from the run's events up to ``seq``.

        A checkpoint at the same ``(run_id, seq)`` exists already when a concurrent reader
        saved it first: it is kept, and this call does nothing. ``seen``: the run as read
        before its events were folded; when its head has changed since (a rewrite), the
        fold may hold what the rewrite replaced, and nothing is kept. Raises
        ``RunNotFound``.

        The checkpoint at a closed run's last event (``seen`` closed, ``seq`` its last) may
        be kept as the changes from the run's posted input (``open_store``'s
        ``checkpoint_deltas``): it comes back the same bytes, at the cost of rebuilding the
        input first. An input rewritten since it was read is no base: the checkpoint is
        then kept on its own.
        """
        ...

    async def rewrite_inputs(
        self,
        thread_id: str,
        inputs: Mapping[str, bytes],
        *,
        redacted: Mapping[str, Redacted] | None = None,
    ) -> int:
        """Replace posted inputs of the thread's runs (new bytes by run: a redaction after
        the fact) in one transaction; how many. ``redacted``: what redaction did to each,
        by run, kept in ``redactions`` at seq -1 as at record time (a row there already
        keeps its keyed hash, of the input as posted, and gains the rules). Each is kept
        whole or as a tree, and is never a later delta's base (a process may hold its old
        bytes); one kept as a delta from a replaced one is kept whole first, unchanged.
        Chunks only the old inputs reached are deleted, the thread's checkpoints and the
        replaced runs' search documents dropped. Raises ``ThreadNotFound``;
        ``InputError`` for a run of another thread or without an input."""
        ...

    async def drop_checkpoints(self, run_id: str | None = None) -> int:
        """Drop the checkpoints of ``run_id`` (of every run when None); how many. They are
        derived data, rebuilt from the log (``recorder.timetravel.history``)."""
        ...

    async def nearest_checkpoint(self, run_id: str, seq: int) -> tuple[int, bytes] | None:
        """The run's checkpoint with the highest seq at or below ``seq``, as ``(seq, data)``;
        None if there is none."""
        ...

    async def run_checkpoint(
        self, run_id: str, seq: int | None = None
    ) -> tuple[Run, tuple[int, bytes] | None]:
        """``get_run(run_id, input=False)`` and the run's ``nearest_checkpoint`` at or
        before ``seq`` (None, or past its last event: at its last event), read together:
        the state at a run's boundary from one row. Raises ``RunNotFound``."""
        ...

    # -- governance: the hash chains, sanctioned changes, the audit log ----------------------

    async def verify_chains(
        self,
        thread_ids: Sequence[str] = (),
        run_ids: Sequence[str] = (),
        *,
        marks: Mapping[str, int] | None = None,
    ) -> ChainReport:
        """Recompute the hash chains (``recorder.store.chain``) of the threads and runs
        named, every thread when neither is, and report where they differ from what is
        stored. ``marks`` (run id -> seq) asks for the recomputed hash at those points.

        Raises ``ThreadNotFound`` / ``RunNotFound`` for an id that names nothing.
        """
        ...

    async def heads(self) -> Heads:
        """Every thread's chain head and every running run's last hash, now."""
        ...

    async def purge(
        self, selection: PurgeSelection, *, actor: str, reason: str | None, dry_run: bool = False
    ) -> PurgeReport:
        """Delete the selected threads with everything of theirs (``governance.THREAD_TABLES``)
        in one sanctioned transaction that writes a tombstone (ids, counts, chain heads,
        when, ``actor``, ``reason``); other threads' references to their runs are cleared.
        A thread with a run still recording is skipped. ``dry_run``: report, delete nothing.

        Raises ``InputError`` for a selection that names nothing.
        """
        ...

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
        """Replace the stored payloads of the run's events at the given seqs, in one
        sanctioned transaction: the run's chain is recomputed from the first of them, its
        head and its thread's chain re-sealed, and a record links the old heads to the new.
        The run's checkpoints from the first of them on, folded over what the events said
        before, are dropped in the same transaction (``History.build_checkpoints`` makes
        them again). ``redacted``: what redaction did at those seqs, for ``list_redactions``
        (a seq redacted at record time keeps its original's keyed hash, gaining the rules).
        ``if_head``: the run's head as the caller read it; ``Conflict`` when it is another
        (the run was rewritten since: its payloads were computed from what it no longer is).

        Raises ``RunNotFound``, ``Conflict`` for a run still recording, ``InputError`` for
        a seq the run does not have.
        """
        ...

    async def tombstones(self) -> list[Tombstone]:
        """Every purge's tombstone, oldest first."""
        ...

    async def rewrites(self) -> list[Rewrite]:
        """Every sanctioned rewrite's record (``rewrite``), oldest first."""
        ...

    async def record_action(
        self,
        actor: str,
        action: str,
        target: str | None,
        outcome: str,
        detail: dict[str, Any] | None = None,
    ) -> int:
        """Append an action to the audit log; its id."""
        ...

    async def list_actions(
        self, *, limit: int = 100, before: int | None = None, action: str | None = None
    ) -> list[Action]:
        """The audit log, newest first: at most ``limit`` actions with an id below
        ``before``, of kind ``action`` when given."""
        ...

    async def set_tags(
        self, thread_id: str, run_id: str | None, tags: Mapping[str, str | None]
    ) -> None:
        """Set tags on the thread (``run_id`` None) or on one of its runs: each key gets its
        value, or loses its tag when the value is None. One transaction.

        Raises ``ThreadNotFound``, ``RunNotFound``, ``NotFound`` for a run of another
        thread, ``InputError`` for an empty key or text too long.
        """
        ...

    async def add_note(self, note: Note) -> None:
        """Keep a note (a note with the same id is kept as it was). Raises as ``set_tags``,
        and ``InputError`` for a note without text."""
        ...

    async def remove_note(self, note_id: str) -> str:
        """Forget a note; returns its thread's id. Raises ``NotFound``."""
        ...

    async def set_score(
        self, thread_id: str, run_id: str | None, value: float | None, author: str | None
    ) -> None:
        """Give the thread or run its score (None removes it). Raises as ``set_tags``, and
        ``InputError`` for a number that is not finite."""
        ...

    async def annotations(self, thread_id: str) -> Annotations:
        """The tags, notes (oldest first) and scores of the thread and its runs. Raises
        ``ThreadNotFound``."""
        ...

    async def restore_annotations(self, saved: Annotations) -> None:
        """Put exported annotations back as they were, times included; doing it again
        changes nothing. Raises ``ThreadNotFound``."""
        ...

    async def search(
        self, filters: SearchFilter, *, limit: int = 20, cursor: str | None = None
    ) -> Page:
        """A page of ``SearchHit`` for ``filters.text`` (all of its words, in any order,
        ignoring case and accents; with ``filters.syntax``, the small query language of
        ``recorder.store.terms``) among indexed documents matching the other filters, best
        first, then newest. No text: every document that matches the filters, newest first.
        Raises ``InputError`` for a bad cursor, kind or query.
        """
        ...

    async def runs_to_index(
        self, limit: int, *, owner: str | None = None, closed_before: float = 0.0
    ) -> list[str]:
        """Up to ``limit`` closed runs whose documents are not indexed yet, oldest first.
        With ``owner`` (a recorder's ``Runtime.owner``), only the runs it recorded, those
        no recorder owns, and those closed before ``closed_before`` (a time): recorders
        sharing a database each index their own runs, and any of them those left over."""
        ...

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
        """Add ``docs`` to the run's searchable documents, in one transaction: with
        ``replace`` after dropping those it had, with ``done`` marking the run indexed.
        A run's documents may so be written in several transactions (the first replacing,
        the last done): a crash between them leaves the run to be indexed again, whole.
        Nothing is written (0) for a run gone meanwhile, nor, given ``seen`` (the run as
        read before its events), once its head has changed (a rewrite: the documents may
        hold what it replaced; the run is left to be indexed again)."""
        ...

    async def clear_index(self, thread_id: str | None = None) -> None:
        """Drop every searchable document: every closed run is to be indexed again; or
        only ``thread_id``'s (for a purge: its runs, once gone, are not indexed again)."""
        ...

    async def wait(self, timeout: float) -> None:
        """Return once events or a run's status were committed after the call (through this
        store; on PostgreSQL by any process on the database), or after ``timeout`` seconds.

        Where no notification can arrive (SQLite, from other processes), readers poll.
        """
        ...


def shown_url(url: str) -> str:
    """A database URL as logs and messages show it: without its password, in the user
    part or the query (``?password=``, ``sslpassword=``)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    hidden = {key: "***" for key in parsed.query if "password" in key.lower()}
    shown = parsed.update_query_dict(hidden).render_as_string(hide_password=True)
    return shown.replace("=%2A%2A%2A", "=***")


async def open_store(
    url: str,
    *,
    migrate: bool = False,
    checkpoint_deltas: bool | None = None,
    chunk_cache_bytes: int = CHUNK_CACHE_BYTES,
    read_deadline: float | None = None,
) -> EventStore:
    """A store for ``url`` (``sqlite+aiosqlite:///...`` or ``postgresql+asyncpg://...``),
    its schema migrated first with ``migrate=True``. ``checkpoint_deltas``: keep a closed
    run's last checkpoint as a delta from the run's input (None: on PostgreSQL only).
    ``chunk_cache_bytes``: about how many bytes of chunks it keeps in memory (0: none).
    ``read_deadline``: seconds a read waits for PostgreSQL's answer before it raises
    ``StoreUnavailable`` (None: as long as it takes); SQLite's reads wait at most for the
    file's lock.

    ``sqlite+aiosqlite:///:memory:`` and URI databases (``?uri=true``) live on one
    connection, which the store shares between all its work. Raises ``ConfigError`` for
    any other URL, ``StoreUnavailable`` when the database cannot be opened.
    """
    kind: type[SQLiteDatabase] | type[PostgresDatabase]
    opening: Coroutine[Any, Any, Database]
    if url.startswith("sqlite+aiosqlite:"):
        kind = SQLiteDatabase
        opening = SQLiteDatabase.open(url)
    elif url.startswith(("postgresql+asyncpg:", "postgres+asyncpg:")):
        kind = PostgresDatabase
        opening = PostgresDatabase.open(url, read_deadline)
    else:
        raise ConfigError(
            f"unsupported database URL {shown_url(url)!r}: use sqlite+aiosqlite:///PATH "
            "or postgresql+asyncpg://USER@HOST/DB"
        )
    with store_errors(kind.classify):
        database: Database = await opening
    store = SqlStore(
        database, checkpoint_deltas=checkpoint_deltas, chunk_cache_bytes=chunk_cache_bytes
    )
    if migrate:
        try:
            await store.migrate()
        except BaseException:
            await store.close()
            raise
    return store


__all__ = [
    "Action",
    "Annotations",
    "Appended",
    "ChainProblem",
    "ChainReport",
    "Closing",
    "EventStore",
    "Heads",
    "NewEvent",
    "NewRun",
    "Note",
    "Page",
    "PurgeReport",
    "PurgeSelection",
    "Redacted",
    "Redaction",
    "Rewrite",
    "RewriteReport",
    "Run",
    "SearchDoc",
    "SearchFilter",
    "SearchHit",
    "Thread",
    "ThreadFilter",
    "ThreadSource",
    "Tombstone",
    "open_store",
    "shown_url",
]
