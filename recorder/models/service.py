"""The service itself: health, configured agents, and the shape of every error."""

from __future__ import annotations

from pydantic import Field

from recorder.models.base import Model
from recorder.models.fork import ForkStrategy


class Health(Model):
    ok: bool
    version: str
    active_runs: int


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
