"""The recorder's Prometheus metrics, in a registry of their own (one per process's runtime).

Every name starts with ``recorder_``. Labels stay few and bounded: the agent (a configured
name), a run's final status, the recorder's own RUN_ERROR code, a tool's name.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from recorder.errors import ConfigError
from recorder.telemetry.tallies import LeanHistogram, Tally

# Seconds: from a fraction of a millisecond (a commit) to minutes (a long run).
_SHORT = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_LONG = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
_BATCH = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.runs_started = Counter(
            "recorder_runs_started", "Runs begun, by agent", ["agent"], registry=registry
        )
        self.runs_ended = Counter(
            "recorder_runs_ended",
            "Runs ended, by agent and final status",
            ["agent", "status"],
            registry=registry,
        )
        # By agent: [events, bytes] committed to the log (``recorded.of(agent)``).
        self.recorded = Tally(
            [
                ("recorder_events_recorded", "Events committed to the log"),
                ("recorder_bytes_recorded", "Bytes of event data committed to the log"),
            ],
            "agent",
        )
        registry.register(self.recorded)
        self.live_runs = Gauge("recorder_live_runs", "Runs being recorded now", registry=registry)
        self.commit_seconds = LeanHistogram(
            "recorder_commit_seconds", "Duration of one commit", _SHORT
        )
        self.commit_events = LeanHistogram(
            "recorder_commit_batch_events",
            "Events in one commit (group commit: every run's waiting events)",
            _BATCH,
        )
        registry.register(self.commit_seconds)
        registry.register(self.commit_events)
        self.first_event = Histogram(
            "recorder_agent_first_event_seconds",
            "The agent's time to its first event, from the request the recorder sent",
            ["agent"],
            buckets=(*_SHORT, 5.0, 10.0, 30.0, 60.0),
            registry=registry,
        )
        self.run_duration = Histogram(
            "recorder_run_duration_seconds",
            "A run's duration, from the request to the agent to its end",
            ["agent"],
            buckets=_LONG,
            registry=registry,
        )
        self.tool_call = Histogram(
            "recorder_tool_call_seconds",
            "From TOOL_CALL_START to its result (TOOL_CALL_RESULT, or a tool message posted "
            "in a later run)",
            ["agent", "tool"],
            buckets=_LONG,
            registry=registry,
        )
        self.upstream_errors = Counter(
            "recorder_upstream_errors",
            "Runs the recorder closed because of the agent's answer, by its RUN_ERROR code",
            ["agent", "code"],
            registry=registry,
        )
        self.journal_bytes = Gauge(
            "recorder_journal_bytes", "Bytes held in the write journal (0: none)", registry=registry
        )
        self.chunk_cache_bytes = Gauge(
            "recorder_chunk_cache_bytes",
            "Bytes of input and checkpoint chunks kept in memory (at most the chunk cache's "
            "budget)",
            registry=registry,
        )

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)

    def serve(self, address: str) -> Callable[[], None]:
        """Serve the metrics at ``HOST:PORT`` on a thread of their own (no token: the address
        is the protection); returns what stops it."""
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"metrics_address must be HOST:PORT, got {address!r}")
        try:
            server, thread = start_http_server(int(port), host.strip("[]"), registry=self.registry)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {address}: {exc.strerror or exc}") from exc

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(5)

        return stop
