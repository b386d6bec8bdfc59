"""The lifecycle rules of the reference ``verifyEvents`` (AG-UI 1.0), one table row per rule.

Each row lists every violation our Verifier reports (it goes on after the first one); the
first of them is the reference client's error, word for word. ``test_verify_interop.py``
replays the same rows through the real @ag-ui/client to prove that.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recorder.reference.verify import Verifier, Violation


def verify(events: Any) -> list[Violation]:
    """Every violation in a sequence of events; the first is the reference's error."""
    verifier = Verifier()
    return [v for v in map(verifier.feed, events) if v is not None]


Event = dict[str, Any]


def ev(kind: str, **fields: Any) -> Event:
    return {"type": kind, **fields}


S1: dict[str, Any] = {"subagentRunId": "s1"}
S2: dict[str, Any] = {"subagentRunId": "s2"}
NULL_TAG: dict[str, Any] = {"subagentRunId": None}

RS = ev("RUN_STARTED", threadId="t1", runId="r1")
RS2 = ev("RUN_STARTED", threadId="t1", runId="r2")
RF = ev("RUN_FINISHED", threadId="t1", runId="r1")
RE = ev("RUN_ERROR", message="boom")


def tms(mid: Any, **kw: Any) -> Event:
    return ev("TEXT_MESSAGE_START", messageId=mid, role="assistant", **kw)


def tmc(mid: Any, **kw: Any) -> Event:
    return ev("TEXT_MESSAGE_CONTENT", messageId=mid, delta="hi", **kw)


def tme(mid: Any, **kw: Any) -> Event:
    return ev("TEXT_MESSAGE_END", messageId=mid, **kw)


def tcs(tid: Any, **kw: Any) -> Event:
    return ev("TOOL_CALL_START", toolCallId=tid, toolCallName="search", **kw)


def tca(tid: Any, **kw: Any) -> Event:
    return ev("TOOL_CALL_ARGS", toolCallId=tid, delta="{}", **kw)


def tce(tid: Any, **kw: Any) -> Event:
    return ev("TOOL_CALL_END", toolCallId=tid, **kw)


def result(mid: str, tid: str, **kw: Any) -> Event:
    return ev("TOOL_CALL_RESULT", messageId=mid, toolCallId=tid, content="42", **kw)


def step_start(name: Any, **kw: Any) -> Event:
    return ev("STEP_STARTED", stepName=name, **kw)


def step_end(name: Any, **kw: Any) -> Event:
    return ev("STEP_FINISHED", stepName=name, **kw)


def span_start(mid: Any, **kw: Any) -> Event:
    return ev("REASONING_START", messageId=mid, **kw)


def span_end(mid: Any, **kw: Any) -> Event:
    return ev("REASONING_END", messageId=mid, **kw)


def rms(mid: Any, **kw: Any) -> Event:
    return ev("REASONING_MESSAGE_START", messageId=mid, role="reasoning", **kw)


def rmc(mid: Any, **kw: Any) -> Event:
    return ev("REASONING_MESSAGE_CONTENT", messageId=mid, delta="hmm", **kw)


def rme(mid: Any, **kw: Any) -> Event:
    return ev("REASONING_MESSAGE_END", messageId=mid, **kw)


def encrypted(subtype: str, entity: str, **kw: Any) -> Event:
    return ev(
        "REASONING_ENCRYPTED_VALUE", subtype=subtype, entityId=entity, encryptedValue="x", **kw
    )


def sub_start(sid: Any, **kw: Any) -> Event:
    return ev("SUBAGENT_STARTED", subagentRunId=sid, name="helper", **kw)


def sub_end(sid: Any, **kw: Any) -> Event:
    return ev("SUBAGENT_FINISHED", subagentRunId=sid, **kw)


def sub_error(sid: Any, **kw: Any) -> Event:
    return ev("SUBAGENT_ERROR", subagentRunId=sid, message="failed", **kw)


def activity(mid: str, **kw: Any) -> Event:
    return ev("ACTIVITY_SNAPSHOT", messageId=mid, activityType="plan", content={}, **kw)


def activity_delta(mid: str, **kw: Any) -> Event:
    return ev("ACTIVITY_DELTA", messageId=mid, activityType="plan", patch=[], **kw)


def snapshot(*messages: dict[str, Any]) -> Event:
    return ev("MESSAGES_SNAPSHOT", messages=list(messages))


def started_with(*messages: dict[str, Any]) -> Event:
    run_input = {"threadId": "t1", "runId": "r1", "messages": list(messages)}
    return ev("RUN_STARTED", threadId="t1", runId="r1", input=run_input)


def errored(kind: str) -> str:
    return (
        f"Cannot send event type '{kind}': The run has already errored with 'RUN_ERROR'. "
        "No further events can be sent."
    )


def finished(kind: str) -> str:
    return (
        f"Cannot send event type '{kind}': The run has already finished with 'RUN_FINISHED'. "
        "Start a new run with 'RUN_STARTED'."
    )


FIRST = "First event must be 'RUN_STARTED'"
ACTIVE = (
    "Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished "
    "with 'RUN_FINISHED' before starting a new run."
)
OMIT = "The field is optional — omit it entirely."


def mismatch(kind: str, tag: str, label: str, entity: str, owner: str) -> str:
    return (
        f"Cannot send '{kind}': subagentRunId '{tag}' does not match the {label} '{entity}' "
        f"opener's subagent '{owner}'."
    )


PARENT = "(the parent agent)"

