"""EventStore.search, runs_to_index, index_run, clear_index (with the indexer that feeds them)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import orjson
import pytest

from recorder.errors import InputError
from recorder.store import EventStore, NewEvent, NewRun, PurgeSelection, SearchFilter
from recorder.timetravel.indexing import Indexer


def ev(**event: Any) -> NewEvent:
    return NewEvent(orjson.dumps(event), event["type"])


def posted(thread: str, run: str, *messages: dict[str, Any]) -> bytes:
    return orjson.dumps({"threadId": thread, "runId": run, "messages": list(messages)})


def said(mid: str, *deltas: str) -> list[NewEvent]:
    return [
        ev(type="TEXT_MESSAGE_START", messageId=mid, role="assistant"),
        *[ev(type="TEXT_MESSAGE_CONTENT", messageId=mid, delta=d) for d in deltas],
        ev(type="TEXT_MESSAGE_END", messageId=mid),
    ]


async def record(
    store: EventStore,
    run: str,
    thread: str,
    events: list[NewEvent],
    *,
    agent: str = "support",
    status: str = "finished",
    created_at: float = 1000.0,
    messages: tuple[dict[str, Any], ...] = (),
) -> None:
    await store.create_run(
        NewRun(run, thread, agent, posted(thread, run, *messages), created_at=created_at)
    )
    started = ev(type="RUN_STARTED", threadId=thread, runId=run)
    await store.append(run, [NewEvent(started.payload, started.type, recorded_at=created_at)])
    timed = [NewEvent(e.payload, e.type, recorded_at=created_at + 0.5) for e in events]
    if timed:
        await store.append(run, timed)
    await store.set_status(run, status)


async def hits(store: EventStore, text: str = "", **filters: Any) -> list[tuple[str, str, int]]:
    page = await store.search(SearchFilter(text=text, **filters), limit=100)
    return [(h.doc.run_id, h.doc.kind, h.doc.seq_from) for h in page.items]


async def corpus(store: EventStore) -> None:
    user = {"id": "u1", "role": "user", "content": "Can I get a refund for order 42?"}
    await record(
        store,
        "r1",
        "t1",
        [
            *said("m1", "Your refund is guar", "ante", "ed within five days."),
            ev(type="TOOL_CALL_START", toolCallId="c1", toolCallName="refund_order"),
            ev(type="TOOL_CALL_ARGS", toolCallId="c1", delta='{"order": 42, "amo'),
            ev(type="TOOL_CALL_ARGS", toolCallId="c1", delta='unt": 750}'),
            ev(type="TOOL_CALL_END", toolCallId="c1"),
            ev(type="TOOL_CALL_RESULT", messageId="t1", toolCallId="c1", content="approved"),
        ],
        messages=(user,),
    )
    await record(
        store,
        "r2",
        "t2",
        [
            ev(type="REASONING_START", messageId="s1"),
            ev(type="REASONING_MESSAGE_START", messageId="s1", role="reasoning"),
            ev(type="REASONING_MESSAGE_CONTENT", messageId="s1", delta="the user seems upset"),
            ev(type="REASONING_MESSAGE_END", messageId="s1"),
            ev(
                type="REASONING_ENCRYPTED_VALUE",
                subtype="message",
                entityId="s1",
                encryptedValue="zzsecretzz",
            ),
            ev(type="REASONING_END", messageId="s1"),
            ev(type="TOOL_CALL_CHUNK", toolCallId="c2", toolCallName="lookup", delta='{"q": "Crè'),
            ev(type="TOOL_CALL_CHUNK", toolCallId="c2", delta='me brûlée"}'),
            ev(type="RUN_ERROR", message="no byte for 60 s", code="upstream_idle"),
        ],
        agent="billing",
        status="error",
        created_at=2000.0,
        messages=(
            {"id": "u2", "role": "user", "content": "東京タワーの営業時間は\uff1f 🎉 Ünïcödé"},
        ),
    )
    await store.create_run(NewRun("r3", "t3", "support", posted("t3", "r3")))
    await store.append("r3", said("m3", "a refund still running"))
    assert await Indexer(store).index_pending() == 2


async def test_assembled_text_tool_calls_input_and_errors(store: EventStore) -> None:
    await corpus(store)
    # Split across deltas: found as one message, with the events it came from.
    assert await hits(store, "guaranteed within") == [("r1", "message", 1)]
    page = await store.search(SearchFilter(text="guaranteed"))
    (hit,) = page.items
    assert (hit.doc.seq_from, hit.doc.seq_to, hit.doc.thread_id) == (1, 5, "t1")
    assert hit.snippet == "Your refund is guaranteed within five days."
    assert [hit.snippet[s:e] for s, e in hit.marks] == ["guaranteed"]
    # Tool arguments split across TOOL_CALL_ARGS and TOOL_CALL_CHUNK; name and result too.
    assert await hits(store, "amount 750") == [("r1", "tool_call", 6)]
    assert await hits(store, "refund_order approved") == [("r1", "tool_call", 6)]
    assert await hits(store, "creme brulee") == [("r2", "tool_call", 7)]
    # The posted user message, not the run still recording.
    assert await hits(store, "order 42", kind="input") == [("r1", "input", -1)]
    assert await hits(store, "still running") == []
    # Reasoning, but never its encrypted value; errors by code and message.
    assert await hits(store, "upset") == [("r2", "reasoning", 2)]
    assert await hits(store, "zzsecretzz") == []
    assert await hits(store, "upstream_idle") == [("r2", "error", 9)]
    assert await hits(store, "60", kind="error") == [("r2", "error", 9)]
    (error,) = (await store.search(SearchFilter(error_code="upstream_idle"))).items
    assert error.doc.error_code == "upstream_idle" and error.doc.agent == "billing"


async def test_escaped_json_and_a_frontend_tools_posted_result(store: EventStore) -> None:
    import json  # (the escapes Python's own json.dumps writes)

    args = json.dumps({"city": "Zürich", "note": "naïve\ncafé"})
    await record(
        store,
        "r1",
        "t1",
        [
            ev(type="TOOL_CALL_START", toolCallId="c1", toolCallName="weather"),
            ev(type="TOOL_CALL_ARGS", toolCallId="c1", delta=args[:12]),
            ev(type="TOOL_CALL_ARGS", toolCallId="c1", delta=args[12:]),
            ev(type="TOOL_CALL_END", toolCallId="c1"),
            ev(
                type="TOOL_CALL_RESULT",
                messageId="x",
                toolCallId="c1",
                content=json.dumps({"sky": "sunny over Genève"}),
            ),
            ev(type="TOOL_CALL_START", toolCallId="c2", toolCallName="ask_user"),
            ev(type="TOOL_CALL_ARGS", toolCallId="c2", delta="{}"),
            ev(type="TOOL_CALL_END", toolCallId="c2"),
        ],
    )
    call = {"id": "c2", "type": "function", "function": {"name": "ask_user", "arguments": "{}"}}
    await record(
        store,
        "r2",
        "t1",
        [],
        messages=(
            {"id": "a1", "role": "assistant", "toolCalls": [call]},
            {"id": "t1", "role": "tool", "toolCallId": "c2", "content": "the user chose kiwi"},
        ),
    )
    await Indexer(store).index_pending()
    for words in ("zurich", "naive cafe", "geneve sunny"):
        assert await hits(store, words) == [("r1", "tool_call", 1)], words
    (tool,) = (await store.search(SearchFilter(text="zurich"))).items
    assert [tool.snippet[a:b] for a, b in tool.marks] == ["Zürich"]
    # A frontend tool's result: only ever posted, found in the input that posted it.
    (posted,) = (await store.search(SearchFilter(text="kiwi"))).items
    assert (posted.doc.run_id, posted.doc.kind, posted.doc.role) == ("r2", "input", "tool")
    assert posted.snippet == "the user chose kiwi"


async def test_what_the_log_holds_is_not_indexed_again_as_posted(store: EventStore) -> None:
    """A backend tool's result comes back in the next turn's input, and a regenerated
    turn posts its user message again: each is found once, where it was first recorded."""
    question = {"id": "u1", "role": "user", "content": "what is the weather in Lyon"}
    await record(
        store,
        "r1",
        "t1",
        [
            ev(type="TOOL_CALL_START", toolCallId="c1", toolCallName="weather"),
            ev(type="TOOL_CALL_ARGS", toolCallId="c1", delta='{"city": "Lyon"}'),
            ev(type="TOOL_CALL_END", toolCallId="c1"),
            ev(type="TOOL_CALL_RESULT", messageId="x1", toolCallId="c1", content="drizzle"),
        ],
        messages=(question,),
    )
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    history = (
        question,
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "x1", "role": "tool", "toolCallId": "c1", "content": "drizzle"},
    )
    follow_up = {"id": "u2", "role": "user", "content": "and tomorrow in Lyon"}
    for run in ("r2", "r3"):  # r3: the same turn regenerated, its input posted again
        await store.create_run(
            NewRun(run, "t1", "support", posted("t1", run, *history, follow_up), infer_parent=True)
        )
        await store.set_status(run, "finished")
    await Indexer(store).index_pending()
    assert await hits(store, "drizzle") == [("r1", "tool_call", 1)]
    assert await hits(store, "tomorrow") == [("r2", "input", -1)]
    assert await hits(store, "weather Lyon", kind="input") == [("r1", "input", -1)]
    # Rebuilt from the log: the same answers.
    await store.clear_index()
    await Indexer(store).reindex()
    assert await hits(store, "drizzle") == [("r1", "tool_call", 1)]
    assert await hits(store, "tomorrow") == [("r2", "input", -1)]
    # A fork into a new thread holds its history there: indexed in it. A message posted
    # again with its text changed (its id kept) is new text: indexed too.
    edited = {**follow_up, "content": "and the day after in Lyon"}
    for run, thread, parent, last in (("f1", "t2", "r2", follow_up), ("r4", "t1", "r3", edited)):
        body = posted(thread, run, *history, last)
        await store.create_run(NewRun(run, thread, "support", body, parent_run_id=parent))
        await store.set_status(run, "finished")
    await Indexer(store).index_pending()
    assert await hits(store, "tomorrow", thread_id="t2") == [("f1", "input", -1)]
    assert await hits(store, "day after") == [("r4", "input", -1)]


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("GUARANTEED", True),
        ("Guaranteed", True),
        ("東京", True),
        ("タワー", True),
        ("営業時間", True),
        ("🎉", True),
        ("unicode", True),
        ("ÜNÏCÖDÉ", True),
        ("crème", True),
        ("東京x", False),
        ("guarantee", False),
    ],
)
async def test_unicode_and_case(store: EventStore, query: str, found: bool) -> None:
    await corpus(store)
    assert bool(await hits(store, query)) is found


@pytest.mark.parametrize(
    "query",
    ['"refund', "refund*", "-refund", "(refund)", "refund:", "^refund", "refund)", "'refund'"],
)
async def test_query_syntax_is_literal_by_default(store: EventStore, query: str) -> None:
    await corpus(store)
    assert await hits(store, query) == await hits(store, "refund") != []


@pytest.mark.parametrize(
    "query",
    [
        "refund OR approved",
        "refund AND NOT",
        "refund NEAR/2",
        "'; DROP TABLE events; --",
        "*",
        '"',
        "()",
        "%_",
        "\\",
        "-",
        "OR",
        "NOT",
        "\x00",
    ],
)
async def test_syntax_words_are_words(store: EventStore, query: str) -> None:
    """OR, NOT, NEAR are words to find: no document holds them; punctuation alone finds
    nothing either, and no query is an error."""
    await corpus(store)
    assert await hits(store, query) == []


async def test_syntax_flag(store: EventStore) -> None:
    await corpus(store)
    assert await hits(store, "guarant*", syntax=True) == [("r1", "message", 1)]
    assert await hits(store, '"five days"', syntax=True) == [("r1", "message", 1)]
    assert await hits(store, '"days five"', syntax=True) == []
    either = await hits(store, "upset OR approved", syntax=True)
    assert sorted(either) == [("r1", "tool_call", 6), ("r2", "reasoning", 2)]
    assert await hits(store, "refund -approved", syntax=True, kind="tool_call") == []
    with pytest.raises(InputError):
        await store.search(SearchFilter(text="-refund", syntax=True))


async def test_filters(store: EventStore) -> None:
    await corpus(store)
    assert {r for r, _k, _s in await hits(store, agent="billing")} == {"r2"}
    assert await hits(store, "refund", tool="refund_order") == [("r1", "tool_call", 6)]
    assert {r for r, _k, _s in await hits(store, status="error")} == {"r2"}
    assert await hits(store, "refund", status="error") == []
    assert {r for r, _k, _s in await hits(store, since=1500.0)} == {"r2"}
    assert {r for r, _k, _s in await hits(store, until=1500.0)} == {"r1"}
    # A caller's scope: only its agents' runs, whatever else it asks.
    assert {r for r, _k, _s in await hits(store, agents=("billing",))} == {"r2"}
    assert await hits(store, "refund", agents=("billing",)) == []
    assert await hits(store, "refund", agents=()) == []
    assert {r for r, _k, _s in await hits(store, thread_id="t2")} == {"r2"}
    with pytest.raises(InputError):
        await store.search(SearchFilter(kind="nonsense"))


async def test_ranking_and_keyset_pages(store: EventStore) -> None:
    for i in range(9):
        text = "apple " * (1 + i % 3) + f"filler words number {i}"
        await record(store, f"r{i}", f"t{i}", said(f"m{i}", text), created_at=1000.0 + i)
    await Indexer(store).index_pending()
    everything = (await store.search(SearchFilter(text="apple"), limit=100)).items
    assert len(everything) == 9
    scores = [h.score for h in everything]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    # Equal relevance: newest first.
    for a, b in itertools.pairwise(everything):
        if a.score == b.score:
            assert a.doc.recorded_at >= b.doc.recorded_at
    seen, cursor = [], None
    while True:
        page = await store.search(SearchFilter(text="apple"), limit=2, cursor=cursor)
        seen += [h.doc.run_id for h in page.items]
        if page.cursor is None:
            break
        cursor = page.cursor
    assert seen == [h.doc.run_id for h in everything]
    with pytest.raises(InputError):
        await store.search(SearchFilter(text="apple"), cursor="not-a-cursor")


async def test_rebuilt_from_the_log_to_the_same_answers(store: EventStore) -> None:
    await corpus(store)
    queries = ["refund", "guaranteed", "東京", "upstream_idle", "", "crème brûlée"]
    before = [await hits(store, q) for q in queries]
    assert await store.runs_to_index(10) == []
    await store.clear_index()
    for query in queries:
        assert await hits(store, query) == []
    assert sorted(await store.runs_to_index(10)) == ["r1", "r2"]
    assert await Indexer(store).index_pending() == 2
    assert [await hits(store, q) for q in queries] == before
    # Indexing a run again replaces its documents: nothing doubles.
    await Indexer(store).index_run("r1")
    assert [await hits(store, q) for q in queries] == before
    assert await Indexer(store).reindex() == 2
    assert [await hits(store, q) for q in queries] == before


async def test_a_run_written_in_pieces_is_indexed_whole_or_again(store: EventStore) -> None:
    events = [e for i in range(120) for e in said(f"m{i}", f"note number{i} ", "about tea")]
    await record(store, "r1", "t1", events)
    # A crash after the first piece: the run is not marked, and indexing it again
    # replaces what the first piece wrote.
    doc = (await Indexer(store).index_run("r1"), await store.runs_to_index(5))
    assert doc == (120, [])
    await store.index_run("r1", "t1", [], replace=True, done=False)
    assert await store.runs_to_index(5) == ["r1"]
    assert await hits(store, "tea") == []
    assert await Indexer(store).index_pending() == 1
    found = await store.search(SearchFilter(text="tea"), limit=100)
    assert len(found.items) == 100 and found.cursor is not None
    assert await hits(store, "number119") == [("r1", "message", 477)]


async def test_indexing_gives_way_to_live_runs_but_not_forever(store: EventStore) -> None:
    await record(store, "r1", "t1", said("m1", "patience"))
    started = time.monotonic()
    assert await Indexer(store, busy=lambda: True, max_lag=0.3).index_pending() == 1
    assert time.monotonic() - started >= 0.3
    assert await hits(store, "patience") == [("r1", "message", 1)]


async def test_one_threads_documents_dropped(store: EventStore) -> None:
    await corpus(store)
    await store.clear_index("t1")
    assert await hits(store, "refund") == []
    assert await hits(store, "upset") == [("r2", "reasoning", 2)]
    assert await store.runs_to_index(10) == ["r1"]  # still in the log: indexed again
    await Indexer(store).index_pending()
    assert await hits(store, "guaranteed") == [("r1", "message", 1)]


async def test_messages_only_in_a_snapshot(store: EventStore) -> None:
    """An agent that answers with a MESSAGES_SNAPSHOT: its new messages are found, those it
    streamed or was given are not found twice."""
    user = {"id": "u1", "role": "user", "content": "plan my trip"}
    snapshot = [
        user,
        {"id": "m1", "role": "assistant", "content": "streamed answer"},
        {
            "id": "m2",
            "role": "assistant",
            "content": "only in the snapshot",
            "toolCalls": [
                {
                    "id": "c9",
                    "type": "function",
                    "function": {"name": "book_hotel", "arguments": '{"city": "Lisbon"}'},
                }
            ],
        },
        {"id": "t9", "role": "tool", "toolCallId": "c9", "content": "booked"},
    ]
    await record(
        store,
        "r1",
        "t1",
        [*said("m1", "streamed answer"), ev(type="MESSAGES_SNAPSHOT", messages=snapshot)],
        messages=(user,),
    )
    await Indexer(store).index_pending()
    assert await hits(store, "streamed answer") == [("r1", "message", 1)]
    assert await hits(store, "only snapshot") == [("r1", "message", 4)]
    assert await hits(store, "lisbon", tool="book_hotel") == [("r1", "tool_call", 4)]
    assert await hits(store, "booked") == [("r1", "tool_call", 4)]
    assert await hits(store, "plan my trip") == [("r1", "input", -1)]


async def test_a_rewrite_takes_what_it_replaced_out_of_the_index(store: EventStore) -> None:
    """Redacting a recorded run (``EventStore.rewrite``) drops its documents in the same
    transaction: a search never finds, nor shows, the text a redaction removed. The
    indexer then indexes the run again from its rewritten events."""
    await record(store, "r1", "t1", said("m1", "write to bob@example.com ", "today"))
    await record(store, "r2", "t2", said("m2", "bob@example.com is unrelated here"))
    assert await Indexer(store).index_pending() == 2
    assert sorted(await hits(store, "bob example")) == [("r1", "message", 1), ("r2", "message", 1)]
    events = await store.read_events("r1")
    (seq,) = [e.seq for e in events if b"bob@example.com" in e.payload]
    redacted = events[seq].payload.replace(b"bob@example.com", b"[REDACTED:email]")
    await store.rewrite("r1", {seq: redacted}, actor="cli", reason="erasure")
    assert await hits(store, "bob example") == [("r2", "message", 1)]
    assert await store.runs_to_index(10) == ["r1"]
    assert await Indexer(store).index_pending() == 1
    assert await hits(store, "bob example") == [("r2", "message", 1)]
    (hit,) = (await store.search(SearchFilter(text="today", thread_id="t1"))).items
    assert hit.snippet == "write to [REDACTED:email] today"


async def test_an_index_of_what_a_rewrite_replaced_is_not_written_after_it(
    store: EventStore,
) -> None:
    """The indexer read the run before a rewrite and writes its documents after it: the
    store turns them away (the run's head is no longer the one read), and the run stays
    to be indexed again. The same for a run purged meanwhile: nothing is written."""
    await record(store, "r1", "t1", said("m1", "write to bob@example.com"))
    indexer = Indexer(store)
    index_run = store.index_run
    events = await store.read_events("r1")
    (seq,) = [e.seq for e in events if b"bob@example.com" in e.payload]
    redacted = events[seq].payload.replace(b"bob@example.com", b"[REDACTED:email]")

    async def overtaken(run_id: str, *args: Any, **kwargs: Any) -> int:
        await store.rewrite("r1", {seq: redacted}, actor="cli", reason="erasure")
        store.index_run = index_run  # type: ignore[method-assign]
        return await index_run(run_id, *args, **kwargs)

    store.index_run = overtaken  # type: ignore[method-assign]
    assert await indexer.index_run("r1") == 0
    assert await hits(store, "bob example") == []
    assert await store.runs_to_index(10) == ["r1"]
    assert await indexer.index_pending() == 1
    assert await hits(store, "redacted") == [("r1", "message", 1)]


async def test_an_index_of_an_input_a_redaction_replaced_is_not_written_after_it(
    store: EventStore,
) -> None:
    """The indexer read a run's posted input before a redaction rewrote it
    (``EventStore.rewrite_inputs``) and writes its documents after it: the store turns them
    away (the input is no longer the one read), and the run is indexed again from the
    rewritten input."""
    user = {"id": "u1", "role": "user", "content": "mail bob@example.com please"}
    await record(store, "r1", "t1", said("m1", "done"), messages=(user,))
    replaced = (await store.get_run("r1")).input or b""
    replaced = replaced.replace(b"bob@example.com", b"[REDACTED:email]")
    index_run = store.index_run

    async def overtaken(run_id: str, *args: Any, **kwargs: Any) -> int:
        assert await store.rewrite_inputs("t1", {"r1": replaced}) == 1
        store.index_run = index_run  # type: ignore[method-assign]
        return await index_run(run_id, *args, **kwargs)

    store.index_run = overtaken  # type: ignore[method-assign]
    assert await Indexer(store).index_run("r1") == 0
    assert await hits(store, "bob example") == []
    assert await store.runs_to_index(10) == ["r1"]
    assert await Indexer(store).index_pending() == 1
    assert await hits(store, "bob example") == []
    assert await hits(store, "mail please")


async def test_an_index_of_a_run_purged_meanwhile_is_not_written(store: EventStore) -> None:
    """Before, the documents of a thread purged (erased) while the indexer read it were
    written after the purge, and stayed searchable."""
    await record(store, "r1", "t1", said("m1", "write to bob@example.com"))
    index_run = store.index_run

    async def overtaken(run_id: str, *args: Any, **kwargs: Any) -> int:
        await store.purge(PurgeSelection(thread_ids=("t1",)), actor="cli", reason="erasure")
        return await index_run(run_id, *args, **kwargs)

    store.index_run = overtaken  # type: ignore[method-assign]
    assert await Indexer(store).index_run("r1") == 0
    store.index_run = index_run  # type: ignore[method-assign]
    assert await hits(store, "bob example") == []
    assert await store.runs_to_index(10) == []


async def test_recorders_sharing_a_database_each_index_their_own(store: EventStore) -> None:
    """A recorder's indexer, as it follows the log, takes the runs it recorded and those no
    recorder owns; another recorder's only once closed for the handover (its recorder gone,
    or not indexing). ``index_pending`` takes every run."""
    for run, owner in (("a1", "rec-a"), ("b1", "rec-b"), ("n1", None), ("g1", "rec-gone")):
        await store.create_run(
            NewRun(run, f"t-{run}", "support", posted(f"t-{run}", run), owner=owner)
        )
        await store.append(run, said(f"m-{run}", f"spoken in {run}"))
        await store.set_status(run, "finished")
    assert sorted(await store.runs_to_index(10)) == ["a1", "b1", "g1", "n1"]
    assert sorted(await store.runs_to_index(10, owner="rec-a")) == ["a1", "n1"]
    later = time.time() + 5
    assert sorted(await store.runs_to_index(10, owner="rec-a", closed_before=later)) == [
        "a1",
        "b1",
        "g1",
        "n1",
    ]

    async def indexed() -> set[str]:
        return {run_id for run_id, _kind, _seq in await hits(store, "spoken")}

    assert await Indexer(store, owner="rec-a").index_own() == 2
    assert await indexed() == {"a1", "n1"}
    assert await Indexer(store, owner="rec-b").index_own() == 1
    assert await indexed() == {"a1", "b1", "n1"}
    assert await Indexer(store, owner="rec-a").index_own() == 0  # g1: not handed over yet
    assert await Indexer(store, owner="rec-a", handover=0.0).index_own() == 1
    assert await indexed() == {"a1", "b1", "g1", "n1"}
    await store.clear_index()
    assert await Indexer(store, owner="rec-a").index_pending() == 4
