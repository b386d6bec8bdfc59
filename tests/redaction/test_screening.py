"""The cheap screening before any search: ``features`` never hides a detector that would
match, a payload found clean holds nothing to redact, and the proxy's shortcuts redact
exactly as the walk over the event does."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from recorder.config import RedactionConfig
from recorder.redaction import Redactor, detectors, engine
from recorder.redaction.detectors import BITS, PATTERNS, features
from recorder.wire.jsontext import dump

BUILTIN = RedactionConfig(rules="builtin").rules

# Text dense in what the detectors and their hints turn on: digits beside separators, dots,
# colons, hex letters, token prefixes, an @.
_PIECES = st.sampled_from(
    [
        *"0123456789",
        *" -.:+()@_",
        *"abcdefAFJ",
        "sk-",
        "eyJ",
        "Bearer ",
        "AKIA",
        "4111 1111 1111 1111",
        "4111111111111111",
        "378282246310005",
        "192.168.0.1",
        "fe80::1",
        "+1 415-555-0100",
        "x@y.io",
        "é",
        "٣",  # a digit outside ASCII
    ]
)
texts = st.lists(_PIECES, max_size=30).map("".join)
# Short strings of a few characters: every arrangement of digits and separators turns up.
dense = st.text(alphabet="01 -.:+(aF٣", max_size=12)


@settings(max_examples=600, deadline=None)
@given(st.one_of(dense, texts))
def test_features_never_hides_a_detector_that_matches(text: str) -> None:
    found = features(text)
    for name, pattern in PATTERNS.items():
        if re.search(f"(?a:{pattern})", text):
            assert found & BITS[name], (name, text)


@settings(max_examples=1000, deadline=None)
@given(st.one_of(dense, texts))
def test_the_hints_agree_with_their_plain_forms(text: str) -> None:
    """The hints begin with their rarest character and look behind for the rest; they
    must find what the plain patterns would."""
    plain = {
        detectors._PHONE_HINT: r"\d[ -]\d",
        detectors._IPV4_HINT: r"\d\.\d{1,3}\.\d",
        detectors._IPV6_HINT: r"[0-9A-Fa-f]:|::",
    }
    for hint, pattern in plain.items():
        assert bool(hint.search(text)) == bool(re.search(pattern, text)), (pattern, text)


_SINGLE_KINDS = st.sampled_from(
    ["TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "TOOL_CALL_RESULT", "REASONING_MESSAGE_CONTENT"]
)


@settings(max_examples=300, deadline=None)
@given(_SINGLE_KINDS, texts)
def test_the_one_string_shortcut_redacts_as_the_walk_does(kind: str, text: str) -> None:
    field = "content" if kind == "TOOL_CALL_RESULT" else "delta"
    obj = {"type": kind, "messageId": "m1", "toolCallId": "c1", field: text}
    data = dump(obj, exact=True)
    redactor = Redactor(BUILTIN, key="k")
    result, stored = redactor.event(kind, obj, data)
    fired: set[str] = set()
    walked = engine.event(redactor.rules, kind, obj, fired)
    assert result.fired == tuple(sorted(fired))
    assert stored == walked
    if fired:
        assert result.payload == dump(walked, exact=True)
        assert result.mac is not None
    else:
        assert result.payload is data and stored is obj
    # ``quiet`` says so only of an event in which nothing fires.
    if redactor.quiet(kind, obj):
        assert not fired
    # What the proxy asks: the same answer when something fired, else None.
    done = redactor.redacted(kind, obj, data)
    if fired:
        assert done is not None
        assert done[0] == result and done[1] == walked
    else:
        assert done is None


@settings(max_examples=600, deadline=None)
@given(st.one_of(dense, texts))
def test_short_and_long_strings_are_screened_alike(text: str) -> None:
    """A short string is first mapped in one pass, a long one only tested substring by
    substring: the same answer either way (spaces after it add no feature)."""
    assert features(text) == features(text + " " * detectors._SHORT)


def _reference_clean(rules: engine.Rules, data: bytes) -> bool:
    """``Rules.clean`` as the plain reading: every string of the payload but its type,
    ``features`` of them all."""
    strings = data.split(b'"')[1::2]
    if strings[:1] == [b"type"]:
        del strings[:2]
    return not features(b"\x00".join(strings).decode("utf-8", "replace")) & rules.bits


# Strings and numbers of a state: what a detector needs, inside strings and out of them.
_state_strings = st.one_of(texts, st.sampled_from(["", "add", "/items/-", "x:y", "Paris"]))
_values = st.recursive(
    st.one_of(
        _state_strings,
        st.integers(-(10**16), 10**16),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.none(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(_state_strings, inner, max_size=6)
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(_values, st.integers(0, 3))
def test_a_payload_found_clean_holds_nothing_to_redact(state: Any, repeat: int) -> None:
    """Large payloads are first screened in one pass over their bytes (``Rules._plain``):
    it finds clean only what the plain reading does, and nothing fires in what it finds
    clean."""
    redactor = Redactor(BUILTIN)
    rules = redactor.rules
    for snapshot in (state, [state] * (40 * repeat)):  # (short, and past ``_LARGE``)
        obj = {"type": "STATE_SNAPSHOT", "snapshot": snapshot}
        data = dump(obj, exact=True)
        if b"\\" in data:
            continue
        reference = _reference_clean(rules, data)
        assert rules.clean(data) == reference
        if rules._plain(data):
            assert reference
        if reference:
            fired: set[str] = set()
            engine.event(rules, "STATE_SNAPSHOT", obj, fired)
            assert not fired
            assert redactor.redacted("STATE_SNAPSHOT", obj, data) is None
