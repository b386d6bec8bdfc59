"""``Telemetry``: the observer the proxy is given when anything is watching.

It measures times itself (a run's clock starts when the watch is made, just before the
request goes to the agent), feeds the Prometheus metrics when they are on, and hands every
ended run's ``RunReport`` to its sinks (the run log, the trace export). Per batch it does
nothing unless metrics are on, and then a few counter increments and one pass over the
batch's event types.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any, NamedTuple

import orjson

from recorder.telemetry.metrics import Metrics
from recorder.telemetry.observer import CommittedEvent, RunEnd, RunReport, RunWatch

# The recorder's RUN_ERROR codes that say the agent's answer was at fault.
UPSTREAM_CODES = frozenset(
    {
        "upstream_unreachable",
        "upstream_http_error",
        "upstream_bad_content_type",
        "upstream_idle",
        "upstream_dropped",
        "upstream_incomplete",
        "frame_too_large",
        "limit_exceeded",
    }
)
_TOOL_TYPES = frozenset({"TOOL_CALL_START", "TOOL_CALL_RESULT"})
_PAYLOAD = attrgetter("payload")
_TYPE = attrgetter("type")
_OPEN_TOOL_CALLS = 10_000  # tool calls awaiting their result, oldest forgotten first

Sink = Callable[[RunReport], None]


class Telemetry:
    def __init__(self, metrics: Metrics | None = None, sinks: Sequence[Sink] = ()) -> None:
        self.metrics = metrics
        self.sinks = tuple(sinks)
        # tool call id -> (when it started, agent, tool name)
        self._tool_calls: dict[str, tuple[float, str, str]] = {}
        # agent -> its children of the metrics every run touches (``labels()`` is a lock
        # and a lookup: a few of them on every run's way to its first event).
        self._children: dict[str, _AgentMetrics] = {}

    def children(self, agent: str) -> _AgentMetrics:
        found = self._children.get(agent)
        if found is None:
            metrics = self.metrics
            assert metrics is not None
            found = self._children[agent] = _AgentMetrics(
                metrics.runs_started.labels(agent),
                metrics.first_event.labels(agent),
                metrics.run_duration.labels(agent),
                metrics.recorded.of(agent),
            )
        return found

    def run(self, agent: str | None, run_id: str, posted: Mapping[str, Any]) -> RunWatch:
        watch = _Watch(self, agent, run_id)
        if self.metrics is not None and self._tool_calls:
            self._posted_results(posted)
        return watch

    def committed(self, seconds: float, events: int) -> None:
        if self.metrics is not None:
            self.metrics.commit_seconds.observe(seconds)
            self.metrics.commit_events.observe(events)

    def journal_size(self, size: int) -> None:
        if self.metrics is not None:
            self.metrics.journal_bytes.set(size)

    # -- tool calls -------------------------------------------------------------------------

    def tool_events(self, agent: str, events: Sequence[CommittedEvent]) -> None:
        now = time.perf_counter()
        for event in events:
            if event.type not in _TOOL_TYPES:
                continue
            obj = _object(event.payload)
            call_id = obj.get("toolCallId")
            if not isinstance(call_id, str):
                continue
            if event.type == "TOOL_CALL_START":
                name = obj.get("toolCallName")
                self._open_call(call_id, now, agent, name if isinstance(name, str) else "")
            else:
                self._close_call(call_id, now)

    def _posted_results(self, posted: Mapping[str, Any]) -> None:
        """A frontend tool's result comes back as a tool message in the next run's input."""
        messages = posted.get("messages")
        now = time.perf_counter()
        for message in messages if isinstance(messages, list) else ():
            if isinstance(message, dict) and message.get("role") == "tool":
                call_id = message.get("toolCallId")
                if isinstance(call_id, str):
                    self._close_call(call_id, now)

    def _open_call(self, call_id: str, now: float, agent: str, tool: str) -> None:
        calls = self._tool_calls
        if len(calls) >= _OPEN_TOOL_CALLS:
            del calls[next(iter(calls))]
        calls[call_id] = (now, agent, tool)

    def _close_call(self, call_id: str, now: float) -> None:
        started = self._tool_calls.pop(call_id, None)
        if started is not None and self.metrics is not None:
            at, agent, tool = started
            self.metrics.tool_call.labels(agent, tool).observe(now - at)


class _AgentMetrics(NamedTuple):
    runs_started: Any
    first_event: Any
    run_duration: Any
    recorded: list[float]  # [events, bytes]


class _Watch:
    """One recorded response's clock and counters."""

    __slots__ = (
        "_agent",
        "_children",
        "_first",
        "_label",
        "_runs",
        "_started",
        "_tally",
        "_telemetry",
        "_wall",
    )

    def __init__(self, telemetry: Telemetry, agent: str | None, run_id: str) -> None:
        self._telemetry = telemetry
        self._agent = agent
        self._label = agent or ""
        self._started = time.perf_counter()
        self._wall = time.time()
        self._first: float | None = None
        self._runs = {run_id}
        metrics = telemetry.metrics
        if metrics is not None:
            self._children = children = telemetry.children(self._label)
            children.runs_started.inc()
            metrics.live_runs.inc()
            self._tally = children.recorded

    def first_event(self) -> None:
        if self._first is not None:
            return
        self._first = time.perf_counter() - self._started
        if self._telemetry.metrics is not None:
            self._children.first_event.observe(self._first)

    def recorded(self, run_id: str, events: Sequence[CommittedEvent]) -> None:
        metrics = self._telemetry.metrics
        if metrics is None:
            return
        if run_id not in self._runs:  # a later run in the same response
            self._runs.add(run_id)
            self._children.runs_started.inc()
            metrics.live_runs.inc()
        tally = self._tally
        tally[0] += len(events)
        tally[1] += sum(map(len, map(_PAYLOAD, events)))  # (loops in C: per batch, not event)
        if not _TOOL_TYPES.isdisjoint(map(_TYPE, events)):
            self._telemetry.tool_events(self._label, events)

    def ended(self, end: RunEnd) -> None:
        duration = time.perf_counter() - self._started
        metrics = self._telemetry.metrics
        if metrics is not None:
            metrics.runs_ended.labels(self._label, end.status).inc()
            metrics.live_runs.dec()
            self._children.run_duration.observe(duration)
            if end.code in UPSTREAM_CODES:
                metrics.upstream_errors.labels(self._label, end.code).inc()
        report = RunReport(end, self._agent, self._first, duration, self._wall)
        for sink in self._telemetry.sinks:
            sink(report)


def _object(payload: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