# (name, events, every violation as (index, message)). Shared with test_verify_interop.py.
CASES: list[tuple[str, list[Event], list[tuple[int, str]]]] = [
    # -- valid streams ------------------------------------------------------------------------
    ("empty stream", [], []),
    ("minimal run", [RS, RF], []),
    (
        "full run",
        [
            RS,
            step_start("plan"),
            span_start("r1"),
            rms("r1"),
            rmc("r1"),
            rme("r1"),
            span_end("r1"),
            encrypted("message", "r1"),
            tms("m1"),
            tmc("m1"),
            tcs("tc1", parentMessageId="m1"),
            tca("tc1"),
            tme("m1"),
            tce("tc1"),
            result("tm1", "tc1"),
            ev("STATE_SNAPSHOT", snapshot={"a": 1}),
            ev("STATE_DELTA", delta=[{"op": "add", "path": "/b", "value": 2}]),
            snapshot({"id": "u1", "role": "user", "content": "hi"}),
            activity("act1"),
            activity_delta("act1"),
            ev("CUSTOM", name="x", value=1),
            ev("RAW", event={"any": "thing"}),
            step_end("plan"),
            RF,
        ],
        [],
    ),
    ("RUN_ERROR may be the first event", [RE], []),
    (
        "open entities do not block RUN_ERROR",
        [RS, tms("m1"), tcs("tc1"), step_start("s"), span_start("r"), sub_start("a"), RE],
        [],
    ),
    ("sequential runs in one stream", [RS, RF, RS2, RF, RS, RF], []),
    ("RUN_ERROR then RUN_STARTED starts a new run", [RS, RE, RS2, tms("m1"), tme("m1"), RF], []),
    ("RUN_FINISHED then RUN_ERROR", [RS, RF, RE], []),
    ("RUN_FINISHED, RUN_ERROR, then a new run", [RS, RF, RE, RS2, RF], []),
    ("RUN_ERROR first, then a run", [RE, RS, RF], []),
    (
        "ids are reusable in the next run",
        [RS, tms("m1"), tme("m1"), tcs("t"), tce("t"), RF, RS2, tms("m1"), tme("m1"), RF],
        [],
    ),
    (
        "a new run forgets owners and subagents",
        [
            RS,
            tms("m1", **S1),
            tme("m1"),
            sub_start("a"),
            sub_end("a"),
            RF,
            RS2,
            tms("m1", **S2),
            tme("m1", **S2),
            sub_start("a"),
            sub_end("a"),
            RF,
        ],
        [],
    ),
    (
        "a text message id may be reopened after its END",
        [RS, tms("m1"), tme("m1"), tms("m1"), tme("m1"), RF],
        [],
    ),
    (
        "chunks and unknown types pass the default branch",
        [
            RS,
            ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
            ev("TOOL_CALL_CHUNK", toolCallId="t1", delta="{"),
            ev("REASONING_MESSAGE_CHUNK", delta="x"),
            ev("SOMETHING_NEW", value=1),
            RF,
        ],
        [],
    ),
    ("TOOL_CALL_RESULT for an unknown tool call", [RS, result("tm1", "nope"), RF], []),
    (
        "a reasoning span and message may share an id",
        [RS, span_start("r1"), rms("r1"), rmc("r1"), rme("r1"), span_end("r1"), RF],
        [],
    ),
    ("reasoning content needs no span", [RS, rms("r1"), rmc("r1"), rme("r1"), RF], []),
    # -- run lifecycle ------------------------------------------------------------------------
    ("first event must be RUN_STARTED", [tms("m1"), RS, RF], [(0, FIRST)]),
    ("RUN_FINISHED as the first event", [RF], [(0, FIRST)]),
    ("RUN_STARTED while a run is active", [RS, RS2, RF], [(1, ACTIVE)]),
    (
        "nothing but RUN_STARTED after RUN_ERROR",
        [RS, RE, tms("m1")],
        [(2, errored("TEXT_MESSAGE_START"))],
    ),
    ("RUN_ERROR after RUN_ERROR", [RS, RE, RE], [(2, errored("RUN_ERROR"))]),
    ("RUN_FINISHED after RUN_ERROR", [RS, RE, RF], [(2, errored("RUN_FINISHED"))]),
    ("nothing but RUN_STARTED after RUN_ERROR (first)", [RE, RF], [(1, errored("RUN_FINISHED"))]),
    ("events after RUN_FINISHED", [RS, RF, tms("m1")], [(2, finished("TEXT_MESSAGE_START"))]),
    ("RUN_FINISHED twice", [RS, RF, RF], [(2, finished("RUN_FINISHED"))]),
    # -- text messages ------------------------------------------------------------------------
    (
        "TEXT_MESSAGE_START for an open id",
        [RS, tms("m1"), tms("m1"), tme("m1"), RF],
        [
            (
                2,
                "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID 'm1' is already "
                "in progress. Complete it with 'TEXT_MESSAGE_END' first.",
            )
        ],
    ),
    (
        "TEXT_MESSAGE_CONTENT without a start",
        [RS, tmc("m1"), RF],
        [
            (
                1,
                "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID "
                "'m1'. Start a text message with 'TEXT_MESSAGE_START' first.",
            )
        ],
    ),
    (
        "TEXT_MESSAGE_CONTENT after the end",
        [RS, tms("m1"), tme("m1"), tmc("m1"), RF],
        [
            (
                3,
                "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID "
                "'m1'. Start a text message with 'TEXT_MESSAGE_START' first.",
            )
        ],
    ),
    (
        "TEXT_MESSAGE_END without a start",
        [RS, tme("m1"), RF],
        [
            (
                1,
                "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID "
                "'m1'. A 'TEXT_MESSAGE_START' event must be sent first.",
            )
        ],
    ),
    # -- tool calls ---------------------------------------------------------------------------
    (
        "TOOL_CALL_START for an open id",
        [RS, tcs("tc1"), tcs("tc1"), tce("tc1"), RF],
        [
            (
                2,
                "Cannot send 'TOOL_CALL_START' event: A tool call with ID 'tc1' is already in "
                "progress. Complete it with 'TOOL_CALL_END' first.",
            )
        ],
    ),
    (
        "TOOL_CALL_ARGS without a start",
        [RS, tca("tc1"), RF],
        [
            (
                1,
                "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID 'tc1'. "
                "Start a tool call with 'TOOL_CALL_START' first.",
            )
        ],
    ),
    (
        "TOOL_CALL_END without a start",
        [RS, tce("tc1"), RF],
        [
            (
                1,
                "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID 'tc1'. "
                "A 'TOOL_CALL_START' event must be sent first.",
            )
        ],
    ),
    # -- steps --------------------------------------------------------------------------------
    (
        "STEP_STARTED for an active step",
        [RS, step_start("plan"), step_start("plan"), step_end("plan"), RF],
        [(2, "Step \"plan\" is already active for 'STEP_STARTED'")],
    ),
    (
        "STEP_FINISHED for a step never started",
        [RS, step_end("plan"), RF],
        [(1, "Cannot send 'STEP_FINISHED' for step \"plan\" that was not started")],
    ),
    (
        "STEP_FINISHED twice",
        [RS, step_start("plan"), step_end("plan"), step_end("plan"), RF],
        [(3, "Cannot send 'STEP_FINISHED' for step \"plan\" that was not started")],
    ),
    # -- RUN_FINISHED with open entities, in the reference's order ----------------------------
    (
        "RUN_FINISHED with active steps, listed in start order",
        [RS, step_start("b"), step_start("a"), RF],
        [(3, "Cannot send 'RUN_FINISHED' while steps are still active: b, a")],
    ),
    (
        "steps are reported before everything else",
        [RS, sub_start("x"), tcs("t"), span_start("s"), rms("r"), tms("m"), step_start("p"), RF],
        [(7, "Cannot send 'RUN_FINISHED' while steps are still active: p")],
    ),
    (
        "then text messages",
        [RS, sub_start("x"), tcs("t"), span_start("s"), rms("r"), tms("m2"), tms("m1"), RF],
        [(7, "Cannot send 'RUN_FINISHED' while text messages are still active: m2, m1")],
    ),
    (
        "then reasoning messages",
        [RS, sub_start("x"), tcs("t"), span_start("s"), rms("r"), RF],
        [(5, "Cannot send 'RUN_FINISHED' while reasoning messages are still active: r")],
    ),
    (
        "then reasoning spans",
        [RS, sub_start("x"), tcs("t"), span_start("s"), RF],
        [(4, "Cannot send 'RUN_FINISHED' while reasoning spans are still active: s")],
    ),
    (
        "then tool calls",
        [RS, sub_start("x"), tcs("t2"), tcs("t1"), RF],
        [(4, "Cannot send 'RUN_FINISHED' while tool calls are still active: t2, t1")],
    ),
    (
        "then subagents",
        [RS, sub_start("x"), sub_start("y"), RF],
        [(3, "Cannot send 'RUN_FINISHED' while subagents are still active: x, y")],
    ),
    (
        "a closed and reopened message moves to the end of the list",
        [RS, tms("a"), tms("b"), tme("a"), tms("a"), RF],
        [(5, "Cannot send 'RUN_FINISHED' while text messages are still active: b, a")],
    ),
    # -- reasoning ----------------------------------------------------------------------------
    (
        "REASONING_START for an open span",
        [RS, span_start("r1"), span_start("r1"), span_end("r1"), RF],
        [
            (
                2,
                "Cannot send 'REASONING_START' event: A reasoning span with ID 'r1' is already "
                "in progress. Complete it with 'REASONING_END' first.",
            )
        ],
    ),
    (
        "REASONING_MESSAGE_START for an open message",
        [RS, rms("r1"), rms("r1"), rme("r1"), RF],
        [
            (
                2,
                "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID 'r1' "
                "is already in progress. Complete it with 'REASONING_MESSAGE_END' first.",
            )
        ],
    ),
    (
        "REASONING_MESSAGE_CONTENT inside a span but no message",
        [RS, span_start("r1"), rmc("r1"), span_end("r1"), RF],
        [
            (
                2,
                "Cannot send 'REASONING_MESSAGE_CONTENT' event: No active reasoning message "
                "found with ID 'r1'. Start a reasoning message with 'REASONING_MESSAGE_START' "
                "first.",
            )
        ],
    ),
    (
        "REASONING_MESSAGE_END without a start",
        [RS, rme("r1"), RF],
        [
            (
                1,
                "Cannot send 'REASONING_MESSAGE_END' event: No active reasoning message found "
                "with ID 'r1'. Start a reasoning message with 'REASONING_MESSAGE_START' first.",
            )
        ],
    ),
    (
        "REASONING_END for an id open only as a message",
        [RS, rms("r1"), span_end("r1"), rme("r1"), RF],
        [
            (
                2,
                "Cannot send 'REASONING_END' event: No active reasoning span found with ID 'r1'. "
                "A 'REASONING_START' event must be sent first.",
            )
        ],
    ),
    # -- subagents -----------------------------------------------------------------------------
    (
        "nested subagents",
        [
            RS,
            sub_start("a"),
            sub_start("b", parentSubagentRunId="a"),
            sub_end("b"),
            sub_error("a"),
            RF,
        ],
        [],
    ),
    (
        "a finished subagent may still parent a new one",
        [
            RS,
            sub_start("a"),
            sub_end("a"),
            sub_start("b", parentSubagentRunId="a"),
            sub_end("b"),
            RF,
        ],
        [],
    ),
    (
        "subagent outcomes",
        [
            RS,
            sub_start("a"),
            sub_end("a", outcome={"type": "suspended", "interruptIds": ["i1"]}),
            sub_start("b"),
            sub_end("b", outcome={"type": "success"}),
            RF,
        ],
        [],
    ),
    (
        "SUBAGENT_STARTED without a subagentRunId",
        [RS, ev("SUBAGENT_STARTED", name="helper"), RF],
        [(1, "Cannot send 'SUBAGENT_STARTED' without a 'subagentRunId'.")],
    ),
    (
        "SUBAGENT_STARTED with a numeric subagentRunId",
        [RS, sub_start(7), RF],
        [(1, "Cannot send 'SUBAGENT_STARTED' without a 'subagentRunId'.")],
    ),
    (
        "SUBAGENT_STARTED without a name",
        [RS, ev("SUBAGENT_STARTED", subagentRunId="a"), RF],
        [(1, "Cannot send 'SUBAGENT_STARTED' without a 'name'.")],
    ),
    (
        "SUBAGENT_STARTED for an active subagent",
        [RS, sub_start("a"), sub_start("a"), sub_end("a"), RF],
        [
            (
                2,
                "Cannot send 'SUBAGENT_STARTED': subagent 'a' is already active. Finish it with "
                "'SUBAGENT_FINISHED' first.",
            )
        ],
    ),
    (
        "SUBAGENT_STARTED for a finished subagent",
        [RS, sub_start("a"), sub_error("a"), sub_start("a"), RF],
        [
            (
                3,
                "Cannot send 'SUBAGENT_STARTED': subagent 'a' has already finished in this run. "
                "Subagent IDs are per-invocation and cannot be reused.",
            )
        ],
    ),
    (
        "SUBAGENT_STARTED under an unknown parent",
        [RS, sub_start("b", parentSubagentRunId="a"), RF],
        [
            (
                1,
                "Cannot send 'SUBAGENT_STARTED': parentSubagentRunId 'a' has not been started in "
                "this run.",
            )
        ],
    ),
    (
        "SUBAGENT_FINISHED without a subagentRunId",
        [RS, ev("SUBAGENT_FINISHED"), RF],
        [(1, "Cannot send 'SUBAGENT_FINISHED' without a 'subagentRunId'.")],
    ),
    (
        "SUBAGENT_ERROR without a message",
        [RS, sub_start("a"), ev("SUBAGENT_ERROR", subagentRunId="a"), sub_end("a"), RF],
        [(2, "Cannot send 'SUBAGENT_ERROR' without a 'message'.")],
    ),
    (
        "SUBAGENT_FINISHED for an unknown subagent",
        [RS, sub_end("a"), RF],
        [
            (
                1,
                "Cannot send 'SUBAGENT_FINISHED': no active subagent found with ID 'a'. A "
                "'SUBAGENT_STARTED' event must be sent first.",
            )
        ],
    ),
    (
        "SUBAGENT_ERROR for a closed subagent",
        [RS, sub_start("a"), sub_end("a"), sub_error("a"), RF],
        [
            (
                3,
                "Cannot send 'SUBAGENT_ERROR': no active subagent found with ID 'a'. A "
                "'SUBAGENT_STARTED' event must be sent first.",
            )
        ],
    ),
    (
        "SUBAGENT_FINISHED with an unknown outcome type",
        [RS, sub_start("a"), sub_end("a", outcome={"type": "failed"}), sub_end("a"), RF],
        [
            (
                2,
                "Cannot send 'SUBAGENT_FINISHED' with outcome type 'failed'. The outcome is "
                'either { type: "success" } or { type: "suspended" }.',
            )
        ],
    ),
    (
        "SUBAGENT_FINISHED with an outcome that is not an object",
        [RS, sub_start("a"), sub_end("a", outcome="success"), sub_end("a"), RF],
        [
            (
                2,
                "Cannot send 'SUBAGENT_FINISHED' with outcome type 'undefined'. The outcome is "
                'either { type: "success" } or { type: "suspended" }.',
            )
        ],
    ),
    (
        "the outcome is checked on SUBAGENT_STARTED too",
        [RS, sub_start("a", outcome={"type": "success"}), sub_start("b", outcome={"type": 3}), RF],
        [
            (
                2,
                "Cannot send 'SUBAGENT_STARTED' with outcome type '3'. The outcome is either "
                '{ type: "success" } or { type: "suspended" }.',
            ),
            (3, "Cannot send 'RUN_FINISHED' while subagents are still active: a"),
        ],
    ),
    (
        "SUBAGENT_FINISHED with a non-string interrupt id",
        [
            RS,
            sub_start("a"),
            sub_end("a", outcome={"type": "suspended", "interruptIds": ["i", 1]}),
            sub_end("a"),
            RF,
        ],
        [
            (
                2,
                "Cannot send 'SUBAGENT_FINISHED' with a non-string entry in "
                "'outcome.interruptIds'. Interrupt ids are strings.",
            )
        ],
    ),
    # -- no nulls ------------------------------------------------------------------------------
    (
        "subagentRunId: null on any event",
        [RS, tms("m1", **NULL_TAG), tms("m1"), tme("m1"), RF],
        [(1, f"Cannot send 'TEXT_MESSAGE_START' with 'subagentRunId: null'. {OMIT}")],
    ),
    (
        "subagentRunId: null on RUN_STARTED",
        [ev("RUN_STARTED", threadId="t1", runId="r1", **NULL_TAG), RS, RF],
        [(0, f"Cannot send 'RUN_STARTED' with 'subagentRunId: null'. {OMIT}")],
    ),
    (
        "subagentRunId: null on SUBAGENT_FINISHED",
        [RS, sub_start("a"), ev("SUBAGENT_FINISHED", **NULL_TAG), sub_end("a"), RF],
        [(2, f"Cannot send 'SUBAGENT_FINISHED' with 'subagentRunId: null'. {OMIT}")],
    ),
    (
        "description: null on SUBAGENT_STARTED",
        [RS, sub_start("a", description=None), RF],
        [(1, f"Cannot send 'SUBAGENT_STARTED' with 'description: null'. {OMIT}")],
    ),
    (
        "parentSubagentRunId: null on SUBAGENT_STARTED",
        [RS, sub_start("a", parentSubagentRunId=None), RF],
        [(1, f"Cannot send 'SUBAGENT_STARTED' with 'parentSubagentRunId: null'. {OMIT}")],
    ),
    (
        "parentToolCallId: null, reported before parentMessageId: null",
        [RS, sub_start("a", parentMessageId=None, parentToolCallId=None), RF],
        [(1, f"Cannot send 'SUBAGENT_STARTED' with 'parentToolCallId: null'. {OMIT}")],
    ),
    (
        "parentMessageId: null on SUBAGENT_STARTED",
        [RS, sub_start("a", parentMessageId=None), RF],
        [(1, f"Cannot send 'SUBAGENT_STARTED' with 'parentMessageId: null'. {OMIT}")],
    ),
    (
        "outcome: null on SUBAGENT_FINISHED",
        [RS, sub_start("a"), sub_end("a", outcome=None), sub_end("a"), RF],
        [(2, f"Cannot send 'SUBAGENT_FINISHED' with 'outcome: null'. {OMIT}")],
    ),
    (
        "outcome.interruptIds: null on SUBAGENT_FINISHED",
        [
            RS,
            sub_start("a"),
            sub_end("a", outcome={"type": "suspended", "interruptIds": None}),
            sub_end("a"),
            RF,
        ],
        [(2, f"Cannot send 'SUBAGENT_FINISHED' with 'outcome.interruptIds: null'. {OMIT}")],
    ),
    (
        "code: null on SUBAGENT_ERROR",
        [RS, sub_start("a"), sub_error("a", code=None), sub_end("a"), RF],
        [(2, f"Cannot send 'SUBAGENT_ERROR' with 'code: null'. {OMIT}")],
    ),
    (
        "subagentRunId: null inside a RUN_FINISHED interrupt",
        [
            RS,
            ev(
                "RUN_FINISHED",
                threadId="t1",
                runId="r1",
                outcome={
                    "type": "interrupt",
                    "interrupts": [
                        {"id": "i1", "reason": "confirmation", "subagentRunId": "s1"},
                        {"id": "i2", "reason": "confirmation", "subagentRunId": None},
                    ],
                },
            ),
            RF,
        ],
        [
            (
                1,
                "Cannot send 'RUN_FINISHED' with an interrupt (id 'i2') carrying "
                f"'subagentRunId: null'. {OMIT}",
            )
        ],
    ),
    (
        "subagentRunId: null on a MESSAGES_SNAPSHOT message",
        [RS, snapshot({"id": "u1", "role": "user", "content": "x", "subagentRunId": None}), RF],
        [(1, f"Cannot send a message (id 'u1') with 'subagentRunId: null'. {OMIT}")],
    ),
    (
        "subagentRunId: null on a RUN_STARTED input message",
        [started_with({"id": "u1", "role": "user", "content": "x", "subagentRunId": None}), RS, RF],
        [(0, f"Cannot send a message (id 'u1') with 'subagentRunId: null'. {OMIT}")],
    ),
    (
        "a null tag on a message without a string id is not looked at",
        [RS, snapshot({"id": 5, "role": "user", "content": "x", "subagentRunId": None}), RF],
        [],
    ),
    # -- ownership -----------------------------------------------------------------------------
    (
        "untagged continuations agree with any owner",
        [RS, tms("m1", **S1), tmc("m1"), tme("m1"), tcs("t", **S2), tca("t"), tce("t"), RF],
        [],
    ),
    (
        "a tagged continuation of another subagent's message",
        [RS, tms("m1", **S1), tmc("m1", **S2), tme("m1", **S1), RF],
        [(2, mismatch("TEXT_MESSAGE_CONTENT", "s2", "message", "m1", "s1"))],
    ),
    (
        "a tagged end of a parent-owned message",
        [RS, tms("m1"), tme("m1", **S1), tme("m1"), RF],
        [(2, mismatch("TEXT_MESSAGE_END", "s1", "message", "m1", PARENT))],
    ),
    (
        "a reopen under another owner",
        [RS, tms("m1", **S1), tme("m1"), tms("m1", **S2), RF],
        [(3, mismatch("TEXT_MESSAGE_START", "s2", "message", "m1", "s1"))],
    ),
    (
        "an untagged reopen keeps the first owner",
        [RS, tms("m1", **S1), tme("m1"), tms("m1"), tmc("m1", **S2), tme("m1"), RF],
        [(4, mismatch("TEXT_MESSAGE_CONTENT", "s2", "message", "m1", "s1"))],
    ),
    (
        "tool-call args from another subagent",
        [RS, tcs("tc1", **S1), tca("tc1", **S2), tce("tc1"), RF],
        [(2, mismatch("TOOL_CALL_ARGS", "s2", "tool call", "tc1", "s1"))],
    ),
    (
        "a tool call tagged unlike its parent message",
        [RS, tms("m1", **S1), tcs("tc1", parentMessageId="m1", **S2), tme("m1"), RF],
        [
            (
                2,
                "Cannot send 'TOOL_CALL_START': subagentRunId 's2' does not match its parent "
                "message 'm1' owner 's1'. A tool call belongs to the message that carries it.",
            )
        ],
    ),
    (
        "an untagged tool call inherits its parent message's owner",
        [RS, tms("m1", **S1), tme("m1"), tcs("tc1", parentMessageId="m1"), tce("tc1", **S2), RF],
        [
            (4, mismatch("TOOL_CALL_END", "s2", "tool call", "tc1", "s1")),
            (5, "Cannot send 'RUN_FINISHED' while tool calls are still active: tc1"),
        ],
    ),
    (
        "a tool call reopened under a parent message with another owner",
        [
            RS,
            tms("m1", **S1),
            tme("m1"),
            tms("m2"),
            tme("m2"),
            tcs("tc1", parentMessageId="m1"),
            tce("tc1"),
            tcs("tc1", parentMessageId="m2"),
            RF,
        ],
        [
            (
                7,
                "Cannot send 'TOOL_CALL_START': tool call 'tc1' is owned by 's1' but its parent "
                "message 'm2' is owned by '(the parent agent)'. A tool call belongs to the "
                "message that carries it.",
            )
        ],
    ),
    (
        "owners are per entity kind",
        [
            RS,
            tms("x", **S1),
            tme("x"),
            tcs("x", **S2),
            tce("x", **S2),
            encrypted("tool-call", "x", **S2),
            RF,
        ],
        [],
    ),
    (
        "a MESSAGES_SNAPSHOT seeds message and tool-call owners",
        [
            RS,
            snapshot(
                {
                    "id": "a1",
                    "role": "assistant",
                    "subagentRunId": "s1",
                    "toolCalls": [
                        {
                            "id": "tc1",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        }
                    ],
                }
            ),
            tcs("tc1", **S2),
            tms("a1", **S2),
            RF,
        ],
        [
            (2, mismatch("TOOL_CALL_START", "s2", "tool call", "tc1", "s1")),
            (3, mismatch("TEXT_MESSAGE_START", "s2", "message", "a1", "s1")),
        ],
    ),
    (
        "a MESSAGES_SNAPSHOT replaces recorded owners",
        [
            RS,
            tms("m1", **S1),
            tme("m1"),
            snapshot({"id": "m1", "role": "assistant"}),
            tms("m1", **S1),
            RF,
        ],
        [(4, mismatch("TEXT_MESSAGE_START", "s1", "message", "m1", PARENT))],
    ),
    (
        "in a snapshot the last duplicate wins",
        [
            RS,
            snapshot(
                {"id": "m1", "role": "user", "content": "", "subagentRunId": "s1"},
                {"id": "m1", "role": "user", "content": "", "subagentRunId": "s2"},
            ),
            tms("m1", **S1),
            RF,
        ],
        [(2, mismatch("TEXT_MESSAGE_START", "s1", "message", "m1", "s2"))],
    ),
    (
        "in a RUN_STARTED input the first duplicate wins",
        [
            started_with(
                {"id": "m1", "role": "user", "content": "", "subagentRunId": "s1"},
                {"id": "m1", "role": "user", "content": "", "subagentRunId": "s2"},
            ),
            tms("m1", **S2),
            RF,
        ],
        [(1, mismatch("TEXT_MESSAGE_START", "s2", "message", "m1", "s1"))],
    ),
    (
        "reasoning history seeds reasoning owners",
        [
            started_with({"id": "r1", "role": "reasoning", "content": "", "subagentRunId": "s1"}),
            rms("r1", **S2),
            RF,
        ],
        [(1, mismatch("REASONING_MESSAGE_START", "s2", "reasoning message", "r1", "s1"))],
    ),
    (
        "activity history seeds activity owners",
        [
            RS,
            snapshot(
                {
                    "id": "a1",
                    "role": "activity",
                    "activityType": "plan",
                    "content": {},
                    "subagentRunId": "s1",
                }
            ),
            activity("a1", replace=False, **S2),
            activity_delta("a1", **S2),
            RF,
        ],
        [(3, mismatch("ACTIVITY_DELTA", "s2", "activity", "a1", "s1"))],
    ),
    (
        "a replacing activity snapshot re-owns the activity",
        [
            RS,
            activity("a1", **S1),
            activity("a1", **S2),
            activity_delta("a1", **S2),
            activity_delta("a1", **S1),
            RF,
        ],
        [(4, mismatch("ACTIVITY_DELTA", "s1", "activity", "a1", "s2"))],
    ),
    (
        "a TOOL_CALL_RESULT owns the tool message it mints, newest first",
        [RS, result("tm1", "tc1", **S1), result("tm1", "tc1"), tms("tm1", **S2), RF],
        [(3, mismatch("TEXT_MESSAGE_START", "s2", "message", "tm1", PARENT))],
    ),
    (
        "an encrypted value on a closed tool call is checked against its owner",
        [RS, tcs("tc1", **S1), tce("tc1"), encrypted("tool-call", "tc1", **S2), RF],
        [(3, mismatch("REASONING_ENCRYPTED_VALUE", "s2", "tool call", "tc1", "s1"))],
    ),
    (
        "an encrypted message value reaches reasoning owners",
        [RS, rms("r1", **S1), rme("r1"), encrypted("message", "r1", **S2), RF],
        [(3, mismatch("REASONING_ENCRYPTED_VALUE", "s2", "message", "r1", "s1"))],
    ),
    (
        "a reasoning span and its message share one owner",
        [RS, span_start("r1", **S1), rms("r1", **S2), span_end("r1"), RF],
        [(2, mismatch("REASONING_MESSAGE_START", "s2", "reasoning message", "r1", "s1"))],
    ),
    # -- steps keyed by owner ------------------------------------------------------------------
    (
        "parent and subagent may both run step 'tools'",
        [
            RS,
            step_start("tools"),
            step_start("tools", **S1),
            step_end("tools", **S1),
            step_end("tools"),
            RF,
        ],
        [],
    ),
    (
        "a subagent's empty id is not the parent",
        [
            RS,
            step_start("tools"),
            step_start("tools", subagentRunId=""),
            step_end("tools"),
            step_end("tools", subagentRunId=""),
            RF,
        ],
        [],
    ),
    (
        "STEP_STARTED twice in one subagent",
        [RS, step_start("tools", **S1), step_start("tools", **S1), step_end("tools", **S1), RF],
        [(2, "Step \"tools\" is already active for 'STEP_STARTED' in subagent 's1'")],
    ),
    (
        "a subagent finishing the parent's step",
        [RS, step_start("tools"), step_end("tools", **S1), step_end("tools"), RF],
        [
            (
                2,
                "Cannot send 'STEP_FINISHED' for step \"tools\" attributed to subagent 's1': "
                "that step is open under the parent agent. A step must be finished by whoever "
                "started it.",
            )
        ],
    ),
    (
        "the parent finishing a subagent's step",
        [RS, step_start("tools", **S1), step_end("tools"), step_end("tools", **S1), RF],
        [
            (
                2,
                "Cannot send 'STEP_FINISHED' for step \"tools\" attributed to the parent agent: "
                "that step is open under subagent 's1'. A step must be finished by whoever "
                "started it.",
            )
        ],
    ),
    (
        "open steps are listed per owner, in the order owners first started a step",
        [
            RS,
            step_start("a", **S1),
            step_end("a", **S1),
            step_start("b"),
            step_start("c", **S1),
            RF,
        ],
        [(5, "Cannot send 'RUN_FINISHED' while steps are still active: c (subagent 's1'), b")],
    ),
    # -- ids that are not strings, compared and printed as JavaScript does ---------------------
    (
        "1 and 1.0 are one id, '1' another",
        [RS, tms(1), tme(1.0), tms("1"), tms(True), RF],
        [(5, "Cannot send 'RUN_FINISHED' while text messages are still active: 1, true")],
    ),
    (
        "every object is a different id",
        [RS, tms({}), tme({}), tms([1, None, [2, {}]]), tms(None), ev("TEXT_MESSAGE_START"), RF],
        [
            (
                2,
                "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID "
                "'[object Object]'. A 'TEXT_MESSAGE_START' event must be sent first.",
            ),
            (
                6,
                "Cannot send 'RUN_FINISHED' while text messages are still active: "
                "[object Object], 1,,2,[object Object], , ",
            ),
        ],
    ),
    (
        "null and absent names are listed empty",
        [RS, step_start(None), ev("STEP_STARTED"), step_start("x"), RF],
        [(4, "Cannot send 'RUN_FINISHED' while steps are still active: , , x")],
    ),
    (
        "null and absent ids are listed empty",
        [RS, tms(None), ev("TEXT_MESSAGE_START"), RF],
        [(3, "Cannot send 'RUN_FINISHED' while text messages are still active: , ")],
    ),
    (
        "numbers print as JavaScript prints them",
        [RS, step_start(1e21), step_start(1e-7), step_start(0.5), step_start(-0.0), RF],
        [(5, "Cannot send 'RUN_FINISHED' while steps are still active: 1e+21, 1e-7, 0.5, 0")],
    ),
    (
        "a null step name is listed empty but printed 'null' in messages",
        [RS, step_start(None), step_start(None), RF],
        [
            (2, "Step \"null\" is already active for 'STEP_STARTED'"),
            (3, "Cannot send 'RUN_FINISHED' while steps are still active: "),
        ],
    ),
    (
        "a numeric subagent tag differs from the string",
        [
            RS,
            tms("m1", subagentRunId=1),
            tmc("m1", subagentRunId="1"),
            tme("m1", subagentRunId=1.0),
            RF,
        ],
        [(2, mismatch("TEXT_MESSAGE_CONTENT", "1", "message", "m1", "1"))],
    ),
    (
        "non-iterable toolCalls in history fail with the engine's TypeError",
        [RS, snapshot({"id": "a1", "role": "assistant", "toolCalls": 5}), RF],
        [(1, "number 5 is not iterable (cannot read property Symbol(Symbol.iterator))")],
    ),
    (
        "an object as toolCalls",
        [started_with({"id": "a1", "role": "assistant", "toolCalls": {"id": "tc1"}}), RS, RF],
        [(0, "object is not iterable (cannot read property Symbol(Symbol.iterator))")],
    ),
]


