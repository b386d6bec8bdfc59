"""What redaction did is append-only, as the log is: changed only by a sanctioned rewrite

``redactions`` rows (the rules that replaced a payload and the keyed hash of the
original: what shows that a redacted event was the one recorded) could be updated or
deleted by any statement; now the database refuses it, save inside a purge (DELETE,
sanction ``purge``) or a rewrite (UPDATE: a row kept gains the rules that fired again,
sanction ``rewrite``).

Revision ID: 0016_redactions_append_only
Revises: 0015_close_updates_thread
Create Date: 2026-12-08
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016_redactions_append_only"
down_revision: str | None = "0015_close_updates_thread"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REFUSED = "what redaction did is append-only"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION recorder_redactions_append_only() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN "
            "IF TG_OP = 'DELETE' AND current_setting('recorder.sanctioned', true) = 'purge' "
            "THEN RETURN OLD; END IF; "
            "IF TG_OP = 'UPDATE' AND current_setting('recorder.sanctioned', true) = 'rewrite' "
            "THEN RETURN NEW; END IF; "
            f"RAISE EXCEPTION '{REFUSED}'; END $$"
        )
        op.execute(
            "CREATE TRIGGER redactions_append_only BEFORE UPDATE OR DELETE ON redactions "
            "FOR EACH ROW EXECUTE FUNCTION recorder_redactions_append_only()"
        )
        op.execute(
            "CREATE TRIGGER redactions_no_truncate BEFORE TRUNCATE ON redactions "
            "FOR EACH STATEMENT EXECUTE FUNCTION recorder_redactions_append_only()"
        )
        return
    for action, kind in (("UPDATE", "rewrite"), ("DELETE", "purge")):
        op.execute(
            f"CREATE TRIGGER redactions_no_{action.lower()} BEFORE {action} ON redactions "
            f"WHEN NOT EXISTS (SELECT 1 FROM sanctioned WHERE kind = '{kind}') "
            f"BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS redactions_no_truncate ON redactions")
        op.execute("DROP TRIGGER IF EXISTS redactions_append_only ON redactions")
        op.execute("DROP FUNCTION IF EXISTS recorder_redactions_append_only()")
        return
    for action in ("update", "delete"):
        op.execute(f"DROP TRIGGER IF EXISTS redactions_no_{action}")
