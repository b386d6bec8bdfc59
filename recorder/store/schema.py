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
    Index("ix_runs_thread_created", "thread_id", "created_at"),
    Index("ix_runs_status", "status"),
    Index("ix_runs_parent", "parent_run_id"),
)

# The RunAgentInput exactly as posted, apart from the run row: inputs carry the whole
# history (often hundreds of KB) and the run row is updated on every append; SQLite
# rewrites a row with all its overflow pages on each update. Small inputs are kept whole
# (``input``); others as the ``root`` of a tree in ``input_chunks`` (recorder.store.inputs).
run_inputs = Table(
    "run_inputs",
    metadata,
    Column("run_id", String, ForeignKey("runs.run_id"), primary_key=True),
    Column("input", LargeBinary, nullable=True),
    Column("root", LargeBinary, nullable=True),
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
    Column("run_id", String, ForeignKey("runs.run_id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", String, nullable=True),
    Column("payload", LargeBinary, nullable=False),
    Column("recorded_at", Float, nullable=False),
    Column("origin", String, nullable=False),
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
    # Small ones whole, others as the root of a tree in ``input_chunks``, like inputs.
    Column("data", LargeBinary, nullable=True),
    Column("root", LargeBinary, nullable=True),
)
