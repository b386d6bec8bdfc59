"""What the store takes and gives: plain frozen records, no database types."""

from __future__ import annotations

from collections.abc import Sequence
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
class Closing:
    """A run's close written in the same transaction as its last events
    (``EventStore.append_batches``): what ``set_status`` takes, the status terminal."""

    run_id: str
    status: str
    outcome: str | None = None
    error: str | None = None
    violations: list[dict[str, object]] | None = None
    # The thread's summary, kept in the same transaction.
    summary: str | None = None
    # When it ended (epoch seconds); None: now. Given by an import, which keeps the times
    # it was exported with.
    finished_at: float | None = None


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
    # The hash its chain ends with, set when it closes (None while it runs) and changed
    # only by a rewrite of its events: a fold of the run read with one head is a fold of
    # the same events while the run has that head.
    head: bytes | None = None
    # When its posted input was last rewritten (a redaction), None if never.
    input_rewritten_at: float | None = None

    def changed_since(self, stored: Sequence[Any]) -> bool:
        """Whether the run as the database holds it now (``stored``: ``RUN_AS_STORED``'s
        row) is no longer the one it was read as: its events rewritten (another head), its
        input rewritten (a redaction), or the run itself purged and posted again under its
        id (another ``created_at``). What was derived from it since (a checkpoint, search
        documents) may hold what was replaced, or belong to another run."""
        head, created_at, input_rewritten_at = stored
        return (
            (None if head is None else bytes(head)) != self.head
            or float(created_at) != self.created_at
            or (None if input_rewritten_at is None else float(input_rewritten_at))
            != self.input_rewritten_at
        )


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
    # key/value pairs, each on the thread or on one of its runs
    tags: tuple[tuple[str, str], ...] = ()
    # Only threads whose every run (and the thread itself) was recorded through one of
    # these agents; None: no such limit. An agent-limited token's view of the list.
    agents: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Page:
    """A page of a keyset-paginated list; ``cursor`` fetches the next one (None: no more)."""

    items: list[Any] = field(default_factory=list)
    cursor: str | None = None


# -- governance ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Action:
    """A write or admin action, as the audit log keeps it."""

    id: int
    at: float
    actor: str
    action: str
    target: str | None
    outcome: str
    detail: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class PurgeSelection:
    """Which threads a purge deletes: those named (all when none are), and of them those
    last updated before ``updated_before`` (epoch seconds), with a run of ``agent`` and
    none of ``exclude_agents``, when given. A selection that names nothing is refused."""

    thread_ids: tuple[str, ...] = ()
    updated_before: float | None = None
    agent: str | None = None
    # Threads with a run of any of these agents are left out (retention: an agent with an
    # age of its own is not purged by the global one).
    exclude_agents: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.thread_ids and self.updated_before is None and self.agent is None


@dataclass(frozen=True, slots=True)
class PurgedRun:
    run_id: str
    events: int
    head: bytes | None


@dataclass(frozen=True, slots=True)
class PurgedThread:
    thread_id: str
    head: bytes | None
    sealed: int
    runs: tuple[PurgedRun, ...]

    @property
    def events(self) -> int:
        return sum(run.events for run in self.runs)


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What a purge deleted (or, in a dry run, would delete), and its tombstone's id.

    ``skipped``: selected threads left alone because a run of theirs is still recording;
    ``missing``: named threads that do not exist."""

    threads: tuple[PurgedThread, ...]
    skipped: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    dry_run: bool = False
    tombstone: int | None = None
    at: float = 0.0

    @property
    def runs(self) -> int:
        return sum(len(thread.runs) for thread in self.threads)

    @property
    def events(self) -> int:
        return sum(thread.events for thread in self.threads)


@dataclass(frozen=True, slots=True)
class Tombstone:
    id: int
    at: float
    actor: str
    reason: str | None
    threads: int
    runs: int
    events: int
    detail: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A sanctioned rewrite's record (table ``rewrites``): the run's head before and after."""

    id: int
    at: float
    actor: str
    reason: str | None
    run_id: str
    thread_id: str
    old_head: bytes | None
    new_head: bytes | None
    # Each rewritten event's hash before and after: {seq: (old hash hex, new hash hex)}.
    events: dict[int, tuple[str | None, str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RewriteReport:
    """A sanctioned rewrite: the events whose payloads were replaced, the events re-hashed
    (those and every later one of the run), and the links from old heads to new."""

    id: int
    run_id: str
    thread_id: str
    rewritten: tuple[int, ...]
    rehashed: int
    old_head: bytes | None
    new_head: bytes | None
    old_thread_head: bytes | None
    new_thread_head: bytes | None


@dataclass(frozen=True, slots=True)
class ChainProblem:
    """Where a chain does not match what is stored: ``seq`` None for a run's or a
    thread's own head or count."""

    thread_id: str
    run_id: str | None
    seq: int | None
    what: str


@dataclass(slots=True)
class ChainReport:
    """A verification: what was checked, and every chain that broke (the first problem
    of each run, then the thread's own)."""

    threads: int = 0
    runs: int = 0
    events: int = 0
    problems: list[ChainProblem] = field(default_factory=list)
    # (thread id) -> its closed runs' recomputed heads in seal order; (run id) -> the
    # hash recomputed at each seq asked for (``marks``): what a receipt is checked against
    sealed: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)
    marked: dict[str, bytes] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class Heads:
    """The log's heads at one moment: each thread's chain (head, runs sealed) and each
    running run's last hash (seq, hash)."""

    at: float
    threads: dict[str, tuple[bytes, int]]
    running: dict[str, tuple[str, int, bytes]]  # run id -> (thread id, last seq, hash)


# Kinds of searchable documents, each derived from a run's events or its posted input.
MESSAGE = "message"
TOOL_CALL = "tool_call"
REASONING = "reasoning"
RUN_ERROR = "error"
INPUT = "input"
SEARCH_KINDS = (MESSAGE, TOOL_CALL, REASONING, RUN_ERROR, INPUT)


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """Searchable text derived from a run: a message assembled from its deltas, a tool call
    (name, arguments, result), reasoning, an error or a posted user message; found at
    events ``seq_from`` to ``seq_to`` (-1: the posted input)."""

    thread_id: str
    run_id: str
    seq_from: int
    seq_to: int
    kind: str
    text: str
    recorded_at: float
    agent: str | None = None
    message_id: str | None = None
    role: str | None = None
    tool_name: str | None = None
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    doc: SearchDoc
    score: float
    snippet: str
    marks: list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """What hits must match besides the text. ``agents`` limits hits to those agents' runs
    (a caller's scope); the others are the asker's filters."""

    text: str = ""
    syntax: bool = False
    agents: tuple[str, ...] | None = None
    agent: str | None = None
    kind: str | None = None
    tool: str | None = None
    status: str | None = None
    error_code: str | None = None
    since: float | None = None
    until: float | None = None
    thread_id: str | None = None
    run_id: str | None = None
    # key/value pairs, each on the hit's thread or on its run
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Note:
    """A note on a thread (``run_id`` None) or one of its runs."""

    note_id: str
    thread_id: str
    run_id: str | None
    text: str
    author: str | None
    created_at: float


@dataclass(frozen=True, slots=True)
class Score:
    thread_id: str
    run_id: str | None
    value: float
    author: str | None
    updated_at: float


@dataclass(frozen=True, slots=True)
class Tag:
    thread_id: str
    run_id: str | None
    key: str
    value: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class Annotations:
    """Everything annotated on a thread and its runs, beside the log."""

    thread_id: str
    tags: list[Tag] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
