"""events.run_id: no foreign key to runs

Every event is written by an append that locks its run's row and checks, in the same
transaction, that the run is there and running (``recorder.store.writes``, ``calls``), and
removed only by a purge, which removes a thread's events with its runs. The key's check
read the run again for every event: on PostgreSQL a trigger and a row lock per event, 40%
of an append's time; on SQLite a lookup per event, about 20%. The other keys to ``runs``
(inputs, redactions, checkpoints), written once a run, stay.

On SQLite the table is rebuilt (a key cannot be dropped in place; the events are copied
once), its append-only triggers with it.

Revision ID: 0009_events_fk
Revises: 0008_one_trip
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009_events_fk"
down_revision: str | None = "0008_one_trip"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = "fk_events_run_id_runs"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint(KEY, "events", type_="foreignkey")
        return
    triggers = _triggers()
    with op.batch_alter_table("events", recreate="always") as batch:
        batch.drop_constraint(KEY, type_="foreignkey")
    for sql in triggers:
        op.execute(sql)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.create_foreign_key(KEY, "events", "runs", ["run_id"], ["run_id"])
        return
    triggers = _triggers()
    with op.batch_alter_table("events", recreate="always") as batch:
        batch.create_foreign_key(KEY, "runs", ["run_id"], ["run_id"])
    for sql in triggers:
        op.execute(sql)


def _triggers() -> list[str]:
    """The events table's triggers as SQLite keeps them (a rebuilt table loses them)."""
    rows = op.get_bind().exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'"
    )
    return [str(sql) for (sql,) in rows]
