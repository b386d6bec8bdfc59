"""Fork options (the body of ``POST /runs/{id}/fork``) and a fork's plan (its dry run).

A new option is a field here: the API takes it, the client library and the CLI pass it on
unchanged, and ``recorder.timetravel.fork`` acts on it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from recorder.models.base import JSONObject, Model


class ForkOptions(Model):
    """Where to fork and what to change. ``state`` and ``forwarded_props`` count only when
    given (null is a value): unset, they come from the point and the parent's input."""

    model_config = ConfigDict(extra="forbid")

    at_seq: int | None = Field(
        default=None, ge=-1, description="fork after this event (default: the end)"
    )
    messages: list[JSONObject | str] = Field(
        default_factory=list, description="messages to append (a string is a user message)"
    )
    state: Any = Field(default=None, description="replace the state at the point")
    run_id: str | None = Field(default=None, description="the new run's id (default: a new one)")
    thread_id: str | None = Field(default=None, description="fork into this thread")
    resume: list[JSONObject] | None = Field(
        default=None, description="answers to pending interrupts"
    )
    forwarded_props: Any = None


class ForkBody(ForkOptions):
    dry_run: bool = Field(False, description="only return the RunAgentInput")


class ForkPlan(Model):
    """What a fork would post to the agent: the answer of a dry run."""

    agent: str
    input: JSONObject = Field(description="the RunAgentInput")
    parent_run_id: str
    parent_seq: int | None
