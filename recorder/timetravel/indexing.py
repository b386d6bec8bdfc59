"""The search indexer: a closed run's searchable documents, derived from its events.

DESIGN. Indexing follows the log, off the client's path: a background task asks the store
for closed runs not indexed yet (``runs_to_index``, whose answer is the cursor, kept in the
database: after a crash it resumes where it stopped), derives each run's documents and
writes them in one transaction. A frame never waits for it: documents are made from
committed events, after the run closed; on SQLite the write runs on the writer's thread.
The index is derived data: ``reindex`` drops it and builds it again from the log.

Documents come from the events as the reference client reads them (compat, enforcement,
chunk expansion: ``recorder.reference.inbound``), so a message is its assembled text, not
its deltas, whatever shape the producer used: messages (TEXT_MESSAGE_*), tool calls (name,
arguments, result), reasoning (REASONING_MESSAGE_*; encrypted values are never indexed),
errors (RUN_ERROR's code and message), and the user messages the run's input posted (the
trailing ones: the history before them was posted, and indexed, with earlier turns).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from recorder.errors import RunNotFound, StoreError, StoreUnavailable
from recorder.reference import JSONObject
from recorder.reference.inbound import Handler, Inbound
from recorder.store import EventStore, SearchDoc
from recorder.store.model import INPUT, MESSAGE, REASONING, RUN_ERROR, TOOL_CALL, Run
from recorder.timetravel.giveway import GiveWay
from recorder.timetravel.history import History
from recorder.wire.events import RecordedEvent

LOG = logging.getLogger("recorder.search")
MAX_DOC_CHARS = 64 * 1024  # a document keeps this much text (tool results can be huge)


@dataclass
class _Open:
    seq_from: int
    seq_to: int
    kind: str
    message_id: str | None = None
    role: str | None = None
    tool_name: str | None = None
    error_code: str | None = None
    parts: list[str] = field(default_factory=list)
    result: list[str] = field(default_factory=list)
    at: float = 0.0


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts: their text
        return " ".join(
            str(part.get("text", "")) for part in value if isinstance(part, dict)
        ).strip()
    return ""


def _unescaped(text: str) -> str:
    """JSON text (a tool call's arguments, a result a tool wrote as JSON) as it is searched:
    with its strings' escapes read (``"Z\\u00fcrich"``, as Python's ``json.dumps`` writes
    any letter past ASCII, is found as Zürich; an escaped newline splits no word). Text
    with no escape, or that is not JSON, stays as it is."""
    if "\\" not in text:
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    return _loose(value) if isinstance(value, (dict, list, str)) else text


def _loose(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}": {_loose(v)}' for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_loose(v) for v in value) + "]"
    return orjson.dumps(value).decode()


class _Collector(Inbound):
    """Folds one run's events into documents, in the order their first event came."""

    def __init__(self, run: Run, events: list[RecordedEvent]) -> None:
        super().__init__(_HANDLERS)
        self.run = run
        self.events = events
        self.open: dict[tuple[str, str], _Open] = {}
        self.done: list[_Open] = []
        # Messages and tool calls known already: posted, or streamed by this run. A
        # MESSAGES_SNAPSHOT adds documents for the others only (an agent that sends its
        # answer as a snapshot, never as TEXT_MESSAGE events).
        self.seen: set[str] = set(_posted_ids(run))

    def _reject(self, index: int, kind: str | None, message: str) -> None:
        """A frame the client would fail on has nothing to index."""

    def event_at(self, index: int) -> RecordedEvent:
        return self.events[index]

    def start(self, key: tuple[str, str], index: int, kind: str, **fields: Any) -> None:
        self.seen.add(key[1])
        event = self.events[index]
        item = _Open(event.seq, event.seq, kind, at=event.recorded_at, **fields)
        previous = self.open.pop(key, None)
        if previous is not None:
            self.done.append(previous)
        self.open[key] = item

    def add(self, key: tuple[str, str], index: int, text: str, *, result: bool = False) -> None:
        item = self.open.get(key)
        if item is None:
            return
        (item.result if result else item.parts).append(text)
        item.seq_to = self.events[index].seq

    def end(self, key: tuple[str, str], index: int) -> None:
        item = self.open.pop(key, None)
        if item is not None:
            item.seq_to = self.events[index].seq
            self.done.append(item)

    def documents(self) -> list[SearchDoc]:
        items = sorted([*self.done, *self.open.values()], key=lambda item: item.seq_from)
        docs = [self._doc(item) for item in items]
        return [doc for doc in docs if doc.text.strip()]

    def _doc(self, item: _Open) -> SearchDoc:
        text = "".join(item.parts)
        if item.kind == TOOL_CALL:
            result = _unescaped("".join(item.result))
            text = "\n".join(
                part for part in (item.tool_name or "", _unescaped(text), result) if part
            )
        return SearchDoc(
            thread_id=self.run.thread_id,
            run_id=self.run.run_id,
            seq_from=item.seq_from,
            seq_to=item.seq_to,
            kind=item.kind,
            text=text[:MAX_DOC_CHARS],
            recorded_at=item.at,
            agent=self.run.agent,
            message_id=item.message_id,
            role=item.role,
            tool_name=item.tool_name,
            error_code=item.error_code,
        )


