"""The lines of an export file, checked: each becomes a run or an event to write, or an
``InputError`` of one line naming the line and the field (``line 7: seq: ...``).

Nothing here writes: ``transfer.import_lines`` checks a whole run (its line and all its
event lines) before it writes any of it, so a run imports whole or not at all.
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass, field
from typing import Any, NoReturn

import orjson

from recorder.errors import InputError
from recorder.store import NewEvent, NewRun
from recorder.store.model import IMPORT, RECORDER, STATUSES, UPSTREAM
from recorder.wire.ids import id_problem
from recorder.wire.jsontext import MAX_DEPTH, nested_too_deeply

ORIGINS = (UPSTREAM, RECORDER, IMPORT)
_MAX_TIME = 1e11  # epoch seconds: past the year 5000
_MAX_INT = (1 << 31) - 1  # the seq columns' range


@dataclass(slots=True)
class RunLines:
    """One run of the file: its line checked, its events as they follow."""

    line: int
    run: NewRun
    status: str
    outcome: str | None
    error: str | None
    violations: list[dict[str, object]]
    event_count: int | None
    finished_at: float | None = None
    events: list[NewEvent] = field(default_factory=list)
    next_seq: int = 0  # the seq the next event line must have


def parse_line(raw: bytes, number: int) -> dict[str, Any]:
    try:
        line = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"line {number}: not JSON ({exc})") from exc
    if not isinstance(line, dict):
        raise InputError(f"line {number}: not a JSON object")
    return line


def run_lines(line: dict[str, Any], number: int) -> RunLines:
    """A ``"kind": "run"`` line, checked."""
    check = _Fields(line, number)
    run_id = check.id("runId")
    thread_id = check.id("threadId")
    parent = check.id("parentRunId", optional=True)
    status = line.get("status")
    if status not in STATUSES:
        check.fail("status", f"must be one of {', '.join(STATUSES)}")
    violations = line.get("violations")
    if violations is None:
        violations = []
    elif not isinstance(violations, list) or not all(isinstance(v, dict) for v in violations):
        check.fail("violations", "must be a list of objects")
    return RunLines(
        line=number,
        run=NewRun(
            run_id=run_id,
            thread_id=thread_id,
            agent=check.text("agent"),
            input=check.run_input(),
            parent_run_id=parent,
            parent_seq=check.integer("parentSeq", low=-1),
            parent_inferred=check.flag("parentInferred"),
            origin=IMPORT,
            created_at=check.time("createdAt"),
        ),
        status=status,
        outcome=check.text("outcome"),
        error=check.text("error"),
        violations=violations,
        event_count=check.integer("eventCount", low=0),
        finished_at=check.time("finishedAt"),
    )


def add_event(run: RunLines, line: dict[str, Any], number: int) -> None:
    """A ``"kind": "event"`` line of ``run``, checked: seqs run 0, 1, 2, ... with no gap,
    repeat or reordering (an export's are; nothing is renumbered)."""
    check = _Fields(line, number)
    if line.get("runId") != run.run.run_id:
        check.fail("runId", f"an event of another run than the run of line {run.line}")
    seq = check.integer("seq", low=0, required=True)
    if seq != run.next_seq:
        what = "repeats an earlier seq" if seq < run.next_seq else "leaves a gap"
        check.fail("seq", f"is {seq} where {run.next_seq} was due ({what})")
    origin = line.get("origin")
    if origin is not None and origin not in ORIGINS:
        check.fail("origin", f"must be one of {', '.join(ORIGINS)}")
    payload = check.data("payload")
    if payload is None:
        check.fail("payload", "is missing (payload or payloadB64)")
    run.events.append(
        NewEvent(payload, check.text("type"), origin or IMPORT, check.time("recordedAt"))
    )
    run.next_seq += 1


def check_complete(run: RunLines) -> None:
    """The run's events are all there (an export cut short is refused, not half imported)."""
    count = run.event_count
    if count is not None and run.next_seq < count:
        raise InputError(
            f"line {run.line}: eventCount: says {count} events, but {run.next_seq} follow "
            "(a file cut short?)"
        )


class _Fields:
    """Typed reads of one line's fields; each failure an ``InputError`` naming line and field."""

    def __init__(self, line: dict[str, Any], number: int) -> None:
        self.line = line
        self.number = number

    def fail(self, name: str, problem: str) -> NoReturn:
        raise InputError(f"line {self.number}: {name}: {problem}")

    def id(self, name: str, *, optional: bool = False) -> Any:
        value = self.line.get(name)
        if value is None and optional:
            return None
        problem = id_problem(value)
        if problem is not None:
            self.fail(name, problem)
        return value

    def text(self, name: str) -> Any:
        value = self.line.get(name)
        if value is not None and not isinstance(value, str):
            self.fail(name, "must be a string or null")
        return value

    def flag(self, name: str) -> bool:
        value = self.line.get(name)
        if value is not None and not isinstance(value, bool):
            self.fail(name, "must be true, false or null")
        return bool(value)

    def integer(self, name: str, *, low: int, required: bool = False) -> Any:
        value = self.line.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= _MAX_INT:
            self.fail(name, f"must be an integer from {low} to {_MAX_INT}")
        return value

    def time(self, name: str) -> Any:
        value = self.line.get(name)
        if value is None:
            return None
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or not 0 <= value <= _MAX_TIME
        ):
            self.fail(name, "must be epoch seconds (a number from 0 to 10^11)")
        return float(value)

    def run_input(self) -> bytes | None:
        data = self.data("input")
        if data is not None:
            try:
                posted = orjson.loads(data)
            except orjson.JSONDecodeError:
                posted = None
            if not isinstance(posted, dict):
                self.fail("input", "must be the RunAgentInput as posted (a JSON object)")
            if nested_too_deeply(data, posted):
                self.fail("input", f"nests arrays and objects past {MAX_DEPTH} levels")
        return data

    def data(self, name: str) -> bytes | None:
        """Bytes given as UTF-8 text (``name``) or base64 (``name`` + ``B64``)."""
        text, encoded = self.line.get(name), self.line.get(name + "B64")
        if text is not None and encoded is not None:
            self.fail(name, f"give {name} or {name}B64, not both")
        if encoded is not None:
            if not isinstance(encoded, str):
                self.fail(name + "B64", "must be a base64 string")
            try:
                return base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                self.fail(name + "B64", "is not valid base64")
        if text is None:
            return None
        if not isinstance(text, str):
            self.fail(name, "must be a string (or use " + name + "B64)")
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            self.fail(name, "holds half of a surrogate pair (not UTF-8)")
        return None