@pytest.mark.parametrize(("events", "expected"), [pytest.param(e, x, id=n) for n, e, x in CASES])
def test_rules(events: list[Event], expected: list[tuple[int, str]]) -> None:
    found = [(v.index, v.message) for v in verify(events)]
    assert found == expected


def test_violations_carry_the_event_type() -> None:
    assert verify([RS, tme("m1"), RF]) == [
        Violation(
            1,
            "TEXT_MESSAGE_END",
            "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID 'm1'. "
            "A 'TEXT_MESSAGE_START' event must be sent first.",
        )
    ]


# -- after a violation: report it, leave its effect out, keep checking -------------------------


def test_a_rejected_event_leaves_no_trace() -> None:
    # The rejected duplicate START does not reopen m1, so the END after it is legal and the
    # run can finish.
    assert [v.index for v in verify([RS, tms("m1"), tms("m1"), tme("m1"), RF])] == [2]
    # A rejected RUN_STARTED does not reset the open message.
    assert [v.index for v in verify([RS, tms("m1"), RS2, tme("m1"), RF])] == [2]
    # A rejected RUN_STARTED does not start a run: what follows is still outside one.
    assert [v.index for v in verify([ev("RUN_STARTED", **NULL_TAG), tms("m1")])] == [0, 1]
    # A rejected RUN_FINISHED leaves the run open, so a later one is checked again.
    assert [v.index for v in verify([RS, tms("m1"), RF, tme("m1"), RF])] == [2]


