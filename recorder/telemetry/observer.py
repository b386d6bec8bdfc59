"""What a recording reports as it goes: the observer interface, and one that does nothing.

The proxy calls an ``Observer`` at a few points, each at most once per batch or per run,
never per event: a run begins (``run``, which answers a ``RunWatch`` for that run), a batch
of its events is committed (``RunWatch.recorded``), its first event arrives
(``first_event``), a run ends (``ended``), a group commit is done (``committed``). With
telemetry off the proxy holds ``NO_OBSERVER``, whose methods return at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class CommittedEvent(Protocol):
    """A recorded event as the proxy hands it over (the store's ``NewEvent``)."""

    @property
    def payload(self) -> bytes: ...
    @property
    def type(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How one run ended, as the recording knows it."""

    run_id: str
    thread_id: str
    status: str  # finished, interrupted, cancelled, error
    outcome: str | None
    error: str | None
    events: int
    bytes: int
    code: str | None = None  # the code of the recorder's own RUN_ERROR, if it closed the run


@dataclass(frozen=True, slots=True)
class RunReport:
    """One ended run, with the times the observer measured: what a run's log line says."""

    end: RunEnd
    agent: str | None
    first_event: float | None  # seconds from the request to the agent to its first event
    duration: float  # seconds from the request to the agent to the run's end
    started_at: float  # wall-clock time (epoch seconds) of the request to the agent


class RunWatch(Protocol):
    """The observations of one recorded response (its posted run, and any later run the
    agent started in the same response)."""

    def first_event(self) -> None:
        """The agent's first event arrived."""

    def recorded(self, run_id: str, events: Sequence[CommittedEvent]) -> None:
        """``events`` of ``run_id`` are in the log."""

    def ended(self, end: RunEnd) -> None:
        """A run of this response ended (called once per run)."""


class Observer(Protocol):
    def run(self, agent: str | None, run_id: str, posted: Mapping[str, Any]) -> RunWatch:
        """A run was created and is about to be posted to ``agent``."""

    def committed(self, seconds: float, events: int) -> None:
        """One commit of ``events`` events took ``seconds``."""

    def journal_size(self, size: int) -> None:
        """The journal now holds ``size`` bytes (for a store that keeps one)."""


class TraceSink(Protocol):
    """Where ended runs go to become traces (``traces.TraceExport``)."""

    def __call__(self, report: RunReport) -> None: ...
    async def flush(self) -> None: ...
    async def close(self) -> None: ...


class _Silent:
    """Observes nothing (telemetry off)."""

    def first_event(self) -> None:
        pass

    def recorded(self, run_id: str, events: Sequence[CommittedEvent]) -> None:
        pass

    def ended(self, end: RunEnd) -> None:
        pass

    def run(self, agent: str | None, run_id: str, posted: Mapping[str, Any]) -> RunWatch:
        return self

    def committed(self, seconds: float, events: int) -> None:
        pass

    def journal_size(self, size: int) -> None:
        pass


NO_OBSERVER: Observer = _Silent()
