"""The bodies of the search index: derived documents, kept beside the log and rebuildable.

The index is three tables (revision 0006): ``search_docs`` (one row per document, keyed by
thread and run, so a purge of a thread can drop them), its text index (SQLite: the FTS5
table ``search_fts``, whose rowid is the document's id; PostgreSQL: the ``terms``
``tsvector`` column with a GIN index), and ``search_runs``, the runs already indexed: the
indexer's cursor, in the database, so it resumes after a crash where it stopped. Indexing a
run replaces its documents whole in one transaction, so doing it again changes nothing.

Hits are ranked by relevance (FTS5's bm25, PostgreSQL's ts_rank; higher is better), then
newest first, then by document id; the cursor is that key, so pages never overlap.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from typing import Any

import orjson

from recorder.errors import InputError
from recorder.store import terms
from recorder.store.annotation import tag_condition
from recorder.store.model import (
    RUNNING,
    SEARCH_KINDS,
    Page,
    Run,
    SearchDoc,
    SearchFilter,
    SearchHit,
)
from recorder.store.statements import RUN_AS_STORED, Body, Execute, Fetch

SQLITE = "sqlite"

_DOC_COLUMNS = (
    "thread_id, run_id, seq_from, seq_to, kind, text, recorded_at, agent, message_id, "
    "role, tool_name, error_code"
)
_INSERT_DOC = f"INSERT INTO search_docs ({_DOC_COLUMNS}, terms) VALUES " + "(?, ?, ?, ?, ?, ?, "
INSERT_DOC_SQLITE = Fetch(f"{_INSERT_DOC}?, ?, ?, ?, ?, ?, ?) RETURNING id")
INSERT_DOC_PG = Execute(f"{_INSERT_DOC}?, ?, ?, ?, ?, ?, ?::tsvector)")
INSERT_FTS = Execute(
    "INSERT INTO search_fts (rowid, terms) SELECT id, terms FROM search_docs WHERE id = ?"
)
# External content: FTS5 reads the words to remove from search_docs, so this goes first.
DROP_FTS_OF_RUN = Execute(
    "INSERT INTO search_fts (search_fts, rowid, terms) "
    "SELECT 'delete', id, terms FROM search_docs WHERE run_id = ?"
)
DROP_DOCS_OF_RUN = Execute("DELETE FROM search_docs WHERE run_id = ?")
LOCK_RUN = Fetch(RUN_AS_STORED, lock=True)
UNMARK_INDEXED = Execute("DELETE FROM search_runs WHERE run_id = ?")
MARK_INDEXED = Execute(
    "INSERT INTO search_runs (run_id, thread_id, indexed_at) VALUES (?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET indexed_at = excluded.indexed_at"
)
_PENDING = (
    "SELECT r.run_id FROM runs r WHERE r.status <> ?{} AND NOT EXISTS "
    "(SELECT 1 FROM search_runs s WHERE s.run_id = r.run_id) "
    "ORDER BY r.created_at, r.run_id LIMIT ?"
)
PENDING = Fetch(_PENDING.format(""))
# Only the runs one recorder should index: its own, those no recorder owns, and those
# whose recorder had ``handover`` seconds since they closed (gone, or not indexing).
PENDING_OF = Fetch(
    _PENDING.format(
        " AND (r.owner = ? OR r.owner IS NULL OR coalesce(r.finished_at, r.created_at) < ?)"
    )
)
_CLEAR = ("DELETE FROM search_runs", "DELETE FROM search_docs")
DROP_FTS_OF_THREAD = Execute(
    "INSERT INTO search_fts (search_fts, rowid, terms) "
    "SELECT 'delete', id, terms FROM search_docs WHERE thread_id = ?"
)
DROP_DOCS_OF_THREAD = Execute("DELETE FROM search_docs WHERE thread_id = ?")
UNMARK_THREAD = Execute("DELETE FROM search_runs WHERE thread_id = ?")
CLEAR_FTS = Execute("INSERT INTO search_fts (search_fts) VALUES ('delete-all')")


def pending_runs(
    limit: int, owner: str | None = None, closed_before: float = 0.0
) -> Body[list[str]]:
    """Closed runs not indexed yet, oldest first; with ``owner``, only those it recorded,
    those no recorder owns, and those closed before ``closed_before``."""
    if owner is None:
        rows = yield PENDING, (RUNNING, limit)
    else:
        rows = yield PENDING_OF, (RUNNING, owner, closed_before, limit)
    return [str(row[0]) for row in rows]


def document_terms(dialect: str, doc: SearchDoc) -> str:
    """What the text index takes for ``doc`` (made before the write transaction: it is
    the slow part, and a write transaction holds SQLite's one write lock)."""
    if dialect == SQLITE:
        return terms.fts5_document(doc.text)
    return terms.tsvector_document(doc.text)


def index_run(
    dialect: str,
    run_id: str,
    thread_id: str,
    docs: Sequence[tuple[SearchDoc, str]],
    replace: bool,
    done: bool,
    now: float,
    seen: Run | None = None,
) -> Body[int]:
    """Add ``docs`` (each with its terms) to the run's documents: first dropping those it
    had (``replace``), then marking it indexed (``done``). Nothing is written for a run
    gone meanwhile (a purge), nor when it is no longer ``seen`` (``Run.changed_since``: its
    events or its input rewritten since the documents were read from them: it is left to
    be indexed again)."""
    # The run's row, locked: two indexers of one run take turns (PostgreSQL), and the
    # second replaces the first's documents instead of adding to them. A purge and a
    # rewrite lock it too before they drop documents: an indexer holding it is waited for.
    found = yield LOCK_RUN, (run_id,)
    if not found:
        return 0
    if seen is not None and seen.changed_since(found[0]):
        return 0
    if replace:
        yield from forget_run(dialect, run_id)
    for doc, words in docs:
        values = _doc_values(doc)
        if dialect == SQLITE:
            ((doc_id,),) = yield INSERT_DOC_SQLITE, (*values, words)
            yield INSERT_FTS, (doc_id,)
        else:
            yield INSERT_DOC_PG, (*values, words)
    if done:
        yield MARK_INDEXED, (run_id, thread_id, now)
    return len(docs)


def forget_run(dialect: str, run_id: str) -> Body[None]:
    """Drop the run's documents and its mark: it is to be indexed again (all of it)."""
    if dialect == SQLITE:
        yield DROP_FTS_OF_RUN, (run_id,)
    yield DROP_DOCS_OF_RUN, (run_id,)
    yield UNMARK_INDEXED, (run_id,)  # indexed again only once the last piece is in


def clear_index(dialect: str, thread_id: str | None) -> Body[None]:
    """Forget every document and every indexed run (the indexer starts over), or only
    ``thread_id``'s (a purge of the thread calls this in its transaction)."""
    if thread_id is not None:
        if dialect == SQLITE:
            yield DROP_FTS_OF_THREAD, (thread_id,)
        yield DROP_DOCS_OF_THREAD, (thread_id,)
        yield UNMARK_THREAD, (thread_id,)
        return
    if dialect == SQLITE:
        yield CLEAR_FTS, ()
    for sql in _CLEAR:
        yield Execute(sql), ()


def _doc_values(doc: SearchDoc) -> tuple[Any, ...]:
    text = doc.text.replace("\x00", "")
    return (
        doc.thread_id,
        doc.run_id,
        doc.seq_from,
        doc.seq_to,
        doc.kind,
        text,
        doc.recorded_at,
        doc.agent,
        doc.message_id,
        doc.role,
        doc.tool_name,
        doc.error_code,
    )


def search(dialect: str, f: SearchFilter, limit: int, cursor: str | None) -> Body[Page]:
    """A page of hits for ``f``: best first, then newest."""
    query = terms.parse(f.text, syntax=f.syntax)
    if f.text.strip() and not query.clauses:
        return Page([], None)  # text, but not one word in it: nothing can match
    columns = ", ".join(f"d.{name.strip()}" for name in _DOC_COLUMNS.split(","))
    params: list[Any] = []
    if not query.clauses:
        source = f"SELECT d.id, {columns}, 0.0 AS score FROM search_docs d"
        conditions: list[str] = []
    elif dialect == SQLITE:
        source = (
            f"SELECT d.id, {columns}, f.score FROM (SELECT rowid AS id, -bm25(search_fts) "
            "AS score FROM search_fts WHERE search_fts MATCH ?) f "
            "JOIN search_docs d ON d.id = f.id"
        )
        params.append(terms.fts5_match(query))
        conditions = []
    else:
        source = (
            f"SELECT d.id, {columns}, ts_rank(d.terms, w.q)::float8 AS score "
            "FROM search_docs d, (SELECT ?::tsquery AS q) w"
        )
        params.append(terms.tsquery(query))
        conditions = ["d.terms @@ w.q"]
    more, more_params = _conditions(f)
    conditions += more
    params += more_params
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    outer = ""
    if cursor is not None:
        score, at, doc_id = _decode(cursor)
        outer = (
            " WHERE (s.score < ? OR (s.score = ? AND (s.recorded_at < ? "
            "OR (s.recorded_at = ? AND s.id < ?))))"
        )
        params += [score, score, at, at, doc_id]
    sql = (
        f"SELECT * FROM ({source}{where}) s{outer} "
        "ORDER BY s.score DESC, s.recorded_at DESC, s.id DESC LIMIT ?"
    )
    rows = yield Fetch(sql), (*params, limit + 1)
    hits = [_hit(row, query) for row in rows[:limit]]
    if len(rows) <= limit:
        return Page(hits, None)
    last = rows[limit - 1]
    return Page(hits, _encode(float(last[-1]), float(last[7]), int(last[0])))


def _conditions(f: SearchFilter) -> tuple[list[str], list[Any]]:
    conditions: list[str] = []
    params: list[Any] = []
    if f.agents is not None:
        if not f.agents:
            conditions.append("1 = 0")
        else:
            # As the thread list: only threads whose every run went through these agents.
            marks = ", ".join("?" for _ in f.agents)
            conditions.append(
                f"d.agent IN ({marks}) AND NOT EXISTS (SELECT 1 FROM runs "
                "WHERE runs.thread_id = d.thread_id "
                f"AND (runs.agent IS NULL OR runs.agent NOT IN ({marks})))"
            )
            params += [*f.agents, *f.agents]
    for column, value in (
        ("agent", f.agent),
        ("kind", f.kind),
        ("tool_name", f.tool),
        ("error_code", f.error_code),
        ("thread_id", f.thread_id),
        ("run_id", f.run_id),
    ):
        if value is not None:
            conditions.append(f"d.{column} = ?")
            params.append(value)
    if f.kind is not None and f.kind not in SEARCH_KINDS:
        raise InputError(f"unknown kind {f.kind!r}: use one of {', '.join(SEARCH_KINDS)}")
    if f.status is not None:
        conditions.append(
            "EXISTS (SELECT 1 FROM runs r WHERE r.run_id = d.run_id AND r.status = ?)"
        )
        params.append(f.status)
    more, more_params = tag_condition(f.tags, "d.thread_id", "d.run_id")
    conditions += more
    params += more_params
    if f.since is not None:
        conditions.append("d.recorded_at >= ?")
        params.append(float(f.since))
    if f.until is not None:
        conditions.append("d.recorded_at <= ?")
        params.append(float(f.until))
    return conditions, params


def _hit(row: Sequence[Any], query: terms.Query) -> SearchHit:
    doc = SearchDoc(
        thread_id=row[1],
        run_id=row[2],
        seq_from=int(row[3]),
        seq_to=int(row[4]),
        kind=row[5],
        text=row[6],
        recorded_at=float(row[7]),
        agent=row[8],
        message_id=row[9],
        role=row[10],
        tool_name=row[11],
        error_code=row[12],
    )
    piece, marks = terms.snippet(doc.text, query)
    return SearchHit(doc, float(row[13]), piece, marks)


def _encode(score: float, at: float, doc_id: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([score, at, doc_id])).decode()


def _decode(cursor: str) -> tuple[float, float, int]:
    try:
        score, at, doc_id = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
        found = float(score), float(at), int(doc_id)
    except Exception as exc:
        raise InputError(f"invalid cursor {cursor!r}") from exc
    if not (math.isfinite(found[0]) and math.isfinite(found[1]) and 0 <= found[2] < 2**63):
        raise InputError(f"invalid cursor {cursor!r}")  # (none this store gave)
    return found
