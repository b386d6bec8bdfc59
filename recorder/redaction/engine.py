"""Rules compiled into matchers, and the walk that applies them to the strings of a payload.

A ``Matcher`` is the rules that apply to one kind of data, joined into one regular
expression, so a string that holds nothing to redact (nearly all of them) costs one search.
A candidate that a detector's check refuses (a 16-digit number failing Luhn) is not
redacted, and the other rules still get their chance at that place.

Which rules apply to which string follows the AG-UI event it is in (``FIELDS``): a text
delta is message content, a TOOL_CALL_ARGS delta a tool call's arguments, and so on. Other
strings of an event (apart from its ids, type and names, ``SKIP``) are for "everywhere"
rules only. Keys of objects are never rewritten; nor are JSON Patch paths (a redacted path
would point elsewhere): only the values a patch writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from recorder.config import RedactionRule
from recorder.redaction.detectors import BITS, CHECKS, PATTERNS, features

MESSAGES, TOOL_ARGS, TOOL_RESULTS, STATE, INPUT, EVERYWHERE = (
    "messages",
    "tool_args",
    "tool_results",
    "state",
    "input",
    "everywhere",
)
# Strings that name or order things rather than say them: never rewritten.
SKIP = frozenset(
    {
        "type",
        "role",
        "id",
        "messageId",
        "parentMessageId",
        "toolCallId",
        "toolCallName",
        "threadId",
        "runId",
        "parentRunId",
        "timestamp",
        "name",
    }
)
_MESSAGE_PARTS = "_messages"
_RUN_INPUT = "_input"
_PATCH = "_patch"
# The field of each event type that holds data of a kind, and that kind.
FIELDS: dict[str, dict[str, str]] = {
    "TEXT_MESSAGE_CONTENT": {"delta": MESSAGES},
    "TEXT_MESSAGE_CHUNK": {"delta": MESSAGES},
    "REASONING_MESSAGE_CONTENT": {"delta": MESSAGES},
    "REASONING_MESSAGE_CHUNK": {"delta": MESSAGES},
    "THINKING_TEXT_MESSAGE_CONTENT": {"delta": MESSAGES},
    "TOOL_CALL_ARGS": {"delta": TOOL_ARGS},
    "TOOL_CALL_CHUNK": {"delta": TOOL_ARGS},
    "TOOL_CALL_RESULT": {"content": TOOL_RESULTS},
    "STATE_SNAPSHOT": {"snapshot": STATE},
    "STATE_DELTA": {"delta": _PATCH},
    "MESSAGES_SNAPSHOT": {"messages": _MESSAGE_PARTS},
    "RUN_STARTED": {"input": _RUN_INPUT},
}
# Bytes that no detector needs in a string (``Rules._plain``), a bearer token's aside; and
# the size from which a payload is first looked at that way (below it, it costs more than
# it saves).
_LARGE = 1024
_NOT_SIGNALS = bytes(b for b in range(256) if chr(b) not in '"0123456789@:_AJ-')
_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def replacement(rule: str) -> str:
    return f"[REDACTED:{rule}]"


@dataclass(frozen=True)
class _Rule:
    name: str
    source: str
    regex: re.Pattern[str]
    check: Callable[[str], bool] | None
    bit: int  # the detector's bit in ``features`` (0: a custom rule, always searched)


def _source(rule: RedactionRule) -> str:
    if rule.detector is not None:  # ASCII: the digits ``features`` looks for
        return f"(?a:{PATTERNS[rule.detector]})"
    pattern = rule.pattern or ""
    flags = _GLOBAL_FLAGS.match(pattern)
    if flags:  # (?i) at the start: scoped to the rule, as it is joined with others
        return f"(?{flags.group(1)}:{pattern[flags.end() :]})"
    return pattern


class _Search:
    """Some rules joined into one alternation."""

    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules
        try:
            joined: re.Pattern[str] | None = re.compile("|".join(f"(?:{r.source})" for r in rules))
        except re.error:  # a custom pattern that cannot be joined (a numbered backreference)
            joined = None
        self.search = joined.search if joined is not None else self._search_each

    def _search_each(self, text: str, pos: int = 0) -> re.Match[str] | None:
        found = [m for r in self.rules if (m := r.regex.search(text, pos))]
        return min(found, key=lambda m: m.start()) if found else None

    def accepted(self, text: str, at: int) -> tuple[str, int] | None:
        """The first rule (in order) that matches at ``at`` and passes its check."""
        for rule in self.rules:
            m = rule.regex.match(text, at)
            if m is None or m.end() == at:
                continue
            if rule.check is None or rule.check(m.group()):
                return rule.name, m.end()
        return None


class Matcher:
    """Some rules, searched for at once: only those whose detector could match the string
    (``features``), with every custom rule."""

    def __init__(self, rules: Sequence[RedactionRule]) -> None:
        self.rules = [
            _Rule(
                r.name,
                _source(r),
                re.compile(_source(r)),
                CHECKS.get(r.detector) if r.detector is not None else None,
                BITS[r.detector] if r.detector is not None else 0,
            )
            for r in rules
        ]
        self._bits = 0
        for rule in self.rules:
            self._bits |= rule.bit
        self._custom = any(rule.bit == 0 for rule in self.rules)
        # Only detectors: a string none of whose ``features`` they need is left as it is.
        self.bits = 0 if self._custom else self._bits
        self._searches: dict[int, _Search] = {}

    def _search(self, bits: int) -> _Search:
        search = self._searches.get(bits)
        if search is None:
            chosen = [r for r in self.rules if r.bit == 0 or r.bit & bits]
            search = self._searches[bits] = _Search(chosen)
        return search

    def sub(self, text: str, fired: set[str], bits: int | None = None) -> str:
        """``text`` with every match replaced; the rules that fired are added to ``fired``.
        ``bits``: ``features(text) & self.bits``, when the caller has it already."""
        out: list[str] = []
        done = 0
        for start, end, name in self.hits(text, bits):
            out += [text[done:start], replacement(name)]
            fired.add(name)
            done = end
        if not out:
            return text
        out.append(text[done:])
        return "".join(out)

    def hits(self, text: str, bits: int | None = None) -> Iterator[tuple[int, int, str]]:
        """Where ``text`` holds something to redact, in order and apart: each place's start,
        end and the rule that matched there."""
        if bits is None:
            bits = features(text) & self._bits if self._bits else 0
        if not bits and not self._custom:
            return
        search = self._search(bits)
        match = search.search(text)
        while match is not None:
            hit = search.accepted(text, match.start())
            if hit is None:
                match = search.search(text, match.start() + 1)
                continue
            name, end = hit
            yield match.start(), end, name
            match = search.search(text, end) if end > match.start() else None


# Event types whose data is one string field: checked without walking the event.
_SINGLE: dict[str, tuple[str, str, frozenset[str]]] = {
    kind: (field, data_kind, SKIP | {field})
    for kind, fields in FIELDS.items()
    for field, data_kind in fields.items()
    if kind.endswith(("_CONTENT", "_CHUNK", "_ARGS", "_RESULT"))
}


class Plan(NamedTuple):
    """How an event type whose data is one string field is screened (``Redactor.quiet``)."""

    field: str
    allowed: frozenset[str]  # the keys such an event may hold, that field's included
    bits: int  # the detectors of its rules (0: no rule for its data, nothing to look for)
    matcher: Matcher | None  # its rules (None: no rule for its data)


def plans(rules: Rules) -> dict[str, Plan]:
    """For each single-field event type whose rules are detectors only (or none): its
    ``Plan``."""
    found: dict[str, Plan] = {}
    for kind, (field, data_kind, allowed) in _SINGLE.items():
        matcher = rules.matcher(data_kind)
        if matcher is None:  # no rule for this data: nothing to look for
            found[kind] = Plan(field, allowed, 0, None)
        elif matcher.bits:
            found[kind] = Plan(field, allowed, matcher.bits, matcher)
    return found


def quiet(kind: str | None, obj: dict[str, Any], rules: Rules) -> bool:
    """True when the event certainly needs nothing: one string field (a text delta, a tool
    call's arguments) in which no detector of its rules could match. The proxy's common
    case, decided in well under a microsecond."""
    if obj.keys() <= SKIP:  # (TEXT_MESSAGE_START, TOOL_CALL_END...: ids and names only)
        return True
    single = _SINGLE.get(kind or "")
    if single is None or not obj.keys() <= single[2]:
        return False
    value = obj.get(single[0])
    if type(value) is not str:
        return value is None
    matcher = rules.matcher(single[1])
    return matcher is None or (matcher.bits != 0 and not features(value) & matcher.bits)


class Rules:
    """A rule set, compiled once: the matcher for each kind of data (and combination of
    kinds), made when first needed."""

    def __init__(self, rules: Iterable[RedactionRule]) -> None:
        self.rules = tuple(rules)
        self._matchers: dict[tuple[str, ...], Matcher | None] = {}
        # The detectors of the rules, when every rule is a detector (none is a pattern).
        self.bits = 0
        if all(r.detector is not None for r in self.rules):
            for r in self.rules:
                self.bits |= BITS[r.detector or ""]

    def clean(self, data: bytes) -> bool:
        """True when no rule can match any string of the JSON ``data``: its strings (keys
        too, but not its type, which comes first), read off the raw bytes, hold nothing any
        detector needs. Only for a payload with no escape in it (an escaped quote would
        misplace the strings), and only when every rule is a detector (a pattern is not
        known by its needs)."""
        if not self.bits or b"\\" in data:
            return False
        if len(data) > _LARGE and self._plain(data):
            return True
        strings = data.split(b'"')[1::2]
        if strings[:1] == [b"type"]:
            del strings[:2]
        return not features(b"\x00".join(strings).decode("utf-8", "replace")) & self.bits

    def _plain(self, data: bytes) -> bool:
        """True when no string of ``data`` holds a character that a detector needs, found
        in one pass over the bytes: after the type (whose value holds an underscore), keep
        the quotes and those characters (``_NOT_SIGNALS`` drops the rest), then drop each
        pair of quotes side by side. A quote is left only where a string holds one of them:
        outside strings they are numbers and punctuation, between two strings, never inside
        one. A bearer token needs none of them, and is looked for as itself."""
        body = data[data.find(b'"', 9) + 1 :] if data.startswith(b'{"type":"') else data
        if b'"' in body.translate(None, _NOT_SIGNALS).replace(b'""', b""):
            return False
        return not self.bits & BITS["token"] or (b"earer" not in body and b"EARER" not in body)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def matcher(self, *kinds: str) -> Matcher | None:
        """The rules that apply to data of any of ``kinds`` (and those for everywhere)."""
        try:
            return self._matchers[kinds]
        except KeyError:
            wanted = {*kinds, EVERYWHERE}
            chosen = [r for r in self.rules if wanted & set(r.where)]
            found = self._matchers[kinds] = Matcher(chosen) if chosen else None
            return found


def deep(value: Any, matcher: Matcher | None, fired: set[str]) -> Any:
    """``value`` with every string in it (not the keys) redacted; the very object when
    nothing changed."""
    if matcher is None:
        return value
    if isinstance(value, str):
        return matcher.sub(value, fired)
    if isinstance(value, list):
        items = [deep(v, matcher, fired) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, dict):
        return _fields(value, lambda _k: matcher, fired, skip=frozenset())
    return value


def _fields(
    obj: Mapping[str, Any],
    matcher_for: Callable[[str], Matcher | None],
    fired: set[str],
    *,
    skip: frozenset[str] = SKIP,
) -> Any:
    changed: dict[str, Any] = {}
    for key, value in obj.items():
        if key in skip:
            continue
        new = deep(value, matcher_for(key), fired)
        if new is not value:
            changed[key] = new
    return {**obj, **changed} if changed else obj


def event(rules: Rules, kind: str | None, obj: dict[str, Any], fired: set[str]) -> Any:
    """The event ``obj`` (of type ``kind``) redacted; ``obj`` itself when nothing fired."""
    single = _SINGLE.get(kind or "")
    if single is not None and obj.keys() <= single[2]:  # (the common case: a text delta)
        field, data_kind, _ = single
        value = obj.get(field)
        matcher = rules.matcher(data_kind)
        if matcher is None or value is None:
            return obj
        new = matcher.sub(value, fired) if type(value) is str else deep(value, matcher, fired)
        return obj if new is value else {**obj, field: new}
    fields = FIELDS.get(kind or "", {})
    base = (EVERYWHERE,)
    changed: dict[str, Any] = {}
    for key, value in obj.items():
        if key in SKIP:
            continue
        kind_of = fields.get(key)
        if kind_of == _MESSAGE_PARTS:
            new = messages(rules, value, base, fired)
        elif kind_of == _RUN_INPUT:
            new = run_input(rules, value, fired) if isinstance(value, dict) else value
        elif kind_of == _PATCH:
            new = patch(value, rules.matcher(STATE), fired)
        else:
            new = deep(value, rules.matcher(kind_of or EVERYWHERE), fired)
        if new is not value:
            changed[key] = new
    return {**obj, **changed} if changed else obj


def run_input(rules: Rules, posted: dict[str, Any], fired: set[str]) -> Any:
    """A RunAgentInput redacted: its messages by their parts, its state as state, every
    other string as input (the rules for "input" apply to all of it)."""
    changed: dict[str, Any] = {}
    for key, value in posted.items():
        if key in SKIP:
            continue
        if key == "messages":
            new = messages(rules, value, (INPUT,), fired)
        elif key == "state":
            new = deep(value, rules.matcher(STATE, INPUT), fired)
        else:
            new = deep(value, rules.matcher(INPUT), fired)
        if new is not value:
            changed[key] = new
    return {**posted, **changed} if changed else posted


def messages(rules: Rules, value: Any, base: tuple[str, ...], fired: set[str]) -> Any:
    """A list of AG-UI messages: content as message text (a tool message's as a tool
    result), tool calls' arguments as tool arguments, the rest for ``base`` rules."""
    if not isinstance(value, list):
        return deep(value, rules.matcher(*base), fired)
    out = [_message(rules, m, base, fired) if isinstance(m, dict) else m for m in value]
    return out if any(a is not b for a, b in zip(out, value, strict=True)) else value


def _message(rules: Rules, message: dict[str, Any], base: tuple[str, ...], fired: set[str]) -> Any:
    content_kind = TOOL_RESULTS if message.get("role") == "tool" else MESSAGES
    content = rules.matcher(content_kind, *base)
    other = rules.matcher(*base)

    def matcher_for(key: str) -> Matcher | None:
        if key == "toolCalls":
            return None  # below, each call's arguments as tool arguments
        return content if key == "content" else other

    redacted = _fields(message, matcher_for, fired)
    calls = message.get("toolCalls")
    if isinstance(calls, list):
        new_calls = [_tool_call(rules, c, base, fired) for c in calls]
        if any(a is not b for a, b in zip(new_calls, calls, strict=True)):
            redacted = {**redacted, "toolCalls": new_calls}
    return redacted


def _tool_call(rules: Rules, call: Any, base: tuple[str, ...], fired: set[str]) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return call
    args = rules.matcher(TOOL_ARGS, *base)
    new = _fields(function, lambda key: args if key == "arguments" else None, fired)
    return call if new is function else {**call, "function": new}


def patch(value: Any, matcher: Matcher | None, fired: set[str]) -> Any:
    """A JSON Patch: only the values its operations write."""
    if not isinstance(value, list) or matcher is None:
        return value
    out = [
        {**op, "value": deep(op["value"], matcher, fired)}
        if isinstance(op, dict) and "value" in op
        else op
        for op in value
    ]
    changed = any(
        isinstance(a, dict) and "value" in a and a["value"] is not b.get("value")
        for a, b in zip(out, value, strict=True)
        if isinstance(b, dict)
    )
    return out if changed else value
