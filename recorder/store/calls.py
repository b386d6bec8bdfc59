"""PostgreSQL's one-call writes: a run created, a batch appended, in one round trip each.

``writes.create_run`` and ``writes.append_batches`` take a transaction of several
statements: on PostgreSQL a round trip each, with BEGIN and COMMIT, seven for a new run on
a new thread and four for an append. The functions of migration ``0008_one_trip`` do the
same work, in the same order and under the same locks, as one call that is its own
transaction. These bodies make that call; where a call meets what only the statements
handle, it writes nothing and the body says so (``None``), and the store takes the
statements' way.

An append's hashes chain from the run's last event, which the call does not read back:
the store keeps each live run's ``Head`` (``HeadCache``), and the call checks it (count of
events and last hash) under the run's lock before writing anything, so a stale one costs
a fallback, never a broken chain.

A call is sent again when its connection is found broken before its answer came: it may
have committed. The functions know their own work when they meet it again (a run with the
call's owner and times; a run ending with the hash the call brings for its last event),
so a call sent twice writes once.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import orjson

from recorder.errors import Conflict, RunClosed, RunNotFound
from recorder.store import chain
from recorder.store.closing import without_nul
from recorder.store.model import RUNNING, Appended, Closing, NewEvent, NewRun, Run
from recorder.store.statements import Body, Fetch
from recorder.store.writes import Head, Kept, created_run, lineage

CREATE_RUN = Fetch(f"SELECT * FROM recorder_create_run({', '.join(['?'] * 19)})")
APPEND = Fetch(f"SELECT * FROM recorder_append({', '.join(['?'] * 17)})")
# The same, then runs closed (migration 0010_append_close; their threads' rows locked
# before anything else since 0011_close_lock_order): arrays of the closes' runs, statuses,
# outcomes, errors, violations and summaries, their finish time, and the chain's prefixes
# (``recorder.store.chain``).
APPEND_CLOSE = Fetch(f"SELECT * FROM recorder_append_close({', '.join(['?'] * 26)})")
_THREAD_EXISTS, _BASE_GONE = 1, 2
_UNKNOWN, _CLOSED, _MOVED = 1, 2, 3


def can_create(run: NewRun, kept: Kept) -> bool:
    """Whether ``create_run`` can be one call: not for an input kept as a tree (its chunks
    are inserted level by level) nor one redacted (its redaction row)."""
    return (
        kept.tree is None
        and run.input_redacted is None
        and not (run.new_thread and kept.delta is not None)
    )


def create_run(run: NewRun, kept: Kept, beat: float) -> Body[Run | None]:
    """``writes.create_run`` in one call; None when the delta's base is gone (nothing was
    written: the input is to be kept another way). ``beat``: the heartbeat (and the time,
    when the run has none), the same in a call sent again."""
    now, beat, parent, inferred, source = lineage(run, beat)
    infer = run.infer_parent and parent is None
    params = (
        run.run_id,
        run.thread_id,
        run.agent,
        RUNNING,
        parent,
        run.parent_seq,
        inferred,
        infer,
        run.origin,
        now,
        beat,
        run.owner,
        *source,
        run.new_thread,
        run.input if kept.delta is None else None,
        kept.delta,
        kept.base,
        kept.base_created if kept.delta is not None else None,
    )
    ((status, _created, parent, inferred),) = yield CREATE_RUN, params
    if status == _THREAD_EXISTS:
        raise Conflict(
            f"thread {run.thread_id!r} exists already: a fork into a new thread needs an id "
            "no thread has"
        )
    if status == _BASE_GONE:
        return None
    return created_run(run, parent, bool(inferred), now, beat)


def can_append(
    batches: Sequence[tuple[str, Sequence[NewEvent]]], closes: Sequence[Closing]
) -> bool:
    """Whether an append with ``closes`` can be one call: each closed run has events in it
    (the call has locked and checked its row before it closes it)."""
    if not closes:
        return True
    appended = {run_id for run_id, events in batches if events}
    return all(close.run_id in appended for close in closes)


def append_batches(
    batches: Sequence[tuple[str, Sequence[NewEvent]]],
    heads: dict[str, Head],
    closes: Sequence[Closing] = (),
) -> Body[list[list[Appended]] | None]:
    """``writes.append_batches`` in one call, chained from ``heads`` (every run's, which
    is brought up to date), then ``closes`` (``can_append``) as ``closing.set_status``
    closes a run; None when a run's events are not where its head says (nothing was
    written). No event may carry a redaction (their rows are the statements' job).

    The events go as a few values rather than arrays of one element each (which the
    driver checks and encodes element by element, at several microseconds an event): their
    payloads and their hashes each joined into one bytea, their lengths, types (an index
    into the call's few distinct types) and blocks as comma-separated numbers."""
    now = time.time()
    runs: dict[str, int] = {}  # run id -> its index (1-based) in the call
    firsts: list[int] = []
    lasts: list[bytes | None] = []
    counts: list[int] = []
    run_at: list[int] = []
    seqs: list[int] = []
    ats: list[float] = []
    origins: list[str] = []
    starts: list[int] = []
    blocks: list[int] = []
    kinds: list[int] = []
    payloads: list[bytes] = []
    hashes: list[bytes] = []
    distinct: dict[str | None, int] = {None: 0}  # a type -> its number (1-based); None: 0
    after: dict[str, Head] = {}  # each run's head as this call leaves it
    sha256, seq_bytes, types = chain.sha256, chain.SEQ_BYTES, chain.STORED_TYPES
    for run_id, events in batches:
        index = runs.get(run_id)
        if index is None:
            index = runs[run_id] = len(runs) + 1
            head = heads[run_id]
            firsts.append(head.next_seq)
            lasts.append(head.hash if head.next_seq else None)
            counts.append(0)
            after[run_id] = head
        seq, previous = after[run_id]
        counts[index - 1] += len(events)
        at, source = -1.0, ""  # (no event has these: the first begins a block)
        block = len(starts)
        for payload, kind, origin, when, _redaction in events:
            stored, tail = types.get(kind) or chain.stored_type(kind)
            when = now if when is None else when
            if when != at or origin != source:
                at, source = when, origin
                run_at.append(index)
                seqs.append(seq)
                ats.append(when)
                origins.append(origin)
                starts.append(len(payloads) + 1)
                block = len(starts)
            previous = sha256(previous + seq_bytes(seq) + tail + payload).digest()
            number = distinct.get(stored)
            if number is None:
                number = distinct[stored] = len(distinct)
            kinds.append(number)
            blocks.append(block)
            payloads.append(payload)
            hashes.append(previous)
            seq += 1
        after[run_id] = Head(seq, previous)
    params: tuple[Any, ...] = (
        list(runs),
        counts,
        firsts,
        lasts,
        [after[run_id].hash for run_id in runs],
        now,
        run_at,
        seqs,
        ats,
        origins,
        starts,
        [kind for kind in distinct if kind is not None],
        ",".join(map(str, blocks)),
        ",".join(map(str, kinds)),
        ",".join(map(str, map(len, payloads))),
        b"".join(payloads),
        b"".join(hashes),
    )
    if closes:
        # One end time for the call's closes: now, or the one an import gave them all.
        given = {close.finished_at for close in closes}
        finished = given.pop() if len(given) == 1 and None not in given else time.time()
        params += (
            [close.run_id for close in closes],
            [close.status for close in closes],
            [_text(close.outcome) for close in closes],
            [_text(close.error) for close in closes],
            [_violations(close.violations) for close in closes],
            [_text(close.summary) for close in closes],
            finished,
            chain.RUN_PREFIX,
            chain.THREAD_PREFIX,
        )
    ((problem, at_run, status, position),) = yield (APPEND_CLOSE if closes else APPEND), params
    if problem == _MOVED:
        return None
    if problem:
        run_id = list(runs)[at_run - 1]
        if problem == _UNKNOWN:
            raise RunNotFound(run_id)
        raise RunClosed(f"run {run_id!r} is {status}: a closed run takes no more events")
    heads.update(after)
    results: list[list[Appended]] = []
    taken = dict(zip(runs, firsts, strict=True))
    for run_id, events in batches:
        first = taken[run_id]
        taken[run_id] = first + len(events)
        results.append([Appended(first + k, position + k + 1) for k in range(len(events))])
        position += len(events)
    return results


def _text(value: str | None) -> str | None:
    return None if value is None else without_nul(value)


def _violations(violations: list[dict[str, object]] | None) -> str | None:
    return None if violations is None else orjson.dumps(violations).decode()


class HeadCache:
    """The ``Head`` of each run this process is recording, for one-call appends: known
    from a run's creation on, and from each append; forgotten when the run closes, when
    an append of it fails (its outcome unknown), and beyond ``limit`` runs, oldest first."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._heads: OrderedDict[str, Head] = OrderedDict()

    def known(self, run_ids: Sequence[str]) -> dict[str, Head] | None:
        """The heads of ``run_ids``, or None unless all are known."""
        heads: dict[str, Head] = {}
        for run_id in run_ids:
            head = self._heads.get(run_id)
            if head is None:
                return None
            heads[run_id] = head
        return heads

    def update(self, heads: dict[str, Head]) -> None:
        for run_id, head in heads.items():
            self._heads[run_id] = head
            self._heads.move_to_end(run_id)
        while len(self._heads) > self._limit:
            self._heads.popitem(last=False)

    def forget(self, run_ids: Sequence[str]) -> None:
        for run_id in run_ids:
            self._heads.pop(run_id, None)
