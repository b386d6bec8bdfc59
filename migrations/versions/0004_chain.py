"""hash chains, sanctioned purge and rewrite, tombstones, the audit log

- ``events.hash``: each event's link in its run's chain; ``runs.head`` / ``runs.seal``:
  a closed run's head and its place in its thread's chain; ``threads.head`` /
  ``threads.sealed``: the thread's chain over its closed runs (``recorder.store.chain``).
  Rows recorded before this revision get their chains computed here (closed runs sealed
  in the order they finished).
- The append-only triggers now let a DELETE of events through inside a purge and an
  UPDATE inside a rewrite, and nothing else: PostgreSQL reads a transaction-local setting
  (``recorder.sanctioned``), SQLite a row of ``sanctioned`` that those transactions insert
  and delete before they commit. TRUNCATE stays refused.
- ``purges`` (tombstones), ``rewrites`` and ``audit_log``: append-only, no exception.

Revision ID: 0004_chain
Revises: 0003_storage
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from recorder.store import chain

revision: str = "0004_chain"
down_revision: str | None = "0003_storage"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "events are append-only"
AUDIT_ONLY = "audit records are append-only"
AUDIT_TABLES = ("purges", "rewrites", "audit_log")


def upgrade() -> None:
    op.add_column("events", sa.Column("hash", sa.LargeBinary(), nullable=True))
    op.add_column("runs", sa.Column("head", sa.LargeBinary(), nullable=True))
    op.add_column("runs", sa.Column("seal", sa.Integer(), nullable=True))
    op.add_column("threads", sa.Column("head", sa.LargeBinary(), nullable=True))
    op.add_column("threads", sa.Column("sealed", sa.Integer(), server_default="0", nullable=False))
    op.create_table(
        "sanctioned",
        sa.Column("kind", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("kind", name=op.f("pk_sanctioned")),
    )
    op.create_table(
        "purges",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_purges")),
    )
    op.create_table(
        "rewrites",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("old_head", sa.LargeBinary(), nullable=True),
        sa.Column("new_head", sa.LargeBinary(), nullable=True),
        sa.Column("old_thread_head", sa.LargeBinary(), nullable=True),
        sa.Column("new_thread_head", sa.LargeBinary(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rewrites")),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=True),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"])
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:  # the old triggers would refuse the backfill's UPDATEs
        op.execute("DROP TRIGGER IF EXISTS events_no_update")
        op.execute("DROP TRIGGER IF EXISTS events_no_delete")
    else:
        op.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
    _backfill(op.get_bind())
    if sqlite:
        _sqlite_triggers()
    else:
        op.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
        _postgres_triggers()


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for table in AUDIT_TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_update")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete")
        for action in ("UPDATE", "DELETE"):
            op.execute(f"DROP TRIGGER IF EXISTS events_no_{action.lower()}")
            op.execute(
                f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
                f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END"
            )
    else:
        for table in AUDIT_TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        op.execute("DROP FUNCTION IF EXISTS recorder_audit_append_only()")
        op.execute(
            "CREATE OR REPLACE FUNCTION recorder_events_append_only() RETURNS trigger "
            f"LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '{APPEND_ONLY}'; END $$"
        )
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    for table in ("audit_log", "rewrites", "purges", "sanctioned"):
        op.drop_table(table)
    with op.batch_alter_table("threads") as batch:
        batch.drop_column("sealed")
        batch.drop_column("head")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("seal")
        batch.drop_column("head")
    # Not in batch mode: recreating events on SQLite would drop its triggers.
    op.drop_column("events", "hash")


def _backfill(conn: sa.Connection) -> None:
    """Every recorded event's hash; each closed run's head, sealed into its thread in the
    order the runs finished."""
    runs = conn.exec_driver_sql(
        "SELECT run_id, thread_id, status, finished_at, created_at FROM runs "
        "ORDER BY thread_id, finished_at, created_at, run_id"
    ).fetchall()
    sealed: dict[str, list[tuple[str, bytes]]] = {}
    for run_id, thread_id, status, _finished, _created in runs:
        rows = conn.execute(
            sa.text("SELECT seq, type, payload FROM events WHERE run_id = :r ORDER BY seq"),
            {"r": run_id},
        ).fetchall()
        head = chain.run_genesis(thread_id, run_id)
        updates = []
        for seq, kind, payload in rows:
            head = chain.event_link(head, int(seq), kind, bytes(payload))
            updates.append({"h": head, "r": run_id, "s": seq})
        if updates:
            conn.execute(
                sa.text("UPDATE events SET hash = :h WHERE run_id = :r AND seq = :s"), updates
            )
        if status != "running":
            sealed.setdefault(thread_id, []).append((run_id, head))
    for thread_id, closed in sealed.items():
        for number, (run_id, head) in enumerate(closed, 1):
            conn.execute(
                sa.text("UPDATE runs SET head = :h, seal = :n WHERE run_id = :r"),
                {"h": head, "n": number, "r": run_id},
            )
        conn.execute(
            sa.text("UPDATE threads SET head = :h, sealed = :n WHERE thread_id = :t"),
            {"h": chain.thread_head(thread_id, closed), "n": len(closed), "t": thread_id},
        )


def _sqlite_triggers() -> None:
    for action, kind in (("UPDATE", "rewrite"), ("DELETE", "purge")):
        op.execute(
            f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
            f"WHEN NOT EXISTS (SELECT 1 FROM sanctioned WHERE kind = '{kind}') "
            f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END"
        )
    for table in AUDIT_TABLES:
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{AUDIT_ONLY}'); END"
            )


def _postgres_triggers() -> None:
    # The same trigger (events_append_only, BEFORE UPDATE OR DELETE, per row) with a body
    # that lets the sanctioned transactions through; TRUNCATE (events_no_truncate) is
    # refused by the same function, whatever the setting.
    op.execute(
        "CREATE OR REPLACE FUNCTION recorder_events_append_only() RETURNS trigger "
        "LANGUAGE plpgsql AS $$ BEGIN "
        "IF TG_OP = 'DELETE' AND current_setting('recorder.sanctioned', true) = 'purge' "
        "THEN RETURN OLD; END IF; "
        "IF TG_OP = 'UPDATE' AND current_setting('recorder.sanctioned', true) = 'rewrite' "
        "THEN RETURN NEW; END IF; "
        f"RAISE EXCEPTION '{APPEND_ONLY}'; END $$"
    )
    op.execute(
        "CREATE FUNCTION recorder_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN RAISE EXCEPTION '{AUDIT_ONLY}'; END $$"
    )
    for table in AUDIT_TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE "
            f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION recorder_audit_append_only()"
        )
