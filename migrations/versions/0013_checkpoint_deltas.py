"""A checkpoint may be kept as a delta from its run's posted input; deltas and leaves compressed

``checkpoints.from_input``: true when ``data`` holds the checkpoint as the changes from
its run's input (``recorder.store.deltas.delta``) rather than whole (``data``) or as a
tree (``root``). A run's closing checkpoint holds what its input held (the messages, the
state) plus what the run added: as a delta it costs about what the run added, where a tree
costs the chunks around each change and a path of nodes to its root, each a row.

An input changes only by a rewrite (``EventStore.rewrite_inputs``), which drops its
thread's checkpoints in the same transaction; a checkpoint is kept as a delta only from an
input never rewritten.

From this revision on, a delta (of an input or a checkpoint) may be kept compressed, and a
leaf of a chunk tree too (``input_chunks.level`` -1, under the hash of its bytes): the
revision below reads neither, so a downgrade puts them back as they were kept before.

Revision ID: 0013_checkpoint_deltas
Revises: 0012_input_rewrites
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from recorder.store.deltas import compressed, operations, patch
from recorder.store.inputs import reassemble, unpacked

revision: str = "0013_checkpoint_deltas"
down_revision: str | None = "0012_input_rewrites"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.add_column(sa.Column("from_input", sa.Boolean(), nullable=True))


def downgrade() -> None:
    # Checkpoints are derived: those kept as deltas go (rebuilt from the log on demand).
    op.execute("DELETE FROM checkpoints WHERE from_input")
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("from_input")
    bind = op.get_bind()
    chunks = {
        bytes(key): unpacked(bytes(key), int(level), bytes(data))
        for key, level, data in bind.execute(sa.text("SELECT hash, level, data FROM input_chunks"))
    }
    rows = {
        str(run_id): (None if kept is None else bytes(kept), root, base)
        for run_id, kept, root, base in bind.execute(
            sa.text("SELECT run_id, input, root, base FROM run_inputs")
        )
    }
    whole: dict[str, bytes] = {}

    def rebuilt(run_id: str) -> bytes:
        chain: list[str] = []
        current = run_id
        while current not in whole:
            kept, root, base = rows[current]
            if base is None:
                whole[current] = reassemble(bytes(root), chunks) if kept is None else kept or b""
                break
            chain.append(current)
            current = str(base)
        data = whole[current]
        for link in reversed(chain):
            data = whole[link] = patch(data, rows[link][0] or b"")
        return data

    # Each delta's operations as they are, decompressed with its base's bytes.
    for run_id, (kept, _root, base) in rows.items():
        if base is not None and kept is not None and compressed(kept):
            bind.execute(
                sa.text("UPDATE run_inputs SET input = :input WHERE run_id = :run_id"),
                {"input": operations(rebuilt(str(base)), kept), "run_id": run_id},
            )
    for (key,) in list(bind.execute(sa.text("SELECT hash FROM input_chunks WHERE level = -1"))):
        bind.execute(
            sa.text("UPDATE input_chunks SET level = 0, data = :data WHERE hash = :hash"),
            {"data": chunks[bytes(key)].data, "hash": bytes(key)},
        )
