"""Lifecycle verification: a port of the reference client's ``verifyEvents`` (AG-UI 1.0).

The reference (``@ag-ui/client@1.0.0``, ``src/verify/verify.ts``) is an RxJS operator that
errors the stream at the first violation. A recorder wants every problem, so `Verifier`
answers each event with its `Violation`, leaves the offending event's effect out of its
state and goes on checking. Up to and including the first violation the two agree exactly,
error text included; ``tests/reference/test_verify_interop.py`` holds this port to the real
client. The checks that need no state, and the texts, are in
``recorder.reference.verify_fields``.

Like the reference it checks events that went through the earlier stages
(``recorder.reference``; ``recorder.reference.check`` runs them all): ``*_CHUNK`` events and
unknown types pass without checks.

The reference reads event fields as they come, unvalidated, so an id may be a number, null,
absent or an object. Ids and subagent tags are therefore turned into `Key`s that compare the
way a JavaScript ``Map`` compares its keys and that remember how JavaScript would print them
(``recorder.reference.jsvalues``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from recorder.reference import JSONObject
from recorder.reference.jsvalues import (
    UNDEFINED,
    UNDEFINED_KEY,
    Key,
    MapKeys,
    js_string,
    show,
    show_joined,
)
from recorder.reference.verify_fields import (
    ALREADY_OPEN,
    NOT_OPEN,
    describe,
    null_error,
    seed_error,
    show_owner,
    tag_error,
)

# A rule for one event type: (verifier, event, type) -> the violation's text, or None.
Handler = Callable[["Verifier", JSONObject, str], str | None]


@dataclass(frozen=True, slots=True)
class Violation:
    index: int  # 0-based position in the fed sequence, across feed calls
    type: str | None
    message: str  # the reference's error text


class Verifier:
    """The reference's per-subscription state machine, fed one parsed event at a time."""

    __slots__ = (
        "_closed_subagents",
        "_first_seen",
        "_keys",
        "_owners",
        "_reasoning",
        "_run_errored",
        "_run_finished",
        "_run_started",
        "_seen",
        "_spans",
        "_steps",
        "_subagents",
        "_text",
        "_tools",
    )

    def __init__(self) -> None:
        self._seen = 0  # events fed so far: the next event's index
        self._keys = MapKeys()  # ids as a JavaScript Map would key them
        self._first_seen = False
        self._run_started = False
        self._run_finished = False
        self._run_errored = False
        # Ordered sets (dicts to None): RUN_FINISHED lists what is still open in JS Set order.
        self._text: dict[Key, None] = {}
        self._tools: dict[Key, None] = {}
        self._spans: dict[Key, None] = {}
        self._reasoning: dict[Key, None] = {}
        # Owner (subagent tag, UNDEFINED_KEY = the parent agent) per entity kind, kept after the
        # entity closes: a late continuation (an encrypted value after TOOL_CALL_END) or a
        # reopen must still agree with whoever opened the id.
        self._owners: dict[str, dict[Key, Key]] = {
            kind: {} for kind in ("message", "toolCall", "activity", "reasoning")
        }
        # owner -> open step names. Nested, not joined, so that the parent and a subagent
        # whose id is "" stay apart; emptied owners stay, as in the reference's Map, so the
        # listing order at RUN_FINISHED is the same.
        self._steps: dict[Key, dict[Key, None]] = {}
        self._subagents: dict[str, None] = {}
        self._closed_subagents: dict[str, None] = {}

    def seen(self) -> None:
        """An event was fed that the caller knows is accepted and changes nothing here."""
        self._seen += 1

    def knows(self, entity: str) -> bool:
        """Whether the stream has used ``entity`` as an id of anything yet (in this run)."""
        return any(entity in owners for owners in self._owners.values()) or any(
            entity in ids for ids in self._open_sets()
        )

    def feed(self, event: JSONObject) -> Violation | None:
        """Check one event; on success apply it to the state, otherwise record why not."""
        index = self._seen
        self._seen += 1
        if type(event) is not dict and not isinstance(event, Mapping):
            return self._record(index, None, "Invalid event: the event is not a JSON object.")
        kind = event.get("type")
        if not isinstance(kind, str):
            return self._record(index, None, "Invalid event: the event carries no string 'type'.")
        message = self._check(event, kind)
        return None if message is None else self._record(index, kind, message)

    def _open_sets(self) -> tuple[dict[Key, None], ...]:
        return (self._text, self._tools, self._spans, self._reasoning)

    # -- the pipeline: run-level pre-checks, null checks, then the per-type rule ---------------

    def _record(self, index: int, kind: str | None, message: str) -> Violation:
        return Violation(index, kind, message)

    def _check(self, event: JSONObject, kind: str) -> str | None:
        message = self._lifecycle_error(kind) or null_error(event, kind)
        if message is not None:
            return message
        handler = _HANDLERS.get(kind)
        if handler is not None:
            message = handler(self, event, kind)
            if message is not None:
                return message
        # Only an accepted event counts as the stream's first: everything before the first
        # accepted RUN_STARTED / RUN_ERROR is reported as outside any run.
        self._first_seen = True
        return None

    def _lifecycle_error(self, kind: str) -> str | None:
        if self._run_errored and kind != "RUN_STARTED":
            return (
                f"Cannot send event type '{kind}': The run has already errored with 'RUN_ERROR'. "
                "No further events can be sent."
            )
        if self._run_finished and kind != "RUN_ERROR" and kind != "RUN_STARTED":
            return (
                f"Cannot send event type '{kind}': The run has already finished with "
                "'RUN_FINISHED'. Start a new run with 'RUN_STARTED'."
            )
        if not self._first_seen:
            if kind != "RUN_STARTED" and kind != "RUN_ERROR":
                return "First event must be 'RUN_STARTED'"
        elif kind == "RUN_STARTED" and self._run_started and not self._run_over():
            return (
                "Cannot send 'RUN_STARTED' while a run is still active. The previous run must "
                "be finished with 'RUN_FINISHED' before starting a new run."
            )
        return None

    def _run_over(self) -> bool:
        return self._run_finished or self._run_errored

    def _tag(self, event: JSONObject) -> Key:
        return self._keys.of(event.get("subagentRunId", UNDEFINED))

    # -- streaming entities: text messages, tool calls, reasoning spans and messages ------------

    def _open(
        self,
        event: JSONObject,
        kind: str,
        field: str,
        ids: dict[Key, None],
        owners: dict[Key, Key],
        label: str,
    ) -> str | None:
        entity = self._keys.of(event.get(field, UNDEFINED))
        if entity in ids:
            return ALREADY_OPEN[kind].format(id=show(entity))
        tag = self._tag(event)
        owner = owners.get(entity)
        if owner is not None:
            # First writer wins: a reopen (after the close) must agree with the first opener.
            message = tag_error(kind, tag, owner, label, entity)
            if message is not None:
                return message
        else:
            owners[entity] = tag
        ids[entity] = None
        return None

    def _continue(
        self,
        event: JSONObject,
        kind: str,
        field: str,
        ids: dict[Key, None],
        owners: dict[Key, Key],
        label: str,
        closes: bool,
    ) -> str | None:
        entity = self._keys.of(event.get(field, UNDEFINED))
        if entity not in ids:
            return NOT_OPEN[kind].format(id=show(entity))
        message = tag_error(kind, self._tag(event), owners.get(entity), label, entity)
        if message is None and closes:
            del ids[entity]
        return message

    def _tool_call_start(self, event: JSONObject, kind: str) -> str | None:
        call = self._keys.of(event.get("toolCallId", UNDEFINED))
        if call in self._tools:
            return ALREADY_OPEN[kind].format(id=show(call))
        tag = self._tag(event)
        # A tool call lives inside the assistant message parentMessageId names and carries no
        # tag of its own, so it cannot belong to anyone but that message's owner.
        parent = event.get("parentMessageId", UNDEFINED)
        inherited = None
        if parent is not UNDEFINED:
            parent_key = self._keys.of(parent)
            inherited = self._owners["message"].get(parent_key)
            if inherited is not None and tag != UNDEFINED_KEY and tag != inherited:
                return (
                    f"Cannot send 'TOOL_CALL_START': subagentRunId '{show(tag)}' does not match "
                    f"its parent message '{show(parent_key)}' owner '{show_owner(inherited)}'. "
                    "A tool call belongs to the message that carries it."
                )
        existing = self._owners["toolCall"].get(call)
        if existing is not None:
            message = tag_error(kind, tag, existing, "tool call", call)
            if message is not None:
                return message
            # An untagged reopen's owner is the one it inherits from its parent message.
            if tag == UNDEFINED_KEY and inherited is not None and inherited != existing:
                return (
                    f"Cannot send 'TOOL_CALL_START': tool call '{show(call)}' is owned by "
                    f"'{show_owner(existing)}' but its parent message "
                    f"'{js_string(parent)}' is owned by '{show_owner(inherited)}'. "
                    "A tool call belongs to the message that carries it."
                )
        else:
            owned = tag if tag != UNDEFINED_KEY or inherited is None else inherited
            self._owners["toolCall"][call] = owned
        self._tools[call] = None
        return None

    def _tool_call_result(self, event: JSONObject, kind: str) -> str | None:
        # It mints the tool message the reducer inserts; the newest result owns it.
        message_id = event.get("messageId")
        if isinstance(message_id, str):
            self._owners["message"][message_id] = self._tag(event)
        return None

    def _encrypted_value(self, event: JSONObject, kind: str) -> str | None:
        # Checked for ownership only: it opens and closes nothing.
        entity = self._keys.of(event.get("entityId", UNDEFINED))
        subtype = event.get("subtype")
        if subtype == "tool-call":
            owner, label = self._owners["toolCall"].get(entity), "tool call"
        elif subtype == "message":
            owner = self._owners["message"].get(entity)
            if owner is None:
                owner = self._owners["reasoning"].get(entity)
            label = "message"
        else:
            owner, label = self._owners["reasoning"].get(entity), "reasoning message"
        return tag_error(kind, self._tag(event), owner, label, entity)

    # -- steps ------------------------------------------------------------------------------------

    def _step_started(self, event: JSONObject, kind: str) -> str | None:
        name, owner = self._keys.of(event.get("stepName", UNDEFINED)), self._tag(event)
        names = self._steps.get(owner)
        if names is not None and name in names:
            where = "" if owner == UNDEFINED_KEY else f" in subagent '{show(owner)}'"
            return f"Step \"{show(name)}\" is already active for 'STEP_STARTED'{where}"
        self._steps.setdefault(owner, {})[name] = None
        return None

    def _step_finished(self, event: JSONObject, kind: str) -> str | None:
        name, owner = self._keys.of(event.get("stepName", UNDEFINED)), self._tag(event)
        names = self._steps.get(owner)
        if names is not None and name in names:
            del names[name]
            return None
        # Finishing a step open only under another owner is the likelier producer bug (a tag
        # stamped from "whichever subagent is current"), so the reference names that owner.
        for other, other_names in self._steps.items():
            if other != owner and name in other_names:
                return (
                    f"Cannot send 'STEP_FINISHED' for step \"{show(name)}\" attributed to "
                    f"{describe(owner)}: that step is open under "
                    f"{describe(other)}. A step must be finished by whoever started it."
                )
        return f"Cannot send 'STEP_FINISHED' for step \"{show(name)}\" that was not started"

    # -- activities and snapshots ----------------------------------------------------------------

    def _activity_snapshot(self, event: JSONObject, kind: str) -> str | None:
        # Only a replacing snapshot re-mints, and so re-owns, an existing activity.
        activity = self._keys.of(event.get("messageId", UNDEFINED))
        owners = self._owners["activity"]
        if activity not in owners or event.get("replace", UNDEFINED) is not False:
            owners[activity] = self._tag(event)
        return None

    def _activity_delta(self, event: JSONObject, kind: str) -> str | None:
        activity = self._keys.of(event.get("messageId", UNDEFINED))
        owner = self._owners["activity"].get(activity)
        return tag_error(kind, self._tag(event), owner, "activity", activity)

    def _messages_snapshot(self, event: JSONObject, kind: str) -> str | None:
        # Authoritative: the reducer replaces each message, so its owner replaces ours.
        messages = event.get("messages")
        message = seed_error(messages)
        if message is None:
            self._seed(messages, authoritative=True)
        return message

    def _seed(self, messages: Any, *, authoritative: bool) -> None:
        """Record the owners of replayed history; `seed_error` has accepted `messages`."""
        if not isinstance(messages, list):
            return
        tool_calls = self._owners["toolCall"]
        for message in messages:
            if not isinstance(message, Mapping) or not isinstance(message.get("id"), str):
                continue
            role = message.get("role")
            # Seed the bucket the role streams through: reasoning continuations are checked
            # against reasoning owners, activity deltas against activity owners.
            owners = self._owners[role if role in ("reasoning", "activity") else "message"]
            owner = self._keys.of(message.get("subagentRunId", UNDEFINED))
            if authoritative or message["id"] not in owners:
                owners[message["id"]] = owner
            # A ToolCall carries no tag: its message's owner is its owner.
            calls = message.get("toolCalls")
            for call in calls if isinstance(calls, list) else ():
                call_id = call.get("id") if isinstance(call, Mapping) else None
                if isinstance(call_id, str) and (authoritative or call_id not in tool_calls):
                    tool_calls[call_id] = owner

    # -- subagents ---------------------------------------------------------------------------

    def _subagent_started(self, event: JSONObject, kind: str) -> str | None:
        subagent = event.get("subagentRunId")
        if not isinstance(subagent, str):
            return "Cannot send 'SUBAGENT_STARTED' without a 'subagentRunId'."
        if not isinstance(event.get("name"), str):
            return "Cannot send 'SUBAGENT_STARTED' without a 'name'."
        if subagent in self._subagents:
            return (
                f"Cannot send 'SUBAGENT_STARTED': subagent '{subagent}' is already active. "
                "Finish it with 'SUBAGENT_FINISHED' first."
            )
        if subagent in self._closed_subagents:
            return (
                f"Cannot send 'SUBAGENT_STARTED': subagent '{subagent}' has already finished in "
                "this run. Subagent IDs are per-invocation and cannot be reused."
            )
        parent = event.get("parentSubagentRunId", UNDEFINED)
        known = isinstance(parent, str) and (
            parent in self._subagents or parent in self._closed_subagents
        )
        if parent is not UNDEFINED and not known:
            return (
                f"Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{js_string(parent)}' "
                "has not been started in this run."
            )
        self._subagents[subagent] = None
        return None

    def _subagent_closed(self, event: JSONObject, kind: str) -> str | None:
        subagent = event.get("subagentRunId")
        if not isinstance(subagent, str):
            return f"Cannot send '{kind}' without a 'subagentRunId'."
        if kind == "SUBAGENT_ERROR" and not isinstance(event.get("message"), str):
            return "Cannot send 'SUBAGENT_ERROR' without a 'message'."
        if subagent not in self._subagents:
            return (
                f"Cannot send '{kind}': no active subagent found with ID '{subagent}'. "
                "A 'SUBAGENT_STARTED' event must be sent first."
            )
        del self._subagents[subagent]
        # Ids are per invocation: a closed one may not be started again in this run.
        self._closed_subagents[subagent] = None
        return None

    # -- runs ---------------------------------------------------------------------------------

    def _run_started_rule(self, event: JSONObject, kind: str) -> str | None:
        run_input = event.get("input")
        messages = run_input.get("messages") if isinstance(run_input, Mapping) else None
        message = seed_error(messages)
        if message is not None:
            return message
        # A stream may carry several runs (a replayed thread): a new one starts from scratch,
        # so message and tool-call ids may be reused.
        if self._run_over():
            self._reset_run()
        self._run_started = True
        # The input echo is history, not a rewrite: it seeds only ids nobody has claimed.
        self._seed(messages, authoritative=False)
        return None

    def _run_finished_rule(self, event: JSONObject, kind: str) -> str | None:
        if any(self._steps.values()):
            steps = ", ".join(
                show_joined(name) if owner == UNDEFINED_KEY else f"{show(name)} ({describe(owner)})"
                for owner, names in self._steps.items()
                for name in names
            )
            return f"Cannot send 'RUN_FINISHED' while steps are still active: {steps}"
        for label, ids in (
            ("text messages", self._text),
            ("reasoning messages", self._reasoning),
            ("reasoning spans", self._spans),
            ("tool calls", self._tools),
            ("subagents", self._subagents),
        ):
            if ids:
                listed = ", ".join(show_joined(entity) for entity in ids)
                return f"Cannot send 'RUN_FINISHED' while {label} are still active: {listed}"
        self._run_finished = True
        return None

    def _run_error_rule(self, event: JSONObject, kind: str) -> str | None:
        # Allowed at any time; open entities do not block it.
        self._run_errored = True
        return None

    def _reset_run(self) -> None:
        for ids in self._open_sets():
            ids.clear()
        for owners in self._owners.values():
            owners.clear()
        self._steps.clear()
        self._subagents.clear()
        self._closed_subagents.clear()
        self._run_finished = self._run_errored = False