def test_every_problem_is_reported() -> None:
    events = [tms("x"), RS, tmc("m1"), tcs("t"), tcs("t"), step_end("s"), RF, tce("t"), RF, RF]
    assert [(v.index, v.type) for v in verify(events)] == [
        (0, "TEXT_MESSAGE_START"),
        (2, "TEXT_MESSAGE_CONTENT"),
        (4, "TOOL_CALL_START"),
        (5, "STEP_FINISHED"),
        (6, "RUN_FINISHED"),
        (9, "RUN_FINISHED"),
    ]


def test_indexes_count_across_feed_calls() -> None:
    verifier = Verifier()
    assert verifier.feed(RS) is None
    assert verifier.feed(tmc("m1")) == Violation(
        1,
        "TEXT_MESSAGE_CONTENT",
        "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'm1'. "
        "Start a text message with 'TEXT_MESSAGE_START' first.",
    )
    assert verifier.feed(RF) is None
    violation = verifier.feed(RF)
    assert violation is not None and violation.index == 3


def test_events_without_a_string_type() -> None:
    verifier = Verifier()
    first = verifier.feed({"messageId": "m1"})
    second = verifier.feed({"type": 5})
    third = verifier.feed(["not", "a", "dict"])  # type: ignore[arg-type]
    assert first is not None and first.type is None and first.message.startswith("Invalid event")
    assert second is not None and second.index == 1 and second.message.startswith("Invalid event")
    assert third is not None and third.index == 2 and third.message.startswith("Invalid event")
    # None of them counted as the first event: the stream can still start.
    assert verifier.feed(RS) is None


