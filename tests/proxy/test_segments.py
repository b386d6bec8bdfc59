"""Segment: one run's part of a response, from its frames to its closing status."""

from __future__ import annotations

import orjson
import pytest

from recorder.proxy.segments import Segment, SegmentPhase, Summary
from recorder.wire.said import SUMMARY_LIMIT
from recorder.wire.sse import FrameSplitter


def event(**fields: object) -> bytes:
    return orjson.dumps(fields)


def started(segment: Segment, summary: Summary) -> None:
    segment.observe(event(type="RUN_STARTED", threadId="t", runId="r"), summary)
    segment.next_seq += 1


@pytest.mark.parametrize(
    ("terminal", "status", "outcome", "error"),
    [
        (event(type="RUN_FINISHED", threadId="t", runId="r"), "finished", "success", None),
        (
            event(type="RUN_FINISHED", threadId="t", runId="r", outcome={"type": "interrupt"}),
            "interrupted",
            "interrupt",
            None,
        ),
        (event(type="RUN_ERROR", message="agent broke"), "error", "error", "agent broke"),
    ],
)
def test_a_terminal_event_ends_the_run_with_its_outcome(
    terminal: bytes, status: str, outcome: str, error: str | None
) -> None:
    segment, summary = Segment("r", "t"), Summary([])
    started(segment, summary)
    recorded = segment.observe(terminal, summary)
    assert recorded.payload == terminal
    assert segment.phase is SegmentPhase.ENDED
    assert segment.status(None) == (status, error) and segment.outcome == outcome


def test_a_run_that_ended_is_never_ended_again() -> None:
    segment, summary = Segment("r", "t"), Summary([])
    started(segment, summary)
    segment.observe(event(type="RUN_FINISHED", threadId="t", runId="r"), summary)
    segment.next_seq += 1
    assert segment.end_with("the upstream stream broke", "upstream_dropped") is None
    assert segment.status(None) == ("finished", None) and segment.next_seq == 2


def test_the_recorder_ends_an_open_run_with_its_own_run_error() -> None:
    segment, summary = Segment("r", "t"), Summary([])
    started(segment, summary)
    ending = segment.end_with("the upstream sent nothing for 1 s", "upstream_idle")
    assert ending is not None
    recorded, frame = ending
    assert (recorded.type, recorded.origin) == ("RUN_ERROR", "recorder")
    (sent,) = FrameSplitter().feed(frame)
    assert sent.id == "1" and sent.data == recorded.payload
    assert orjson.loads(sent.data)["code"] == "upstream_idle"
    assert segment.status(None) == ("error", "the upstream sent nothing for 1 s")
    assert segment.next_seq == 2


def test_a_store_failure_overrides_the_run_s_own_outcome() -> None:
    segment, summary = Segment("r", "t"), Summary([])
    started(segment, summary)
    segment.observe(event(type="RUN_FINISHED", threadId="t", runId="r"), summary)
    assert segment.status("database connection lost") == (
        "error",
        "store failure: database connection lost",
    )


def test_violations_are_noted_at_their_seq_and_the_frame_kept() -> None:
    segment, summary = Segment("r", "t"), Summary([])
    started(segment, summary)
    recorded = segment.observe(b"<html>oops</html>", summary)
    assert (recorded.payload, recorded.type) == (b"<html>oops</html>", None)
    assert segment.problems == [
        {"seq": 1, "message": "Invalid event: the frame is not a JSON object."}
    ]


def test_the_summary_keeps_the_posted_text_then_deltas_up_to_its_limit() -> None:
    segment, summary = Segment("r", "t"), Summary(["hello\n"])
    started(segment, summary)
    delta = "x" * 1000
    for _ in range(SUMMARY_LIMIT // 1000 + 5):
        segment.observe(event(type="TEXT_MESSAGE_CONTENT", messageId="m", delta=delta), summary)
    text = summary.text()
    assert text is not None and text.startswith("hello\nxxx") and len(text) == SUMMARY_LIMIT
    assert Summary([]).text() is None


def test_fields_the_schema_does_not_describe_are_redacted_and_kept() -> None:
    # The stream check strips fields its schema does not describe from the object it is
    # given: redaction sees the event as it came, so a secret in such a field is not
    # stored, and the field is kept in what is stored.
    from recorder.config import RedactionConfig
    from recorder.redaction import Redactor

    redactor = Redactor.from_config(RedactionConfig(rules=["builtin"]))
    segment, summary = Segment("r", "t"), Summary([], redactor)
    started(segment, summary)
    segment.observe(event(type="TEXT_MESSAGE_START", messageId="m", role="assistant"), summary)
    segment.next_seq += 1
    data = event(type="TEXT_MESSAGE_CONTENT", messageId="m", delta="hi", note="eve@example.com")
    recorded = segment.observe(data, summary)
    assert recorded.redacted is not None and recorded.redacted.rules == ("email",)
    assert orjson.loads(recorded.payload) == {
        "type": "TEXT_MESSAGE_CONTENT",
        "messageId": "m",
        "delta": "hi",
        "note": "[REDACTED:email]",
    }
    assert segment.problems == []
    assert summary.text() == "hi"
