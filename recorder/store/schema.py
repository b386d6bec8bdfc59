"""The tables: the only definition Alembic reads (``migrations/env.py``).

Times are epoch seconds as floats: one representation on both databases, cheap to write on
the hot path, rendered as ISO-8601 at the edges.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import TSVECTOR

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

# BIGINT on PostgreSQL, INTEGER on SQLite (where only INTEGER PRIMARY KEY is the rowid).
Position = BigInteger().with_variant(Integer(), "sqlite")

threads = Table(
    "threads",
    metadata,
    Column("thread_id", String, primary_key=True),
    Column("agent", String, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("run_count", Integer, nullable=False, server_default="0"),
    Column("latest_run_id", String, nullable=True),
    # Searchable text of the thread's latest known messages (maintained by the recorder).
    Column("summary", Text, nullable=True),
    # Where the thread branched off another: its first run's parent, when that parent was
    # given and belongs to another thread (a fork into a new thread). The source thread is
    # that run's thread, read through ``runs``.
    Column("source_run_id", String, nullable=True),
    Column("source_seq", Integer, nullable=True),
    # The thread's hash chain over its closed runs' heads (``recorder.store.chain``): its
    # value after the last run sealed, and how many runs it covers.
    Column("head", LargeBinary, nullable=True),
    Column("sealed", Integer, nullable=False, server_default="0"),
    Index("ix_threads_updated", "updated_at", "thread_id"),
    Index("ix_threads_source_run", "source_run_id"),
)

runs = Table(
    "runs",
    metadata,
    Column("run_id", String, primary_key=True),
    Column("thread_id", String, ForeignKey("threads.thread_id"), nullable=False),
    Column("agent", String, nullable=True),
    Column("status", String, nullable=False),
    Column("parent_run_id", String, nullable=True),
    Column("parent_seq", Integer, nullable=True),
    Column("parent_inferred", Boolean, nullable=False, server_default="0"),
    Column("origin", String, nullable=False, server_default="upstream"),
    Column("outcome", String, nullable=True),
    Column("error", Text, nullable=True),
    Column("violations", Text, nullable=True),
    Column("event_count", Integer, nullable=False, server_default="0"),
    Column("created_at", Float, nullable=False),
    Column("finished_at", Float, nullable=True),
    # Liveness: the recording process refreshes this; a stale running run is incomplete.
    Column("heartbeat_at", Float, nullable=True),
    Column("owner", String, nullable=True),
    # The hash of the run's last event (its chain's head), kept when the run closes, and
    # the run's place in its thread's chain (1, 2, ... in the order its runs closed).
    Column("head", LargeBinary, nullable=True),
    Column("seal", Integer, nullable=True),
    Index("ix_runs_thread_created", "thread_id", "created_at"),
    Index("ix_runs_status", "status"),
    Index("ix_runs_parent", "parent_run_id"),
)

# The RunAgentInput exactly as posted, apart from the run row: inputs carry the whole
# history (often hundreds of KB) and the run row is updated on every append; SQLite
# rewrites a row with all its overflow pages on each update. Small inputs are kept whole
# (``input``); others as the ``root`` of a tree in ``input_chunks``, or as a delta (in
# ``input``) from the input of ``base``, an earlier run of the same thread
# (recorder.store.inputs, recorder.store.deltas).
run_inputs = Table(
    "run_inputs",
    metadata,
    Column("run_id", String, ForeignKey("runs.run_id"), primary_key=True),
    Column("input", LargeBinary, nullable=True),
    Column("root", LargeBinary, nullable=True),
    Column("base", String, nullable=True),
    # When the input was replaced (a redaction after the fact, ``rewrite_inputs``): a
    # rewritten input is never a delta's base again (migration 0012_input_rewrites).
    Column("rewritten_at", Float, nullable=True),
)

# Content-addressed pieces of posted inputs, shared by every run whose input holds them:
# level 0 holds bytes, level n the hashes of its children. Never updated or deleted.
input_chunks = Table(
    "input_chunks",
    metadata,
    Column("hash", LargeBinary, primary_key=True),
    Column("level", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
)

events = Table(
    "events",
    metadata,
    Column("position", Position, primary_key=True, autoincrement=False),
    Column("thread_id", String, nullable=False),
    # No foreign key: every append checks its run under the run's lock (a key's check
    # repeated that for every event: migration 0009_events_fk).
    Column("run_id", String, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", String, nullable=True),
    Column("payload", LargeBinary, nullable=False),
    Column("recorded_at", Float, nullable=False),
    Column("origin", String, nullable=False),
    # H(previous event's hash, seq, type, payload) within the run (``recorder.store.chain``).
    Column("hash", LargeBinary, nullable=True),
    UniqueConstraint("run_id", "seq", name="uq_events_run_seq"),
)

# Which rules redacted a stored payload before it was written (seq -1: the run's posted
# input), and a keyed hash of the original bytes, so that whoever holds an original can
# prove it is the one recorded. Kept beside the events, which never change.
redactions = Table(
    "redactions",
    metadata,
    Column("run_id", String, ForeignKey("runs.run_id"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("rules", Text, nullable=False),
    Column("original_mac", String, nullable=True),
    Column("recorded_at", Float, nullable=False),
)

# Derived data: rebuildable from the log at any time, never the source of truth.
checkpoints = Table(
    "checkpoints",
    metadata,
    Column("run_id", String, ForeignKey("runs.run_id"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    # Small ones whole, others as the root of a tree in ``input_chunks``, like inputs, or
    # (``from_input``) in ``data`` as a delta from the run's posted input, never rewritten.
    Column("data", LargeBinary, nullable=True),
    Column("root", LargeBinary, nullable=True),
    Column("from_input", Boolean, nullable=True),
)

# -- governance: written by sanctioned transactions and admin actions, append-only ---------

# A row here, inside a transaction, lets that transaction's DELETE and UPDATE of events
# past the triggers (SQLite; PostgreSQL uses a transaction-local setting). The purge and
# the rewrite insert it and delete it again before they commit: it is never seen outside.
sanctioned = Table(
    "sanctioned",
    metadata,
    Column("kind", String, primary_key=True),
)

# What a purge deleted: ids, counts and chain heads, when, by whom and why.
purges = Table(
    "purges",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("actor", String, nullable=False),
    Column("reason", Text, nullable=True),
    Column("threads", Integer, nullable=False),
    Column("runs", Integer, nullable=False),
    Column("events", Integer, nullable=False),
    # JSON: [{"threadId", "head", "sealed", "runs": [{"runId", "events", "head"}]}]
    Column("detail", Text, nullable=False),
)

# What a sanctioned rewrite changed: the run's old and new heads (the link from the old
# chain to the new one), the thread's, and which events.
rewrites = Table(
    "rewrites",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("actor", String, nullable=False),
    Column("reason", Text, nullable=True),
    Column("run_id", String, nullable=False),
    Column("thread_id", String, nullable=False),
    Column("old_head", LargeBinary, nullable=True),
    Column("new_head", LargeBinary, nullable=True),
    Column("old_thread_head", LargeBinary, nullable=True),
    Column("new_thread_head", LargeBinary, nullable=True),
    # JSON: [{"seq", "oldHash", "newHash"}] for each rewritten event
    Column("detail", Text, nullable=False),
)

# Every write and admin action: who, what, on what, when, how it ended.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("actor", String, nullable=False),
    Column("action", String, nullable=False),
    Column("target", String, nullable=True),
    Column("outcome", String, nullable=False),
    Column("detail", Text, nullable=True),
    Index("ix_audit_log_at", "at"),
)

# The search index (``recorder.store.search``): derived from the log, dropped and rebuilt
# at will (``recorder reindex``), keyed by thread and run. ``terms`` holds the words as the
# text index reads them: a tsvector with a GIN index on PostgreSQL; on SQLite, the text of
# the FTS5 table ``search_fts``, which takes it from here (an external-content table).
search_docs = Table(
    "search_docs",
    metadata,
    Column("id", Position, primary_key=True, autoincrement=True),
    Column("thread_id", String, nullable=False),
    Column("run_id", String, nullable=False),
    Column("seq_from", Integer, nullable=False),
    Column("seq_to", Integer, nullable=False),
    Column("kind", String, nullable=False),
    Column("text", Text, nullable=False),
    Column("recorded_at", Float, nullable=False),
    Column("agent", String, nullable=True),
    Column("message_id", String, nullable=True),
    Column("role", String, nullable=True),
    Column("tool_name", String, nullable=True),
    Column("error_code", String, nullable=True),
    Column("terms", Text().with_variant(TSVECTOR(), "postgresql"), nullable=True),
    Index("ix_search_docs_run", "run_id"),
    Index("ix_search_docs_thread", "thread_id"),
    Index("ix_search_docs_agent_at", "agent", "recorded_at"),
    Index("ix_search_docs_kind_at", "kind", "recorded_at"),
)

# The runs whose documents are in search_docs: the indexer's cursor.
search_runs = Table(
    "search_runs",
    metadata,
    Column("run_id", String, primary_key=True),
    Column("thread_id", String, nullable=False),
    Column("indexed_at", Float, nullable=False),
    Index("ix_search_runs_thread", "thread_id"),
)

# Annotations: beside the log, never in it. Each is on a thread (run_id '') or one of its
# runs; keyed by thread, so a thread's go with it.
tags = Table(
    "tags",
    metadata,
    Column("thread_id", String, primary_key=True),
    Column("run_id", String, primary_key=True),
    Column("key", String, primary_key=True),
    Column("value", String, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_tags_key_value", "key", "value"),
)

notes = Table(
    "notes",
    metadata,
    Column("note_id", String, primary_key=True),
    Column("thread_id", String, nullable=False),
    Column("run_id", String, nullable=False),
    Column("author", String, nullable=True),
    Column("text", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_notes_thread", "thread_id", "created_at"),
)

scores = Table(
    "scores",
    metadata,
    Column("thread_id", String, primary_key=True),
    Column("run_id", String, primary_key=True),
    Column("value", Float, nullable=False),
    Column("author", String, nullable=True),
    Column("updated_at", Float, nullable=False),
)

# Made by the migration, outside what SQLAlchemy describes: the FTS5 table (and the
# shadow tables SQLite keeps for it) and PostgreSQL's GIN index.
UNDESCRIBED = ("search_fts", "ix_search_docs_terms")


def described(obj: object, name: str | None, kind: str, reflected: bool, other: object) -> bool:
    """Alembic's ``include_object``: whether a schema object is compared with ``metadata``."""
    return not (name or "").startswith(UNDESCRIBED)
