"""What the store takes and gives: plain frozen records, no database types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

RUNNING = "running"
FINISHED = "finished"
INTERRUPTED = "interrupted"
CANCELLED = "cancelled"
ERROR = "error"
INCOMPLETE = "incomplete"
STATUSES = (RUNNING, FINISHED, INTERRUPTED, CANCELLED, ERROR, INCOMPLETE)
TERMINAL = frozenset(STATUSES) - {RUNNING}

UPSTREAM = "upstream"
RECORDER = "recorder"
IMPORT = "import"


class Redacted(NamedTuple):
    """What redaction did to a recorded payload: the rules that fired, and a keyed hash
    (HMAC-SHA256, hex) of the original bytes when a key is set."""

    rules: tuple[str, ...]
    mac: str | None = None


class Redaction(NamedTuple):
    """A redaction as the store keeps it: ``seq`` -1 is the run's posted input."""

    run_id: str
    seq: int
    rules: tuple[str, ...]
    mac: str | None
    recorded_at: float


class NewEvent(NamedTuple):
    """A frame to append: the payload exactly as received.

    A named tuple: the proxy makes one per streamed event, and a frozen dataclass's
    ``__init__`` costs several times a tuple's.
    """

    payload: bytes
    type: str | None
    origin: str = UPSTREAM
    recorded_at: float | None = None
    # Set when the payload was redacted before it was stored.
    redacted: Redacted | None = None


class Appended(NamedTuple):
    """Where an appended event landed (a named tuple: one is made per recorded event)."""

    seq: int
    position: int


@dataclass(frozen=True, slots=True)
class NewRun:
    run_id: str
    thread_id: str
    agent: str | None = None
    input: bytes | None = None
    parent_run_id: str | None = None
    parent_seq: int | None = None
    parent_inferred: bool = False
    origin: str = UPSTREAM
    owner: str | None = None
    created_at: float | None = None
    # Set when the input was redacted before it was stored.
    input_redacted: Redacted | None = None
    # Without a parent: take the thread's latest run, read in the creating transaction so
    # two runs posted at once on one thread cannot both claim the same parent unseen.
    infer_parent: bool = False
    # The run must start its thread (a fork into a new thread): ``Conflict`` when the
    # thread exists, decided in the creating transaction (two such forks at once: one wins).
    new_thread: bool = False


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    thread_id: str
    agent: str | None
    status: str
    input: bytes | None
    parent_run_id: str | None
    parent_seq: int | None
    parent_inferred: bool
    origin: str
    outcome: str | None
    error: str | None
    violations: list[dict[str, Any]]
    event_count: int
    created_at: float
    finished_at: float | None
    heartbeat_at: float | None
    owner: str | None


@dataclass(frozen=True, slots=True)
class ThreadSource:
    """The point another thread branched off at: after event ``seq`` (None: the end) of
    run ``run_id``, a run of ``thread_id`` (None: a run not recorded here)."""

    thread_id: str | None
    run_id: str
    seq: int | None


@dataclass(frozen=True, slots=True)
class Thread:
    thread_id: str
    agent: str | None
    created_at: float
    updated_at: float
    run_count: int
    latest_run_id: str | None
    summary: str | None
    latest_status: str | None = None
    source: ThreadSource | None = None


@dataclass(frozen=True, slots=True)
class ThreadFilter:
    agent: str | None = None
    status: str | None = None
    since: float | None = None
    until: float | None = None
    text: str | None = None
    # Only threads whose every run (and the thread itself) was recorded through one of
    # these agents; None: no such limit. An agent-limited token's view of the list.
    agents: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Page:
    """A page of a keyset-paginated list; ``cursor`` fetches the next one (None: no more)."""

    items: list[Any] = field(default_factory=list)
    cursor: str | None = None
