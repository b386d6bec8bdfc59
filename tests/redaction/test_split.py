"""Secrets split across streamed deltas (``split_secrets``): found in the text a message's
deltas make together, taken out of the deltas they span so that those deltas join to the
redacted text, and only the deltas that held part of one changed."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from recorder.config import RedactionConfig, RedactionRule
from recorder.redaction import Redactor, redact
from recorder.redaction.streamed import split_secrets

BUILTIN = Redactor(RedactionConfig(rules="builtin").rules)


def frames(*events: dict[str, Any]) -> list[tuple[int, str, bytes]]:
    return [(seq, e["type"], json.dumps(e).encode()) for seq, e in enumerate(events)]


def text(message: str, delta: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": delta}


def deltas(events: list[tuple[int, str, bytes]], changed: dict[int, bytes]) -> list[str]:
    return [json.loads(changed.get(seq, payload)).get("delta", "") for seq, _, payload in events]


def test_an_address_cut_in_three_is_redacted_where_it_starts() -> None:
    events = frames(
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        text("m1", "Mail bob"),
        text("m1", "@exa"),
        text("m1", "mple.com today"),
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    )
    split = split_secrets(events, BUILTIN)
    assert split.fired == {"email"}
    assert sorted(split.payloads) == [1, 2, 3]
    assert split.rules == {1: {"email"}, 2: {"email"}, 3: {"email"}}
    # The delta inside it is emptied, the others keep what is theirs.
    assert deltas(events, split.payloads) == ["", "Mail [REDACTED:email]", "", " today", ""]
    # Everything else of each event is kept, in its order.
    assert list(json.loads(split.payloads[2])) == ["type", "messageId", "delta"]


def test_messages_are_joined_by_their_ids_not_by_their_order() -> None:
    events = frames(
        text("m1", "write to carol@exa"),
        text("m2", "nothing here"),
        text("m1", "mple.org please"),
        text("m2", " and bob@"),
        text("m1", "."),
        text("m2", "x.org"),
    )
    split = split_secrets(events, BUILTIN)
    assert deltas(events, split.payloads) == [
        "write to [REDACTED:email]",
        "nothing here",
        " please",
        " and [REDACTED:email]",
        ".",
        "",
    ]
    # Two messages' texts are never joined: an address made only across them is not one.
    apart = frames(text("m1", "bob@"), text("m2", "example.com"))
    assert split_secrets(apart, BUILTIN).payloads == {}


def test_a_chunk_without_an_id_continues_the_last_one_named() -> None:
    events = frames(
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant", "delta": "key sk-"},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": "abcdefghijklmnop"},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": "qrstuvwx ok"},
    )
    split = split_secrets(events, BUILTIN)
    assert deltas(events, split.payloads) == ["key [REDACTED:token]", "", " ok"]
    assert json.loads(split.payloads[0])["role"] == "assistant"


def test_tool_arguments_and_thinking_spans() -> None:
    rules = Redactor(
        [
            RedactionRule(name="ticket", pattern=r"TCK-\d+", where=("tool_args",)),
            RedactionRule(name="email", detector="email", where=("messages",)),
        ]
    )
    events = frames(
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "refund"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"ticket":"TC'},
        {"type": "TOOL_CALL_CHUNK", "delta": 'K-4242"}'},
        {"type": "THINKING_TEXT_MESSAGE_START"},
        {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "ask a@"},
        {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "b.io"},
        {"type": "THINKING_TEXT_MESSAGE_END"},
        {"type": "THINKING_TEXT_MESSAGE_START"},
        {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "x@"},
        {"type": "THINKING_TEXT_MESSAGE_END"},
        {"type": "THINKING_TEXT_MESSAGE_START"},
        {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "y.io"},
    )
    split = split_secrets(events, rules)
    assert split.fired == {"ticket", "email"}
    got = deltas(events, split.payloads)
    assert got[1:3] == ['{"ticket":"[REDACTED:ticket]', '"}']
    assert got[4:6] == ["ask [REDACTED:email]", ""]
    # Two thinking spans are two texts.
    assert 8 not in split.payloads and 11 not in split.payloads
    # A rule for tool arguments only is not applied to message text, and the reverse.
    only_args = Redactor([RedactionRule(name="email", detector="email", where=("tool_args",))])
    assert split_secrets(frames(text("m", "a@"), text("m", "b.io")), only_args).payloads == {}


def test_nothing_split_changes_nothing() -> None:
    events = frames(text("m1", "hello "), text("m1", "world"), text("m1", " [REDACTED:email]"))
    assert split_secrets(events, BUILTIN).payloads == {}  # whole in one delta: redacted already
    assert split_secrets(frames(text("m1", "a@b.io")), BUILTIN).payloads == {}
    broken = [(0, "TEXT_MESSAGE_CONTENT", b"not json"), (1, "TEXT_MESSAGE_CONTENT", b"[1]")]
    assert split_secrets(broken, BUILTIN).payloads == {}


def test_the_rest_of_a_secret_one_delta_matched_alone_is_cut_from_the_next() -> None:
    """A key or an address cut after what a rule needs: the first delta alone matched it,
    so it was stored redacted, and its rest begins the next delta. Joined from the stored
    deltas (record time: the originals are gone), the rest is cut; joined from the
    originals (an import, ``recorder redact``), the whole is found."""
    named = Redactor([RedactionRule(name="mail", detector="email")])
    cases = [
        (BUILTIN, ["key sk-abcdefghijklmnopqr", "stuvwxyz0123", "456789 end"], "token", " end"),
        (BUILTIN, ["mail bob@example.co", "m today"], "email", " today"),
        (named, ["mail bob@example.co", "m today"], "mail", " today"),
    ]
    for rules, pieces, rule, tail in cases:
        originals = frames(*(text("m1", p) for p in pieces))
        stored = [(seq, kind, redact(kind, p, rules).payload) for seq, kind, p in originals]
        for events, kept in ((stored, None), (originals, {0: stored[0][2]})):
            split = split_secrets(events, rules, stored=kept)
            got = "".join(deltas(events, split.payloads))
            assert got == f"{pieces[0].split()[0]} [REDACTED:{rule}]{tail}", got
            assert all(split.rules[seq] == {rule} for seq in split.payloads)
    # A replacement that ends a delta before a word of its own takes nothing from it.
    apart = frames(text("m1", "mail [REDACTED:email]"), text("m1", " and more"))
    assert split_secrets(apart, BUILTIN).payloads == {}


def test_an_id_that_is_not_a_string_is_no_message_of_its_own() -> None:
    events = frames(
        text("m1", "write to bob@exa"),
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": {"odd": 1}, "delta": "mple.com"},
    )
    split = split_secrets(events, BUILTIN)  # (not a TypeError: it continues m1)
    assert deltas(events, split.payloads) == ["write to [REDACTED:email]", ""]


SECRETS = ["bob@example.com", "sk-abcdefghijklmnopqrstuvwx", "4111 1111 1111 1111", "10.1.2.3"]
# Words between secrets (two card numbers side by side read as one longer number, which
# is not a card: a detector's limit, not the joining's).
FILLER = st.text(alphabet="abc ,.!", max_size=12).map(lambda s: f" x{s} ")


@settings(max_examples=120, deadline=None)
@given(
    parts=st.lists(st.tuples(FILLER, st.sampled_from(SECRETS)), min_size=1, max_size=4),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_any_cut_of_a_message_joins_to_the_message_redacted(
    parts: list[tuple[str, str]], cuts: list[int]
) -> None:
    whole = "".join(filler + secret for filler, secret in parts) + " end"
    points = sorted({0, len(whole), *(c % (len(whole) + 1) for c in cuts)})
    pieces = [whole[a:b] for a, b in itertools.pairwise(points)] or [whole]
    events = frames(*(text("m1", p) for p in pieces))

    # On the deltas as they came: the joined result is the message redacted as a whole (a
    # message of one delta is left to that delta's own redaction).
    split = split_secrets(events, BUILTIN)
    expected = BUILTIN.text(whole) if len(pieces) > 1 else whole
    assert "".join(deltas(events, split.payloads)) == expected

    # On the deltas as the proxy stored them (each redacted alone first): no secret is left.
    stored = []
    for seq, kind, payload in events:
        stored.append((seq, kind, redact(kind, payload, BUILTIN).payload))
    after = split_secrets(stored, BUILTIN)
    joined = "".join(deltas(stored, after.payloads))
    for secret in SECRETS:
        assert secret not in joined
    assert not list(BUILTIN.rules.matcher("messages").hits(joined))  # type: ignore[union-attr]
