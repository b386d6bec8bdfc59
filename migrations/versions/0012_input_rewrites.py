"""Posted inputs can be rewritten (redaction after the fact); a rewritten one is no base

``run_inputs.rewritten_at``: when the input was replaced (``EventStore.rewrite_inputs``),
NULL for one kept as it was posted. A run's input is kept as a delta from a recent input
of its thread that the recording process holds in memory, named by its run; a process may
still hold the bytes an input had before it was rewritten. A delta made from those would
rebuild as garbage over the new ones, so a rewritten input is never taken as a delta's
base again: ``recorder_create_run`` (migration 0008), like the statements, finds such a
base gone and keeps the new input as a tree.

Revision ID: 0012_input_rewrites
Revises: 0011_close_lock_order
Create Date: 2026-12-04
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0012_input_rewrites"
down_revision: str | None = "0011_close_lock_order"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Migration 0008's function, as it created it (made to replace the one there): replaced
# here with its base's check extended, and put back as it was on downgrade.
_PREVIOUS = str(
    runpy.run_path(str(Path(__file__).with_name("0008_one_trip.py")))["CREATE_RUN"]
).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
_CHECK = "                AND r.created_at = p_base_created;\n"
assert _PREVIOUS.count(_CHECK) == 1, "migration 0008's function is not the one replaced here"
CREATE_RUN = _PREVIOUS.replace(
    _CHECK,
    "                AND r.created_at = p_base_created AND b.rewritten_at IS NULL;\n",
    1,
)


def upgrade() -> None:
    with op.batch_alter_table("run_inputs") as batch:
        batch.add_column(sa.Column("rewritten_at", sa.Float(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(CREATE_RUN)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PREVIOUS)
    with op.batch_alter_table("run_inputs") as batch:
        batch.drop_column("rewritten_at")
