"""redactions: which rules redacted a stored payload, and a keyed hash of the original

One row per redacted payload: a run's posted input (seq -1) or one of its events. The
events themselves stay append-only; this table only says what was done to them before
they were written.

Revision ID: 0006_access
Revises: 0005_search
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_access"
down_revision: str | None = "0005_search"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "redactions",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("rules", sa.Text(), nullable=False),
        sa.Column("original_mac", sa.String(), nullable=True),
        sa.Column("recorded_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name="fk_redactions_run_id_runs"),
        sa.PrimaryKeyConstraint("run_id", "seq", name="pk_redactions"),
    )


def downgrade() -> None:
    op.drop_table("redactions")
