"""The bodies that close runs: a status set, a run sealed into its thread's chain, its
thread's summary kept, runs whose writer stopped marked incomplete.

They keep ``recorder.store.writes``' lock order (a thread's row before a run's row) and
keep derived text without NUL characters, as every write body does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, TypeVar

import orjson

from recorder.errors import InputError, RunNotFound, ThreadNotFound
from recorder.store import chain
from recorder.store.model import INCOMPLETE, RUNNING, STATUSES, TERMINAL, Closing
from recorder.store.statements import NOTIFY, Body, Execute, Fetch

T = TypeVar("T")

# Closing a run seals it into its thread's chain. The thread's row is locked first (the
# lock order in ``recorder.store.writes``), then the run's row is read with its last hash.
LOCK_THREAD_OF_RUN = Fetch(
    "SELECT thread_id, head, sealed FROM threads "
    "WHERE thread_id = (SELECT thread_id FROM runs WHERE run_id = ?)",
    lock=True,
)
# The closing UPDATE returns what sealing needs (the run's head, set once, and its last
# hash, read while the UPDATE holds the run's row: no append can slip in after it).
_TAIL = (
    " RETURNING head, (SELECT hash FROM events WHERE events.run_id = runs.run_id "
    "ORDER BY seq DESC LIMIT 1)"
)
SEAL_RUN = Execute("UPDATE runs SET head = ?, seal = ? WHERE run_id = ?")
# A run's close moves its thread's ``updated_at`` to when it ended (never back): a thread
# is as recent as its last activity (``list_threads``' order, retention's age).
SEAL_THREAD = Execute(
    "UPDATE threads SET head = ?, sealed = ?, "
    "updated_at = CASE WHEN updated_at < ? THEN ? ELSE updated_at END WHERE thread_id = ?"
)
# A summary equal to the one kept is not written again: PostgreSQL would keep a new copy
# of a long one (its TOAST) on every run's close, the old one dead until vacuumed.
SUMMARY_OF_RUN = Execute(
    "UPDATE threads SET summary = ? "
    "WHERE thread_id = (SELECT thread_id FROM runs WHERE run_id = ?) "
    "AND (summary IS NULL OR summary <> ?)"
)
LOCK_THREAD_TO_CLOSE = Fetch(
    "SELECT thread_id, head, sealed, summary = ? FROM threads "
    "WHERE thread_id = (SELECT thread_id FROM runs WHERE run_id = ?)",
    lock=True,
)
SEAL_THREAD_SUMMARY = Execute(
    "UPDATE threads SET head = ?, sealed = ?, summary = ?, "
    "updated_at = CASE WHEN updated_at < ? THEN ? ELSE updated_at END WHERE thread_id = ?"
)
CLOSE_IF_RUNNING = Fetch(
    "UPDATE runs SET status = ?, finished_at = ? WHERE run_id = ? AND status = ?" + _TAIL
)
SET_SUMMARY = Execute("UPDATE threads SET summary = ? WHERE thread_id = ?")
SET_ERROR = Execute("UPDATE runs SET error = ? WHERE run_id = ? AND status <> 'running'")


def check_closes(closes: Sequence[Closing]) -> None:
    """Closes ride with an append only to end runs: ``InputError`` for another status."""
    for close in closes:
        if close.status not in TERMINAL:
            raise InputError(f"a run is closed with a terminal status, not {close.status!r}")


def then_close(append: Body[T], closes: Sequence[Closing], dialect: str = "sqlite") -> Body[T]:
    """The ``append`` body, then each of ``closes`` as ``set_status`` writes it, in the same
    transaction: the runs' last events and their closes are one commit. On PostgreSQL the
    closed runs' threads are locked first (the lock order: the append takes the runs'
    rows); SQLite's writers take turns."""
    if closes and dialect == "postgresql":
        yield _lock_threads(len(closes)), tuple(close.run_id for close in closes)
    result = yield from append
    for close in closes:
        yield from set_status(
            close.run_id,
            close.status,
            close.outcome,
            close.error,
            close.violations,
            close.summary,
            close.finished_at,
        )
    return result


def _lock_threads(count: int) -> Fetch:
    """The rows of the threads of ``count`` runs, locked in thread id order."""
    marks = ", ".join(["?"] * count)
    return Fetch(
        "SELECT thread_id FROM threads WHERE thread_id IN "
        f"(SELECT thread_id FROM runs WHERE run_id IN ({marks})) ORDER BY thread_id",
        lock=True,
    )


