"""The bodies of the store's writes, one per operation (see ``recorder.store.statements``).

Lock order, the same in every body: a thread's row before a run's row, and appends take the
events lock (PostgreSQL) before any run row. ``create_run`` locks its thread and then
inserts the run; ``set_status`` updates the thread's summary before the run; an append
that closes runs locks their threads before the events lock (``closing.then_close``,
migration 0011). Taken the other way round, a duplicate run id posted while the first run
is closing deadlocks: the duplicate holds the thread and waits on the run's row, the
closing run holds that row and waits for the thread.

Text that the store derives from what it records (summaries, a run's error and outcome,
an event's type) is kept without NUL characters, on both databases: PostgreSQL's ``text``
cannot hold them, and the exact bytes stay in the event log. Ids are never altered: one
with a NUL is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import orjson

from recorder.errors import Conflict, InputError, RunClosed, RunNotFound
from recorder.store import chain
from recorder.store.inputs import INLINE_BELOW, InputTree, batches, build, pack
from recorder.store.model import (
    RUNNING,
    Appended,
    NewEvent,
    NewRun,
    Redacted,
    Run,
)
from recorder.store.statements import (
    APPEND_LOCK,
    INSERT_EVENTS,
    NOTIFY,
    RUN_AS_STORED,
    Body,
    EventBlock,
    Execute,
    Fetch,
)

INSERT_CLAIMED_THREAD = Execute(
    "INSERT INTO threads (thread_id, agent, created_at, updated_at, run_count, latest_run_id) "
    "VALUES (?, ?, ?, ?, 1, ?) ON CONFLICT (thread_id) DO NOTHING"
)
# A thread's run count is 1 only once its first run claimed it: a count of 1 here says
# the row was inserted by this statement.
_UPSERT_THREAD = (
    "INSERT INTO threads (thread_id, agent, created_at, updated_at, run_count, latest_run_id, "
    "source_run_id, source_seq) VALUES (?, ?, ?, ?, 1, ?, ?, ?) ON CONFLICT (thread_id) DO "
    "UPDATE SET updated_at = excluded.updated_at, run_count = threads.run_count + 1, "
    "latest_run_id = excluded.latest_run_id RETURNING run_count"
)
UPSERT_THREAD = Fetch(_UPSERT_THREAD)
_RUN_COLUMNS = (
    "run_id, thread_id, agent, status, parent_run_id, parent_seq, parent_inferred, origin, "
    "created_at, heartbeat_at, owner"
)
_BASE = (
    "SELECT b.run_id FROM run_inputs b JOIN runs r ON r.run_id = b.run_id "
    "WHERE b.run_id = ? AND r.thread_id = ? AND r.created_at = ? AND b.rewritten_at IS NULL"
)
_CREATE = (
    f"WITH t AS ({_UPSERT_THREAD}), r AS (INSERT INTO runs ({_RUN_COLUMNS}) "
    "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM t RETURNING run_id)"
)
CREATE = Fetch(f"{_CREATE} SELECT (SELECT run_count FROM t), NULL")
CREATE_WITH_INPUT = Fetch(
    f"{_CREATE}, i AS (INSERT INTO run_inputs (run_id, input) SELECT r.run_id, ? FROM r "
    "RETURNING run_id) SELECT (SELECT run_count FROM t), (SELECT run_id FROM i)"
)

LATEST_RUN = Fetch("SELECT latest_run_id FROM threads WHERE thread_id = ?", lock=True)
CLAIM_THREAD = Execute(
    "UPDATE threads SET updated_at = ?, run_count = run_count + 1, latest_run_id = ? "
    "WHERE thread_id = ?"
)
INSERT_RUN = Execute(
    "INSERT INTO runs (run_id, thread_id, agent, status, parent_run_id, parent_seq, "
    "parent_inferred, origin, created_at, heartbeat_at, owner) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_INPUT = Execute("INSERT INTO run_inputs (run_id, input, root) VALUES (?, ?, ?)")
# A delta names its base only if the base's input is there, the very one the delta was
# made from: of this thread, created when it was (not a run purged since and its id used
# again); else ``base`` is NULL.
INSERT_DELTA = Fetch(
    f"INSERT INTO run_inputs (run_id, input, base) SELECT ?, ?, b.run_id FROM ({_BASE}) b "
    "RETURNING base"
)
INSERT_REDACTION = Execute(
    "INSERT INTO redactions (run_id, seq, rules, original_mac, recorded_at) VALUES (?, ?, ?, ?, ?)"
)
# The run's last hash rides along: the subquery in RETURNING reads the event before the
# new ones (the new event_count minus the count taken, minus one), so chaining an append
# costs no statement of its own.
CLAIM = Fetch(
    "UPDATE runs SET event_count = event_count + ?, heartbeat_at = ? WHERE run_id = ? "
    "RETURNING thread_id, event_count, status, (SELECT hash FROM events "
    "WHERE events.run_id = runs.run_id AND events.seq = runs.event_count - ? - 1)"
)
# An append's first claim also reads the highest position (under the append lock), which
# spares a statement (a round trip, on PostgreSQL).
CLAIM_FIRST = Fetch(CLAIM.sql + ", (SELECT max(position) FROM events)")
HEARTBEAT = Execute(
    "UPDATE runs SET heartbeat_at = ?, owner = ? WHERE run_id = ? AND heartbeat_at < ?"
)
RUN_STORED = Fetch(RUN_AS_STORED)
RUN_STORED_KEPT = Fetch(RUN_AS_STORED + " FOR KEY SHARE OF r")
SAVE_CHECKPOINT = Execute(
    "INSERT INTO checkpoints (run_id, seq, data, root, from_input) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, seq) DO NOTHING"
)
DROP_CHECKPOINTS = Execute("DELETE FROM checkpoints")
DROP_RUN_CHECKPOINTS = Execute("DELETE FROM checkpoints WHERE run_id = ?")
# A run that appended within this long was refreshed by the append itself.
FRESH_FOR = 1.0


def input_tree(
    posted: bytes | None,
    known: Callable[[bytes], object] | None = None,
    after: InputTree | None = None,
) -> InputTree | None:
    """How ``create_run`` keeps ``posted`` when not as a delta: None when whole (absent or
    small), else its tree of chunks (``recorder.store.inputs``), its leaves but those
    ``known`` finds compressed (``after``: a tree of bytes it may begin like, whose leaves
    it shares are taken as they are). Made once per run, outside the body, so a
    transaction that starts over does not cut the input again."""
    if posted is None or len(posted) < INLINE_BELOW:
        return None
    return pack(build(posted, after), known)


def whole_or_tree(data: bytes) -> tuple[bytes | None, InputTree | None]:
    """``data`` as a replaced input is kept (``rewrite_inputs``): whole, or as a tree."""
    tree = input_tree(data)
    return (data, None) if tree is None else (None, tree)


class Head(NamedTuple):
    """Where a run's events stand: the seq its next event takes, and the hash that event
    chains from (its last event's, or its genesis)."""

    next_seq: int
    hash: bytes


@dataclass(slots=True)
class Kept:
    """How ``create_run`` keeps a run's input: whole, as a ``tree``, or as a ``delta`` from
    the input of run ``base`` (``depth`` deltas away from a tree). A delta whose base is
    gone (purged since) is kept as a tree instead, and ``depth`` says so afterwards."""

    tree: InputTree | None = None
    base: str | None = None
    base_created: float = 0.0
    delta: bytes | None = None
    depth: int = 0


def create_run(run: NewRun, kept: Kept | None = None, dialect: str = "sqlite") -> Body[Run]:
    """Claim the thread (insert-if-absent, then lock its row: concurrent first runs of a
    thread do not collide, and concurrent runs on it line up, each seeing the one before),
    then insert the run and its input (whole, as a delta, or the chunks of its tree the
    store lacks); a thread created here from a given parent keeps it as its source."""
    now, beat, parent, inferred, source = lineage(run)
    kept = kept if kept is not None else Kept()
    stored = False  # the input went in with the run
    if run.infer_parent and parent is None:
        # The thread's latest run is wanted: read under the thread's lock, then claimed. A
        # thread not there yet is inserted claimed by this run, its first (no parent): one
        # statement where an empty row, then its claim, took two.
        rows = yield LATEST_RUN, (run.thread_id,)
        created = False
        if not rows:
            new = (run.thread_id, run.agent, now, now, run.run_id)
            created = bool((yield INSERT_CLAIMED_THREAD, new))
            if not created:  # another transaction inserted it meanwhile (PostgreSQL)
                rows = yield LATEST_RUN, (run.thread_id,)
        if not created:
            ((latest,),) = rows
            yield CLAIM_THREAD, (now, run.run_id, run.thread_id)
            parent, inferred = latest, latest is not None
        yield INSERT_RUN, _run_columns(run, parent, inferred, now, beat)
    elif dialect == "postgresql":
        # One statement (one round trip): the thread inserted or locked and claimed, then
        # the run, then its input when whole (each part reads the one before, which orders
        # them: the thread's row is locked before the run's is inserted). A delta's base is
        # looked for in a statement of its own, after the thread's row is locked: a purge
        # of the thread that took the base with it committed before (its snapshot sees
        # that), or waits for this transaction.
        thread = (run.thread_id, run.agent, now, now, run.run_id, *source)
        columns = _run_columns(run, parent, inferred, now, beat)
        if kept.delta is None and kept.tree is None and run.input is not None:
            rows = yield CREATE_WITH_INPUT, (*thread, *columns, run.input)
        else:
            rows = yield CREATE, (*thread, *columns)
        count, stored = rows[0][0], rows[0][1] is not None
        created = int(count) == 1
    else:  # insert the thread, or lock and claim it (the run is its first)
        ((count,),) = yield UPSERT_THREAD, (run.thread_id, run.agent, now, now, run.run_id, *source)
        created = int(count) == 1
        yield INSERT_RUN, _run_columns(run, parent, inferred, now, beat)
    if run.new_thread and not created:
        raise Conflict(
            f"thread {run.thread_id!r} exists already: a fork into a new thread needs an id "
            "no thread has"
        )
    if kept.delta is not None and not stored:
        # The base is of this thread, whose row this transaction holds: a purge of the
        # thread (which would take the base with it) is before or after, not during.
        params = (run.run_id, kept.delta, kept.base, run.thread_id, kept.base_created)
        found = yield INSERT_DELTA, params
        stored = bool(found)
    if kept.delta is not None and not stored:  # the base is gone: a tree (or whole) after all
        kept.base, kept.delta, kept.depth = None, None, 0
        kept.tree = input_tree(run.input)
    if stored:
        pass
    elif kept.tree is not None:
        yield from insert_chunks(kept.tree)
        yield INSERT_INPUT, (run.run_id, None, kept.tree.root)
    elif run.input is not None:
        yield INSERT_INPUT, (run.run_id, run.input, None)
    if run.input is not None and run.input_redacted is not None:
        yield INSERT_REDACTION, redaction_row(run.run_id, -1, run.input_redacted, now)
    return created_run(run, parent, inferred, now, beat)


def lineage(
    run: NewRun, beat: float | None = None
) -> tuple[float, float, str | None, bool, tuple[str | None, int | None]]:
    """What creating ``run`` writes besides its own fields: its ``created_at`` and
    heartbeat (``beat``, default now), its parent and whether that was inferred (as given;
    ``create_run`` infers one when asked), and the source a thread created by it keeps.
    Refuses a NUL in an id."""
    _refuse_nul(run.run_id, run.thread_id, run.parent_run_id)
    # The heartbeat is the creation's own time, even for a run created with an earlier
    # ``created_at`` (an import): a writer is at work on it, not one that stopped long ago.
    beat = time.time() if beat is None else beat
    now = run.created_at if run.created_at is not None else beat
    parent = run.parent_run_id
    # A new thread started from a given parent (a fork into a new thread) keeps the point
    # it branched off at.
    given = parent is not None and not run.parent_inferred and parent != run.run_id
    source = (parent, run.parent_seq) if given else (None, None)
    return now, beat, parent, run.parent_inferred, source


def created_run(run: NewRun, parent: str | None, inferred: bool, now: float, beat: float) -> Run:
    """``run`` as ``get_run`` reads it right after it was created."""
    return Run(
        run_id=run.run_id,
        thread_id=run.thread_id,
        agent=run.agent,
        status=RUNNING,
        input=run.input,
        parent_run_id=parent,
        parent_seq=run.parent_seq,
        parent_inferred=inferred,
        origin=run.origin,
        outcome=None,
        error=None,
        violations=[],
        event_count=0,
        created_at=now,
        finished_at=None,
        heartbeat_at=beat,
        owner=run.owner,
    )


def _run_columns(
    run: NewRun, parent: str | None, inferred: bool, now: float, beat: float
) -> tuple[Any, ...]:
    return (
        run.run_id,
        run.thread_id,
        run.agent,
        RUNNING,
        parent,
        run.parent_seq,
        inferred,
        run.origin,
        now,
        beat,
        run.owner,
    )


def insert_chunks(tree: InputTree) -> Body[int]:
    """Insert the chunks of ``tree`` that the store lacks; how many it lacked.

    From the root down: a chunk found stored has its whole subtree stored (a tree is
    inserted in one transaction and chunks are never deleted), so only the children of
    chunks inserted here are looked at, a level at a time. Each level is one statement
    per batch, its rows sorted by hash: two transactions inserting shared chunks wait on
    each other in one order and cannot deadlock.
    """
    inserted = 0
    frontier = [tree.root]
    while frontier:
        new: list[bytes] = []
        for batch in batches(sorted(frontier)):
            params = [v for key in batch for v in tree.row(key)]
            rows = yield _insert_chunks(len(batch)), params
            new += [bytes(row[0]) for row in rows]
        inserted += len(new)
        frontier = sorted({child for key in new for child in tree.chunks[key].children()})
    return inserted


def _insert_chunks(count: int) -> Fetch:
    values = ", ".join(["(?, ?, ?)"] * count)
    return Fetch(
        f"INSERT INTO input_chunks (hash, level, data) VALUES {values} "
        "ON CONFLICT (hash) DO NOTHING RETURNING hash"
    )


def append_batches(
    batches: Sequence[tuple[str, Sequence[NewEvent]]],
    heads: dict[str, Head] | None = None,
) -> Body[list[list[Appended]]]:
    """``heads``, when given, is told each run's ``Head`` after this append."""
    # Under the append lock, the positions handed out here are contiguous and increase
    # in commit order. The first claim also reads the highest position taken.
    yield APPEND_LOCK, ()
    position = 0
    claim = CLAIM_FIRST
    now = time.time()
    blocks: list[EventBlock] = []
    redacted: list[tuple[Any, ...]] = []
    results: list[list[Appended]] = []
    last: dict[str, bytes] = {}  # a run's last hash, for its next batch in this call
    sha256, seq_bytes, types = chain.sha256, chain.SEQ_BYTES, chain.STORED_TYPES
    for run_id, events in batches:
        count = len(events)
        found = yield claim, (count, now, run_id, count)
        row = found[0] if found else None
        thread_id, first_seq = _claimed(run_id, count, row)
        if claim is CLAIM_FIRST:
            position, claim = int(row[4] or 0) if row is not None else 0, CLAIM
        previous = last.get(run_id) or _previous(thread_id, run_id, first_seq, row)
        first_position, seq = position + 1, first_seq
        columns: list[Any] = []
        at, source = -1.0, ""  # (no event has these: the first begins a block)
        # One pass per event: its type as stored, its link of the chain, its columns;
        # a new block where its time or origin differs from the event before.
        for payload, kind, origin, when, redaction in events:
            stored, tail = types.get(kind) or chain.stored_type(kind)
            when = now if when is None else when
            if when != at or origin != source:
                if columns:
                    blocks.append(
                        EventBlock(
                            first_position,
                            thread_id,
                            run_id,
                            seq - len(columns) // 3,
                            at,
                            source,
                            columns,
                        )
                    )
                    first_position = position + 1
                    columns = []
                at, source = when, origin
            position += 1
            previous = sha256(previous + seq_bytes(seq) + tail + payload).digest()
            columns += (stored, payload, previous)
            if redaction is not None:
                redacted.append(redaction_row(run_id, seq, redaction, now))
            seq += 1
        if columns:
            blocks.append(
                EventBlock(
                    first_position,
                    thread_id,
                    run_id,
                    seq - len(columns) // 3,
                    at,
                    source,
                    columns,
                )
            )
        if count:
            last[run_id] = previous
        if heads is not None:
            heads[run_id] = Head(seq, previous)
        seqs = range(first_seq, seq)
        positions = range(position - count + 1, position + 1)
        results.append(list(map(_appended, zip(seqs, positions, strict=True))))
    if blocks:
        yield INSERT_EVENTS, blocks
        for row in redacted:
            yield INSERT_REDACTION, row
        yield NOTIFY, ()
    return results


_appended = partial(tuple.__new__, Appended)  # an Appended from a (seq, position) pair


def redaction_row(run_id: str, seq: int, redacted: Redacted, now: float) -> tuple[Any, ...]:
    return (run_id, seq, orjson.dumps(list(redacted.rules)).decode(), redacted.mac, now)


def heartbeat(run_id: str, owner: str) -> Body[None]:
    now = time.time()
    yield HEARTBEAT, (now, owner, run_id, now - FRESH_FOR)


def save_checkpoint(
    run_id: str,
    seq: int,
    data: bytes,
    tree: InputTree | None,
    dialect: str = "sqlite",
    seen: Run | None = None,
    from_input: bool = False,
) -> Body[bool]:
    """Keep the checkpoint unless the run is no longer ``seen`` (``Run.changed_since``: its
    events or its input rewritten after the fold read them, or the run purged and posted
    again); whether it was kept or found there already. ``from_input``: ``data`` is a
    delta from the run's posted input, which ``seen`` says was never rewritten."""
    # A checkpoint that exists already was saved by a concurrent reader: same data.
    # On PostgreSQL the run's row is locked before the chunks are inserted, as a run's
    # creation locks its thread first: a purge deleting the run is waited for before the
    # chunk table is held (see ``governance.LOCK_CHUNKS``). The purge and the rewrites lock
    # their runs before they delete checkpoints: a write holding the run is waited for
    # (and its checkpoint deleted with the others), one coming later waits for them and
    # then reads the run as they left it.
    rows = yield (RUN_STORED if dialect == "sqlite" else RUN_STORED_KEPT), (run_id,)
    if not rows:
        raise RunNotFound(run_id)
    if seen is not None and seen.changed_since(rows[0]):
        return False
    if from_input:
        yield SAVE_CHECKPOINT, (run_id, seq, data, None, True)
    elif tree is None:
        yield SAVE_CHECKPOINT, (run_id, seq, data, None, None)
    else:
        yield from insert_chunks(tree)
        yield SAVE_CHECKPOINT, (run_id, seq, None, tree.root, None)
    return True


def drop_checkpoints(run_id: str | None) -> Body[int]:
    if run_id is None:
        dropped: int = yield DROP_CHECKPOINTS, ()
    else:
        dropped = yield DROP_RUN_CHECKPOINTS, (run_id,)
    return dropped


def _previous(thread_id: str, run_id: str, first_seq: int, row: Sequence[Any] | None) -> bytes:
    """The hash the run's next event chains from: its last event's, or its genesis."""
    if first_seq == 0 or row is None or row[3] is None:
        return chain.run_genesis(thread_id, run_id)
    return bytes(row[3])


def _claimed(run_id: str, count: int, row: Sequence[Any] | None) -> tuple[str, int]:
    """The run's thread and first new seq from a ``CLAIM`` row; refuses unknown/closed runs."""
    if row is None:
        raise RunNotFound(run_id)
    if row[2] != RUNNING:
        raise RunClosed(f"run {run_id!r} is {row[2]}: a closed run takes no more events")
    return str(row[0]), int(row[1]) - count


def _refuse_nul(*ids: str | None) -> None:
    if any(i is not None and "\x00" in i for i in ids):
        raise InputError("an id cannot contain a NUL character")
