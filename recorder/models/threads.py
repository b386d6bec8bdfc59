"""Threads: the list, and one thread with its tree of runs."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from recorder.models.base import Model
from recorder.models.runs import RunNode, RunStatus


class Thread(Model):
    thread_id: str
    agent: str | None
    created_at: datetime
    updated_at: datetime
    run_count: int
    latest_run_id: str | None
    latest_status: RunStatus | None
    summary: str | None = Field(description="the end of the latest recorded text")


class ThreadPage(Model):
    threads: list[Thread]
    next_cursor: str | None = Field(description="cursor for the next page; null: no more")


class ThreadDetail(Thread):
    runs: list[RunNode] = Field(description="the runs as a forest, oldest roots first")
