"""The service itself: health, configured agents, and the shape of every error."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recorder.models.base import Model
from recorder.models.fork import ForkStrategy


class JournalHealth(Model):
    """The local journal while it holds writes the database has yet to take."""

    bytes: int = Field(description="bytes of records held")
    records: int = Field(description="records written since the outage began")
    commits: int = Field(description="journal flushes (write + fsync) since the process began")
    age_seconds: float = Field(description="how long ago its oldest record was written")
    reason: str | None = Field(description="why it holds them")
    rejected: int = Field(description="records the database refused for good (kept aside)")


class Health(Model):
    ok: bool
    version: str
    active_runs: int
    status: Literal["ok", "degraded"] = Field(
        "ok", description="degraded: writes are held in the journal until the database is back"
    )
    journal: JournalHealth | None = None


class Agent(Model):
    name: str
    fork: ForkStrategy = Field(description="how a fork reaches it (its strategy)")


class AgentList(Model):
    agents: list[Agent]


class ErrorDetail(Model):
    """Every error answer: one readable sentence, never SQL, driver text or a traceback."""

    detail: str
    error_id: str | None = Field(
        None, description="on an internal error (500): the id the server's log line carries"
    )
