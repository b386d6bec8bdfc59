"""The public shapes: what the HTTP API answers and what the client library returns.

Plain pydantic models, importable without FastAPI or a database driver: the API declares
them as its response models (so ``/openapi.json`` describes every answer), and
``recorder.client`` and the CLI build their results from them. On the wire every field is
AG-UI's camelCase (``threadId``); in Python it is snake_case (``thread_id``); either name
is accepted when building one.

Free-form AG-UI values (messages, state, events, interrupts) are JSON values as recorded:
the recorder keeps whatever an agent sent, so these models never narrow them.
"""

from recorder.models.annotations import (
    Annotated,
    NewNote,
    NewScore,
    Note,
    Score,
    ThreadAnnotations,
)
from recorder.models.audit import (
    AuditAction,
    AuditLog,
    ChainProblem,
    ChainVerification,
    PurgeBody,
    PurgedRun,
    PurgedThread,
    PurgeResult,
    Receipt,
    RunHead,
    ThreadHead,
)
from recorder.models.base import Model
from recorder.models.diff import ChangedMessage, MessageChanges, Point, StateDiff
from recorder.models.fork import ForkBody, ForkOptions, ForkPlan, ForkStrategy, MessageEdit
from recorder.models.runs import (
    RUN_STATUSES,
    Event,
    EventPage,
    LifecycleViolation,
    RecordedViolation,
    RedactionRecord,
    Run,
    RunNode,
    RunRedactions,
    RunStatus,
    RunSummary,
    Verification,
)
from recorder.models.search import (
    SEARCH_KINDS,
    ReindexReport,
    SearchHit,
    SearchKind,
    SearchPage,
)
from recorder.models.service import Agent, AgentList, ErrorDetail, Health, JournalHealth
from recorder.models.state import Checkpoint, Problem, State, ThreadHistory
from recorder.models.stream import StreamedEvent
from recorder.models.threads import ForkOrigin, Thread, ThreadDetail, ThreadPage
from recorder.models.transfer import ImportReport

__all__ = [
    "RUN_STATUSES",
    "SEARCH_KINDS",
    "Agent",
    "AgentList",
    "Annotated",
    "AuditAction",
    "AuditLog",
    "ChainProblem",
    "ChainVerification",
    "ChangedMessage",
    "Checkpoint",
    "ErrorDetail",
    "Event",
    "EventPage",
    "ForkBody",
    "ForkOptions",
    "ForkOrigin",
    "ForkPlan",
    "ForkStrategy",
    "Health",
    "ImportReport",
    "JournalHealth",
    "LifecycleViolation",
    "MessageChanges",
    "MessageEdit",
    "Model",
    "NewNote",
    "NewScore",
    "Note",
    "Point",
    "Problem",
    "PurgeBody",
    "PurgeResult",
    "PurgedRun",
    "PurgedThread",
    "Receipt",
    "RecordedViolation",
    "RedactionRecord",
    "ReindexReport",
    "Run",
    "RunHead",
    "RunNode",
    "RunRedactions",
    "RunStatus",
    "RunSummary",
    "Score",
    "SearchHit",
    "SearchKind",
    "SearchPage",
    "State",
    "StateDiff",
    "StreamedEvent",
    "Thread",
    "ThreadAnnotations",
    "ThreadDetail",
    "ThreadHead",
    "ThreadHistory",
    "ThreadPage",
    "Verification",
]
