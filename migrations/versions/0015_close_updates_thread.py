"""PostgreSQL: a run's close moves its thread's ``updated_at`` to when it ended

A thread's ``updated_at`` was set when its latest run began and never moved, so a thread
whose long run ended a minute ago looked as old as that run's start: listed below threads
updated since, and purged by a retention shorter than the run (its age counted from the
start). A close now moves it to the run's ``finished_at``, never back. The statements
(``recorder.store.closing``) do it on both databases; this revision does it in
``recorder_append_close`` (migrations 0010 and 0011), replaced by the same function with
that one assignment added where it seals the run into its thread.

Revision ID: 0015_close_updates_thread
Revises: 0014_inputs_append_only
Create Date: 2026-12-07
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0015_close_updates_thread"
down_revision: str | None = "0014_inputs_append_only"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Migration 0011's function, as it created it: replaced here, put back on downgrade.
_PREVIOUS = str(
    runpy.run_path(str(Path(__file__).with_name("0011_close_lock_order.py")))["APPEND_CLOSE"]
)
_SEALED = "                sealed = CASE WHEN v_newly THEN v_thread.sealed + 1 ELSE sealed END,\n"
_UPDATED = (
    "                updated_at = CASE WHEN v_newly THEN greatest(updated_at, p_finished)\n"
    "                    ELSE updated_at END,\n"
)
assert _PREVIOUS.count(_SEALED) == 1, "migration 0011's function is not the one replaced here"
APPEND_CLOSE = _PREVIOUS.replace(_SEALED, _SEALED + _UPDATED, 1)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(APPEND_CLOSE)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_PREVIOUS)