def _text_start(c: _Collector, i: int, e: JSONObject) -> None:
    role = e.get("role") or "assistant"
    c.start(("text", str(e["messageId"])), i, MESSAGE, message_id=str(e["messageId"]), role=role)


def _text_content(c: _Collector, i: int, e: JSONObject) -> None:
    c.add(("text", str(e["messageId"])), i, str(e.get("delta") or ""))


def _text_end(c: _Collector, i: int, e: JSONObject) -> None:
    c.end(("text", str(e["messageId"])), i)


def _reasoning_start(c: _Collector, i: int, e: JSONObject) -> None:
    key = ("reasoning", str(e["messageId"]))
    c.start(key, i, REASONING, message_id=str(e["messageId"]), role="reasoning")


def _reasoning_content(c: _Collector, i: int, e: JSONObject) -> None:
    c.add(("reasoning", str(e["messageId"])), i, str(e.get("delta") or ""))


def _reasoning_end(c: _Collector, i: int, e: JSONObject) -> None:
    c.end(("reasoning", str(e["messageId"])), i)


def _tool_start(c: _Collector, i: int, e: JSONObject) -> None:
    call = str(e["toolCallId"])
    c.start(("tool", call), i, TOOL_CALL, message_id=call, tool_name=str(e["toolCallName"]))


def _tool_args(c: _Collector, i: int, e: JSONObject) -> None:
    c.add(("tool", str(e["toolCallId"])), i, str(e.get("delta") or ""))


def _tool_end(c: _Collector, i: int, e: JSONObject) -> None:
    item = c.open.get(("tool", str(e["toolCallId"])))
    if item is not None:
        item.seq_to = c.event_at(i).seq  # kept open: its result may follow


def _tool_result(c: _Collector, i: int, e: JSONObject) -> None:
    key = ("tool", str(e["toolCallId"]))
    if key not in c.open:  # the result of a call made in an earlier run
        c.start(key, i, TOOL_CALL, message_id=str(e["toolCallId"]))
    c.add(key, i, _text(e.get("content")), result=True)
    c.end(key, i)


def _run_error(c: _Collector, i: int, e: JSONObject) -> None:
    event = c.event_at(i)
    code = e.get("code")
    item = _Open(event.seq, event.seq, RUN_ERROR, at=event.recorded_at)
    item.error_code = str(code) if code is not None else None
    item.parts.append(" ".join(str(v) for v in (code, e.get("message")) if v))
    c.done.append(item)


