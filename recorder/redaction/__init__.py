"""Redaction at record time: secrets and personal data replaced in the stored bytes.

``Redactor`` applies the settings' rules to one payload at a time: an event as the proxy
decoded it, or a posted RunAgentInput. A match inside a JSON string becomes
``[REDACTED:<rule>]``; the payload is written back as JSON (``recorder.wire.jsontext``), so it
stays valid and the projection reads it as before. A payload nothing matched keeps its exact
bytes. With a key, the result carries a keyed hash (HMAC-SHA256) of the original bytes.

``redact_payload`` is the same as a pure function of bytes, for what is already recorded.

engine.py      rules compiled into matchers; which strings of which event they apply to
detectors.py   the built-in detectors (email, phone, card, token, ip)
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any, NamedTuple

import orjson

from recorder.config import RedactionConfig, RedactionRule
from recorder.redaction import engine
from recorder.redaction.detectors import features
from recorder.redaction.engine import MESSAGES, Rules, replacement
from recorder.wire.jsontext import dump, parse

# The event type given to ``redact_payload`` for a run's posted input.
RUN_INPUT = "RunAgentInput"


class Result(NamedTuple):
    """A redacted payload: its bytes (the original's when nothing fired), the rules that
    fired (sorted), the keyed hash of the original (None without a key or a change)."""

    payload: bytes
    fired: tuple[str, ...]
    mac: str | None = None


class Redactor:
    def __init__(self, rules: Iterable[RedactionRule], key: str | bytes | None = None) -> None:
        self.rules = Rules(rules)
        self._key = key.encode() if isinstance(key, str) else key
        # For each event type whose data is one string field: that field, the keys such an
        # event may have besides it, and the detectors that apply to it (0: not decided
        # here, as a custom pattern applies).
        self._plans = engine.plans(self.rules)

    @classmethod
    def from_config(cls, config: RedactionConfig) -> Redactor:
        return cls(config.rules, config.key)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def mac(self, original: bytes) -> str | None:
        if self._key is None:
            return None
        return hmac.new(self._key, original, hashlib.sha256).hexdigest()

    def event(
        self, kind: str | None, obj: dict[str, Any] | None, data: bytes
    ) -> tuple[Result, dict[str, Any] | None]:
        """The event ``data`` (decoded as ``obj``, None when it is not a JSON object), and
        the event as stored (``obj`` itself when nothing fired)."""
        if obj is None:
            fired: set[str] = set()
            matcher = self.rules.matcher(engine.EVERYWHERE)
            text = data.decode("utf-8", "replace")
            new_text = matcher.sub(text, fired) if matcher is not None else text
            return self._result(data, new_text.encode() if fired else None, fired), None
        return self.redacted(kind, obj, data) or (Result(data, ()), obj)

    def quiet(self, kind: str | None, obj: dict[str, Any]) -> bool:
        """True when the event certainly needs nothing, decided on its one string field by
        its type's plan (``engine.plans``) in a few hundred nanoseconds for a text delta. An
        event of ids and names alone (a message's start or end) needs nothing either."""
        plan = self._plans.get(kind)  # type: ignore[arg-type]
        if plan is not None and plan.allowed.issuperset(obj):
            value = obj.get(plan.field)
            if type(value) is str:
                return not features(value) & plan.bits
        return obj.keys() <= engine.SKIP

    def redacted(
        self, kind: str | None, obj: dict[str, Any], data: bytes
    ) -> tuple[Result, dict[str, Any]] | None:
        """``event`` when a rule fired in it, else None: what the proxy asks of every event.
        An event of one string field (a text delta) is screened by its type's plan and,
        when a detector could match, searched on that string alone, its ``features`` found
        once; any other, unless its strings certainly hold nothing, walked."""
        fired: set[str] = set()
        plan = self._plans.get(kind)  # type: ignore[arg-type]
        if plan is not None:
            value = obj.get(plan.field)
            if type(value) is str and plan.allowed.issuperset(obj):
                bits = features(value) & plan.bits if plan.bits else 0
                if not bits:
                    return None
                assert plan.matcher is not None  # (bits come from its detectors)
                new_value = plan.matcher.sub(value, fired, bits)
                if not fired:
                    return None
                new = {**obj, plan.field: new_value}
                return self._result(data, dump(new, exact=True), fired), new
        if engine.quiet(kind, obj, self.rules) or self.rules.clean(data):
            return None
        new = engine.event(self.rules, kind, obj, fired)
        return (self._result(data, dump(new, exact=True), fired), new) if fired else None

    def run_input(self, body: bytes, posted: dict[str, Any]) -> tuple[Result, dict[str, Any]]:
        """A posted RunAgentInput (``body``, decoded as ``posted``) and the input as stored."""
        fired: set[str] = set()
        new = engine.run_input(self.rules, posted, fired)
        return self._result(body, dump(new, exact=True) if fired else None, fired), new

    def text(self, text: str) -> str:
        """Message text (a thread's summary) with the message rules applied."""
        matcher = self.rules.matcher(MESSAGES)
        return matcher.sub(text, set()) if matcher is not None else text

    def _result(self, original: bytes, new: bytes | None, fired: set[str]) -> Result:
        if new is None or not fired:
            return Result(original, ())
        return Result(new, tuple(sorted(fired)), self.mac(original))


def redact_payload(
    event_type: str | None,
    payload: bytes,
    rules: Redactor | Iterable[RedactionRule],
) -> tuple[bytes, tuple[str, ...]]:
    """``payload`` (an event of ``event_type``, or a posted input: ``RUN_INPUT``) with the
    rules applied, and the rules that fired; the very bytes when none did. The keyed hash
    of the original is ``Redactor.mac(payload)`` (or ``redact``'s result)."""
    result = redact(event_type, payload, rules)
    return result.payload, result.fired


def redact(
    event_type: str | None,
    payload: bytes,
    rules: Redactor | Iterable[RedactionRule],
    *,
    key: str | bytes | None = None,
) -> Result:
    """``redact_payload`` with the keyed hash of the original: ``(new_bytes, fired, mac)``."""
    redactor = rules if isinstance(rules, Redactor) else Redactor(rules, key)
    try:
        obj = parse(payload)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return redactor.event(event_type, None, payload)[0]
    if event_type == RUN_INPUT:
        return redactor.run_input(payload, obj)[0]
    return redactor.event(event_type, obj, payload)[0]


def error_redacted(error: str, redactor: Redactor) -> str:
    """``error`` with the rules applied as to a RUN_ERROR event's message."""
    event = orjson.dumps({"type": "RUN_ERROR", "message": error})
    result = redact("RUN_ERROR", event, redactor)
    if not result.fired:
        return error
    message = orjson.loads(result.payload).get("message")
    return message if isinstance(message, str) else error


__all__ = [
    "RUN_INPUT",
    "Redactor",
    "Result",
    "error_redacted",
    "redact",
    "redact_payload",
    "replacement",
]
