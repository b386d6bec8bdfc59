"""Posted inputs are append-only, as events are: changed only by a sanctioned rewrite

``run_inputs`` rows (what a client posted: the prompt an audit most needs) could be
updated or deleted by any statement; now the database refuses it as it refuses it for
events, save inside a purge (DELETE, sanction ``purge``) or a rewrite of inputs
(``EventStore.rewrite_inputs``: UPDATE, sanction ``rewrite``).

Revision ID: 0014_inputs_append_only
Revises: 0013_checkpoint_deltas
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014_inputs_append_only"
down_revision: str | None = "0013_checkpoint_deltas"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REFUSED = "posted inputs are append-only"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION recorder_inputs_append_only() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN "
            "IF TG_OP = 'DELETE' AND current_setting('recorder.sanctioned', true) = 'purge' "
            "THEN RETURN OLD; END IF; "
            "IF TG_OP = 'UPDATE' AND current_setting('recorder.sanctioned', true) = 'rewrite' "
            "THEN RETURN NEW; END IF; "
            f"RAISE EXCEPTION '{REFUSED}'; END $$"
        )
        op.execute(
            "CREATE TRIGGER run_inputs_append_only BEFORE UPDATE OR DELETE ON run_inputs "
            "FOR EACH ROW EXECUTE FUNCTION recorder_inputs_append_only()"
        )
        op.execute(
            "CREATE TRIGGER run_inputs_no_truncate BEFORE TRUNCATE ON run_inputs "
            "FOR EACH STATEMENT EXECUTE FUNCTION recorder_inputs_append_only()"
        )
        return
    for action, kind in (("UPDATE", "rewrite"), ("DELETE", "purge")):
        op.execute(
            f"CREATE TRIGGER run_inputs_no_{action.lower()} BEFORE {action} ON run_inputs "
            f"WHEN NOT EXISTS (SELECT 1 FROM sanctioned WHERE kind = '{kind}') "
            f"BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS run_inputs_no_truncate ON run_inputs")
        op.execute("DROP TRIGGER IF EXISTS run_inputs_append_only ON run_inputs")
        op.execute("DROP FUNCTION IF EXISTS recorder_inputs_append_only()")
        return
    for action in ("update", "delete"):
        op.execute(f"DROP TRIGGER IF EXISTS run_inputs_no_{action}")
