"""Governance: hash-chain verification, receipts, purges and the audit log."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from recorder.models.base import Model


class ChainProblem(Model):
    """Where a chain does not match what is stored: ``seq`` null for a run's or a
    thread's own head or count, ``runId`` null for the thread's chain."""

    thread_id: str
    run_id: str | None = None
    seq: int | None = None
    what: str


class ChainVerification(Model):
    """A recomputation of the chains: what was checked and every break found (the first
    of each run, then the thread's own); with a receipt, also what differs from it."""

    ok: bool
    threads: int
    runs: int
    events: int
    problems: list[ChainProblem]
    receipt_at: str | None = None
    # With a receipt: what differs from it that a purge or a sanctioned rewrite made
    # since accounts for, each naming its record (not problems).
    sanctioned: list[ChainProblem] = []


class ThreadHead(Model):
    head: str
    sealed: int


class RunHead(Model):
    thread_id: str
    seq: int
    hash: str


class Receipt(Model):
    """The log's heads at ``at``: each thread's chain (hex head, runs sealed) and each
    running run's last hash. ``signature``: HMAC-SHA256 (hex) of the receipt without it,
    as canonical JSON (sorted keys, no spaces), when the recorder has an ``audit_key``."""

    version: int = 1
    algorithm: str = "sha256"
    at: str
    threads: dict[str, ThreadHead]
    running: dict[str, RunHead] = Field(default_factory=dict)
    signature: str | None = None


class PurgeBody(Model):
    """What to purge: threads named, last updated longer ago than ``olderThan`` (``90d``,
    ``12h``, ``30m``, ``45s``), with a run of ``agent``; every condition given must hold."""

    thread_ids: list[str] = Field(default_factory=list)
    older_than: str | None = None
    agent: str | None = None
    reason: str | None = None
    dry_run: bool = False


class PurgedRun(Model):
    run_id: str
    events: int
    head: str | None


class PurgedThread(Model):
    thread_id: str
    head: str | None
    sealed: int
    events: int
    runs: list[PurgedRun]


class PurgeResult(Model):
    """What was deleted (a dry run: what would be), and the tombstone that says so."""

    dry_run: bool
    tombstone: int | None
    at: str
    threads: list[PurgedThread]
    runs: int
    events: int
    skipped: list[str]
    missing: list[str]
    # Threads forked from the purged ones (at any depth) and not purged: their posted
    # inputs hold copies of what the purged threads said. Erasing that takes them too.
    forks: list[str] = []


class AuditAction(Model):
    id: int
    at: str
    actor: str
    action: str
    target: str | None
    outcome: str
    detail: dict[str, Any] | None = None


class AuditLog(Model):
    """Newest first; ``nextBefore`` fetches the next page (null: no more)."""

    actions: list[AuditAction]
    next_before: int | None = None
