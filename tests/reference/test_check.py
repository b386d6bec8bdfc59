"""StreamCheck: the reference client's checks in its order, its reducer's failures included."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from recorder.reference.check import StreamCheck, verify_frames
from recorder.reference.compat import minted_id
from recorder.reference.inbound import NO_TYPE, NOT_JSON
from recorder.wire.jsontext import dump

RS = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
RF = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def delta(*ops: Any) -> dict[str, Any]:
    return {"type": "STATE_DELTA", "delta": list(ops)}


def messages(*violations: Any) -> list[tuple[int, str]]:
    return [(v.index, v.message) for v in violations]


def test_frames_that_are_no_events() -> None:
    found = verify_frames([b"{nope", b"[1]", b'{"type": ""}', orjson.dumps(RS)])
    assert messages(*found) == [(0, NOT_JSON), (1, NOT_JSON), (2, NO_TYPE)]


def test_enforcement_chunks_and_lifecycle_in_the_clients_order() -> None:
    check = StreamCheck()
    assert check.feed(RS) is None
    chunk = {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"}
    assert check.feed(chunk) is None  # a chunk pair is valid: it is expanded first
    bad = check.feed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 5})
    assert bad is not None and bad.message.startswith("Invalid TEXT_MESSAGE_CONTENT event")
    more = check.feed({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"})
    assert more is None  # the open chunk stream goes on
    late = check.feed({"type": "TOOL_CALL_END", "toolCallId": "ghost"})
    assert late is not None and "No active tool call found with ID 'ghost'" in late.message
    assert check.feed(RF) is None


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        ([delta({"op": "copy", "from": "/toString", "path": "/f"})], "function toString()"),
        ([delta({"op": "move", "from": "/hasOwnProperty", "path": "/h"})], "hasOwnProperty"),
        ([delta({"op": "copy", "from": "/constructor", "path": "/c"})], "function Object()"),
        (
            [delta({"op": "move", "from": "", "path": "/b"}), delta()],
            "Converting circular structure to JSON",
        ),
        (
            [
                delta(
                    {"op": "add", "path": "/x", "value": {}},
                    {"op": "move", "from": "", "path": "/x/y"},
                    {"op": "test", "path": "/nope", "value": 1},
                )
            ],
            "Converting circular structure to JSON",
        ),
    ],
)
def test_patches_on_which_the_clients_run_fails(events: list[Any], reason: str) -> None:
    found = verify_frames([RS, *events, RF])
    assert found, "the reference client fails this run; the check must say so"
    assert found[0].index == len(events) and found[0].type == "STATE_DELTA"
    assert found[0].message.startswith("Cannot apply STATE_DELTA: the reference client's run")
    assert reason in found[0].message


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "copy", "from": "/toString", "path": "/f"}, {"op": "remove", "path": "/f"}],
        [{"op": "move", "from": "", "path": "/b"}, {"op": "replace", "path": "", "value": {}}],
        [
            {"op": "copy", "from": "/valueOf", "path": "/f"},
            {"op": "test", "path": "/nope", "value": 1},
        ],
    ],
)
def test_patches_that_undo_or_discard_what_json_cannot_hold_pass(ops: list[Any]) -> None:
    assert (
        verify_frames([RS, delta(*ops), delta({"op": "add", "path": "/ok", "value": 1}), RF]) == []
    )


def test_a_cycle_left_at_the_end_is_no_failure_of_the_run() -> None:
    # The client holds the cyclic state: only its next patch would fail the run.
    assert verify_frames([RS, delta({"op": "move", "from": "", "path": "/b"}), RF]) == []
    again = [RS, delta({"op": "move", "from": "", "path": "/b"})]
    again += [{"type": "STATE_SNAPSHOT", "snapshot": {}}, delta(), RF]
    assert verify_frames(again) == []  # a snapshot replaced it first


def test_the_starting_state_decides_what_a_patch_does() -> None:
    patch = delta(
        {"op": "copy", "from": "/a/toString", "path": "/f"},
        {"op": "test", "path": "/k", "value": 1},
    )
    assert verify_frames([RS, patch, RF], state={"a": {}, "k": 2}) == []  # the test fails
    assert verify_frames([RS, patch, RF], state={"a": {}, "k": 1})  # the function stays


def test_minted_ids_never_meet_the_producers_ids() -> None:
    # The old minted ids (thinking-1, thinking-2) made this valid stream fail: the producer's
    # REASONING_START "thinking-1" was "already in progress".
    events = [
        RS,
        {"type": "REASONING_START", "messageId": "thinking-1"},
        {"type": "THINKING_START"},
        {"type": "THINKING_END"},
        {"type": "REASONING_END", "messageId": "thinking-1"},
        RF,
    ]
    assert verify_frames(events) == []


def test_an_id_the_stream_used_is_not_minted() -> None:
    events = [
        RS,
        {"type": "REASONING_START", "messageId": minted_id(1)},
        {"type": "THINKING_START"},
    ]
    events += [{"type": "THINKING_END"}, {"type": "REASONING_END", "messageId": minted_id(1)}, RF]
    assert verify_frames(events) == []


def test_half_a_surrogate_pair_in_an_id_is_read_and_reported_in_writable_text() -> None:
    frame = b'{"type": "TEXT_MESSAGE_END", "messageId": "m\\ud83d"}'
    (found,) = verify_frames([orjson.dumps(RS), frame])
    assert found.message == (
        "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID "
        "'m\\ud83d'. A 'TEXT_MESSAGE_START' event must be sent first."
    )
    assert dump({"message": found.message})  # writable, as the store needs it


def test_literals_orjson_refuses_pass_as_they_do_in_the_client() -> None:
    frames = [
        orjson.dumps(RS),
        b'{"type": "STATE_SNAPSHOT", "snapshot": {"n": 1e400, "s": "\\udc00"}}',
        b'{"type": "TEXT_MESSAGE_START", "messageId": "m"}',
        b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "\\ud83d"}',
        b'{"type": "TEXT_MESSAGE_END", "messageId": "m", "timestamp": 9007199254740991}',
        orjson.dumps(RF),
    ]
    assert verify_frames(frames) == []


@pytest.mark.parametrize("ordinary", [1, 63, 64, 65, 200])
def test_ordinary_patches_that_wait_still_decide_a_later_one(ordinary: int) -> None:
    # The check leaves ordinary patches waiting until one reads a prototype member; that
    # one must see every patch before it, however many waited, and only those that applied.
    counting = [delta({"op": "add", "path": f"/n{i}", "value": i}) for i in range(ordinary)]
    refused = delta(
        {"op": "add", "path": "/k", "value": 1}, {"op": "test", "path": "/n0", "value": -1}
    )
    last = f"/n{ordinary - 1}"
    survives = delta(
        {"op": "copy", "from": "/toString", "path": "/f"},
        {"op": "test", "path": last, "value": ordinary - 1},
    )
    undone = delta(
        {"op": "copy", "from": "/toString", "path": "/f"},
        {"op": "test", "path": "/k", "value": 1},  # /k never applied: this patch fails
    )
    assert verify_frames([RS, *counting, refused, undone, RF]) == []
    found = verify_frames([RS, *counting, refused, survives, RF])
    assert [v.index for v in found] == [ordinary + 2]


def content(message: str, text: Any = "x", **extra: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": text, **extra}


def chunk(message: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CHUNK", "messageId": message, "delta": "a"}


START_M = {"type": "TEXT_MESSAGE_START", "messageId": "m"}
END_M = {"type": "TEXT_MESSAGE_END", "messageId": "m"}


@pytest.mark.parametrize(
    "events",
    [
        # the message ends, then a delta of it comes
        [START_M, content("m"), content("m"), END_M, content("m")],
        # deltas of two messages, interleaved; the second was never started
        [{"type": "TEXT_MESSAGE_START", "messageId": "a"}, content("a"), content("b")],
        # a delta that is not plain (a bad value, an extra field) between plain ones
        [START_M, content("m"), content("m", 5), content("m", subagentRunId="s"), content("m")],
        # a chunk stream open: deltas go through its lanes
        [chunk("c"), content("c"), content("c"), chunk("d")],
        # the run finishes, then deltas come
        [START_M, content("m"), RF, content("m")],
    ],
)
def test_deltas_given_parsed_are_checked_as_their_bytes_are(events: list[Any]) -> None:
    """The proxy gives the check each frame parsed already, and a run of plain text deltas
    of one message takes a shorter way there: the verdicts are those of the bytes."""
    frames = [RS, *events, RF]
    as_bytes = verify_frames([orjson.dumps(e) for e in frames])
    assert as_bytes, "each stream breaks a rule somewhere"
    assert verify_frames([dict(e) for e in frames]) == as_bytes