def _opener(ids: str, owners: str, field: str, label: str) -> Handler:
    """The rule for an event that opens an entity (``ids``: the verifier's set of open ones)."""

    def rule(verifier: Verifier, event: JSONObject, kind: str) -> str | None:
        open_ids = getattr(verifier, ids)
        return verifier._open(event, kind, field, open_ids, verifier._owners[owners], label)

    return rule


def _follower(ids: str, owners: str, field: str, label: str, closes: bool) -> Handler:
    """The rule for an event that continues (or, with ``closes``, ends) an open entity."""

    def rule(verifier: Verifier, event: JSONObject, kind: str) -> str | None:
        open_ids = getattr(verifier, ids)
        owned = verifier._owners[owners]
        return verifier._continue(event, kind, field, open_ids, owned, label, closes)

    return rule


# One table for every verifier: building bound closures per instance cost more than the
# checks of a short run.
_HANDLERS: Final[dict[str, Handler]] = {
    "RUN_STARTED": Verifier._run_started_rule,
    "RUN_FINISHED": Verifier._run_finished_rule,
    "RUN_ERROR": Verifier._run_error_rule,
    "TEXT_MESSAGE_START": _opener("_text", "message", "messageId", "message"),
    "TEXT_MESSAGE_CONTENT": _follower("_text", "message", "messageId", "message", False),
    "TEXT_MESSAGE_END": _follower("_text", "message", "messageId", "message", True),
    "TOOL_CALL_START": Verifier._tool_call_start,
    "TOOL_CALL_ARGS": _follower("_tools", "toolCall", "toolCallId", "tool call", False),
    "TOOL_CALL_END": _follower("_tools", "toolCall", "toolCallId", "tool call", True),
    "TOOL_CALL_RESULT": Verifier._tool_call_result,
    "REASONING_START": _opener("_spans", "reasoning", "messageId", "reasoning message"),
    "REASONING_END": _follower("_spans", "reasoning", "messageId", "reasoning message", True),
    "REASONING_MESSAGE_START": _opener("_reasoning", "reasoning", "messageId", "reasoning message"),
    "REASONING_MESSAGE_CONTENT": _follower(
        "_reasoning", "reasoning", "messageId", "reasoning message", False
    ),
    "REASONING_MESSAGE_END": _follower(
        "_reasoning", "reasoning", "messageId", "reasoning message", True
    ),
    "REASONING_ENCRYPTED_VALUE": Verifier._encrypted_value,
    "STEP_STARTED": Verifier._step_started,
    "STEP_FINISHED": Verifier._step_finished,
    "ACTIVITY_SNAPSHOT": Verifier._activity_snapshot,
    "ACTIVITY_DELTA": Verifier._activity_delta,
    "MESSAGES_SNAPSHOT": Verifier._messages_snapshot,
    "SUBAGENT_STARTED": Verifier._subagent_started,
    "SUBAGENT_FINISHED": Verifier._subagent_closed,
    "SUBAGENT_ERROR": Verifier._subagent_closed,
}
