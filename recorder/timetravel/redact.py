"""Redaction of what is already recorded: a rule applied to stored events after the fact.

Each run whose events a rule matches is rewritten through the sanctioned path
(``EventStore.rewrite``): its payloads replaced in one transaction that the database
allows, its hash chain and its thread's re-sealed with a link to the old heads, a record
of what changed kept in ``rewrites`` and the action in the audit log. Runs still recording
are left for later (a rewrite refuses them) and listed. Besides each event on its own,
the deltas of each message are redacted together (``split_secrets``): a secret a model
streamed in pieces is found in the text they make.

Posted inputs are redacted as the proxy redacts them at record time and replaced
(``EventStore.rewrite_inputs``) a few runs of a thread at a time, each time in one
transaction, with the action in the audit log. The thread's summary is redacted as a
whole. What was derived from the old log (checkpoints, search documents) is
dropped by the rewrites and built again here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from recorder.config import RedactionRule
from recorder.errors import RunNotFound, ThreadNotFound
from recorder.redaction import Redactor, error_redacted, redact
from recorder.redaction.streamed import split_secrets
from recorder.store import EventStore
from recorder.store.model import RUNNING, Redacted, Run
from recorder.timetravel.audit import audited, rewrite
from recorder.timetravel.history import History
from recorder.timetravel.indexing import Indexer
from recorder.timetravel.transfer import summary_of
from recorder.wire.events import RecordedEvent


@dataclass
class RedactReport:
    runs: list[dict[str, Any]] = field(default_factory=list)  # rewrites, or dry-run finds
    skipped: list[str] = field(default_factory=list)  # runs still recording
    events: int = 0
    inputs: list[dict[str, Any]] = field(default_factory=list)  # posted inputs a rule matched
    summaries: list[str] = field(default_factory=list)  # threads whose summary a rule matched
    errors: list[str] = field(default_factory=list)  # runs whose error a rule matched

    def view(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "skipped": self.skipped,
            "events": self.events,
            "inputs": self.inputs,
            "summaries": self.summaries,
            "errors": self.errors,
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
    key: str | None = None,
) -> RedactReport:
    """Apply ``rules`` to the stored events and posted inputs of these threads (every
    thread when none), and to their summaries.

    A rewrite drops the run's checkpoints folded over what it changed and its search
    documents (a rewrite of inputs, the thread's checkpoints and its runs' documents);
    ``history`` builds the first again from the rewritten log (without it, the next reads
    fold further), ``indexer`` the second (without it, the next pass of a recorder's
    indexer does). ``key``: the redaction key, for the keyed hashes of what is redacted
    (``EventStore.list_redactions``)."""
    redactor = Redactor(rules, key)
    report = RedactReport()
    for thread_id in await _threads(store, list(thread_ids)):
        runs = await store.list_runs(thread_id)
        inputs = await _inputs(store, thread_id, runs, redactor, actor, dry_run)
        report.inputs += inputs
        inputs_rewritten = bool(inputs) and not dry_run  # every checkpoint of it dropped
        touched = {entry["runId"] for entry in inputs} if inputs_rewritten else set()
        for run in runs:
            changed: dict[int, bytes] = {}
            rules_at: dict[int, set[str]] = {}
            try:  # its head as read with its events: a rewrite meanwhile is refused
                head = (await store.get_run(run.run_id, input=False)).head
            except RunNotFound:  # purged meanwhile
                continue
            events = await store.read_events(run.run_id)
            for event in events:
                result = redact(event.type, event.payload, redactor)
                if result.fired:
                    changed[event.seq] = result.payload
                    rules_at[event.seq] = set(result.fired)
            # Then what the deltas of a message hold together, joined as they were stored
            # (a delta that matched part of a secret alone must not hide the rest of it).
            originals = ((e.seq, e.type, e.payload) for e in events)
            split = split_secrets(originals, redactor, stored=changed)
            changed.update(split.payloads)
            for seq, names in split.rules.items():
                rules_at.setdefault(seq, set()).update(names)
            fired = set().union(*rules_at.values())
            if not changed:
                continue
            if run.status == RUNNING:
                report.skipped.append(run.run_id)
                continue
            report.events += len(changed)
            if dry_run:
                would = {"runId": run.run_id, "threadId": thread_id, "rewritten": sorted(changed)}
                report.runs.append({**would, "rules": sorted(fired)})
                continue
            # The rules that fired here, not every rule given: the record says what it did.
            why = f"redact ({', '.join(sorted(fired))})" + (f": {reason}" if reason else "")
            redacted = _redacted(events, rules_at, redactor)
            done = await rewrite(
                store,
                run.run_id,
                changed,
                actor=actor,
                reason=why,
                redacted=redacted,
                if_head=head,
            )
            touched.add(run.run_id)
            report.runs.append({**done, "rules": sorted(fired)})
        for run in runs:
            if await _error(store, run, redactor, actor, dry_run):
                report.errors.append(run.run_id)
        # Their derived data built again, from the rewritten log.
        for run in runs:
            if run.status == RUNNING:
                continue
            if history is not None and (inputs_rewritten or run.run_id in touched):
                await history.build_checkpoints(run.run_id)
            if indexer is not None and run.run_id in touched:
                await indexer.index_run(run.run_id)
        matched = {entry["runId"] for entry in inputs} | {
            entry["runId"] for entry in report.runs if entry["threadId"] == thread_id
        }
        if await _summary(store, thread_id, redactor, dry_run, matched):
            report.summaries.append(thread_id)
    return report


async def redact_split(
    store: EventStore, run_id: str, redactor: Redactor, *, actor: str
) -> dict[str, Any] | None:
    """Redact what the ended run's streamed deltas hold together and no delta alone
    (``split_secrets``): what a recorder does behind each run it redacted at record time.
    Its rewrite (sanctioned, in the audit log), or None when nothing was split."""
    head = (await store.get_run(run_id, input=False)).head
    events = await store.read_events(run_id)
    split = split_secrets(((e.seq, e.type, e.payload) for e in events), redactor)
    if not split.payloads:
        return None
    why = f"redact ({', '.join(sorted(split.fired))}): split across streamed deltas"
    redacted = _redacted(events, split.rules, redactor)
    return await rewrite(
        store,
        run_id,
        split.payloads,
        actor=actor,
        reason=why,
        redacted=redacted,
        if_head=head,
    )


def _redacted(
    events: Iterable[RecordedEvent], rules_at: Mapping[int, set[str]], redactor: Redactor
) -> dict[int, Redacted]:
    """What redaction did at each seq: the rules, the keyed hash of the payload it found
    (kept only where record time had not redacted it: then it is the original)."""
    return {
        e.seq: Redacted(tuple(sorted(rules_at[e.seq])), redactor.mac(e.payload))
        for e in events
        if e.seq in rules_at
    }


_INPUTS_AT_ONCE = 50  # runs whose inputs are held, and replaced, at a time


async def _inputs(
    store: EventStore,
    thread_id: str,
    runs: Sequence[Run],
    redactor: Redactor,
    actor: str,
    dry_run: bool,
) -> list[dict[str, Any]]:
    """Redact the posted inputs of the thread's runs that rules match, a few runs at a
    time in the order they were created (the memory of a long thread's inputs is not held
    at once; a run's input is kept as changes from an earlier one, never a later one);
    what was found, by run."""
    found_all: list[dict[str, Any]] = []
    for start in range(0, len(runs), _INPUTS_AT_ONCE):
        batch: list[Run] = []
        for run in runs[start : start + _INPUTS_AT_ONCE]:
            with contextlib.suppress(RunNotFound):  # purged meanwhile
                batch.append(await store.get_run(run.run_id))
        found = _redacted_inputs(batch, redactor)
        found_all += [
            {"runId": run_id, "threadId": thread_id, "rules": list(redacted.rules)}
            for run_id, (_data, redacted) in sorted(found.items())
        ]
        if found and not dry_run:
            detail = {"runs": sorted(found)}
            async with audited(store, actor, "rewrite_inputs", thread_id, detail):
                await store.rewrite_inputs(
                    thread_id,
                    {run_id: data for run_id, (data, _) in found.items()},
                    redacted={run_id: redacted for run_id, (_, redacted) in found.items()},
                )
    return found_all


def _redacted_inputs(runs: Iterable[Run], redactor: Redactor) -> dict[str, tuple[bytes, Redacted]]:
    """The posted inputs that rules match, redacted as the proxy redacts them at record
    time, with what redaction did (the rules that fired, the keyed hash of the input as it
    was), by run."""
    found: dict[str, tuple[bytes, Redacted]] = {}
    for run in runs:
        if run.input is None:
            continue
        try:
            posted = orjson.loads(run.input)
        except orjson.JSONDecodeError:
            continue  # kept as received: nothing a rule could be applied to
        if isinstance(posted, dict):
            result, _stored = redactor.run_input(run.input, posted)
            if result.fired:
                found[run.run_id] = (
                    result.payload,
                    Redacted(tuple(sorted(result.fired)), result.mac),
                )
    return found


async def _error(
    store: EventStore, run: Run, redactor: Redactor, actor: str, dry_run: bool
) -> bool:
    """Redact the error a closed run ended with (a RUN_ERROR's message, or what the
    recorder said of its failure), as a RUN_ERROR's message is at record time; whether a
    rule matched it."""
    if not run.error or run.status == RUNNING:
        return False
    redacted = error_redacted(run.error, redactor)
    if redacted == run.error:
        return False
    if not dry_run:
        with contextlib.suppress(RunNotFound):  # purged meanwhile
            async with audited(store, actor, "redact_error", run.thread_id, {"run": run.run_id}):
                await store.set_error(run.run_id, redacted)
    return True


async def _summary(
    store: EventStore, thread_id: str, redactor: Redactor, dry_run: bool, matched: set[str]
) -> bool:
    """Redact the thread's summary (its searchable text, shown in its listing, derived from
    what was said) as a whole; where a rule matched the input or events of the run it is
    made from (``matched``), built again from them, every rule applied as at record time
    (rules that apply to inputs or tool results only, too). Whether a rule matched it."""
    try:
        thread = await store.get_thread(thread_id)
        summary = thread.summary
        redacted = redactor.text(summary) if summary else summary
        if summary and thread.latest_run_id in matched:
            latest = await store.get_run(thread.latest_run_id)
            if latest.status != RUNNING:
                rebuilt = await summary_of(store, latest, redactor, redacting=True)
                redacted = rebuilt if rebuilt is not None else redacted
        if redacted == summary:
            return False
        if not dry_run:
            await store.set_summary(thread_id, redacted or "")
    except (ThreadNotFound, RunNotFound):  # purged meanwhile
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
