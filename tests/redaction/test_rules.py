"""The redaction engine as a pure function: detectors, where rules apply, valid JSON out,
the exact bytes kept when nothing matched, the keyed hash of the original."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from recorder.config import RedactionConfig, RedactionRule
from recorder.redaction import RUN_INPUT, Redactor, redact, redact_payload
from recorder.redaction.detectors import luhn

BUILTIN = RedactionConfig(rules="builtin").rules


def text_event(delta: str) -> bytes:
    return json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": delta}).encode()


def redacted_delta(delta: str, rules: Any = BUILTIN) -> tuple[str, tuple[str, ...]]:
    result = redact("TEXT_MESSAGE_CONTENT", text_event(delta), rules)
    return json.loads(result.payload)["delta"], result.fired


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("write to bob.smith+x@example.co.uk today", "email"),
        ("call +1 415-555-0100 now", "phone"),
        ("call (020) 7946 0018 now", "phone"),
        ("call +442079460018 now", "phone"),
        ("card 4111 1111 1111 1111 ok", "card"),
        ("card 5500-0000-0000-0004 ok", "card"),
        ("card 378282246310005 ok", "card"),
        ("Authorization: Bearer abcDEF123456.xyz", "token"),
        ("key sk-proj-abcdefghijklmnopqrstuv", "token"),
        ("key ghp_abcdefghijklmnopqrstuvwxyz0123", "token"),
        ("key AKIAIOSFODNN7EXAMPLE here", "token"),
        ("key xoxb-1234567890-abcdefghij", "token"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "token"),
        ("host 192.168.10.254.", "ip"),
        ("host 2001:db8::8a2e:370:7334 up", "ip"),
        ("host ::1 up", "ip"),
        ("host fe80::1ff:fe23:4567:890a up", "ip"),
    ],
)
def test_each_detector_finds_its_kind(text: str, rule: str) -> None:
    out, fired = redacted_delta(text)
    assert fired == (rule,), (out, fired)
    assert f"[REDACTED:{rule}]" in out


@pytest.mark.parametrize(
    "text",
    [
        "the meeting is at 12:30:45 on 2024-01-02",
        "order 1700000000 shipped, 42 items, version 3.11.2",
        "card 4111 1111 1111 1112 fails Luhn",
        "999.1.1.1 is no address; nor is 1.2.3",
        "an @ sign alone, user@localhost",
        "sk-short and Bearer x",
        "std::vector and Foo::bar in C++",
        '[{"title":"branch","score":0.14471564784405389},{"score":0.7566097264993272}]',
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    payload = text_event(text)
    result = redact("TEXT_MESSAGE_CONTENT", payload, BUILTIN)
    assert result.fired == () and result.payload is payload and result.mac is None, result


def test_luhn() -> None:
    assert luhn("4111111111111111") and luhn("79927398713")
    assert not luhn("4111111111111112") and not luhn("79927398710")


def test_the_stored_frame_stays_valid_json_with_the_rest_unchanged() -> None:
    event = {
        "type": "TOOL_CALL_RESULT",
        "messageId": "m@x.com",  # an id: never rewritten
        "toolCallId": "c1",
        "content": 'found "bob@example.com"\n\u00e9 \U0001f600 and 10.0.0.1',
        "role": "tool",
        "n": 12345678901234567890123,  # past 64 bits: a double, as JSON.parse reads it
    }
    result = redact("TOOL_CALL_RESULT", json.dumps(event).encode(), BUILTIN, key="k")
    stored = json.loads(result.payload)
    assert stored == {
        **event,
        "content": 'found "[REDACTED:email]"\n\u00e9 \U0001f600 and [REDACTED:ip]',
        "n": float(event["n"]),
    }
    assert result.fired == ("email", "ip")


def test_the_keyed_hash_proves_the_original() -> None:
    original = text_event("mail me: a@b.io")
    result = redact("TEXT_MESSAGE_CONTENT", original, BUILTIN, key="audit-key")
    assert result.mac == hmac.new(b"audit-key", original, hashlib.sha256).hexdigest()
    other = text_event("mail me: c@d.io")
    assert result.mac != hmac.new(b"audit-key", other, hashlib.sha256).hexdigest()
    # The same bytes redacted again without a key: no hash.
    assert redact("TEXT_MESSAGE_CONTENT", original, BUILTIN).mac is None


def test_rules_apply_where_they_are_scoped() -> None:
    rules = [
        RedactionRule(name="ticket", pattern=r"(?i)tck-\d{4}", where=("tool_args",)),
        RedactionRule(name="secret", pattern=r"hunter2", where=("state", "tool_results")),
    ]
    redactor = Redactor(rules)

    def fired(kind: str, event: dict[str, Any]) -> tuple[str, ...]:
        return redact(kind, json.dumps({"type": kind, **event}).encode(), redactor).fired

    assert fired("TOOL_CALL_ARGS", {"toolCallId": "c", "delta": '{"t":"TCK-1234"}'}) == ("ticket",)
    assert fired("TEXT_MESSAGE_CONTENT", {"messageId": "m", "delta": "TCK-1234 hunter2"}) == ()
    assert fired("STATE_SNAPSHOT", {"snapshot": {"pw": ["hunter2"]}}) == ("secret",)
    assert fired("TOOL_CALL_RESULT", {"toolCallId": "c", "content": "hunter2"}) == ("secret",)
    patch = [{"op": "add", "path": "/hunter2", "value": {"k": "hunter2"}}]
    out = redact(
        "STATE_DELTA", json.dumps({"type": "STATE_DELTA", "delta": patch}).encode(), redactor
    )
    # The value a patch writes is redacted; its path is not (it would point elsewhere).
    assert json.loads(out.payload)["delta"] == [
        {"op": "add", "path": "/hunter2", "value": {"k": "[REDACTED:secret]"}}
    ]
    snapshot = {
        "messages": [
            {"id": "u", "role": "user", "content": "TCK-1234"},
            {
                "id": "a",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": "TCK-9999"},
                    }
                ],
            },
            {"id": "t", "role": "tool", "toolCallId": "c", "content": "hunter2"},
        ]
    }
    out = redact(
        "MESSAGES_SNAPSHOT",
        json.dumps({"type": "MESSAGES_SNAPSHOT", **snapshot}).encode(),
        redactor,
    )
    messages = json.loads(out.payload)["messages"]
    assert messages[0]["content"] == "TCK-1234"  # message text: not the ticket rule's
    assert messages[1]["toolCalls"][0]["function"]["arguments"] == "[REDACTED:ticket]"
    assert messages[2]["content"] == "[REDACTED:secret]"


def test_a_posted_input_is_redacted_by_its_parts_and_as_a_whole() -> None:
    rules = [
        RedactionRule(name="email", detector="email", where=("messages",)),
        RedactionRule(name="acct", pattern=r"ACCT-\d+", where=("input",)),
    ]
    posted = {
        "threadId": "a@b.com",  # an id: kept
        "runId": "r",
        "messages": [{"id": "u", "role": "user", "content": "I am a@b.com, ACCT-77"}],
        "state": {"acct": "ACCT-12"},
        "forwardedProps": {"note": "ACCT-3 c@d.com"},
    }
    result = redact(RUN_INPUT, json.dumps(posted).encode(), rules)
    stored = json.loads(result.payload)
    assert stored["threadId"] == "a@b.com"
    assert stored["messages"][0]["content"] == "I am [REDACTED:email], [REDACTED:acct]"
    assert stored["state"] == {"acct": "[REDACTED:acct]"}
    # Not message text: the email rule (scoped to messages) leaves it.
    assert stored["forwardedProps"] == {"note": "[REDACTED:acct] c@d.com"}


def test_a_secret_split_across_deltas_is_not_caught_in_the_deltas() -> None:
    """Documented: each delta is redacted alone. The assembled text is redacted where it
    appears whole (a MESSAGES_SNAPSHOT, the next run's posted messages, the thread's
    searchable text)."""
    assert redacted_delta("mail bob@exa")[1] == ()
    assert redacted_delta("mple.com now")[1] == ()
    assert Redactor(BUILTIN).text("mail bob@exa" + "mple.com now") == "mail [REDACTED:email] now"


def test_a_frame_that_is_not_json_is_redacted_as_text() -> None:
    result = redact("TEXT_MESSAGE_CONTENT", b"not json a@b.com", BUILTIN)
    assert result.payload == b"not json [REDACTED:email]" and result.fired == ("email",)


def test_rule_settings_are_checked() -> None:
    for bad in (
        {"name": "x"},
        {"name": "x", "detector": "email", "pattern": "a"},
        {"name": "x", "pattern": "("},
        {"name": "x", "pattern": "a*"},
        {"name": "bad name", "pattern": "a"},
        {"name": "x", "detector": "ssn"},
        {"name": "x", "pattern": "a", "where": ["nowhere"]},
    ):
        with pytest.raises(ValueError):
            RedactionRule.model_validate(bad)
    with pytest.raises(ValueError, match="unique"):
        RedactionConfig(rules=["email", "email"])
    assert [r.name for r in RedactionConfig(rules=["builtin"]).rules] == [
        "email",
        "card",
        "token",
        "ip",
        "phone",
    ]


def test_redact_payload_answers_the_new_bytes_and_the_rules_that_fired() -> None:
    original = text_event("mail a@b.io from 10.0.0.1")
    new, fired = redact_payload("TEXT_MESSAGE_CONTENT", original, BUILTIN)
    assert fired == ("email", "ip")
    assert json.loads(new)["delta"] == "mail [REDACTED:email] from [REDACTED:ip]"
    same, none = redact_payload("TEXT_MESSAGE_CONTENT", text_event("nothing"), BUILTIN)
    assert none == () and json.loads(same)["delta"] == "nothing"
    redactor = Redactor(BUILTIN, key="k")
    assert redactor.mac(original) == hmac.new(b"k", original, hashlib.sha256).hexdigest()
