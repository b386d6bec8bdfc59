"""Our Verifier against the real ``verifyEvents`` of @ag-ui/client 1.0.0.

Every sequence goes through both; they must agree on accept/reject and, on reject, on the
index and the exact text of the first error. The reference runs as the bare operator
(``tests/interop/verify.mjs``), not the runAgent pipeline, so both see the same events. All
sequences of a test go to one node process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.conftest import INTEROP


def _missing_reference() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (INTEROP / "node_modules" / "@ag-ui" / "client").is_dir():
        return "tests/interop/node_modules is missing (run `npm ci` in tests/interop)"
    return None


if (_reason := _missing_reference()) is not None:
    # A CI run that silently skips the outside check would prove nothing.
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the reference client is required when CI=true: {_reason}", pytrace=False)
    pytest.skip(_reason, allow_module_level=True)

pytestmark = pytest.mark.node

Event = dict[str, Any]
Verdict = dict[str, Any]


def _load_rule_table() -> ModuleType:
    # Loaded by path, not imported: tests/ is not a package, and this must not depend on
    # how pytest is told to import test modules.
    spec = importlib.util.spec_from_file_location(
        "_verify_rule_table", Path(__file__).with_name("test_verify.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


table = _load_rule_table()
ev = table.ev
RS, RF = table.RS, table.RF

# Sequences only the reference can judge: odd JSON values in the fields it reads, and the
# places where JavaScript's printing and comparing show through.
EXTRA: list[tuple[str, list[Event]]] = [
    ("only RUN_STARTED, never finished", [RS]),
    ("an empty type first", [ev(""), RS, RF]),
    ("an empty type inside a run", [RS, ev(""), RF]),
    ("format braces in an id", [RS, table.tms("{id}"), table.tms("{0}"), RF]),
    ("quotes and unicode in an id", [RS, table.tcs('it\'s "ü" 🙂'), RF]),
    ("an integer past 2**53", [RS, table.tms(2**53 + 1), RF]),
    ("an integer past the double range", [RS, table.step_start(10**400), RF]),
    ("small and large floats", [RS, table.tms(1e-6), table.tms(1e-7), table.tms(1e20), RF]),
    ("negative numbers", [RS, table.tms(-1.5), table.tms(-1e-9), RF]),
    ("outcome false", [RS, table.sub_start("a"), table.sub_end("a", outcome=False), RF]),
    ("outcome []", [RS, table.sub_start("a"), table.sub_end("a", outcome=[]), RF]),
    ("outcome {}", [RS, table.sub_start("a"), table.sub_end("a", outcome={}), RF]),
    ("outcome type null", [RS, table.sub_start("a"), table.sub_end("a", outcome={"type": None})]),
    ("outcome type list", [RS, table.sub_start("a"), table.sub_end("a", outcome={"type": [1]})]),
    (
        "interruptIds not a list",
        [
            RS,
            table.sub_start("a"),
            table.sub_end("a", outcome={"type": "success", "interruptIds": 1}),
            RF,
        ],
    ),
    (
        "an interrupt without an id",
        [
            RS,
            ev(
                "RUN_FINISHED",
                outcome={"type": "interrupt", "interrupts": [5, {"subagentRunId": None}]},
            ),
        ],
    ),
    (
        "interrupts that are not a list",
        [
            RS,
            ev(
                "RUN_FINISHED", outcome={"type": "interrupt", "interrupts": {"subagentRunId": None}}
            ),
        ],
    ),
    (
        "an unknown encrypted-value subtype checks reasoning owners",
        [RS, table.rms("r1", **table.S1), table.encrypted("other", "r1", **table.S2)],
    ),
    (
        "an encrypted value for an unknown entity",
        [RS, table.encrypted("message", "zz", **table.S1), RF],
    ),
    ("input that is not an object", [ev("RUN_STARTED", input="x"), RF]),
    (
        "input messages that are not a list",
        [ev("RUN_STARTED", input={"messages": {"id": "a"}}), RF],
    ),
    (
        "toolCalls as a string is iterated harmlessly",
        [RS, table.snapshot({"id": "a1", "role": "assistant", "toolCalls": "abc"}), RF],
    ),
    ("toolCalls true", [RS, table.snapshot({"id": "a1", "toolCalls": True})]),
    ("toolCalls -0.0", [RS, table.snapshot({"id": "a1", "toolCalls": -0.0})]),
    (
        "a null parentMessageId is looked up as an id",
        [RS, table.tms(None, **table.S1), table.tcs("t1", parentMessageId=None, **table.S2)],
    ),
    ("a numeric parentSubagentRunId", [RS, table.sub_start("b", parentSubagentRunId=1), RF]),
    (
        "replace: 0 still re-owns",
        [
            RS,
            table.activity("a", **table.S1),
            table.activity("a", replace=0, **table.S2),
            table.activity_delta("a", **table.S2),
            RF,
        ],
    ),
    (
        "a boolean subagent tag",
        [RS, table.tms("m", subagentRunId=True), table.tmc("m", subagentRunId="true")],
    ),
    (
        "an object subagent tag never matches",
        [RS, table.tms("m", subagentRunId={}), table.tmc("m", subagentRunId={})],
    ),
    ("an array step owner", [RS, table.step_start("s", subagentRunId=[1, 2]), RF]),
    (
        "a step finished by an object owner",
        [RS, table.step_start("s"), table.step_end("s", subagentRunId={})],
    ),
    ("subagent name null", [RS, ev("SUBAGENT_STARTED", subagentRunId="a", name=None)]),
    (
        "SUBAGENT_ERROR with a numeric message",
        [RS, table.sub_start("a"), ev("SUBAGENT_ERROR", subagentRunId="a", message=1)],
    ),
    ("the reference needs no RUN_FINISHED fields", [RS, ev("RUN_FINISHED")]),
]
SEQUENCES: list[tuple[str, list[Event]]] = [(name, events) for name, events, _ in table.CASES]
SEQUENCES += EXTRA

# One distinctive fragment of every error the reference can raise; each must be provoked by
# some sequence above, so a rule missing from the table fails the suite.
RULE_TEXTS = [
    "The run has already errored with 'RUN_ERROR'",
    "The run has already finished with 'RUN_FINISHED'",
    "First event must be 'RUN_STARTED'",
    "while a run is still active",
    "with 'subagentRunId: null'",
    "'SUBAGENT_STARTED' with 'description: null'",
    "with 'parentSubagentRunId: null'",
    "with 'parentToolCallId: null'",
    "with 'parentMessageId: null'",
    "'SUBAGENT_FINISHED' with 'outcome: null'",
    "'SUBAGENT_ERROR' with 'code: null'",
    "with outcome type",
    "'outcome.interruptIds: null'",
    "non-string entry in 'outcome.interruptIds'",
    "with an interrupt (id",
    "A text message with ID",
    "No active text message found",
    "A 'TEXT_MESSAGE_START' event must be sent first",
    "A tool call with ID",
    "Start a tool call with 'TOOL_CALL_START' first",
    "A 'TOOL_CALL_START' event must be sent first",
    "does not match its parent message",
    "but its parent message",
    "is already active for 'STEP_STARTED'",
    "is already active for 'STEP_STARTED' in subagent",
    "that was not started",
    "that step is open under",
    "A reasoning span with ID",
    "A reasoning message with ID",
    "'REASONING_MESSAGE_CONTENT' event: No active reasoning message",
    "'REASONING_MESSAGE_END' event: No active reasoning message",
    "No active reasoning span found",
    "opener's subagent",
    "without a 'subagentRunId'",
    "without a 'name'",
    "without a 'message'",
    "is already active. Finish it with 'SUBAGENT_FINISHED' first.",
    "has already finished in this run",
    "has not been started in this run",
    "no active subagent found",
    "Cannot send a message (id",
    "while steps are still active",
    "while text messages are still active",
    "while reasoning messages are still active",
    "while reasoning spans are still active",
    "while tool calls are still active",
    "while subagents are still active",
    "is not iterable",
]


def ours(events: list[Event]) -> Verdict:
    violations = table.verify(events)
    if not violations:
        return {"ok": True, "error": None, "index": None}
    first = violations[0]
    return {"ok": False, "error": first.message, "index": first.index}


def run_reference(sequences: list[list[Event]]) -> list[Verdict]:
    completed = subprocess.run(
        ["node", str(INTEROP / "verify.mjs")],
        input=json.dumps(sequences, allow_nan=False).encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr.decode()
    verdicts: list[Verdict] = json.loads(completed.stdout)
    assert len(verdicts) == len(sequences)
    return verdicts


@pytest.fixture(scope="module")
def reference() -> Callable[[list[list[Event]]], list[Verdict]]:
    return run_reference


@pytest.fixture(scope="module")
def table_verdicts() -> dict[str, Verdict]:
    names = [name for name, _ in SEQUENCES]
    assert len(set(names)) == len(names), "sequence names must be unique"
    return dict(zip(names, run_reference([events for _, events in SEQUENCES]), strict=True))


def test_enough_sequences() -> None:
    assert len(SEQUENCES) >= 60


@pytest.mark.parametrize(("name", "events"), SEQUENCES, ids=[name for name, _ in SEQUENCES])
def test_same_verdict_as_the_reference(
    name: str, events: list[Event], table_verdicts: dict[str, Verdict]
) -> None:
    assert ours(events) == table_verdicts[name]


def test_every_rule_is_exercised(table_verdicts: dict[str, Verdict]) -> None:
    errors = [verdict["error"] for verdict in table_verdicts.values() if not verdict["ok"]]
    unexercised = [text for text in RULE_TEXTS if not any(text in error for error in errors)]
    assert unexercised == []
    assert any(verdict["ok"] for verdict in table_verdicts.values())


def test_random_streams_agree_with_the_reference(
    reference: Callable[[list[list[Event]]], list[Verdict]],
) -> None:
    # Hypothesis only generates here; the judging is one node batch afterwards, so there is
    # no shrinking: the shortest disagreeing stream is reported instead.
    streams: list[list[Event]] = []

    @settings(
        max_examples=100,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(table.event_streams())
    def collect(events: list[Event]) -> None:
        streams.append(events)

    collect()
    verdicts = reference(streams)
    disagreements = [
        (events, verdict, ours(events))
        for events, verdict in zip(streams, verdicts, strict=True)
        if ours(events) != verdict
    ]
    if disagreements:
        events, verdict, mine = min(disagreements, key=lambda item: len(item[0]))
        pytest.fail(
            f"{len(disagreements)} of {len(streams)} streams disagree; the shortest:\n"
            f"events:    {json.dumps(events)}\nreference: {verdict}\nours:      {mine}"
        )
    # A generator that only made broken (or only valid) streams would prove little.
    assert any(v["ok"] for v in verdicts) and any(not v["ok"] for v in verdicts)
