"""Messages, state and pending interrupts at a point, and a thread's history of them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from recorder.models.base import JSONObject, Model
from recorder.models.runs import RunStatus


class Problem(Model):
    """An event the fold could not apply as the reference client would (it went on)."""

    index: int
    type: str | None
    message: str


class State(Model):
    """What a frontend shows after event ``seq`` of run ``run_id`` (null seq: the run's end)."""

    thread_id: str
    run_id: str | None = Field(description="null: the thread has no runs")
    seq: int | None
    messages: list[JSONObject] = Field(description="AG-UI messages")
    state: Any = Field(description="the agent's state (any JSON value)")
    pending_interrupts: list[JSONObject]
    problems: list[Problem]


class Checkpoint(Model):
    """The thread at one run boundary: what the run was given (start) or left (end)."""

    run_id: str
    seq: int = Field(description="-1 at a run's start; its last event at its end")
    boundary: Literal["start", "end"]
    status: RunStatus
    created_at: datetime
    parent_run_id: str | None
    parent_seq: int | None
    messages: list[JSONObject]
    state: Any
    pending_interrupts: list[JSONObject]


class ThreadHistory(Model):
    thread_id: str
    checkpoints: list[Checkpoint] = Field(description="newest first")
