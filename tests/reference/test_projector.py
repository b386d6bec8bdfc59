"""The fold, per event type and per reducer quirk of the reference client (1.0).

Expected values follow ``@ag-ui/client@1.0.0: src/apply/default.ts``; the interop suite
replays the same kinds of streams through the real client. Properties at the end: the fold
never raises, and folding in pieces through checkpoints equals folding at once.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recorder.errors import InputError
from recorder.reference.compat import minted_id
from recorder.reference.projector import Problem, Projection, Projector, fold
from recorder.wire.jsontext import dump

Event = dict[str, Any]


def ev(kind: str, **fields: Any) -> Event:
    return {"type": kind, **fields}


def start(mid: str, **fields: Any) -> Event:
    return ev("TEXT_MESSAGE_START", messageId=mid, **fields)


def content(mid: str, delta: str, **fields: Any) -> Event:
    return ev("TEXT_MESSAGE_CONTENT", messageId=mid, delta=delta, **fields)


def end(mid: str, **fields: Any) -> Event:
    return ev("TEXT_MESSAGE_END", messageId=mid, **fields)


def tool_start(tid: str, **fields: Any) -> Event:
    return ev("TOOL_CALL_START", toolCallId=tid, toolCallName=fields.pop("name", "f"), **fields)


def tool_args(tid: str, delta: str, **fields: Any) -> Event:
    return ev("TOOL_CALL_ARGS", toolCallId=tid, delta=delta, **fields)


def tool_result(tid: str, mid: str, text: Any = "ok", **fields: Any) -> Event:
    return ev("TOOL_CALL_RESULT", toolCallId=tid, messageId=mid, content=text, **fields)


def call(tid: str, name: str = "f", args: str = "") -> Event:
    return {"id": tid, "type": "function", "function": {"name": name, "arguments": args}}


def patch(*ops: Event) -> Event:
    return ev("STATE_DELTA", delta=list(ops))


def activity(mid: str, body: Any, **fields: Any) -> Event:
    kind = fields.pop("kind", "plan")
    return ev("ACTIVITY_SNAPSHOT", messageId=mid, activityType=kind, content=body, **fields)


def snapshot(*messages: Event, **fields: Any) -> Event:
    return ev("MESSAGES_SNAPSHOT", messages=list(messages), **fields)


def user(mid: str, text: Any = "hi") -> Event:
    return {"id": mid, "role": "user", "content": text}


def said(mid: str, text: str = "", **fields: Any) -> Event:
    return {"id": mid, "role": "assistant", "content": text, **fields}


def act(mid: str, kind: str = "plan", **body: Any) -> Event:
    return {"id": mid, "role": "activity", "activityType": kind, "content": body}


def project(events: list[Event], **start_point: Any) -> Projection:
    return fold([orjson.dumps(e) for e in events], **start_point)


def problems(projection: Projection) -> list[str]:
    return [p.message for p in projection.problems]


# -- messages: (name, starting messages, events, expected messages) ---------------------------

MESSAGE_ROWS: list[tuple[str, list[Event], list[Event], list[Event]]] = [
    (
        "text start, content, end",
        [],
        [start("m"), content("m", "a"), content("m", "b"), end("m")],
        [said("m", "ab")],
    ),
    (
        "role defaults to assistant, name kept",
        [],
        [start("m", role="user", name="n")],
        [{"id": "m", "role": "user", "content": "", "name": "n"}],
    ),
    (
        "start on an existing id changes nothing",
        [said("m", "x")],
        [start("m", role="user"), content("m", "y")],
        [said("m", "xy")],
    ),
    (
        "a string delta overwrites array content",
        [user("u", [{"type": "text", "text": "t"}])],
        [content("u", "s")],
        [user("u", "s")],
    ),
    (
        "the first message with an id is the one",
        [said("d", "1"), said("d", "2")],
        [content("d", "+")],
        [said("d", "1+"), said("d", "2")],
    ),
    (
        "metadata merges shallowly, last write wins",
        [],
        [start("m", metadata={"a": 1, "n": {"x": 1}}), end("m", metadata={"n": {"y": 2}})],
        [said("m", metadata={"a": 1, "n": {"y": 2}})],
    ),
    (
        "subagent attribution on the new message",
        [],
        [start("m", subagentRunId="s")],
        [said("m", subagentRunId="s")],
    ),
    (
        "text into an activity message is dropped",
        [act("m")],
        [start("m", metadata={"x": 1}), content("m", "t"), end("m")],
        [act("m")],
    ),
    (
        "reasoning messages",
        [],
        [
            ev("REASONING_MESSAGE_START", messageId="r", role="reasoning"),
            ev("REASONING_MESSAGE_CONTENT", messageId="r", delta="hm"),
            ev("REASONING_MESSAGE_END", messageId="r", metadata={"t": 1}),
        ],
        [{"id": "r", "role": "reasoning", "content": "hm", "metadata": {"t": 1}}],
    ),
    (
        "reasoning spans add nothing",
        [],
        [
            ev("REASONING_START", messageId="s", metadata={"a": 1}),
            ev("REASONING_END", messageId="s"),
        ],
        [],
    ),
    # tool calls
    (
        "a tool call without parent makes its own message",
        [],
        [tool_start("t"), tool_args("t", "{}"), ev("TOOL_CALL_END", toolCallId="t")],
        [{"id": "t", "role": "assistant", "toolCalls": [call("t", args="{}")]}],
    ),
    (
        "a tool call joins its assistant parent",
        [said("a", "x")],
        [tool_start("t", parentMessageId="a")],
        [said("a", "x", toolCalls=[call("t")])],
    ),
    (
        "an unknown parent names the new message",
        [],
        [tool_start("t", parentMessageId="p"), start("p"), content("p", "later")],
        [{"id": "p", "role": "assistant", "toolCalls": [call("t")], "content": "later"}],
    ),
    (
        "a non-assistant parent falls back to the call id",
        [user("u")],
        [tool_start("t", parentMessageId="u")],
        [user("u"), {"id": "t", "role": "assistant", "toolCalls": [call("t")]}],
    ),
    (
        "tool call metadata goes on the call",
        [],
        [tool_start("t", metadata={"a": 1}), tool_args("t", "x", metadata={"b": 2})],
        [
            {
                "id": "t",
                "role": "assistant",
                "toolCalls": [{**call("t", args="x"), "metadata": {"a": 1, "b": 2}}],
            }
        ],
    ),
    (
        "a repeated start renames and keeps the args",
        [said("a", toolCalls=[call("t", "old", "{1}")])],
        [tool_start("t", name="new")],
        [said("a", toolCalls=[call("t", "new", "{1}")])],
    ),
    (
        "results go after their owner, in arrival order",
        [],
        [
            tool_start("t1", parentMessageId="a"),
            tool_start("t2", parentMessageId="a"),
            start("b"),
            tool_result("t2", "r2"),
            tool_result("t1", "r1"),
        ],
        [
            {"id": "a", "role": "assistant", "toolCalls": [call("t1"), call("t2")]},
            {"id": "r2", "toolCallId": "t2", "role": "tool", "content": "ok"},
            {"id": "r1", "toolCallId": "t1", "role": "tool", "content": "ok"},
            said("b"),
        ],
    ),
    (
        "results are not de-duplicated",
        [],
        [tool_start("t"), tool_result("t", "r"), tool_result("t", "r", "again")],
        [
            {"id": "t", "role": "assistant", "toolCalls": [call("t")]},
            {"id": "r", "toolCallId": "t", "role": "tool", "content": "ok"},
            {"id": "r", "toolCallId": "t", "role": "tool", "content": "again"},
        ],
    ),
    (
        "a result without owner is appended",
        [user("u")],
        [tool_result("x", "r", [{"type": "text", "text": "t"}], subagentRunId="s")],
        [
            user("u"),
            {
                "id": "r",
                "toolCallId": "x",
                "role": "tool",
                "content": [{"type": "text", "text": "t"}],
                "subagentRunId": "s",
            },
        ],
    ),
    # encrypted values
    (
        "encrypted values on a tool call and a message",
        [user("u"), act("p")],
        [
            tool_start("t"),
            ev("REASONING_ENCRYPTED_VALUE", subtype="tool-call", entityId="t", encryptedValue="E1"),
            ev("REASONING_ENCRYPTED_VALUE", subtype="message", entityId="u", encryptedValue="E2"),
            ev("REASONING_ENCRYPTED_VALUE", subtype="message", entityId="p", encryptedValue="E3"),
        ],
        [
            {**user("u"), "encryptedValue": "E2"},
            act("p"),
            {"id": "t", "role": "assistant", "toolCalls": [{**call("t"), "encryptedValue": "E1"}]},
        ],
    ),
    # activity
    (
        "an activity snapshot creates",
        [],
        [activity("p", {"v": 1}, metadata={"m": 1})],
        [{**act("p", v=1), "metadata": {"m": 1}}],
    ),
    (
        "replace keeps metadata and re-attributes",
        [],
        [
            activity("p", {"v": 1}, metadata={"m": 1}, subagentRunId="s"),
            activity("p", {"v": 2}, kind="k2"),
        ],
        [{**act("p", "k2", v=2), "metadata": {"m": 1}}],
    ),
    (
        "replace false leaves it, but merges metadata",
        [],
        [activity("p", {"v": 1}), activity("p", {"v": 2}, replace=False, metadata={"m": 2})],
        [{**act("p", v=1), "metadata": {"m": 2}}],
    ),
    (
        "a replacing activity overwrites another message",
        [user("u")],
        [activity("u", {"v": 1})],
        [act("u", v=1)],
    ),
    (
        "a non-replacing one does not",
        [user("u")],
        [activity("u", {"v": 1}, replace=False, metadata={"m": 1})],
        [user("u")],
    ),
    (
        "an activity delta patches and retypes",
        [],
        [
            activity("p", {"l": [1]}),
            ev(
                "ACTIVITY_DELTA",
                messageId="p",
                activityType="k",
                patch=[{"op": "add", "path": "/l/-", "value": 2}],
            ),
        ],
        [act("p", "k", l=[1, 2])],
    ),
    (
        "a failed activity delta keeps its metadata",
        [],
        [
            activity("p", {}),
            ev(
                "ACTIVITY_DELTA",
                messageId="p",
                activityType="k",
                metadata={"m": 1},
                patch=[{"op": "remove", "path": "/x"}],
            ),
        ],
        [{**act("p"), "metadata": {"m": 1}}],
    ),
    # MESSAGES_SNAPSHOT
    (
        "a snapshot replaces, deletes and appends in local order",
        [user("a"), user("b"), said("c")],
        [snapshot(user("b", "B"), user("n"), user("a", "A"))],
        [user("a", "A"), user("b", "B"), user("n")],
    ),
    (
        "activity the snapshot does not carry is kept",
        [act("p"), user("u")],
        [snapshot(user("u", "U"))],
        [act("p"), user("u", "U")],
    ),
    (
        "a snapshot with activity owns them all",
        [act("p"), act("q", "other")],
        [snapshot(act("r"))],
        [act("r")],
    ),
    (
        "authority for listed types only",
        [act("p", "plan"), act("q", "other")],
        [snapshot(metadata={"@ag-ui/client": {"authoritativeActivityTypes": ["plan"]}})],
        [act("q", "other")],
    ),
    (
        "null authority owns every type",
        [act("p"), user("u")],
        [snapshot(user("u"), metadata={"@ag-ui/client": {"authoritativeActivityTypes": None}})],
        [user("u")],
    ),
    (
        "invalid authority owns none",
        [act("p")],
        [snapshot(act("q"), metadata={"@ag-ui/client": {"authoritativeActivityTypes": "all"}})],
        [act("p"), act("q")],
    ),
    (
        "reasoning is kept unless the snapshot has some",
        [{"id": "r", "role": "reasoning", "content": "x"}],
        [snapshot()],
        [{"id": "r", "role": "reasoning", "content": "x"}],
    ),
    (
        "duplicate ids in a snapshot are all appended",
        [],
        [snapshot(user("x", "1"), user("x", "2"))],
        [user("x", "1"), user("x", "2")],
    ),
    (
        "unknown roles and keys are stripped",
        [],
        [snapshot(user("u") | {"extra": 1}, {"id": "z", "role": "narrator", "content": ""})],
        [user("u")],
    ),
    # RUN_STARTED input
    (
        "input messages are appended when their id is new",
        [user("u", "local")],
        [
            ev(
                "RUN_STARTED",
                threadId="t",
                runId="r",
                input={
                    "threadId": "t",
                    "runId": "r",
                    "messages": [user("u", "input"), user("v"), user("v", "dup")],
                    "state": {"ignored": True},
                },
            )
        ],
        [user("u", "local"), user("v")],
    ),
]


@pytest.mark.parametrize(
    ("name", "given", "events", "expected"), MESSAGE_ROWS, ids=[r[0] for r in MESSAGE_ROWS]
)
def test_messages(
    name: str, given: list[Event], events: list[Event], expected: list[Event]
) -> None:
    assert project(events, messages=given).messages == expected


def test_snapshot_aliasing_is_kept_as_the_reference_has_it() -> None:
    # Two tool messages share an id (results are not de-duplicated); a snapshot naming that
    # id puts ONE object at both places, so text appended later shows up twice.
    events = [
        tool_start("t"),
        tool_result("t", "dup", "1"),
        tool_result("t", "dup", "2"),
        snapshot(
            {"id": "t", "role": "assistant", "toolCalls": [call("t")]},
            {"id": "dup", "role": "tool", "toolCallId": "t", "content": "s"},
        ),
        content("dup", "+"),
    ]
    tool_message = {"id": "dup", "role": "tool", "toolCallId": "t", "content": "s+"}
    whole = project(events)
    assert whole.messages[1:] == [tool_message, tool_message]
    projector = Projector()
    projector.feed_many(orjson.dumps(e) for e in events[:-1])
    resumed = Projector.restore(projector.checkpoint())
    resumed.feed(orjson.dumps(events[-1]))
    assert resumed.result().messages == whole.messages


# -- state ------------------------------------------------------------------------------------

STATE_ROWS: list[tuple[str, Any, list[Event], Any]] = [
    ("snapshot replaces wholesale", {"a": 1}, [ev("STATE_SNAPSHOT", snapshot={"b": 2})], {"b": 2}),
    ("any JSON value is a state", {}, [ev("STATE_SNAPSHOT", snapshot=None)], None),
    (
        "a delta patches",
        {"a": [1]},
        [patch({"op": "add", "path": "/a/-", "value": 2})],
        {"a": [1, 2]},
    ),
    (
        "a failed delta changes nothing",
        {"a": 1},
        [
            patch(
                {"op": "add", "path": "/b", "value": 1}, {"op": "test", "path": "/a", "value": True}
            )
        ],
        {"a": 1},
    ),
    (
        "test is typed",
        {"a": True},
        [
            patch(
                {"op": "test", "path": "/a", "value": True}, {"op": "add", "path": "/b", "value": 1}
            )
        ],
        {"a": True, "b": 1},
    ),
    (
        "unknown operations are stripped first",
        {},
        [patch({"op": "add", "path": "/a", "value": 1}, {"op": "merge", "path": "/b"})],
        {"a": 1},
    ),
    (
        "input.state is ignored",
        {"mine": 1},
        [
            ev(
                "RUN_STARTED",
                threadId="t",
                runId="r",
                input={"threadId": "t", "runId": "r", "messages": [], "state": {"theirs": 1}},
            )
        ],
        {"mine": 1},
    ),
    (
        "an undefined root keeps the shown state",
        {"k": 1},
        [
            patch({"op": "move", "from": "/nope", "path": ""}),
            patch({"op": "add", "path": "/z", "value": 1}),
        ],
        {"k": 1},
    ),
    (
        "after an undefined root, the root can be set",
        {"k": 1},
        [
            patch({"op": "move", "from": "/nope", "path": ""}),
            patch({"op": "add", "path": "", "value": [1]}),
        ],
        [1],
    ),
]


@pytest.mark.parametrize(
    ("name", "given", "events", "expected"), STATE_ROWS, ids=[r[0] for r in STATE_ROWS]
)
def test_state(name: str, given: Any, events: list[Event], expected: Any) -> None:
    assert project(events, state=given).state == expected


def test_state_none_means_an_empty_object() -> None:
    assert fold([]).state == {}


# -- interrupts -------------------------------------------------------------------------------

INTERRUPT = {"id": "i1", "reason": "confirmation"}


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([{"type": "interrupt", "interrupts": [{**INTERRUPT, "junk": 1}]}], [INTERRUPT]),
        ([{"type": "interrupt", "interrupts": [INTERRUPT]}, {"type": "success"}], []),
        ([{"type": "interrupt", "interrupts": [INTERRUPT]}, {"type": "cancelled"}], []),
        ([{"type": "interrupt", "interrupts": [INTERRUPT]}, None], []),  # legacy null outcome
        ([{"type": "interrupt", "interrupts": [INTERRUPT]}, {"type": "later"}], []),  # stripped
        ([{"type": "interrupt", "interrupts": [INTERRUPT]}, "absent"], []),
    ],
)
def test_pending_interrupts_follow_run_finished(outcomes: list[Any], expected: list[Any]) -> None:
    events: list[Event] = []
    for number, outcome in enumerate(outcomes):
        finish = ev("RUN_FINISHED", threadId="t", runId=f"r{number}")
        if outcome != "absent":
            finish["outcome"] = outcome
        events += [ev("RUN_STARTED", threadId="t", runId=f"r{number}"), finish]
    assert project(events).pending_interrupts == expected


# -- the pipeline in front of the reducer -----------------------------------------------------


def test_chunks_expand_before_the_reducer() -> None:
    events = [
        ev("TEXT_MESSAGE_CHUNK", messageId="m", delta="a"),
        ev("TEXT_MESSAGE_CHUNK", delta="b", metadata={"u": 1}),
        ev("TOOL_CALL_CHUNK", toolCallId="t", toolCallName="f", parentMessageId="m", delta="{}"),
    ]
    assert project(events).messages == [
        said("m", "ab", metadata={"u": 1}, toolCalls=[call("t", args="{}")])
    ]


def test_thinking_events_become_reasoning_messages_with_deterministic_ids() -> None:
    events = [
        ev("THINKING_START"),
        ev("THINKING_TEXT_MESSAGE_START"),
        ev("THINKING_TEXT_MESSAGE_CONTENT", delta="deep"),
        ev("THINKING_TEXT_MESSAGE_END"),
        ev("THINKING_END"),
    ]
    expected = [{"id": minted_id(2), "role": "reasoning", "content": "deep"}]
    assert project(events).messages == expected
    assert project(events).messages == expected  # and again: nothing random
    taken = project(events, messages=[user(minted_id(1)), user(minted_id(2))]).messages
    assert [m["id"] for m in taken] == [minted_id(1), minted_id(2), minted_id(4)]


def test_minted_ids_never_meet_the_ids_a_producer_uses() -> None:
    # The old scheme minted "thinking-1", "thinking-2": a producer using those ids had its
    # message merged with a minted one.
    events = [
        ev("THINKING_START"),
        ev("THINKING_TEXT_MESSAGE_START"),
        ev("THINKING_TEXT_MESSAGE_CONTENT", delta="minted"),
        ev("THINKING_TEXT_MESSAGE_END"),
        ev("THINKING_END"),
        start("thinking-1"),
        content("thinking-1", "from the producer"),
        end("thinking-1"),
        start("thinking-2"),
        content("thinking-2", "also the producer"),
        end("thinking-2"),
    ]
    shown = [(m["id"], m["content"]) for m in project(events).messages]
    assert shown == [
        (minted_id(2), "minted"),
        ("thinking-1", "from the producer"),
        ("thinking-2", "also the producer"),
    ]


def test_legacy_binary_parts_are_upgraded() -> None:
    part = {"type": "binary", "mimeType": "image/png", "data": "AAAA"}
    projection = project([snapshot(user("u", [part]))])
    assert projection.messages[0]["content"] == [
        {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}}
    ]


# -- problems ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"{not json", "Invalid event: the frame is not a JSON object."),
        (b"[1, 2]", "Invalid event: the frame is not a JSON object."),
        (b'{"delta": "x"}', "Invalid event: the frame carries no event type."),
        (b'{"type": ""}', "Invalid event: the frame carries no event type."),
        (b'{"type": "NEW_THING"}', "Dropping unrecognised event 'NEW_THING'"),
        (
            orjson.dumps(content("m", 5)),
            "Invalid TEXT_MESSAGE_CONTENT event: 'delta' expected a string",
        ),
        (
            orjson.dumps(content("ghost", "x")),
            "TEXT_MESSAGE_CONTENT: No message found with ID 'ghost'",
        ),
        (
            orjson.dumps(tool_args("ghost", "x")),
            "TOOL_CALL_ARGS: No message found containing tool call",
        ),
        (orjson.dumps(patch({"op": "remove", "path": "/x"})), "Failed to apply state patch: "),
        (
            orjson.dumps(ev("ACTIVITY_DELTA", messageId="p", activityType="k", patch=[])),
            "ACTIVITY_DELTA: No message found",
        ),
        (
            orjson.dumps(ev("TEXT_MESSAGE_CHUNK", delta="x")),
            "First TEXT_MESSAGE_CHUNK must have a messageId",
        ),
    ],
)
def test_bad_frames_become_problems(frame: bytes, message: str) -> None:
    projector = Projector(messages=[said("m")])
    projector.feed(b'{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}')
    projector.feed(frame)
    found = projector.result().problems
    assert len(found) == 1
    assert found[0].index == 1 and found[0].message.startswith(message)
    assert projector.result().messages == [said("m")]  # the offending event was dropped


def test_problem_indexes_count_across_feeds_and_types_are_reported() -> None:
    projector = Projector()
    projector.feed_many([b"x", orjson.dumps(content("a", "b"))])
    projector.feed(orjson.dumps(ev("THINKING_TEXT_MESSAGE_CONTENT", delta=1)))
    assert [(p.index, p.type) for p in projector.result().problems] == [
        (0, None),
        (1, "TEXT_MESSAGE_CONTENT"),
        (2, "THINKING_TEXT_MESSAGE_CONTENT"),
    ]


def test_to_json() -> None:
    projection = Projection([user("u")], {"s": 1}, [INTERRUPT], (Problem(3, "X", "why"),))
    assert projection.to_json() == {
        "messages": [user("u")],
        "state": {"s": 1},
        "pendingInterrupts": [INTERRUPT],
        "problems": [{"index": 3, "type": "X", "message": "why"}],
    }


# -- the Projector's surface ------------------------------------------------------------------


def test_frames_may_be_bytes_str_or_parsed() -> None:
    events = [start("m"), content("m", "x")]
    as_bytes = fold([orjson.dumps(e) for e in events])
    assert fold([orjson.dumps(e).decode() for e in events]) == as_bytes
    assert fold(copy.deepcopy(events)) == as_bytes


def test_the_starting_point_is_copied_and_results_are_independent() -> None:
    given = [said("m", "x")]
    projector = Projector(given, {"s": [1]})
    projector.feed(orjson.dumps(content("m", "y")))
    assert given == [said("m", "x")]
    first = projector.result()
    first.messages[0]["content"] = "changed"
    first.state["s"].append(2)
    assert projector.result().messages == [said("m", "xy")]
    assert projector.result().state == {"s": [1]}


def test_restore_rejects_what_is_not_a_checkpoint() -> None:
    for data in (b"nope", b"{}", orjson.dumps({"version": 99})):
        with pytest.raises(InputError):
            Projector.restore(data)


# -- properties -------------------------------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c", minted_id(1)])
SCALARS = st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=3)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=6,
)
OBJECTS = st.dictionaries(st.sampled_from("abc"), VALUES, max_size=3)
TEXTS = st.sampled_from(["x", "", "yz"])
PARTS = st.lists(
    st.sampled_from(
        [
            {"type": "text", "text": "t"},
            {"type": "binary", "mimeType": "image/png", "data": "AA"},
            {"type": "image", "source": {"type": "url", "value": "u"}},
            {"type": "sticker"},
        ]
    ),
    max_size=2,
)


@st.composite
def messages(draw: st.DrawFn) -> Event:
    role = draw(st.sampled_from(["user", "assistant", "tool", "activity", "reasoning", "system"]))
    message: Event = {"id": draw(IDS), "role": role}
    if role == "activity":
        message.update(activityType=draw(st.sampled_from(["plan", "other"])), content=draw(OBJECTS))
    elif role == "assistant":
        if draw(st.booleans()):
            message["toolCalls"] = draw(st.lists(st.builds(call, IDS), max_size=2))
        if draw(st.booleans()):
            message["content"] = draw(TEXTS)
    else:
        message["content"] = draw(TEXTS | PARTS) if role in ("user", "tool") else draw(TEXTS)
        if role == "tool":
            message["toolCallId"] = draw(IDS)
    if draw(st.integers(0, 9)) == 0:
        message[draw(st.sampled_from(["content", "metadata", "extra"]))] = draw(VALUES)
    return message


MESSAGES = st.lists(messages(), max_size=3)
OPS = st.lists(
    st.fixed_dictionaries(
        {
            "op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bad"]),
            "path": st.sampled_from(["", "/a", "/a/0", "/a/-", "/b", "/toString"]),
        },
        optional={"from": st.sampled_from(["", "/a", "/b"]), "value": VALUES},
    ),
    max_size=3,
)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "messageId": IDS,
    "toolCallId": IDS,
    "toolCallName": st.sampled_from(["f", "g"]),
    "parentMessageId": IDS | st.none(),
    "delta": TEXTS,
    "role": st.sampled_from(["assistant", "user"]),
    "name": TEXTS,
    "content": TEXTS | PARTS,
    "snapshot": VALUES,
    "messages": MESSAGES,
    "activityType": st.sampled_from(["plan", "other"]),
    "patch": OPS,
    "replace": st.booleans(),
    "subtype": st.sampled_from(["tool-call", "message"]),
    "entityId": IDS,
    "encryptedValue": st.just("E"),
    "subagentRunId": st.sampled_from(["s1", "s2"]),
    "metadata": st.dictionaries(st.sampled_from(["k", "@ag-ui/client"]), VALUES, max_size=2),
    "outcome": st.sampled_from(
        [None, {"type": "success"}, {"type": "interrupt", "interrupts": [INTERRUPT]}]
    ),
    "input": st.builds(lambda m: {"threadId": "t", "runId": "r", "messages": m}, MESSAGES),
    "rawEvent": VALUES,
    "stepName": TEXTS,
    "threadId": st.just("t"),
    "runId": st.sampled_from(["r1", "r2"]),
    "message": TEXTS,
    "event": VALUES,
    "value": VALUES,
}
# Per type: the fields it needs and those it may have (besides metadata and the like).
SHAPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "RUN_STARTED": (("threadId", "runId"), ("input",)),
    "RUN_FINISHED": (("threadId", "runId"), ("outcome",)),
    "RUN_ERROR": (("message",), ()),
    "STEP_STARTED": (("stepName",), ()),
    "TEXT_MESSAGE_START": (("messageId",), ("role", "name")),
    "TEXT_MESSAGE_CONTENT": (("messageId", "delta"), ()),
    "TEXT_MESSAGE_END": (("messageId",), ()),
    "TEXT_MESSAGE_CHUNK": ((), ("messageId", "delta", "role")),
    "TOOL_CALL_START": (("toolCallId", "toolCallName"), ("parentMessageId",)),
    "TOOL_CALL_ARGS": (("toolCallId", "delta"), ()),
    "TOOL_CALL_END": (("toolCallId",), ()),
    "TOOL_CALL_CHUNK": ((), ("toolCallId", "toolCallName", "parentMessageId", "delta")),
    "TOOL_CALL_RESULT": (("messageId", "toolCallId", "content"), ()),
    "STATE_SNAPSHOT": (("snapshot",), ()),
    "STATE_DELTA": (("patch",), ()),
    "MESSAGES_SNAPSHOT": (("messages",), ()),
    "ACTIVITY_SNAPSHOT": (("messageId", "activityType", "snapshot"), ("replace",)),
    "ACTIVITY_DELTA": (("messageId", "activityType", "patch"), ()),
    "RAW": (("event",), ()),
    "CUSTOM": (("name", "value"), ()),
    "REASONING_START": (("messageId",), ()),
    "REASONING_MESSAGE_START": (("messageId", "reasoningRole"), ()),
    "REASONING_MESSAGE_CONTENT": (("messageId", "delta"), ()),
    "REASONING_MESSAGE_END": (("messageId",), ()),
    "REASONING_MESSAGE_CHUNK": ((), ("messageId", "delta")),
    "REASONING_END": (("messageId",), ()),
    "REASONING_ENCRYPTED_VALUE": (("subtype", "entityId", "encryptedValue"), ()),
    "SUBAGENT_STARTED": (("subagentRunId", "name"), ()),
    "SUBAGENT_FINISHED": (("subagentRunId",), ()),
    "THINKING_START": ((), ()),
    "THINKING_END": ((), ()),
    "THINKING_TEXT_MESSAGE_START": ((), ()),
    "THINKING_TEXT_MESSAGE_CONTENT": (("delta",), ()),
    "THINKING_TEXT_MESSAGE_END": ((), ()),
    "SOMETHING_ELSE": ((), ("delta",)),
}
# Where a field's wire name differs from the strategy that feeds it.
RENAMED = {
    ("ACTIVITY_SNAPSHOT", "snapshot"): ("content", OBJECTS),
    ("STATE_DELTA", "patch"): ("delta", OPS),
    ("REASONING_MESSAGE_START", "reasoningRole"): ("role", st.just("reasoning")),
}


@st.composite
def events(draw: st.DrawFn) -> Event:
    """Well-formed events over a few ids, one in six of them damaged."""
    kind = draw(st.sampled_from(sorted(SHAPES)))
    needed, optional = SHAPES[kind]
    chosen = [
        *needed,
        *draw(
            st.lists(
                st.sampled_from([*optional, "metadata", "subagentRunId", "rawEvent"]),
                max_size=2,
                unique=True,
            )
        ),
    ]
    event: Event = {"type": kind}
    for name in chosen:
        if (kind, name) in RENAMED:
            wire, strategy = RENAMED[(kind, name)]
            event[wire] = draw(strategy)
        else:
            event[name] = draw(FIELDS[name])
    if draw(st.integers(0, 5)) == 0:  # damage: a field dropped, nulled or scrambled
        victim = draw(st.sampled_from(sorted(event)))
        if victim != "type":
            event[victim] = draw(st.sampled_from([None, 5, "x", [], {}]))
    return event


GARBAGE = st.binary(max_size=8) | st.sampled_from(
    [b"null", b"[]", b'"x"', b"1", b"{}", b'{"type": 5}']
)
# Mostly events, as raw frames and already parsed; now and then garbage.
FRAMES = st.one_of(events().map(orjson.dumps), events().map(orjson.dumps), events(), GARBAGE)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MESSAGES, VALUES, st.lists(FRAMES, max_size=25))
def test_the_fold_never_raises(messages: list[Event], state: Any, frames: list[Any]) -> None:
    projection = fold(frames, messages=messages, state=state)
    orjson.dumps(projection.to_json())  # and its result is JSON


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MESSAGES, st.lists(FRAMES, max_size=25), st.data())
def test_folding_through_a_checkpoint_equals_folding_at_once(
    messages: list[Event], frames: list[Any], data: st.DataObject
) -> None:
    frames = [orjson.dumps(f) if isinstance(f, dict) else f for f in frames]
    cut = data.draw(st.integers(0, len(frames)))
    whole = Projector(messages)
    whole.feed_many(frames)
    first = Projector(messages)
    first.feed_many(frames[:cut])
    rest = Projector.restore(first.checkpoint())
    rest.feed_many(frames[cut:])
    assert rest.result() == whole.result()
    assert rest.checkpoint() == whole.checkpoint()


# -- what JSON.parse reads and orjson does not; numbers as doubles; odd starting points --------

RUN = b'{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}'


def test_a_pair_split_across_two_deltas_is_one_character() -> None:
    frames = [
        RUN,
        orjson.dumps(start("m")),
        b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x\\ud83d"}',
        b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "\\ude00y"}',
        orjson.dumps(end("m")),
    ]
    projection = fold(frames)
    assert projection.messages == [said("m", "x\U0001f600y")]
    assert projection.problems == ()


def test_half_a_pair_stays_and_can_be_written() -> None:
    frames = [RUN, orjson.dumps(start("m\ufffd"))]
    frames.append(
        b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m\xef\xbf\xbd", "delta": "\\udbff"}'
    )
    frames.append(b'{"type": "TEXT_MESSAGE_END", "messageId": "\\ud800"}')
    projection = fold(frames)
    assert projection.messages == [said("m\ufffd", "\udbff")]
    assert problems(projection) == ["TEXT_MESSAGE_END: No message found with ID '\\ud800'"]
    assert dump(projection.to_json()) == (
        b'{"messages":[{"id":"m\xef\xbf\xbd","role":"assistant","content":"\\udbff"}],'
        b'"state":{},"pendingInterrupts":[],"problems":[{"index":3,"type":"TEXT_MESSAGE_END",'
        b'"message":"TEXT_MESSAGE_END: No message found with ID \'\\\\ud800\'"}]}'
    )


def test_numbers_beyond_a_double_are_infinity_and_written_as_null() -> None:
    projector = Projector()
    projector.feed(RUN)
    projector.feed(b'{"type": "STATE_SNAPSHOT", "snapshot": {"a": 1e400, "b": -1e400}}')
    assert projector.result().state == {"a": None, "b": None}
    assert math.isinf(projector.take().state["a"])
    # The next patch applies to a JSON copy of the state, where Infinity is null.
    projector.feed(orjson.dumps(patch({"op": "test", "path": "/a", "value": None})))
    projector.feed(
        b'{"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/c", "value": 1e400}]}'
    )
    assert projector.take().state["a"] is None and math.isinf(projector.take().state["c"])


def test_integers_past_two_to_the_53_are_doubles() -> None:
    projection = fold(
        [
            RUN,
            b'{"type": "STATE_SNAPSHOT", "snapshot": '
            b'{"n": 9007199254740993, "l": [18446744073709551623]}}',
            b'{"type": "TEXT_MESSAGE_START", "messageId": "m", '
            b'"metadata": {"id": 12345678901234567}}',
        ],
        messages=[{"id": "u", "role": "user", "content": "x", "metadata": {"n": 2**53 + 1}}],
    )
    assert projection.state == {"n": 2**53, "l": [2.0**64]}
    assert projection.messages[0]["metadata"] == {"n": 2**53}
    assert projection.messages[1]["metadata"] == {"id": 12345678901234568}


@pytest.mark.parametrize(
    ("messages", "kept", "reported"),
    [
        ([None], [None], ["messages[0] is not an object"]),
        (["hello", said("a", "x")], ["hello", said("a", "x")], ["messages[0] is not an object"]),
        ([5, [1], True], [5, [1], True], [f"messages[{i}] is not an object" for i in range(3)]),
        ("hello", [], ["messages is not an array"]),
        ({"id": "m"}, [], ["messages is not an array"]),
    ],
)
def test_a_starting_point_no_client_could_post_is_reported_and_folded(
    messages: Any, kept: list[Any], reported: list[str]
) -> None:
    projection = fold(
        [RUN, *(orjson.dumps(e) for e in [start("m"), content("m", "x")])], messages=messages
    )
    assert projection.messages == [*kept, said("m", "x")]
    assert [p.index for p in projection.problems] == [-1] * len(reported)
    assert all(r in p for r, p in zip(reported, problems(projection), strict=True))


def test_stray_entries_stay_where_they_are_as_the_reference_keeps_them() -> None:
    events = [
        ev("TOOL_CALL_START", toolCallId="t", toolCallName="f", parentMessageId="a"),
        tool_result("t", "r"),
        snapshot(said("a", "kept"), user("u")),
    ]
    projection = project(events, messages=[said("a"), "stray", user("u")])
    assert [m if isinstance(m, str) else m["id"] for m in projection.messages] == ["a", "u"]
    before_snapshot = project(events[:2], messages=[said("a"), "stray", user("u")])
    assert [m if isinstance(m, str) else m["id"] for m in before_snapshot.messages] == [
        "a",
        "r",
        "stray",
        "u",
    ]


def test_checkpoints_keep_what_json_cannot_say_plainly() -> None:
    frames = [
        RUN,
        b'{"type": "STATE_SNAPSHOT", "snapshot": {"inf": 1e400, "s": "\\ud83d"}}',
        orjson.dumps(patch({"op": "move", "from": "", "path": "/self"})),
    ]
    projector = Projector()
    projector.feed_many(frames)
    restored = Projector.restore(projector.checkpoint())
    assert restored.result() == projector.result()
    shown = restored.take().state
    assert math.isinf(shown["inf"]) and shown["s"] == "\ud83d"
    # The reducer's state is cyclic: the next patch fails the run, before and after alike.
    for one in (projector, restored):
        one.feed(orjson.dumps(patch({"op": "add", "path": "/x", "value": 1})))
        assert "Converting circular structure to JSON" in problems(one.result())[-1]
