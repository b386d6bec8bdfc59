"""The inbound pipeline before the reducer: compatibility boundary, enforcement, chunk lanes.

Rows follow the reference sources (``src/middleware/compatibility-boundary.ts``,
``src/enforce/*.ts`` with the generated 1.0 schemas, ``src/chunks/transform.ts``); chunk
error texts are the reference's, word for word.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import orjson
import pytest

from recorder.reference.chunks import ChunkError, ChunkLanes
from recorder.reference.compat import Compatibility, minted_id
from recorder.reference.enforce import KNOWN_TYPES, InvalidEvent, enforce

Event = dict[str, Any]


def ev(kind: str, **fields: Any) -> Event:
    return {"type": kind, **fields}


def never_taken(_: str) -> bool:
    return False


# -- the compatibility boundary ---------------------------------------------------------------


def translate_all(events: list[Event], taken: Any = never_taken) -> list[Event]:
    boundary = Compatibility()
    return [boundary.translate(copy.deepcopy(e), taken) for e in events]


def test_thinking_becomes_reasoning_with_deterministic_ids() -> None:
    out = translate_all(
        [
            ev("THINKING_START", title="lost", timestamp=1),
            ev("THINKING_TEXT_MESSAGE_START"),
            ev("THINKING_TEXT_MESSAGE_CONTENT", delta="a"),
            ev("THINKING_TEXT_MESSAGE_END"),
            ev("THINKING_END"),
        ]
    )
    span, message = minted_id(1), minted_id(2)
    assert out == [
        ev("REASONING_START", messageId=span, timestamp=1),
        ev("REASONING_MESSAGE_START", messageId=message, role="reasoning"),
        ev("REASONING_MESSAGE_CONTENT", messageId=message, delta="a"),
        ev("REASONING_MESSAGE_END", messageId=message),
        ev("REASONING_END", messageId=span),
    ]


def test_minted_ids_are_distinct_uuids() -> None:
    minted = [minted_id(n) for n in range(1, 200)]
    assert len(set(minted)) == len(minted)
    assert all(uuid.UUID(m).version == 4 and str(uuid.UUID(m)) == m for m in minted)


def test_minted_ids_skip_ids_already_taken() -> None:
    taken = {minted_id(1), minted_id(2)}
    out = translate_all([ev("THINKING_TEXT_MESSAGE_START")], taken.__contains__)
    assert out[0]["messageId"] == minted_id(3)


def test_a_continuation_without_opener_mints_an_id() -> None:
    out = translate_all(
        [
            ev("THINKING_TEXT_MESSAGE_CONTENT", delta="orphan"),
            ev("THINKING_TEXT_MESSAGE_END"),
            ev("THINKING_END"),
        ]
    )
    assert [e["messageId"] for e in out] == [minted_id(1), minted_id(2), minted_id(3)]


def test_the_minting_state_survives_a_round_trip() -> None:
    boundary = Compatibility()
    boundary.translate(ev("THINKING_START"), never_taken)
    boundary.translate(ev("THINKING_TEXT_MESSAGE_START"), never_taken)
    restored = Compatibility.from_json(orjson.loads(orjson.dumps(boundary.to_json())))
    assert restored.translate(ev("THINKING_TEXT_MESSAGE_END"), never_taken)["messageId"] == (
        minted_id(2)
    )
    assert restored.translate(ev("THINKING_START"), never_taken)["messageId"] == minted_id(3)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            ev("TOOL_CALL_START", toolCallId="t", toolCallName="n", parentMessageId=None),
            ev("TOOL_CALL_START", toolCallId="t", toolCallName="n"),
        ),
        (
            ev("TOOL_CALL_CHUNK", toolCallId="t", parentMessageId=None),
            ev("TOOL_CALL_CHUNK", toolCallId="t"),
        ),
        (ev("RUN_FINISHED", outcome=None, result=None), ev("RUN_FINISHED")),
        (ev("SUBAGENT_FINISHED", result=None), ev("SUBAGENT_FINISHED")),
        (ev("CUSTOM", name="c", value=None, rawEvent=None), ev("CUSTOM", name="c", value=None)),
        # only those: other nulls stay, for enforcement to reject
        (
            ev("TEXT_MESSAGE_START", messageId="m", name=None),
            ev("TEXT_MESSAGE_START", messageId="m", name=None),
        ),
        (ev("SUBAGENT_FINISHED", outcome=None), ev("SUBAGENT_FINISHED", outcome=None)),
    ],
)
def test_legacy_nulls_become_absent(given: Event, expected: Event) -> None:
    assert translate_all([given]) == [expected]


BINARY_DATA = {"type": "binary", "mimeType": "image/png", "data": "AAAA", "filename": "a.png"}
IMAGE = {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}}


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([BINARY_DATA], [{**IMAGE, "metadata": {"filename": "a.png"}}]),
        (
            [{"type": "binary", "mimeType": "application/pdf", "url": "https://x/d.pdf"}],
            [
                {
                    "type": "document",
                    "source": {
                        "type": "url",
                        "value": "https://x/d.pdf",
                        "mimeType": "application/pdf",
                    },
                }
            ],
        ),
        (
            [{"type": "binary", "mimeType": "audio/wav", "data": "", "url": "u"}],
            [{"type": "audio", "source": {"type": "url", "value": "u", "mimeType": "audio/wav"}}],
        ),
        # only an id: no modern equivalent, left as it is (enforcement then drops it)
        (
            [{"type": "binary", "mimeType": "video/mp4", "id": "f1"}],
            [{"type": "binary", "mimeType": "video/mp4", "id": "f1"}],
        ),
        # a legacy part mirrored by its modern equivalent is a duplicate
        (
            [{**IMAGE, "metadata": {"filename": "a.png"}}, BINARY_DATA],
            [{**IMAGE, "metadata": {"filename": "a.png"}}],
        ),
        # ... but not when the modern one lost the filename
        ([IMAGE, BINARY_DATA], [IMAGE, {**IMAGE, "metadata": {"filename": "a.png"}}]),
        # media metadata null is dropped; text parts are left alone
        (
            [{**IMAGE, "metadata": None}, {"type": "text", "text": "t", "metadata": None}],
            [IMAGE, {"type": "text", "text": "t", "metadata": None}],
        ),
    ],
)
def test_inbound_message_content_is_upgraded(parts: list[Any], expected: list[Any]) -> None:
    message = {"id": "u1", "role": "user", "content": parts}
    snapshot = translate_all([ev("MESSAGES_SNAPSHOT", messages=[message])])[0]
    assert snapshot["messages"][0]["content"] == expected
    started = translate_all(
        [ev("RUN_STARTED", input={"threadId": "t", "runId": "r", "messages": [message]})]
    )[0]
    assert started["input"]["messages"][0]["content"] == expected


def test_run_started_input_nulls_become_absent() -> None:
    given = {
        "threadId": "t",
        "runId": "r",
        "messages": [],
        "forwardedProps": None,
        "tools": [{"name": "n", "description": "d", "parameters": None}],
        "resume": [{"interruptId": "i", "status": "resolved", "payload": None}],
        "state": None,
    }
    out = translate_all([ev("RUN_STARTED", input=given)])[0]["input"]
    assert out == {
        "threadId": "t",
        "runId": "r",
        "messages": [],
        "tools": [{"name": "n", "description": "d"}],
        "resume": [{"interruptId": "i", "status": "resolved"}],
        "state": None,
    }


# -- enforcement ------------------------------------------------------------------------------


def enforced(event: Event) -> Event:
    event = copy.deepcopy(event)
    assert enforce(event)
    return event


def test_unknown_types_are_not_enforced_but_reported() -> None:
    assert not enforce(ev("THINKING_START"))
    assert not enforce(ev("SOMETHING_NEW"))
    assert len(KNOWN_TYPES) == 31


@pytest.mark.parametrize(
    ("event", "why"),
    [
        (ev("TEXT_MESSAGE_CONTENT", messageId="m", delta=5), "'delta' expected a string"),
        (ev("TEXT_MESSAGE_CONTENT", messageId="m"), "'delta' is required"),
        (ev("TEXT_MESSAGE_START", messageId="m", role="tool"), "'role' expected one of"),
        (ev("TEXT_MESSAGE_END", messageId="m", metadata=None), "'metadata' expected an object"),
        (ev("TEXT_MESSAGE_END", messageId="m", metadata=[]), "'metadata' expected an object"),
        (ev("TEXT_MESSAGE_END", messageId="m", timestamp=1.5), "'timestamp' expected an integer"),
        (ev("TEXT_MESSAGE_END", messageId="m", timestamp=True), "'timestamp' expected an integer"),
        (
            ev("TEXT_MESSAGE_END", messageId="m", subagentRunId=None),
            "'subagentRunId' expected a string",
        ),
        (ev("REASONING_MESSAGE_START", messageId="m"), "'role' is required"),
        (ev("STATE_SNAPSHOT"), "'snapshot' is required"),
        (ev("STATE_DELTA", delta={}), "'delta' expected an array"),
        (ev("STATE_DELTA", delta=[{"op": "add", "path": "a", "value": 1}]), "JSON Pointer"),
        (ev("STATE_DELTA", delta=[{"op": "add", "path": "/~2", "value": 1}]), "JSON Pointer"),
        (ev("STATE_DELTA", delta=[{"op": "move", "path": "/a"}]), "'from' is required"),
        (ev("STATE_DELTA", delta=[{"op": "test", "path": "/a"}]), "'value' is required"),
        (ev("STATE_DELTA", delta=["add"]), "expected an object"),
        (
            ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="k", content=[]),
            "expected an object",
        ),
        (
            ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="k", content={}, replace=1),
            "boolean",
        ),
        (
            ev(
                "RUN_FINISHED",
                threadId="t",
                runId="r",
                outcome={"type": "interrupt", "interrupts": []},
            ),
            "at least 1",
        ),
        (ev("RUN_FINISHED", threadId="t", runId="r", result=None), "expected a value"),
        (ev("MESSAGES_SNAPSHOT", messages=[{"id": "u", "role": "user"}]), "'content' is required"),
        (
            ev("MESSAGES_SNAPSHOT", messages=[{"id": 1, "role": "user", "content": ""}]),
            "'id' expected",
        ),
        (ev("MESSAGES_SNAPSHOT", messages=["text"]), "expected an object"),
        (
            ev(
                "MESSAGES_SNAPSHOT",
                messages=[
                    {
                        "id": "a",
                        "role": "assistant",
                        "toolCalls": [
                            {"id": "t", "type": "x", "function": {"name": "n", "arguments": ""}}
                        ],
                    }
                ],
            ),
            "'type' expected one of",
        ),
        (
            ev("TOOL_CALL_RESULT", messageId="m", toolCallId="t", content=[{"type": "text"}]),
            "'text' is required",
        ),
        (ev("TOOL_CALL_RESULT", messageId="m", toolCallId="t", content=5), "expected an array"),
        (
            ev("RUN_STARTED", threadId="t", runId="r", input={"threadId": "t", "runId": "r"}),
            "'messages' is required",
        ),
        (ev("SUBAGENT_STARTED", name="n"), "'subagentRunId' is required"),
        (
            ev("REASONING_ENCRYPTED_VALUE", subtype="span", entityId="e", encryptedValue="v"),
            "'subtype'",
        ),
    ],
)
def test_invalid_events_are_rejected(event: Event, why: str) -> None:
    with pytest.raises(InvalidEvent, match=why.replace("(", r"\(")):
        enforce(copy.deepcopy(event))


def test_messages_are_stripped_to_the_schema() -> None:
    event = enforced(
        ev(
            "MESSAGES_SNAPSHOT",
            messages=[
                {
                    "id": "u1",
                    "role": "user",
                    "content": "hi",
                    "extra": 1,
                    "metadata": {"kept": {"deep": 1}},
                },
                {"id": "x", "role": "narrator", "content": "an unknown role is dropped"},
                {
                    "id": "a1",
                    "role": "assistant",
                    "toolCalls": [
                        {
                            "id": "t",
                            "type": "function",
                            "function": {"name": "n", "arguments": "", "z": 1},
                            "y": 2,
                        }
                    ],
                },
                {
                    "id": "u2",
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "t", "extra": 1},
                        {"type": "sticker"},
                        {"type": "image", "source": {"type": "hologram"}, "id": 5},
                        {"type": "image", "source": {"type": "url", "value": "v", "x": 1}},
                    ],
                },
            ],
        )
    )
    assert event["messages"] == [
        {"id": "u1", "role": "user", "content": "hi", "metadata": {"kept": {"deep": 1}}},
        {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {"id": "t", "type": "function", "function": {"name": "n", "arguments": ""}}
            ],
        },
        {
            "id": "u2",
            "role": "user",
            "content": [
                {"type": "text", "text": "t"},
                {"type": "image", "source": {"type": "url", "value": "v"}},
            ],
        },
    ]


def test_unknown_patch_operations_are_dropped_and_known_ones_kept_open() -> None:
    event = enforced(
        ev(
            "STATE_DELTA",
            delta=[
                {"op": "add", "path": "/a", "value": 1, "note": "kept"},
                {"op": "merge", "path": "/b"},
                {"path": "/c"},
                {"op": "_get", "path": "/a"},
            ],
        )
    )
    assert event["delta"] == [{"op": "add", "path": "/a", "value": 1, "note": "kept"}]


def test_an_unknown_outcome_is_removed_and_interrupts_stripped() -> None:
    unknown = enforced(ev("RUN_FINISHED", threadId="t", runId="r", outcome={"type": "paused"}))
    assert "outcome" not in unknown
    interrupted = enforced(
        ev(
            "RUN_FINISHED",
            threadId="t",
            runId="r",
            outcome={"type": "interrupt", "interrupts": [{"id": "i", "reason": "x", "junk": 1}]},
        )
    )
    assert interrupted["outcome"]["interrupts"] == [{"id": "i", "reason": "x"}]


def test_plain_events_pass_untouched() -> None:
    event = ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="d", timestamp=1.0, metadata={"k": 1})
    assert enforced(event) == event


@pytest.mark.parametrize(
    ("event", "kept"),
    [
        # Read by our reducer for CONTENT events: an END must not carry it through.
        (ev("TEXT_MESSAGE_END", messageId="m", delta="x"), ev("TEXT_MESSAGE_END", messageId="m")),
        (ev("TOOL_CALL_END", toolCallId="t", delta="x"), ev("TOOL_CALL_END", toolCallId="t")),
        # Read by the verifier, which the client never lets see it on a run-scoped event.
        (
            ev("RUN_STARTED", threadId="t", runId="r", subagentRunId=None, extra=1),
            ev("RUN_STARTED", threadId="t", runId="r"),
        ),
        (
            ev("SUBAGENT_STARTED", subagentRunId="s", name="n", outcome=5),
            ev("SUBAGENT_STARTED", subagentRunId="s", name="n"),
        ),
    ],
)
def test_what_the_schema_does_not_describe_is_stripped(event: Event, kept: Event) -> None:
    assert enforced(event) == kept


# -- chunk expansion --------------------------------------------------------------------------


def expand_all(events: list[Event], lanes: ChunkLanes | None = None) -> list[Event]:
    lanes = lanes or ChunkLanes()
    return [out for e in events for out in lanes.expand(copy.deepcopy(e))]


def text_chunk(**fields: Any) -> Event:
    return ev("TEXT_MESSAGE_CHUNK", **fields)


def tool_chunk(**fields: Any) -> Event:
    return ev("TOOL_CALL_CHUNK", **fields)


def test_text_chunks_expand_and_close_on_a_new_id() -> None:
    out = expand_all(
        [
            text_chunk(messageId="m1", delta="a"),
            text_chunk(delta="b"),
            text_chunk(messageId="m1", delta="c"),
            text_chunk(messageId="m2", role="user", name="n", delta="d"),
        ]
    )
    assert out == [
        ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="a"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="b"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="c"),
        ev("TEXT_MESSAGE_END", messageId="m1"),
        ev("TEXT_MESSAGE_START", messageId="m2", role="user", name="n"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m2", delta="d"),
    ]


def test_chunk_metadata_and_raw_event_ride_on_what_the_chunk_makes() -> None:
    out = expand_all(
        [
            text_chunk(messageId="m1", metadata={"a": 1}),
            text_chunk(metadata={"usage": 2}),
            text_chunk(rawEvent={"p": 1}),
            text_chunk(),
            text_chunk(messageId="m2", metadata={"b": 1}, delta="x"),
        ]
    )
    assert out == [
        ev("TEXT_MESSAGE_START", messageId="m1", role="assistant", metadata={"a": 1}),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="", metadata={"usage": 2}),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="", rawEvent={"p": 1}),
        # an empty continuation makes nothing
        ev("TEXT_MESSAGE_END", messageId="m1"),  # the closing END carries no chunk metadata
        ev("TEXT_MESSAGE_START", messageId="m2", role="assistant", metadata={"b": 1}),
        ev("TEXT_MESSAGE_CONTENT", messageId="m2", delta="x", metadata={"b": 1}),
    ]


def test_tool_and_reasoning_chunks() -> None:
    out = expand_all(
        [
            tool_chunk(toolCallId="t1", toolCallName="f", parentMessageId="a1", delta="{"),
            tool_chunk(delta="}", toolCallName="f", parentMessageId="a1"),
            ev("REASONING_MESSAGE_CHUNK", messageId="r1", delta="hm"),
            ev("REASONING_MESSAGE_CHUNK", delta=""),
        ]
    )
    assert out == [
        ev("TOOL_CALL_START", toolCallId="t1", toolCallName="f", parentMessageId="a1"),
        ev("TOOL_CALL_ARGS", toolCallId="t1", delta="{"),
        ev("TOOL_CALL_ARGS", toolCallId="t1", delta="}"),
        ev("TOOL_CALL_END", toolCallId="t1"),
        ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
        ev("REASONING_MESSAGE_CONTENT", messageId="r1", delta="hm"),
        ev("REASONING_MESSAGE_CONTENT", messageId="r1", delta=""),  # empty delta does not close
    ]


def test_lanes_per_subagent() -> None:
    lanes = ChunkLanes()
    out = expand_all(
        [
            text_chunk(messageId="m1", subagentRunId="s1", delta="1"),
            text_chunk(messageId="m2", subagentRunId="s2", delta="2"),
            text_chunk(subagentRunId="s1", delta="tagged"),
            text_chunk(messageId="m2", delta="by id"),
            ev("SUBAGENT_FINISHED", subagentRunId="s1"),
            text_chunk(delta="sole open lane"),
            ev("TEXT_MESSAGE_START", messageId="p"),
        ],
        lanes,
    )
    assert out == [
        ev("TEXT_MESSAGE_START", messageId="m1", role="assistant", subagentRunId="s1"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="1", subagentRunId="s1"),
        ev("TEXT_MESSAGE_START", messageId="m2", role="assistant", subagentRunId="s2"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m2", delta="2", subagentRunId="s2"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="tagged", subagentRunId="s1"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m2", delta="by id", subagentRunId="s2"),
        ev("TEXT_MESSAGE_END", messageId="m1", subagentRunId="s1"),
        ev("SUBAGENT_FINISHED", subagentRunId="s1"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m2", delta="sole open lane", subagentRunId="s2"),
        ev("TEXT_MESSAGE_START", messageId="p"),  # the parent lane holds nothing to close
    ]
    assert list(lanes.lanes) == ["s2"]


@pytest.mark.parametrize(
    ("event", "closes"),
    [
        (ev("TEXT_MESSAGE_START", messageId="x"), ["m0"]),
        (
            ev("TOOL_CALL_RESULT", messageId="x", toolCallId="t", content="", subagentRunId="s1"),
            ["m1"],
        ),
        (ev("STATE_DELTA", delta=[]), ["m0"]),
        (ev("CUSTOM", name="c", value=1, subagentRunId="s1"), ["m1"]),
        (ev("RUN_FINISHED", threadId="t", runId="r"), ["m0", "m1"]),
        (ev("MESSAGES_SNAPSHOT", messages=[]), ["m0", "m1"]),
        (ev("SUBAGENT_ERROR", subagentRunId="s1", message="x"), ["m1"]),
        (ev("RAW", event={}), []),
        (ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="k", content={}), []),
        (ev("REASONING_ENCRYPTED_VALUE", subtype="message", entityId="m0", encryptedValue="v"), []),
        (ev("SUBAGENT_STARTED", subagentRunId="s1", name="n"), []),
    ],
)
def test_which_events_close_which_lanes(event: Event, closes: list[str]) -> None:
    lanes = ChunkLanes()
    expand_all(
        [
            text_chunk(messageId="m0", delta="p"),
            text_chunk(messageId="m1", subagentRunId="s1", delta="s"),
        ],
        lanes,
    )
    out = lanes.expand(copy.deepcopy(event))
    assert out[-1] == event
    assert [e["messageId"] for e in out[:-1]] == closes
    assert all(e["type"] == "TEXT_MESSAGE_END" for e in out[:-1])


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([text_chunk(delta="x")], "First TEXT_MESSAGE_CHUNK must have a messageId"),
        ([tool_chunk(toolCallName="n")], "First TOOL_CALL_CHUNK must have a toolCallId"),
        ([tool_chunk(toolCallId="t")], "First TOOL_CALL_CHUNK must have a toolCallName"),
        (
            [ev("REASONING_MESSAGE_CHUNK", delta="x")],
            "First REASONING_MESSAGE_CHUNK must have a messageId",
        ),
        (
            [text_chunk(messageId="m", delta="a"), text_chunk(role="user")],
            "Cannot continue text message 'm': chunk role 'user' does not match "
            "the open stream's role 'assistant'.",
        ),
        (
            [text_chunk(messageId="m", delta="a"), text_chunk(name="n")],
            "Cannot continue text message 'm': chunk name 'n' does not match the "
            "open stream's name (absent).",
        ),
        (
            [tool_chunk(toolCallId="t", toolCallName="a"), tool_chunk(toolCallName="b")],
            "Cannot continue tool call 't': chunk toolCallName 'b' does not match "
            "the open stream's toolCallName 'a'.",
        ),
        (
            [
                tool_chunk(toolCallId="t", toolCallName="a", parentMessageId="p"),
                tool_chunk(parentMessageId="q"),
            ],
            "Cannot continue tool call 't': chunk parentMessageId 'q' does not "
            "match the open stream's parentMessageId 'p'.",
        ),
        (
            [text_chunk(messageId="m", delta="a"), text_chunk(messageId="m", subagentRunId="s9")],
            "Cannot continue text message 'm': chunk subagentRunId 's9' does not "
            "match the open stream's subagent '(the parent agent)'.",
        ),
        (
            [
                tool_chunk(toolCallId="t1", toolCallName="a", subagentRunId="s1"),
                tool_chunk(toolCallId="t2", toolCallName="a", subagentRunId="s2"),
                tool_chunk(delta="?"),
            ],
            "Ambiguous TOOL_CALL_CHUNK: it carries neither a toolCallId nor a "
            "subagentRunId, but 2 lanes have an open tool call. "
            "Attribute the chunk to the subagent it belongs to.",
        ),
    ],
)
def test_chunk_errors_are_the_references(events: list[Event], message: str) -> None:
    lanes = ChunkLanes()
    for event in events[:-1]:
        lanes.expand(event)
    with pytest.raises(ChunkError) as failed:
        lanes.expand(events[-1])
    assert str(failed.value) == message


def test_lanes_survive_a_round_trip() -> None:
    lanes = ChunkLanes()
    expand_all(
        [
            text_chunk(messageId="m0", delta="p"),
            tool_chunk(toolCallId="t", toolCallName="n", subagentRunId="s1"),
        ],
        lanes,
    )
    restored = ChunkLanes.from_json(orjson.loads(orjson.dumps(lanes.to_json())))
    event = ev("RUN_ERROR", message="x")
    assert restored.expand(dict(event)) == lanes.expand(dict(event))
    assert restored.lanes == lanes.lanes == {}
