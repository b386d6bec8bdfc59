"""run_inputs.base: a posted input kept as a delta from an earlier input of its thread

A run's input mostly repeats its parent's; kept as the changes from it (in ``input``,
with ``base`` naming the run whose input it changes), a run costs what is new in its input
(``recorder.store.inputs``). Inputs recorded before this revision stay as they are.

Revision ID: 0007_turns
Revises: 0006_access
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from recorder.store.deltas import patch
from recorder.store.inputs import Chunk, reassemble

revision: str = "0007_turns"
down_revision: str | None = "0006_access"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run_inputs") as batch:
        batch.add_column(sa.Column("base", sa.String(), nullable=True))


def downgrade() -> None:
    # The revision below knows no deltas: every input kept as one is put back whole.
    bind = op.get_bind()
    rows = {
        str(run_id): (None if kept is None else bytes(kept), root, base)
        for run_id, kept, root, base in bind.execute(
            sa.text("SELECT run_id, input, root, base FROM run_inputs")
        )
    }
    chunks = {
        bytes(key): Chunk(bytes(key), int(level), bytes(data))
        for key, level, data in bind.execute(sa.text("SELECT hash, level, data FROM input_chunks"))
    }
    whole: dict[str, bytes] = {}

    def rebuilt(run_id: str) -> bytes:
        chain: list[bytes] = []
        current = run_id
        while current not in whole:
            kept, root, base = rows[current]
            if base is None:
                whole[current] = reassemble(bytes(root), chunks) if kept is None else kept
                break
            chain.append(current)
            current = str(base)
        data = whole[current]
        for link in reversed(chain):
            data = whole[link] = patch(data, rows[link][0] or b"")
        return data

    for run_id, (_kept, _root, base) in rows.items():
        if base is not None:
            bind.execute(
                sa.text("UPDATE run_inputs SET input = :input WHERE run_id = :run_id"),
                {"input": rebuilt(run_id), "run_id": run_id},
            )
    with op.batch_alter_table("run_inputs") as batch:
        batch.drop_column("base")
