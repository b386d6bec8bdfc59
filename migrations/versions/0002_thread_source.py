"""threads: where a thread branched off another (source run and seq)

A thread whose first run names a parent recorded in another thread (a fork into a new
thread) keeps that point: ``source_run_id`` and ``source_seq`` (null: the parent's end).
The source thread is the source run's thread, read through ``runs``, so it is right even
when an import brings a fork before the thread it came from. Threads recorded before this
revision get their source from their first run.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Each thread's first run (by created_at, then run id), when its parent was given (not
# inferred) and is not a run of the same thread. UPDATE ... FROM: SQLite 3.33+, PostgreSQL.
BACKFILL = """
UPDATE threads SET source_run_id = first.parent_run_id, source_seq = first.parent_seq
FROM (
    SELECT r.thread_id, r.parent_run_id, r.parent_seq FROM runs r
    WHERE r.parent_run_id IS NOT NULL AND NOT r.parent_inferred
    AND NOT EXISTS (
        SELECT 1 FROM runs e WHERE e.thread_id = r.thread_id
        AND (e.created_at < r.created_at OR (e.created_at = r.created_at AND e.run_id < r.run_id))
    )
    AND NOT EXISTS (
        SELECT 1 FROM runs p WHERE p.run_id = r.parent_run_id AND p.thread_id = r.thread_id
    )
) AS first
WHERE first.thread_id = threads.thread_id
"""


def upgrade() -> None:
    with op.batch_alter_table("threads") as batch:
        batch.add_column(sa.Column("source_run_id", sa.String(), nullable=True))
        batch.add_column(sa.Column("source_seq", sa.Integer(), nullable=True))
    op.create_index("ix_threads_source_run", "threads", ["source_run_id"])
    op.execute(BACKFILL)


def downgrade() -> None:
    op.drop_index("ix_threads_source_run", table_name="threads")
    with op.batch_alter_table("threads") as batch:
        batch.drop_column("source_seq")
        batch.drop_column("source_run_id")