def set_status(
    run_id: str,
    status: str,
    outcome: str | None,
    error: str | None,
    violations: list[dict[str, object]] | None,
    summary: str | None,
    finished_at: float | None = None,
) -> Body[None]:
    values = _status_values(status, outcome, error, violations, finished_at)
    text = None if summary is None else without_nul(summary)
    assignments = ", ".join(f"{column} = ?" for column in values)
    if status not in TERMINAL:
        if text is not None:  # the thread's row first: see the lock order
            yield SUMMARY_OF_RUN, (text, run_id, text)
        found = yield (
            Execute(f"UPDATE runs SET {assignments} WHERE run_id = ?"),
            (*values.values(), run_id),
        )
        if found == 0:
            raise RunNotFound(run_id)
        yield NOTIFY, ()
        return
    # Closing: the thread's row locked (and its summary compared with the new one), the
    # run closed and sealed in one UPDATE, the thread's chain and summary in another.
    thread = yield LOCK_THREAD_TO_CLOSE, (text, run_id)
    if not thread:  # no thread (the run is unknown, or an import brought it alone)
        if text is not None:
            yield SUMMARY_OF_RUN, (text, run_id, text)
        tail = yield (
            Fetch(f"UPDATE runs SET {assignments} WHERE run_id = ?{_TAIL}"),
            (*values.values(), run_id),
        )
        if not tail:
            raise RunNotFound(run_id)
        yield NOTIFY, ()
        return
    thread_id, thread_head, sealed, same = thread[0]
    number = int(sealed) + 1
    sealing = Fetch(
        f"UPDATE runs SET {assignments}, head = COALESCE(head, (SELECT hash FROM events "
        "WHERE events.run_id = runs.run_id ORDER BY seq DESC LIMIT 1), ?), "
        "seal = COALESCE(seal, ?) WHERE run_id = ? RETURNING head, seal"
    )
    params = (*values.values(), chain.run_genesis(thread_id, run_id), number, run_id)
    tail = yield sealing, params
    if not tail:
        raise RunNotFound(run_id)
    head, seal_number = tail[0]
    # A run sealed already keeps its place in the chain: it had a number below this one.
    newly = seal_number is not None and int(seal_number) == number
    renamed = text is not None and not same
    if newly:
        previous = (
            bytes(thread_head) if thread_head is not None else chain.thread_genesis(thread_id)
        )
        link = chain.run_link(previous, run_id, bytes(head))
        ended = values["finished_at"]
        if renamed:
            yield SEAL_THREAD_SUMMARY, (link, number, text, ended, ended, thread_id)
        else:
            yield SEAL_THREAD, (link, number, ended, ended, thread_id)
    elif renamed:
        yield SET_SUMMARY, (text, thread_id)
    yield NOTIFY, ()


# Closing a run on PostgreSQL in one statement, outside any transaction (one round trip
# instead of five): the thread's row locked (``t``), the run closed and sealed (``r``,
# reading ``t``: the thread's row is locked before the run's), the thread's chain and
# summary (``u``), the notification. The hashes are ``recorder.store.chain``'s, computed
# by the database from the same bytes (lengths as 4-byte big-endian, ids as UTF-8):
# ``run_genesis`` for a run without events, ``run_link`` from the thread's head (or
# ``thread_genesis``). No thread row: nothing is done, and the caller closes the run in
# a transaction of its own (``set_status``).
_UTF8_ID = "int4send(octet_length(convert_to({0}, 'UTF8'))) || convert_to({0}, 'UTF8')"
_CLOSE_ALONE = (
    "WITH t AS (SELECT thread_id, head, sealed, summary = ? AS same FROM threads "
    "WHERE thread_id = (SELECT thread_id FROM runs WHERE run_id = ?) FOR UPDATE), "
    "r AS (UPDATE runs SET {assignments}, head = COALESCE(runs.head, (SELECT hash FROM events "
    "WHERE events.run_id = runs.run_id ORDER BY seq DESC LIMIT 1), "
    f"sha256(?::bytea || {_UTF8_ID.format('t.thread_id')} || ?::bytea)), "
    "seal = COALESCE(runs.seal, t.sealed + 1) FROM t WHERE runs.run_id = ? "
    "RETURNING runs.head AS head, runs.seal = t.sealed + 1 AS newly, t.sealed + 1 AS number, "
    "t.head AS previous, t.thread_id AS thread_id, t.same AS same, "
    "runs.finished_at AS finished_at), "
    "u AS (UPDATE threads SET "
    "head = CASE WHEN r.newly THEN sha256(COALESCE(r.previous, "
    f"sha256(?::bytea || {_UTF8_ID.format('r.thread_id')})) || ?::bytea || r.head) "
    "ELSE threads.head END, "
    "sealed = CASE WHEN r.newly THEN r.number ELSE threads.sealed END, "
    "updated_at = CASE WHEN r.newly THEN greatest(threads.updated_at, r.finished_at) "
    "ELSE threads.updated_at END, "
    "summary = CASE WHEN ?::text IS NOT NULL AND r.same IS NOT TRUE THEN ?::text "
    "ELSE threads.summary END "
    "FROM r WHERE threads.thread_id = r.thread_id "
    "AND (r.newly OR (?::text IS NOT NULL AND r.same IS NOT TRUE)) RETURNING 1) "
    "SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM u), "
    "pg_notify('recorder_events', '')"
)


