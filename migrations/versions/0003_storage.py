"""inputs and checkpoints as content-addressed chunks: ``input_chunks``, ``root`` columns

A run's posted input is kept as the root of a tree of chunks shared by every run
(``recorder.store.inputs``) instead of whole: ``run_inputs.input`` becomes optional (small
inputs, and every input recorded before this revision, stay there as they are) and
``run_inputs.root`` names the tree of the others. Checkpoints (a run's messages and state
at a point) are kept the same way, in ``checkpoints.data`` or under ``checkpoints.root``.

Revision ID: 0003_storage
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from recorder.store.inputs import Chunk, reassemble

revision: str = "0003_storage"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "input_chunks",
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("hash", name=op.f("pk_input_chunks")),
    )
    with op.batch_alter_table("run_inputs") as batch:
        batch.alter_column("input", existing_type=sa.LargeBinary(), nullable=True)
        batch.add_column(sa.Column("root", sa.LargeBinary(), nullable=True))
    with op.batch_alter_table("checkpoints") as batch:
        batch.alter_column("data", existing_type=sa.LargeBinary(), nullable=True)
        batch.add_column(sa.Column("root", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    # The revision below keeps every input whole: rebuild those kept as trees first.
    bind = op.get_bind()
    chunks = {
        bytes(key): Chunk(bytes(key), int(level), bytes(data))
        for key, level, data in bind.execute(sa.text("SELECT hash, level, data FROM input_chunks"))
    }
    roots = bind.execute(sa.text("SELECT run_id, root FROM run_inputs WHERE root IS NOT NULL"))
    for run_id, root in list(roots):
        whole = reassemble(bytes(root), chunks)
        bind.execute(
            sa.text("UPDATE run_inputs SET input = :input WHERE run_id = :run_id"),
            {"input": whole, "run_id": run_id},
        )
    # Checkpoints are derived: those kept as trees are dropped, and rebuilt when needed.
    op.execute("DELETE FROM checkpoints WHERE data IS NULL")
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("root")
        batch.alter_column("data", existing_type=sa.LargeBinary(), nullable=False)
    with op.batch_alter_table("run_inputs") as batch:
        batch.drop_column("root")
        batch.alter_column("input", existing_type=sa.LargeBinary(), nullable=False)
    op.drop_table("input_chunks")
