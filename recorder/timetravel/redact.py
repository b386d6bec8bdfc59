"""Redaction of what is already recorded: a rule applied to stored events after the fact.

Each run whose events a rule matches is rewritten through the sanctioned path
(``EventStore.rewrite``): its payloads replaced in one transaction that the database
allows, its hash chain and its thread's re-sealed with a link to the old heads, a record
of what changed kept in ``rewrites`` and the action in the audit log. Runs still recording
are left for later (a rewrite refuses them) and listed. Posted inputs are not rewritten:
they are kept as content-addressed chunks other runs share (the input of every later run
of the thread repeats the messages, and is left as it was recorded).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recorder.config import RedactionRule
from recorder.errors import ThreadNotFound
from recorder.redaction import Redactor, redact
from recorder.store import EventStore
from recorder.store.model import RUNNING
from recorder.timetravel.audit import rewrite
from recorder.timetravel.history import History
from recorder.timetravel.indexing import Indexer


@dataclass
class RedactReport:
    runs: list[dict[str, Any]] = field(default_factory=list)  # rewrites, or dry-run finds
    skipped: list[str] = field(default_factory=list)  # runs still recording
    events: int = 0
    summaries: list[str] = field(default_factory=list)  # threads whose summary a rule matched

    def view(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "skipped": self.skipped,
            "events": self.events,
            "summaries": self.summaries,
        }


async def redact_recorded(
    store: EventStore,
    rules: Sequence[RedactionRule],
    thread_ids: Iterable[str],
    *,
    actor: str,
    reason: str | None,
    dry_run: bool = False,
    history: History | None = None,
    indexer: Indexer | None = None,
) -> RedactReport:
    """Apply ``rules`` to the stored events of these threads (every thread when none).

    A rewrite drops the run's checkpoints folded over what it changed and its search
    documents; ``history`` builds the first again from the rewritten events (without it,
    the next reads fold further), ``indexer`` the second (without it, the next pass of a
    recorder's indexer does)."""
    redactor = Redactor(rules)
    label = ", ".join(rule.name for rule in rules)
    report = RedactReport()
    for thread_id in await _threads(store, list(thread_ids)):
        for run in await store.list_runs(thread_id):
            changed: dict[int, bytes] = {}
            fired: set[str] = set()
            for event in await store.read_events(run.run_id):
                result = redact(event.type, event.payload, redactor)
                if result.fired:
                    changed[event.seq] = result.payload
                    fired.update(result.fired)
            if not changed:
                continue
            if run.status == RUNNING:
                report.skipped.append(run.run_id)
                continue
            report.events += len(changed)
            if dry_run:
                found = {"runId": run.run_id, "threadId": thread_id, "rewritten": sorted(changed)}
                report.runs.append({**found, "rules": sorted(fired)})
                continue
            why = f"redact ({label})" + (f": {reason}" if reason else "")
            done = await rewrite(store, run.run_id, changed, actor=actor, reason=why)
            if history is not None:
                await history.build_checkpoints(run.run_id)
            if indexer is not None:
                await indexer.index_run(run.run_id)
            report.runs.append({**done, "rules": sorted(fired)})
        if await _summary(store, thread_id, redactor, dry_run):
            report.summaries.append(thread_id)
    return report


async def _summary(store: EventStore, thread_id: str, redactor: Redactor, dry_run: bool) -> bool:
    """Redact the thread's summary (its searchable text, shown in its listing, derived from
    what was said) as a whole, as it is at record time; whether a rule matched it."""
    try:
        summary = (await store.get_thread(thread_id)).summary
        redacted = redactor.text(summary) if summary else summary
        if redacted == summary:
            return False
        if not dry_run:
            await store.set_summary(thread_id, redacted or "")
    except ThreadNotFound:  # purged meanwhile
        return False
    return True


async def _threads(store: EventStore, named: list[str]) -> list[str]:
    if named:
        for thread_id in named:
            await store.get_thread(thread_id)  # ThreadNotFound for an unknown id
        return named
    found: list[str] = []
    cursor = None
    while True:
        page = await store.list_threads(limit=500, cursor=cursor)
        found += [thread.thread_id for thread in page.items]
        if page.cursor is None:
            return found
        cursor = page.cursor