def _snapshot(c: _Collector, i: int, e: JSONObject) -> None:
    event = c.event_at(i)
    for message in e.get("messages") or []:
        ident = message.get("id") if isinstance(message, dict) else None
        if not isinstance(ident, str) or ident in c.seen:
            continue
        c.seen.add(ident)
        role = message.get("role")
        for call in message.get("toolCalls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            fresh = isinstance(call.get("id"), str) and call["id"] not in c.seen
            if isinstance(function, dict) and fresh:
                c.seen.add(call["id"])
                item = _Open(event.seq, event.seq, TOOL_CALL, at=event.recorded_at)
                item.message_id, item.tool_name = call["id"], str(function.get("name") or "")
                item.parts.append(str(function.get("arguments") or ""))
                c.done.append(item)
        kind = TOOL_CALL if role == "tool" else REASONING if role == "reasoning" else MESSAGE
        item = _Open(
            event.seq, event.seq, kind, message_id=ident, role=str(role), at=event.recorded_at
        )
        if kind == TOOL_CALL:
            item.message_id = str(message.get("toolCallId") or ident)
            item.result.append(_text(message.get("content")))
        else:
            item.parts.append(_text(message.get("content")))
        c.done.append(item)


def _ignore(c: _Collector, i: int, e: JSONObject) -> None:
    """Nothing searchable."""


class _Handlers(dict[str, Handler]):
    def __missing__(self, key: str) -> Handler:
        return _ignore


_HANDLERS = _Handlers(
    {
        "TEXT_MESSAGE_START": _text_start,
        "TEXT_MESSAGE_CONTENT": _text_content,
        "TEXT_MESSAGE_END": _text_end,
        "REASONING_MESSAGE_START": _reasoning_start,
        "REASONING_MESSAGE_CONTENT": _reasoning_content,
        "REASONING_MESSAGE_END": _reasoning_end,
        "TOOL_CALL_START": _tool_start,
        "TOOL_CALL_ARGS": _tool_args,
        "TOOL_CALL_END": _tool_end,
        "TOOL_CALL_RESULT": _tool_result,
        "RUN_ERROR": _run_error,
        "MESSAGES_SNAPSHOT": _snapshot,
    }
)


def run_documents(run: Run, events: list[RecordedEvent]) -> list[SearchDoc]:
    """The run's searchable documents: the user messages and tool results it was posted,
    then what it streamed."""
    collector = _Collector(run, events)
    for event in events:
        collector.feed(event.payload)
    return posted_messages(run) + collector.documents()


def _posted_ids(run: Run) -> list[str]:
    try:
        posted = orjson.loads(run.input) if run.input else None
    except orjson.JSONDecodeError:
        return []
    messages = posted.get("messages") if isinstance(posted, dict) else None
    if not isinstance(messages, list):
        return []
    return [m["id"] for m in messages if isinstance(m, dict) and isinstance(m.get("id"), str)]


# The roles of the messages a turn adds to the history it posts.
_POSTED = ("user", "tool")


def _posted_text(message: dict[str, Any]) -> str:
    text = _text(message.get("content"))
    if message.get("role") == "tool":
        text = _unescaped(text)
    return text[:MAX_DOC_CHARS]


def posted_messages(run: Run) -> list[SearchDoc]:
    """The user messages and tool results at the end of the run's posted input: what this
    turn added (a frontend's tool runs in the browser: its result is posted, never
    streamed)."""
    try:
        posted = orjson.loads(run.input) if run.input else None
    except orjson.JSONDecodeError:
        return []
    messages = posted.get("messages") if isinstance(posted, dict) else None
    if not isinstance(messages, list):
        return []
    trailing: list[dict[str, Any]] = []
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") not in _POSTED:
            break
        trailing.append(message)
    docs = []
    for message in reversed(trailing):
        text = _posted_text(message)
        if not text.strip():
            continue
        message_id = message.get("id")
        docs.append(
            SearchDoc(
                thread_id=run.thread_id,
                run_id=run.run_id,
                seq_from=-1,
                seq_to=-1,
                kind=INPUT,
                text=text,
                recorded_at=run.created_at,
                agent=run.agent,
                message_id=message_id if isinstance(message_id, str) else None,
                role=str(message["role"]),
            )
        )
    return docs


class Indexer:
    """Keeps the search index up with the log (see the module's DESIGN).

    Recorders sharing a database (``owner``: this one's ``Runtime.owner``) each index,
    as they follow the log, the runs they recorded and those no recorder owns; a run of
    another's once it has been closed ``handover`` seconds (its recorder stopped, or does
    not index), so that no run is indexed by every one of them. ``index_pending`` and
    ``reindex`` take every run.

    Live traffic comes first. The work is cut small (a page of events read, a slice
    folded, a few documents written per transaction), and between pieces the indexer
    gives way (``GiveWay``): while ``busy()`` says runs are being recorded it waits, up
    to ``max_lag`` seconds, so a busy recorder indexes in the lulls and an always-busy one
    still keeps up, a slice at a time.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        busy: Callable[[], bool] | None = None,
        max_lag: float = 10.0,
        batch: int = 20,
        owner: str | None = None,
        handover: float = 60.0,
    ) -> None:
        self.store = store
        self._history = History(store)  # what a run's parent ended with
        self.batch = batch
        self.owner = owner
        self.handover = handover
        self._busy = asyncio.Lock()  # one pass at a time: follow() and reindex() take turns
        self._give_way = GiveWay(busy, max_lag)

    async def index_run(self, run_id: str) -> int:
        await self._give_way()
        try:
            run = await self.store.get_run(run_id)
        except RunNotFound:
            return 0  # gone meanwhile (a purge): nothing to index
        collector = _Collector(run, [])
        done = -1
        while True:
            await self._give_way()
            page = await self.store.read_events(run_id, gt=done, limit=_PAGE)
            if not page:
                break
            collector.events.extend(page)
            for start in range(0, len(page), _SLICE):
                for event in page[start : start + _SLICE]:
                    collector.feed(event.payload)
                await self._give_way()
            done = page[-1].seq
        try:
            posted, docs = posted_messages(run), collector.documents()
        except Exception as exc:  # a bug here must not hold every later run back
            LOG.error("cannot index run %s: %s", run_id, exc, exc_info=exc)
            posted, docs = [], []
        docs = await self._new_in_input(run, posted) + docs
        written = 0
        for start in range(0, max(len(docs), 1), _DOCS_PER_WRITE):
            await self._give_way()
            chunk = docs[start : start + _DOCS_PER_WRITE]
            last = start + _DOCS_PER_WRITE >= len(docs)
            written += await self.store.index_run(
                run_id, run.thread_id, chunk, replace=start == 0, done=last, seen=run
            )
        return written

    async def index_pending(self) -> int:
        """Index closed runs not indexed yet, a batch at a time; how many runs were."""
        async with self._busy:
            return await self._index_pending()

    async def index_own(self) -> int:
        """``index_pending`` for the runs this recorder should index (see the class)."""
        async with self._busy:
            return await self._index_pending(self.owner)

    async def _index_pending(self, owner: str | None = None) -> int:
        done = 0
        while True:
            await self._give_way()
            closed_before = time.time() - self.handover
            pending = await self.store.runs_to_index(
                self.batch, owner=owner, closed_before=closed_before
            )
            for run_id in pending:
                await self.index_run(run_id)
            done += len(pending)
            if len(pending) < self.batch:
                return done

    async def _new_in_input(self, run: Run, posted: list[SearchDoc]) -> list[SearchDoc]:
        """``posted`` but what the run's parent, in the same thread, ended with (at the
        point it branched off), unchanged: a backend tool's result, recorded and indexed
        with its call, comes back in the next turn's input; so does a message posted again
        (a regenerated turn). A fork into a new thread keeps its history: its thread holds
        it (and keeps it if the parent's thread is purged)."""
        if not posted or run.parent_run_id is None or run.parent_run_id == run.run_id:
            return posted
        try:
            parent, before = await self._history.state(run.parent_run_id, run.parent_seq)
        except RunNotFound:  # purged: what it held is not indexed either
            return posted
        except StoreError:
            raise  # the run is indexed again later
        except Exception as exc:  # a bug here must not hold every later run back
            LOG.error("cannot project run %s: %s", run.parent_run_id, exc, exc_info=exc)
            return posted
        if parent.thread_id != run.thread_id:
            return posted
        known = {m.get("id"): _posted_text(m) for m in before.messages if isinstance(m, dict)}
        return [doc for doc in posted if known.get(doc.message_id) != doc.text]

    async def reindex(self) -> int:
        """Drop the index and build it again from the log; how many runs were indexed."""
        async with self._busy:
            await self.store.clear_index()
            return await self._index_pending()

    async def follow(self, interval: float) -> None:
        """Index as runs close, until cancelled; a failure is logged and tried again (an
        unavailable database once, as one line, until indexing goes through again)."""
        waiting = False
        while True:
            try:
                await self.index_own()
                waiting = False
            except StoreUnavailable as exc:
                if not waiting:
                    LOG.warning("search indexing waits for the database: %s", exc)
                waiting = True
            except Exception as exc:
                LOG.warning("search indexing failed: %s", exc, exc_info=exc)
            await asyncio.sleep(interval)


_PAGE = 2000  # events read at a time
_SLICE = 250  # events folded between two chances for the event loop to serve frames
_DOCS_PER_WRITE = 50