def close_alone(
    run_id: str,
    status: str,
    outcome: str | None,
    error: str | None,
    violations: list[dict[str, object]] | None,
    summary: str | None,
) -> Body[bool]:
    """Close a run in one statement (PostgreSQL, outside a transaction); False when it did
    nothing because the run has no thread row (or is unknown): ``set_status`` then."""
    values = _status_values(status, outcome, error, violations)
    assignments = ", ".join(f"{column} = ?" for column in values)
    text = None if summary is None else without_nul(summary)
    run_text = chain.text(run_id)
    params = (
        text,
        run_id,
        *values.values(),
        chain.RUN_PREFIX,
        run_text,
        run_id,
        chain.THREAD_PREFIX,
        run_text,
        text,
        text,
        text,
    )
    ((closed, _sealed, _notified),) = yield (
        Fetch(_CLOSE_ALONE.format(assignments=assignments)),
        params,
    )
    return int(closed) > 0


def seal(run_id: str, thread: Sequence[Any], tail: Sequence[Any], at: float) -> Body[None]:
    """Keep the closed run's head and chain it into its thread (``thread``: the thread's
    row from ``LOCK_THREAD_OF_RUN``, locked by the caller; ``tail``: the run's head and
    last hash as its closing UPDATE returned them; ``at``: when it ended). A run sealed
    already is left as it is: its place in the thread's chain is where it first closed."""
    thread_id, thread_head, sealed = thread
    run_head, last = tail
    if run_head is not None:
        return
    head = bytes(last) if last is not None else chain.run_genesis(thread_id, run_id)
    previous = bytes(thread_head) if thread_head is not None else chain.thread_genesis(thread_id)
    number = int(sealed) + 1
    yield SEAL_RUN, (head, number, run_id)
    link = chain.run_link(previous, run_id, head)
    yield SEAL_THREAD, (link, number, at, at, thread_id)


def set_summary(thread_id: str, summary: str) -> Body[None]:
    found = yield SET_SUMMARY, (without_nul(summary), thread_id)
    if found == 0:
        raise ThreadNotFound(thread_id)


def set_error(run_id: str, error: str) -> Body[None]:
    found = yield SET_ERROR, (without_nul(error), run_id)
    if found == 0:
        raise RunNotFound(run_id)


def mark_incomplete(
    owner: str | None, stale_before: float | None, exclude_owner: str | None
) -> Body[list[str]]:
    conditions: list[str] = ["status = ?"]
    params: list[Any] = [RUNNING]
    if owner is not None:
        conditions.append("owner = ?")
        params.append(owner)
    if exclude_owner is not None:
        conditions.append("(owner IS NULL OR owner <> ?)")
        params.append(exclude_owner)
    if stale_before is not None:
        conditions.append("(heartbeat_at IS NULL OR heartbeat_at < ?)")
        params.append(stale_before)
    # Read first, then close each under its thread's lock (the lock order; threads in id
    # order, as an append that closes runs takes them): a run is closed only if it is
    # still running by then.
    candidates = Fetch(f"SELECT thread_id, run_id FROM runs WHERE {' AND '.join(conditions)}")
    rows = yield candidates, tuple(params)
    closed: list[str] = []
    now = time.time()
    for _thread_id, run_id in sorted(rows):
        thread = yield LOCK_THREAD_OF_RUN, (run_id,)
        tail = yield CLOSE_IF_RUNNING, (INCOMPLETE, now, run_id, RUNNING)
        if tail and thread:
            yield from seal(run_id, thread[0], tail[0], now)
            closed.append(str(run_id))
    if closed:
        yield NOTIFY, ()
    return closed


def _status_values(
    status: str,
    outcome: str | None,
    error: str | None,
    violations: list[dict[str, object]] | None,
    finished_at: float | None = None,
) -> dict[str, Any]:
    """The run columns ``set_status`` writes."""
    if status not in STATUSES:
        raise InputError(f"unknown run status {status!r}")
    values: dict[str, Any] = {"status": status}
    if status in TERMINAL:
        values["finished_at"] = time.time() if finished_at is None else finished_at
    if outcome is not None:
        values["outcome"] = without_nul(outcome)
    if error is not None:
        values["error"] = without_nul(error)
    if violations is not None:
        values["violations"] = orjson.dumps(violations).decode()  # escapes NUL as \u0000
    return values


def without_nul(text: str) -> str:
    return text.replace("\x00", "") if "\x00" in text else text
