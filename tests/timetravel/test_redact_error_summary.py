"""A redaction after the fact (and an import with rules) reaches the run's error and the
thread's summary, as record time does: the error with the rules a RUN_ERROR's message
takes, the summary built again with every rule (those scoped to inputs or tool results
too)."""

from __future__ import annotations

import orjson

from recorder.config import RedactionRule
from recorder.redaction import Redactor
from recorder.store import EventStore, NewEvent, NewRun, open_store
from recorder.timetravel.redact import redact_recorded
from recorder.timetravel.transfer import export_lines, import_lines, summary_of

ERROR = "db failure for erin@err.example"
RULES = [
    RedactionRule(name="email", detector="email"),
    RedactionRule(name="inp", pattern="INPUTSECRET7", where=("input",)),
    RedactionRule(name="tres", pattern="TOOLRESSECRET42", where=("tool_results",)),
]


async def _record(store: EventStore) -> None:
    posted = {
        "threadId": "t",
        "runId": "r1",
        "messages": [
            {"id": "u1", "role": "user", "content": "look up INPUTSECRET7"},
            {"id": "x1", "role": "tool", "toolCallId": "c1", "content": "got TOOLRESSECRET42"},
        ],
    }
    await store.create_run(NewRun("r1", "t", agent="a", input=orjson.dumps(posted)))
    frames = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "checking"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_ERROR", "message": ERROR},
    ]
    await store.append("r1", [NewEvent(orjson.dumps(f), str(f["type"])) for f in frames])
    run = await store.get_run("r1")
    summary = await summary_of(store, run, None)  # as a recorder without rules kept it
    assert summary is not None and "TOOLRESSECRET42" in summary
    await store.set_status("r1", "error", outcome="error", error=ERROR, summary=summary)


def _clean(text: str | None) -> bool:
    return text is not None and not any(
        secret in text for secret in ("erin@err.example", "INPUTSECRET7", "TOOLRESSECRET42")
    )


async def test_the_error_and_the_summary_are_redacted_after_the_fact(store: EventStore) -> None:
    await _record(store)
    dry = await redact_recorded(store, RULES, [], actor="cli", reason=None, dry_run=True)
    assert (dry.errors, dry.summaries) == (["r1"], ["t"])
    assert (await store.get_run("r1")).error == ERROR  # a dry run changes nothing

    done = await redact_recorded(store, RULES, [], actor="cli", reason="erasure")
    assert (done.errors, done.summaries) == (["r1"], ["t"])
    assert (await store.get_run("r1")).error == "db failure for [REDACTED:email]"
    summary = (await store.get_thread("t")).summary
    assert _clean(summary) and "[REDACTED:tres]" in (summary or "")
    assert "[REDACTED:inp]" in (summary or "")
    (action,) = await store.list_actions(action="redact_error")
    assert (action.actor, action.target, action.detail) == ("cli", "t", {"run": "r1"})
    # Again: nothing left to find.
    again = await redact_recorded(store, RULES, [], actor="cli", reason=None)
    assert (again.errors, again.summaries, again.runs) == ([], [], [])


async def test_an_import_with_rules_redacts_the_error(store: EventStore, tmp_path: str) -> None:
    await _record(store)
    lines = [line async for line in export_lines(store, [])]
    other = await open_store(f"sqlite+aiosqlite:///{tmp_path}/imported.db", migrate=True)
    try:
        await import_lines(other, lines, Redactor(RULES))
        run = await other.get_run("r1")
        assert run.error == "db failure for [REDACTED:email]"
        assert _clean((await other.get_thread("t")).summary)
    finally:
        await other.close()
