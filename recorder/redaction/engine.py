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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recorder.config import RedactionRule
from recorder.redaction.detectors import CHECKS, PATTERNS

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
_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def replacement(rule: str) -> str:
    return f"[REDACTED:{rule}]"


@dataclass(frozen=True)
class _Rule:
    name: str
    regex: re.Pattern[str]
    check: Callable[[str], bool] | None


def _source(rule: RedactionRule) -> str:
    if rule.detector is not None:
        return PATTERNS[rule.detector]
    pattern = rule.pattern or ""
    flags = _GLOBAL_FLAGS.match(pattern)
    if flags:  # (?i) at the start: scoped to the rule, as it is joined with others
        return f"(?{flags.group(1)}:{pattern[flags.end() :]})"
    return pattern


class Matcher:
    """Some rules, searched for at once."""

    def __init__(self, rules: Sequence[RedactionRule]) -> None:
        self.rules = [
            _Rule(
                r.name,
                re.compile(_source(r)),
                CHECKS.get(r.detector) if r.detector is not None else None,
            )
            for r in rules
        ]
        self._groups = [f"r{i}" for i in range(len(self.rules))]
        joined = "|".join(
            f"(?P<{g}>{_source(r)})" for g, r in zip(self._groups, rules, strict=True)
        )
        try:
            self._any: re.Pattern[str] | None = re.compile(joined) if rules else None
        except re.error:  # a custom pattern that cannot be joined (a numbered backreference)
            self._any = None
        self.search = self._any.search if self._any is not None else self._search_each

    def _search_each(self, text: str, pos: int = 0) -> re.Match[str] | None:
        found = [m for r in self.rules if (m := r.regex.search(text, pos))]
        return min(found, key=lambda m: m.start()) if found else None

    def sub(self, text: str, fired: set[str]) -> str:
        """``text`` with every match replaced; the rules that fired are added to ``fired``."""
        match = self.search(text)
        if match is None:
            return text
        out: list[str] = []
        done = 0
        while match is not None:
            hit = self._accepted(text, match.start())
            if hit is None:
                match = self.search(text, match.start() + 1)
                continue
            name, end = hit
            out += [text[done : match.start()], replacement(name)]
            fired.add(name)
            done = end
            match = self.search(text, end) if end > match.start() else None
        out.append(text[done:])
        return "".join(out)

    def _accepted(self, text: str, at: int) -> tuple[str, int] | None:
        """The first rule (in order) that matches at ``at`` and passes its check."""
        for rule in self.rules:
            m = rule.regex.match(text, at)
            if m is None or m.end() == at:
                continue
            if rule.check is None or rule.check(m.group()):
                return rule.name, m.end()
        return None


class Rules:
    """A rule set, compiled once: the matcher for each kind of data (and combination of
    kinds), made when first needed."""

    def __init__(self, rules: Iterable[RedactionRule]) -> None:
        self.rules = tuple(rules)
        self._matchers: dict[frozenset[str], Matcher | None] = {}

    def __bool__(self) -> bool:
        return bool(self.rules)

    def matcher(self, *kinds: str) -> Matcher | None:
        """The rules that apply to data of any of ``kinds`` (and those for everywhere)."""
        key = frozenset(kinds)
        if key not in self._matchers:
            wanted = key | {EVERYWHERE}
            chosen = [r for r in self.rules if wanted & set(r.where)]
            self._matchers[key] = Matcher(chosen) if chosen else None
        return self._matchers[key]


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
