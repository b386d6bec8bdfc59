"""search and annotations: documents derived from runs, their text index, the runs already
indexed; tags, notes and scores on threads and runs

``search_docs`` holds one row per searchable document (a message assembled from its
deltas, a tool call, reasoning, an error, a posted user message), ``search_runs`` the runs
whose documents are in; the text index is an FTS5 table on SQLite (external content:
``search_docs.terms``) and a GIN index over the ``terms`` tsvector on PostgreSQL. All of it
is derived from the log: it starts empty, and the recorder fills it in the background.

Annotations live beside the log, never in it: ``tags`` (key/value), ``notes`` (text with an
author and a time) and ``scores`` (one number), each on a thread (``run_id`` empty) or on
one of its runs, keyed by thread.

Revision ID: 0005_search
Revises: 0004_chain
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

revision: str = "0005_search"
down_revision: str | None = "0004_chain"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "search_docs",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("seq_from", sa.Integer(), nullable=False),
        sa.Column("seq_to", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.Float(), nullable=False),
        sa.Column("agent", sa.String(), nullable=True),
        sa.Column("message_id", sa.String(), nullable=True),
        sa.Column("role", sa.String(), nullable=True),
        sa.Column("tool_name", sa.String(), nullable=True),
        sa.Column("error_code", sa.String(), nullable=True),
        sa.Column("terms", sa.Text().with_variant(TSVECTOR(), "postgresql"), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_search_docs")),
    )
    op.create_index("ix_search_docs_run", "search_docs", ["run_id"])
    op.create_index("ix_search_docs_thread", "search_docs", ["thread_id"])
    op.create_index("ix_search_docs_agent_at", "search_docs", ["agent", "recorded_at"])
    op.create_index("ix_search_docs_kind_at", "search_docs", ["kind", "recorded_at"])
    op.create_table(
        "search_runs",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("indexed_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_search_runs")),
    )
    op.create_index("ix_search_runs_thread", "search_runs", ["thread_id"])
    op.create_table(
        "tags",
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("value", sa.String(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "run_id", "key", name=op.f("pk_tags")),
    )
    op.create_index("ix_tags_key_value", "tags", ["key", "value"])
    op.create_table(
        "notes",
        sa.Column("note_id", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("author", sa.String(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("note_id", name=op.f("pk_notes")),
    )
    op.create_index("ix_notes_thread", "notes", ["thread_id", "created_at"])
    op.create_table(
        "scores",
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("author", sa.String(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "run_id", name=op.f("pk_scores")),
    )
    if op.get_bind().dialect.name == "sqlite":
        # Words are made by recorder.store.terms; unicode61 only splits them at spaces.
        op.execute(
            "CREATE VIRTUAL TABLE search_fts USING fts5(terms, content='search_docs', "
            "content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
        )
    else:
        op.execute("CREATE INDEX ix_search_docs_terms ON search_docs USING gin (terms)")


def downgrade() -> None:
    op.drop_table("scores")
    op.drop_index("ix_notes_thread", table_name="notes")
    op.drop_table("notes")
    op.drop_index("ix_tags_key_value", table_name="tags")
    op.drop_table("tags")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS search_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_search_docs_terms")
    op.drop_index("ix_search_runs_thread", table_name="search_runs")
    op.drop_table("search_runs")
    for name in ("ix_search_docs_kind_at", "ix_search_docs_agent_at", "ix_search_docs_thread"):
        op.drop_index(name, table_name="search_docs")
    op.drop_index("ix_search_docs_run", table_name="search_docs")
    op.drop_table("search_docs")
