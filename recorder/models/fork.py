"""Fork options (the body of ``POST /runs/{id}/fork``) and a fork's plan (its dry run).

A new option is a field here: the API takes it, the client library and the CLI pass it on
unchanged, and ``recorder.timetravel.fork`` acts on it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from recorder.models.base import JSONObject, Model

ForkStrategy = Literal["new-thread", "same-thread"]


class MessageEdit(Model):
    """A user message of the history, changed."""

    model_config = ConfigDict(extra="forbid")

    message_id: str = Field(description="the id of a user message in the history at the point")
    content: str | list[JSONObject] = Field(description="its new content (text or parts)")


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
    state_patch: list[JSONObject] | None = Field(
        default=None, description="a JSON Patch (RFC 6902) applied to the state at the point"
    )
    edit: MessageEdit | None = Field(
        default=None,
        description="start from the history with this user message changed (and what "
        "followed it dropped): its turn runs again with the new text",
    )
    regenerate: str | None = Field(
        default=None,
        description="the id of an assistant message: run the turn that produced it again, "
        "from right before that turn's run, with the same input",
    )
    run_id: str | None = Field(default=None, description="the new run's id (default: a new one)")
    thread_id: str | None = Field(
        default=None,
        description="the branch's thread: a new id forks into a new thread, the parent's "
        "thread forks on it (default: by the strategy)",
    )
    strategy: ForkStrategy | None = Field(
        default=None,
        description="new-thread or same-thread (default: the agent's configured strategy)",
    )
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
    parent_run_id: str = Field(description="the run the branch starts from")
    parent_seq: int | None = Field(
        description="after this event of it (-1: its start, null: its end)"
    )
    strategy: ForkStrategy = Field(
        description="new-thread: the branch is a new thread; same-thread: it is posted on "
        "the parent's thread with parentRunId"
    )
    thread_id: str = Field(description="the branch's thread")
