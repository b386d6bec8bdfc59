"""Reading bodies that recompute the hash chains (``recorder.store.chain``) and the heads.

Every thread is checked, then what its rows cannot reach (runs without a thread row,
events without a run row). A thread is checked run by run: every event's hash from the
run's genesis, seqs gap-free from 0, the run's own count and, once closed, its head; then
the thread's chain over its closed runs in seal order against the thread's head. The
first problem of each run is reported (after one break every later link differs too),
then the thread's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recorder.errors import RunNotFound, ThreadNotFound
from recorder.store import chain
from recorder.store.model import ChainProblem, ChainReport, Heads
from recorder.store.statements import Body, Fetch

_PAGE = 5000
THREAD_HEAD = Fetch("SELECT head, sealed FROM threads WHERE thread_id = ?")
RUNS_OF_THREAD = Fetch(
    "SELECT run_id, thread_id, status, event_count, head, seal FROM runs "
    "WHERE thread_id = ? ORDER BY created_at, run_id"
)
RUN = Fetch("SELECT run_id, thread_id, status, event_count, head, seal FROM runs WHERE run_id = ?")
EVENTS = Fetch(
    "SELECT seq, type, payload, hash, thread_id FROM events "
    "WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
SANCTIONS = Fetch("SELECT kind FROM sanctioned")
ALL_THREADS = Fetch("SELECT thread_id FROM threads ORDER BY thread_id")
# What "every thread" cannot reach through the threads table: runs whose thread's row is
# gone, events whose run's row is gone (the foreign keys stop the application, not someone
# who turns them off).
RUNS_WITHOUT_THREAD = Fetch(
    "SELECT run_id, thread_id, status, event_count, head, seal FROM runs WHERE NOT EXISTS "
    "(SELECT 1 FROM threads WHERE threads.thread_id = runs.thread_id) "
    "ORDER BY thread_id, created_at, run_id"
)
EVENTS_WITHOUT_RUN = Fetch(
    "SELECT run_id, min(thread_id), count(*) FROM events WHERE NOT EXISTS "
    "(SELECT 1 FROM runs WHERE runs.run_id = events.run_id) GROUP BY run_id ORDER BY run_id"
)
THREAD_HEADS = Fetch("SELECT thread_id, head, sealed FROM threads")
RUNNING = Fetch(
    "SELECT run_id, thread_id, event_count, (SELECT hash FROM events "
    "WHERE events.run_id = runs.run_id ORDER BY seq DESC LIMIT 1) FROM runs WHERE status = ?"
)


def hexed(value: bytes | None) -> str:
    return value.hex() if value is not None else "none"


def verify(
    thread_ids: Sequence[str], run_ids: Sequence[str], marks: dict[str, int]
) -> Body[ChainReport]:
    """Check the threads and runs named (every thread when neither is); with ``marks``
    (run id -> seq), also keep the recomputed hash at those points."""
    report = ChainReport()
    left = yield SANCTIONS, ()
    if left:
        # Committed by someone else: the triggers would let any DELETE or UPDATE through.
        kinds = ", ".join(sorted(str(row[0]) for row in left))
        what = f"a sanction ({kinds}) was committed: the append-only triggers are open"
        report.problems.append(ChainProblem("", None, None, what))
    everything = not thread_ids and not run_ids
    if everything:
        thread_ids = [str(row[0]) for row in (yield ALL_THREADS, ())]
    for thread_id in thread_ids:
        yield from _thread(thread_id, report, marks)
    if everything:
        yield from _unreachable(report, marks)
    for run_id in run_ids:
        rows = yield RUN, (run_id,)
        if not rows:
            raise RunNotFound(run_id)
        yield from _run(rows[0], report, marks)
    return report


def heads(now: float) -> Body[Heads]:
    threads = {
        str(t): (bytes(h) if h is not None else chain.thread_genesis(str(t)), int(n))
        for t, h, n in (yield THREAD_HEADS, ())
    }
    running = {}
    for run_id, thread_id, count, last in (yield RUNNING, ("running",)):
        tail = bytes(last) if last is not None else chain.run_genesis(thread_id, run_id)
        running[str(run_id)] = (str(thread_id), int(count) - 1, tail)
    return Heads(now, threads, running)


def _unreachable(report: ChainReport, marks: dict[str, int]) -> Body[None]:
    """Check the runs whose thread has no row, and report it and events without a run."""
    orphans = yield RUNS_WITHOUT_THREAD, ()
    for thread_id in sorted({str(row[1]) for row in orphans}):
        what = "runs of this thread have no thread row (it was removed, its chain's head too)"
        report.problems.append(ChainProblem(thread_id, None, None, what))
    for row in orphans:
        yield from _run(row, report, marks)
    for run_id, thread_id, count in (yield EVENTS_WITHOUT_RUN, ()):
        what = f"{count} events of a run that has no row (it was removed)"
        report.problems.append(ChainProblem(str(thread_id), str(run_id), None, what))
        report.events += int(count)


def _thread(thread_id: str, report: ChainReport, marks: dict[str, int]) -> Body[None]:
    found = yield THREAD_HEAD, (thread_id,)
    if not found:
        raise ThreadNotFound(thread_id)
    stored_head, sealed = found[0]
    report.threads += 1
    closed: list[tuple[int, str, bytes]] = []
    for row in (yield RUNS_OF_THREAD, (thread_id,)):
        yield from _run(row, report, marks)
        # The stored head: each was checked against its events just now, so a changed
        # event is reported once, at its run, and the thread's chain checks the rest.
        if row[5] is not None:
            closed.append((int(row[5]), str(row[0]), bytes(row[4])))
    closed.sort()
    report.sealed[thread_id] = [(run_id, head) for _, run_id, head in closed]
    numbers = [number for number, _, _ in closed]
    if numbers != list(range(1, len(closed) + 1)) or len(closed) != int(sealed):
        report.problems.append(
            ChainProblem(
                thread_id,
                None,
                None,
                f"the thread's chain covers {sealed} runs, its closed runs are sealed as "
                f"{numbers} (a run was removed, added or reordered)",
            )
        )
        return
    recomputed = chain.thread_head(thread_id, report.sealed[thread_id])
    if (stored_head is None and closed) or (
        stored_head is not None and bytes(stored_head) != recomputed
    ):
        report.problems.append(
            ChainProblem(
                thread_id,
                None,
                None,
                f"thread head: stored {hexed(_bytes(stored_head))}, recomputed {recomputed.hex()}",
            )
        )


def _run(row: Sequence[Any], report: ChainReport, marks: dict[str, int]) -> Body[bytes]:
    """Check one run; its recomputed head (its last event's hash, or its genesis)."""
    run_id, thread_id, status, count, stored_head, _seal = row
    report.runs += 1
    head = chain.run_genesis(thread_id, run_id)
    expected_seq, after = 0, -1
    problem: tuple[int | None, str] | None = None
    mark = marks.get(run_id)
    while True:
        page = yield EVENTS, (run_id, after, _PAGE)
        for seq, kind, payload, stored, event_thread in page:
            report.events += 1
            if problem is not None:
                continue
            if seq != expected_seq:
                problem = (
                    expected_seq,
                    f"seq {seq} where {expected_seq} was expected (an event was removed, "
                    "added or renumbered)",
                )
                continue
            odd = _odd_column(kind, payload, stored)
            if odd is not None:
                # SQLite keeps any value in any column: a row edited by hand may hold text
                # where bytes belong. Nothing after it can be chained.
                problem = (seq, odd)
                continue
            head = chain.event_link(head, seq, kind, bytes(payload))
            if event_thread != thread_id:
                problem = (seq, f"the event says thread {event_thread!r}, its run {thread_id!r}")
            elif stored is None:
                problem = (seq, "the event has no hash")
            elif bytes(stored) != head:
                problem = (
                    seq,
                    f"hash: stored {bytes(stored).hex()}, recomputed {head.hex()} (its payload, "
                    "type or seq changed, an earlier event did, or it belongs to another run)",
                )
            if mark is not None and seq == mark:
                report.marked[run_id] = head
            expected_seq += 1
        if len(page) < _PAGE:
            break
        after = int(page[-1][0])
    if problem is None and expected_seq != int(count):
        problem = (None, f"the run has {expected_seq} events, its row says {count}")
    if problem is None and stored_head is not None and bytes(stored_head) != head:
        problem = (None, f"run head: stored {bytes(stored_head).hex()}, recomputed {head.hex()}")
    if problem is None and status != "running" and stored_head is None:
        problem = (None, f"the run is {status} but was never sealed into its thread's chain")
    if problem is not None:
        report.problems.append(ChainProblem(thread_id, run_id, problem[0], problem[1]))
    return head


def _odd_column(kind: Any, payload: Any, stored: Any) -> str | None:
    """What is stored in a column of another type than the log writes, if anything."""
    for column, value, allowed in (
        ("type", kind, (str, type(None))),
        ("payload", payload, (bytes, memoryview, bytearray)),
        ("hash", stored, (bytes, memoryview, bytearray, type(None))),
    ):
        if not isinstance(value, allowed):
            what = "NULL" if value is None else "text" if isinstance(value, str) else "a number"
            return f"the event's {column} is stored as {what}, which the log never writes"
    return None


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)
