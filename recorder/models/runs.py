"""Runs, their recorded events and the lifecycle check of a recorded run."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

from pydantic import ConfigDict, Field

from recorder.models.base import JSONObject, Model

RunStatus = Literal["running", "finished", "interrupted", "cancelled", "error", "incomplete"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)


class RecordedViolation(Model):
    """A lifecycle violation found while the run was recorded (the event was kept)."""

    model_config = ConfigDict(extra="allow")

    seq: int | None = Field(default=None, description="the event that broke the rule")
    message: str = Field(description="the reference client's error text")


class RunSummary(Model):
    run_id: str
    thread_id: str
    agent: str | None
    status: RunStatus
    outcome: str | None = Field(description="success or interrupt, once finished")
    error: str | None
    parent_run_id: str | None
    parent_seq: int | None = Field(description="the fork point in the parent; null: its end")
    parent_inferred: bool = Field(
        description="the parent was not posted but taken as the thread's latest run"
    )
    origin: str = Field(description="upstream, recorder or import")
    event_count: int
    created_at: datetime
    finished_at: datetime | None
    duration_ms: float | None
    violations: list[RecordedViolation]


class Run(RunSummary):
    input: JSONObject | None = Field(description="the RunAgentInput as posted")


class RunNode(RunSummary):
    """A run in a thread's tree, with the runs that branch from it (forks, follow-ups)."""

    children: list[RunNode]


class Event(Model):
    position: int = Field(description="global, increasing in commit order")
    seq: int = Field(description="0, 1, 2, ... inside the run")
    run_id: str
    type: str | None = Field(description="null for a frame that is not an AG-UI event")
    origin: str
    recorded_at: datetime
    event: JSONObject | None = Field(description="the frame as a JSON object")
    raw: str | None = Field(description="the frame as text, when it is not a JSON object")


class EventPage(Model):
    run_id: str
    events: list[Event]
    next_after_seq: int | None = Field(description="afterSeq for the next page; null: no more")


class LifecycleViolation(Model):
    index: int = Field(description="the event's place in the checked sequence (its seq)")
    type: str | None
    message: str = Field(description="the reference client's error text")


class Verification(Model):
    """The reference client's checks run over a recorded run (or an event file)."""

    run_id: str | None
    event_count: int
    ok: bool
    violations: list[LifecycleViolation]


class RedactionRecord(Model):
    """What redaction did to one stored payload before it was written."""

    seq: int = Field(description="the event's seq; -1: the run's posted input")
    rules: list[str] = Field(description="the rules that fired")
    original_mac: str | None = Field(
        description="HMAC-SHA256 (hex) of the original bytes, with the redaction key"
    )
    recorded_at: datetime


class RunRedactions(Model):
    run_id: str
    redactions: list[RedactionRecord]
