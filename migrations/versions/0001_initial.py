"""threads, runs, run inputs, events (append-only), checkpoints

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "events are append-only"

Position = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "threads",
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("agent", sa.String(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("run_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("latest_run_id", sa.String(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("thread_id", name=op.f("pk_threads")),
    )
    op.create_index("ix_threads_updated", "threads", ["updated_at", "thread_id"])
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("agent", sa.String(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("parent_run_id", sa.String(), nullable=True),
        sa.Column("parent_seq", sa.Integer(), nullable=True),
        sa.Column("parent_inferred", sa.Boolean(), server_default="0", nullable=False),
        sa.Column("origin", sa.String(), server_default="upstream", nullable=False),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("violations", sa.Text(), nullable=True),
        sa.Column("event_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("heartbeat_at", sa.Float(), nullable=True),
        sa.Column("owner", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(
            ["thread_id"], ["threads.thread_id"], name=op.f("fk_runs_thread_id_threads")
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_runs")),
    )
    op.create_index("ix_runs_thread_created", "runs", ["thread_id", "created_at"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_parent", "runs", ["parent_run_id"])
    op.create_table(
        "run_inputs",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("input", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_run_inputs_run_id_runs")
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_inputs")),
    )
    op.create_table(
        "events",
        sa.Column("position", Position, autoincrement=False, nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(), nullable=True),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("recorded_at", sa.Float(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_events_run_id_runs")),
        sa.PrimaryKeyConstraint("position", name=op.f("pk_events")),
        sa.UniqueConstraint("run_id", "seq", name="uq_events_run_seq"),
    )
    op.create_table(
        "checkpoints",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_checkpoints_run_id_runs")
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_checkpoints")),
    )
    _append_only_triggers()


def downgrade() -> None:
    _drop_triggers()
    op.drop_table("checkpoints")
    op.drop_table("events")
    op.drop_table("run_inputs")
    op.drop_index("ix_runs_parent", table_name="runs")
    op.drop_index("ix_runs_status", table_name="runs")
    op.drop_index("ix_runs_thread_created", table_name="runs")
    op.drop_table("runs")
    op.drop_index("ix_threads_updated", table_name="threads")
    op.drop_table("threads")


def _append_only_triggers() -> None:
    # The log is append-only by the database's own rules, not only by our code: raw SQL
    # from any client cannot rewrite or remove a recorded event.
    if op.get_bind().dialect.name == "sqlite":
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
                f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END"
            )
        return
    op.execute(
        "CREATE FUNCTION recorder_events_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN RAISE EXCEPTION '{APPEND_ONLY}'; END $$"
    )
    op.execute(
        "CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events "
        "FOR EACH ROW EXECUTE FUNCTION recorder_events_append_only()"
    )
    op.execute(
        "CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events "
        "FOR EACH STATEMENT EXECUTE FUNCTION recorder_events_append_only()"
    )


def _drop_triggers() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS events_no_update")
        op.execute("DROP TRIGGER IF EXISTS events_no_delete")
        return
    op.execute("DROP TRIGGER IF EXISTS events_no_truncate ON events")
    op.execute("DROP TRIGGER IF EXISTS events_append_only ON events")
    op.execute("DROP FUNCTION IF EXISTS recorder_events_append_only()")
