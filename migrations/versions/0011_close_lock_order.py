"""PostgreSQL: an append that closes runs locks their threads' rows first

``recorder_append_close`` (migration 0010) took a closed run's row (appending its last
events) before its thread's row, the other way round from every other writer. A run id
posted again while its first run was closing deadlocked: the duplicate's creation holds
the thread's row and waits on the run's key (whose row the closing append holds), the
closing append waits for the thread's row. PostgreSQL broke the tie by failing one of
them: the duplicate with a collision rather than "exists already", or the first run's
close.

The function is replaced by the same one that first locks, in thread id order, the rows of
the threads whose runs it closes, then appends (the events lock, the runs' rows) and
closes. The lock order is again the same everywhere: a thread's row, then the events
lock, then a run's row (``recorder.store.writes``).

Revision ID: 0011_close_lock_order
Revises: 0010_append_close
Create Date: 2026-12-04
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0011_close_lock_order"
down_revision: str | None = "0010_append_close"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Migration 0010's function, as it created it (made to replace the one there): replaced
# here with one statement added before its append, and put back as it was on downgrade.
_PREVIOUS = str(
    runpy.run_path(str(Path(__file__).with_name("0010_append_close.py")))["APPEND_CLOSE"]
).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
_APPEND = "    SELECT a.o_problem, a.o_at, a.o_status, a.o_position\n"
_LOCK_THREADS = """\
    PERFORM 1 FROM threads t
        WHERE t.thread_id IN (SELECT r.thread_id FROM runs r WHERE r.run_id = ANY(p_close))
        ORDER BY t.thread_id FOR UPDATE;
"""
assert _PREVIOUS.count(_APPEND) == 1, "migration 0010's function is not the one replaced here"
APPEND_CLOSE = _PREVIOUS.replace(_APPEND, _LOCK_THREADS + _APPEND, 1)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(APPEND_CLOSE)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_PREVIOUS)