def test_an_id_nested_past_the_recursion_limit() -> None:
    deep: list[Any] = [1]
    for _ in range(5000):
        deep = [deep, None]
    (violation,) = verify([RS, tms(deep), RF])
    assert violation.message.endswith("still active: 1" + "," * 5000)


def test_feeding_does_not_mutate_events() -> None:
    events = [case_event for _, case_events, _ in CASES for case_event in case_events]
    before = copy.deepcopy(events)
    verify(events)
    assert events == before


# -- generated streams -------------------------------------------------------------------------

MISSING = object()
IDS = ["m1", "m2", ""]
TAGS: list[Any] = [MISSING, MISSING, MISSING, "s1", "s2", ""]
ODD: list[Any] = [None, 1, 1.0, True, False, "", [1, None], {}, 1e21, -0.5, "s1"]


def _tagged(event: Event, tag: Any) -> Event:
    return event if tag is MISSING else {**event, "subagentRunId": tag}


@st.composite
def _block(draw: st.DrawFn) -> list[Event]:
    """One entity's events in order: mostly well formed, tags mostly consistent."""
    ident = draw(st.sampled_from(IDS))
    owner = draw(st.sampled_from(TAGS))

    def tag() -> Any:
        # Mostly the owner's own tag or none; now and then someone else's.
        return draw(st.sampled_from([owner] * 8 + [MISSING] * 2 + TAGS))

    kind = draw(
        st.sampled_from(["text", "tool", "reasoning", "step", "subagent", "activity", "misc"])
    )
    if kind == "text":
        body = [tmc(ident) for _ in range(draw(st.integers(0, 2)))]
        events = [tms(ident), *body, tme(ident)]
    elif kind == "tool":
        parent = draw(st.sampled_from([{}, {"parentMessageId": draw(st.sampled_from(IDS))}]))
        events = [tcs(ident, **parent), tca(ident), tce(ident), result("tm" + ident, ident)]
    elif kind == "reasoning":
        inner = draw(st.sampled_from([ident, "r9"]))
        events = [span_start(ident), rms(inner), rmc(inner), rme(inner), span_end(ident)]
        events.insert(
            draw(st.integers(0, 5)),
            encrypted(draw(st.sampled_from(["message", "tool-call"])), ident),
        )
    elif kind == "step":
        events = [step_start(ident or "plan"), step_end(ident or "plan")]
    elif kind == "subagent":
        sid = draw(st.sampled_from(["a", "b"]))
        parent = draw(st.sampled_from([{}, {}, {"parentSubagentRunId": "a"}]))
        outcomes: list[dict[str, Any]] = [
            {},
            {"outcome": {"type": "success"}},
            {"outcome": {"type": "suspended", "interruptIds": ["i"]}},
        ]
        outcome = draw(st.sampled_from(outcomes))
        closing = draw(st.sampled_from([sub_end(sid, **outcome), sub_error(sid)]))
        return [sub_start(sid, **parent), closing]
    elif kind == "activity":
        events = [
            activity(ident, **draw(st.sampled_from([{}, {"replace": False}]))),
            activity_delta(ident),
        ]
    else:
        events = [
            draw(
                st.sampled_from(
                    [
                        ev("STATE_SNAPSHOT", snapshot={}),
                        ev("CUSTOM", name="c", value=1),
                        ev("RAW", event=1),
                        ev("TEXT_MESSAGE_CHUNK", messageId=ident, delta="x"),
                        snapshot(
                            {
                                "id": ident,
                                "role": draw(
                                    st.sampled_from(["assistant", "reasoning", "activity"])
                                ),
                                "toolCalls": [{"id": "m1"}],
                                **_tagged({}, owner),
                            }
                        ),
                    ]
                )
            )
        ]
    return [_tagged(event, tag()) for event in events]


@st.composite
def _run(draw: st.DrawFn) -> list[Event]:
    """A run whose blocks interleave, each keeping its own order."""
    blocks = draw(st.lists(_block(), max_size=5))
    history = draw(
        st.sampled_from([[], [{"id": "m1", "role": "assistant", "subagentRunId": "s1"}]])
    )
    events: list[Event] = [started_with(*history) if history else RS]
    while blocks := [block for block in blocks if block]:
        events.append(blocks[draw(st.integers(0, len(blocks) - 1))].pop(0))
    ending = draw(st.sampled_from([[RF]] * 5 + [[RE], [RF, RE], []]))
    return events + ending


@st.composite
def event_streams(draw: st.DrawFn) -> list[Event]:
    """Runs in sequence, then a few mutations: drop, duplicate, swap, insert, or spoil a field."""
    events = [event for run in draw(st.lists(_run(), min_size=1, max_size=3)) for event in run]
    for _ in range(draw(st.integers(0, 3))):
        if not events:
            break
        at = draw(st.integers(0, len(events) - 1))
        action = draw(st.sampled_from(["drop", "dup", "swap", "insert", "spoil"]))
        if action == "drop":
            del events[at]
        elif action == "dup":
            events.insert(at, events[at])
        elif action == "swap" and at + 1 < len(events):
            events[at], events[at + 1] = events[at + 1], events[at]
        elif action == "insert":
            events.insert(at, draw(st.sampled_from([RS, RF, RE, tme("m1"), sub_end("a")])))
        elif action == "spoil":
            field = draw(st.sampled_from(sorted(set(events[at]) - {"type"}) or ["subagentRunId"]))
            events[at] = {**events[at], field: draw(st.sampled_from(ODD))}
    return events


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_streams(), st.data())
def test_later_events_never_change_earlier_verdicts(
    events: list[Event], data: st.DataObject
) -> None:
    split = data.draw(st.integers(0, len(events)))
    assert verify(events[:split]) == [v for v in verify(events) if v.index < split]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = [
    "messageId",
    "toolCallId",
    "stepName",
    "subagentRunId",
    "parentMessageId",
    "name",
    "message",
    "outcome",
    "messages",
    "input",
    "entityId",
    "subtype",
    "replace",
    "parentSubagentRunId",
    "description",
    "code",
]
TYPES = [
    "RUN_STARTED",
    "RUN_FINISHED",
    "RUN_ERROR",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "STEP_STARTED",
    "STEP_FINISHED",
    "REASONING_START",
    "REASONING_END",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_ENCRYPTED_VALUE",
    "ACTIVITY_SNAPSHOT",
    "ACTIVITY_DELTA",
    "MESSAGES_SNAPSHOT",
    "SUBAGENT_STARTED",
    "SUBAGENT_FINISHED",
    "SUBAGENT_ERROR",
    "CUSTOM",
]


@st.composite
def arbitrary_events(draw: st.DrawFn) -> Event:
    """Any JSON in the fields the verifier reads: it must never raise on any of it."""
    fields = draw(st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=4))
    kind = draw(st.sampled_from(TYPES) | JSON)
    return {**fields, "type": kind}


@settings(max_examples=120, deadline=None)
@given(st.lists(arbitrary_events(), max_size=12))
def test_any_json_is_checked_without_raising(events: list[Event]) -> None:
    verifier = Verifier()
    for event in [RS, *events]:
        verifier.feed(event)
