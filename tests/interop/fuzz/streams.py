"""Valid AG-UI streams from a state machine: runs, messages, tool calls, reasoning, chunk lanes,
state and activity patches, snapshots, steps, subagents and interrupts.

A stream is valid when the reference client accepts it: every run starts with RUN_STARTED,
what it opens it closes, subagents finish before the run does. The values in it are not
tame: patches go after prototype members and the document's root, numbers go past a double
and strings split surrogate pairs, because that is where ports drift from the original.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.interop.fuzz.values import IDS, TOOL_IDS, Values

Event = dict[str, Any]


@dataclass
class Case:
    """One generated stream and what goes with it."""

    events: list[Any]  # events (dicts), or garbage frames (Raw)
    input: Any = None  # the posted RunAgentInput (messages and state), or None
    format: str = "jsonl"  # "array", "jsonl" or "sse"
    features: set[str] = field(default_factory=set)


class Run:
    """The entities one run has open, so that it can close them all."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.tools: list[str] = []
        self.spans: list[str] = []
        self.reasonings: list[str] = []
        self.steps: list[str] = []
        self.subagents: list[str] = []
        self.finished_subagents: list[str] = []
        self.thinking = False
        self.thinking_message = False
        self.chunk: str | None = None  # the kind of chunk stream the lane has open
        self.chunk_id: str | None = None  # and its id


class StreamMaker:
    """Builds one valid stream; ``make`` returns it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.features: set[str] = set()
        self.values = Values(rng, self.features)
        self.events: list[Any] = []
        self.messages_seen: list[str] = []
        self.tools_seen: list[str] = []
        self.run = Run()

    def make(self) -> Case:
        for number in range(self.rng.choice([1, 1, 1, 2, 2, 3])):
            self._run(f"r{number}")
        if len(self.events) > 1 and self.rng.random() < 0.05:
            self.features.add("unfinished")
            self.events.pop()  # a stream that ends without its terminal event
        case = Case(self.events, features=self.features)
        if self.rng.random() < 0.3:
            case.input = self._input()
        return case

    # -- runs ---------------------------------------------------------------------------------

    def _emit(self, event: Event) -> None:
        roll = self.rng.random()
        if roll < 0.08:
            event["metadata"] = self.values.record()
        elif roll < 0.12:
            event["timestamp"] = self.rng.choice([1760000000000, 0, -5, self.values.number()])
        elif roll < 0.14:
            event["rawEvent"] = self.rng.choice([None, {"raw": 1}])
        if event["type"] not in _PASSING_CHUNK_STREAMS and "subagentRunId" not in event:
            self.run.chunk = self.run.chunk_id = None  # it closed the parent lane's stream
        self.events.append(event)

    def _run(self, run_id: str) -> None:
        started: Event = {"type": "RUN_STARTED", "threadId": "thread", "runId": run_id}
        if self.rng.random() < 0.2:
            started["input"] = {
                "threadId": "thread",
                "runId": run_id,
                "messages": self._messages(),
                "state": self.values.value(),
            }
        self.events.append(started)
        run = self.run = Run()
        for _ in range(self.rng.randint(0, 22)):
            self._step(run)
        self._close(run)
        if self.rng.random() < 0.12:
            self.events.append({"type": "RUN_ERROR", "message": "boom", "code": "x"})
            return
        finished: Event = {"type": "RUN_FINISHED", "threadId": "thread", "runId": run_id}
        roll = self.rng.random()
        if roll < 0.2:
            self.features.add("interrupt")
            finished["outcome"] = {
                "type": "interrupt",
                "interrupts": [
                    {"id": f"i{n}", "reason": "approve", "metadata": self.values.record()}
                    for n in range(self.rng.randint(1, 2))
                ],
            }
        elif roll < 0.3:
            finished["outcome"] = {"type": self.rng.choice(["success", "cancelled"])}
        elif roll < 0.35:
            finished["result"] = self.values.value()
        self.events.append(finished)

    def _step(self, run: Run) -> None:
        choice = self.rng.choices(
            [
                self._text,
                self._tool,
                self._result,
                self._reasoning,
                self._thinking,
                self._chunk,
                self._state,
                self._activity,
                self._snapshot,
                self._steps,
                self._subagent,
                self._misc,
            ],
            weights=[14, 10, 4, 6, 3, 8, 12, 6, 3, 3, 4, 2],
        )[0]
        choice(run)

    def _close(self, run: Run) -> None:
        if run.chunk is not None and self.rng.random() < 0.5:
            run.chunk = None  # RUN_FINISHED closes a chunk stream left open
        for mid in run.texts:
            self._emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
        for tid in run.tools:
            self._emit({"type": "TOOL_CALL_END", "toolCallId": tid})
        for mid in run.reasonings:
            self._emit({"type": "REASONING_MESSAGE_END", "messageId": mid})
        for mid in run.spans:
            self._emit({"type": "REASONING_END", "messageId": mid})
        if run.thinking_message:
            self._emit({"type": "THINKING_TEXT_MESSAGE_END"})
        if run.thinking:
            self._emit({"type": "THINKING_END"})
        for name in run.steps:
            self._emit({"type": "STEP_FINISHED", "stepName": name})

    # -- text, tools, reasoning ---------------------------------------------------------------

    def _text(self, run: Run, tag: str | None = None) -> None:
        pool = IDS if tag is None else [f"{tag}-m1", f"{tag}-m2"]
        fresh = [m for m in pool if m not in run.texts and m != run.chunk_id]
        roll = self.rng.random()
        if (roll < 0.35 or not run.texts) and fresh:
            mid = self.rng.choice(fresh)
            start: Event = {"type": "TEXT_MESSAGE_START", "messageId": mid}
            if self.rng.random() < 0.4:
                start["role"] = self.rng.choice(["assistant", "user", "system", "developer"])
            if self.rng.random() < 0.1:
                start["name"] = self.values.string()
            self._emit(_tagged(start, tag))
            run.texts.append(mid)
            self.messages_seen.append(mid)
        elif roll < 0.85 and run.texts:
            for delta in self._deltas():
                mid = self.rng.choice(run.texts)
                self._emit(
                    _tagged({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": delta}, tag)
                )
        elif run.texts:
            mid = run.texts.pop(self.rng.randrange(len(run.texts)))
            self._emit(_tagged({"type": "TEXT_MESSAGE_END", "messageId": mid}, tag))

    def _deltas(self) -> list[str]:
        if self.rng.random() < 0.15:
            self.features.add("split-pair")
            return ["x\ud83d", "\ude00y"]  # one emoji, split across two deltas
        return [self.values.string() for _ in range(self.rng.randint(1, 3))]

    def _tool(self, run: Run, tag: str | None = None) -> None:
        pool = TOOL_IDS if tag is None else [f"{tag}-t1", f"{tag}-t2"]
        fresh = [t for t in pool if t not in run.tools and t != run.chunk_id]
        roll = self.rng.random()
        if (roll < 0.4 or not run.tools) and fresh:
            tid = self.rng.choice(fresh)
            start: Event = {"type": "TOOL_CALL_START", "toolCallId": tid, "toolCallName": "f"}
            parents = [*run.texts, "ghost", ""]
            if tag is None:
                parents += self.messages_seen[-2:]
            if self.rng.random() < 0.6:
                start["parentMessageId"] = self.rng.choice(parents)
            self._emit(_tagged(start, tag))
            run.tools.append(tid)
            self.tools_seen.append(tid)
        elif roll < 0.8 and run.tools:
            tid = self.rng.choice(run.tools)
            delta = self.rng.choice(['{"q":', "1}", self.values.string()])
            self._emit(_tagged({"type": "TOOL_CALL_ARGS", "toolCallId": tid, "delta": delta}, tag))
        elif run.tools:
            tid = run.tools.pop(self.rng.randrange(len(run.tools)))
            self._emit(_tagged({"type": "TOOL_CALL_END", "toolCallId": tid}, tag))

    def _result(self, run: Run) -> None:
        tid = self.rng.choice([*self.tools_seen[-3:], "ghost"])
        content: Any = self.values.string()
        if self.rng.random() < 0.2:
            content = [{"type": "text", "text": self.values.string()}]
        event = {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": tid,
            "messageId": self.rng.choice(["res1", "res2", "m1"]),
            "content": content,
        }
        if self.rng.random() < 0.3:
            event["role"] = "tool"
        self._emit(event)

    def _reasoning(self, run: Run) -> None:
        roll = self.rng.random()
        if roll < 0.2 and not run.spans:
            span = self.rng.choice(["span1", "thinking-1"])
            self._emit({"type": "REASONING_START", "messageId": span})
            run.spans.append(span)
        elif roll < 0.45 and not run.reasonings:
            mid = self.rng.choice(["rm1", "thinking-2", "m3"])
            self._emit({"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"})
            run.reasonings.append(mid)
            self.messages_seen.append(mid)
        elif roll < 0.75 and run.reasonings:
            for delta in self._deltas():
                self._emit(
                    {
                        "type": "REASONING_MESSAGE_CONTENT",
                        "messageId": run.reasonings[0],
                        "delta": delta,
                    }
                )
        elif roll < 0.85 and run.reasonings:
            self._emit({"type": "REASONING_MESSAGE_END", "messageId": run.reasonings.pop()})
        elif roll < 0.92 and run.spans:
            self._emit({"type": "REASONING_END", "messageId": run.spans.pop()})
        else:
            subtype = self.rng.choice(["tool-call", "message"])
            pool = self.tools_seen if subtype == "tool-call" else self.messages_seen
            entity = self.rng.choice([*pool[-3:], "ghost"])
            self._emit(
                {
                    "type": "REASONING_ENCRYPTED_VALUE",
                    "subtype": subtype,
                    "entityId": entity,
                    "encryptedValue": "enc",
                }
            )

    def _thinking(self, run: Run) -> None:
        self.features.add("thinking")
        if not run.thinking:
            start: Event = {"type": "THINKING_START"}
            if self.rng.random() < 0.3:
                start["title"] = "t"
            self._emit(start)
            run.thinking = True
        elif not run.thinking_message:
            self._emit({"type": "THINKING_TEXT_MESSAGE_START"})
            run.thinking_message = True
        elif self.rng.random() < 0.6:
            self._emit({"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": self.values.string()})
        elif self.rng.random() < 0.6:
            self._emit({"type": "THINKING_TEXT_MESSAGE_END"})
            run.thinking_message = False
        else:
            self._emit({"type": "THINKING_TEXT_MESSAGE_END"})
            self._emit({"type": "THINKING_END"})
            run.thinking = run.thinking_message = False

    def _chunk(self, run: Run, tag: str | None = None) -> None:
        self.features.add("chunks")
        kind = self.rng.choice(["TEXT_MESSAGE", "TOOL_CALL", "REASONING_MESSAGE"])
        continuing = run.chunk == kind and tag is None and self.rng.random() < 0.7
        chunk: Event = {"type": f"{kind}_CHUNK"}
        if kind == "TOOL_CALL":
            if not continuing:
                tid = self.rng.choice([t for t in ["ct1", "ct2", *TOOL_IDS] if t not in run.tools])
                run.chunk_id = tid
                chunk.update(toolCallId=tid, toolCallName="g")
                if self.rng.random() < 0.3:
                    chunk["parentMessageId"] = self.rng.choice([*self.messages_seen[-2:], "cm"])
                self.tools_seen.append(tid)
            chunk["delta"] = self.rng.choice(['{"a":', "2}", ""])
        else:
            if not continuing:
                pool = ["c1", "c2", "m1", "thinking-1"] if tag is None else [f"{tag}-c1"]
                mid = self.rng.choice([m for m in pool if m not in run.texts] or ["c3"])
                run.chunk_id = mid
                chunk["messageId"] = mid
                self.messages_seen.append(mid)
                if kind == "TEXT_MESSAGE" and self.rng.random() < 0.3:
                    chunk["role"] = self.rng.choice(["assistant", "user"])
            if self.rng.random() < 0.85:
                chunk["delta"] = self.values.string()
        self._emit(_tagged(chunk, tag))
        if tag is None:
            run.chunk = kind

    def _state(self, run: Run) -> None:
        if self.rng.random() < 0.3:
            self._emit({"type": "STATE_SNAPSHOT", "snapshot": self._document()})
        else:
            self.features.add("state-delta")
            self._emit({"type": "STATE_DELTA", "delta": self.values.patch()})

    def _document(self) -> Any:
        if self.rng.random() < 0.8:
            return {
                "a": self.values.value(1),
                "b": [self.values.value(2) for _ in range(2)],
                **self.values.record(),
            }
        return self.values.value()

    def _activity(self, run: Run) -> None:
        mid = self.rng.choice(["p1", "p2", "m1"])
        if self.rng.random() < 0.45:
            event: Event = {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": mid,
                "activityType": self.rng.choice(["plan", "search"]),
                "content": {"a": self.values.value(1), **self.values.record()},
            }
            if self.rng.random() < 0.3:
                event["replace"] = self.rng.random() < 0.5
            self.messages_seen.append(mid)
        else:
            self.features.add("activity-delta")
            event = {
                "type": "ACTIVITY_DELTA",
                "messageId": mid,
                "activityType": "plan",
                "patch": self.values.patch(),
            }
        self._emit(event)

    def _snapshot(self, run: Run) -> None:
        if run.texts or run.tools or run.reasonings or run.chunk:
            return
        event: Event = {"type": "MESSAGES_SNAPSHOT", "messages": self._messages(activity=True)}
        if self.rng.random() < 0.2:
            claim = self.rng.choice([None, ["plan"], "bad"])
            event["metadata"] = {"@ag-ui/client": {"authoritativeActivityTypes": claim}}
        self._emit(event)

    def _messages(self, *, activity: bool = False) -> list[Any]:
        made: list[Any] = []
        for _ in range(self.rng.randint(0, 3)):
            mid = self.rng.choice([*IDS, "u1", "p1", "rm1"])
            role = self.rng.choice(
                [
                    "user",
                    "assistant",
                    "tool",
                    "system",
                    "reasoning",
                    *(["activity"] if activity else []),
                ]
            )
            message: dict[str, Any] = {"id": mid, "role": role}
            if role == "activity":
                message.update(activityType="plan", content=self.values.record())
            elif role == "tool":
                message.update(toolCallId=self.rng.choice(TOOL_IDS), content=self.values.string())
            elif role == "assistant":
                message["content"] = self.values.string()
                if self.rng.random() < 0.4:
                    tid = self.rng.choice(TOOL_IDS)
                    function = {"name": "f", "arguments": "{}"}
                    message["toolCalls"] = [{"id": tid, "type": "function", "function": function}]
            else:
                message["content"] = self.values.string()
            made.append(message)
        return made

    def _steps(self, run: Run) -> None:
        if run.steps and self.rng.random() < 0.5:
            self._emit({"type": "STEP_FINISHED", "stepName": run.steps.pop()})
        else:
            name = self.rng.choice(["plan", "act", "check"])
            if name not in run.steps:
                self._emit({"type": "STEP_STARTED", "stepName": name})
                run.steps.append(name)

    def _subagent(self, run: Run) -> None:
        self.features.add("subagent")
        sid = self.rng.choice(["s1", "s2", "s3"])
        if sid in run.subagents or sid in run.finished_subagents:
            return
        run.subagents.append(sid)
        self._emit({"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": "helper"})
        inner = Run()
        for _ in range(self.rng.randint(0, 5)):
            self.rng.choice([self._text, self._tool, self._chunk])(inner, sid)
        for mid in inner.texts:
            self._emit({"type": "TEXT_MESSAGE_END", "messageId": mid, "subagentRunId": sid})
        for tid in inner.tools:
            self._emit({"type": "TOOL_CALL_END", "toolCallId": tid, "subagentRunId": sid})
        if self.rng.random() < 0.8:
            self._emit({"type": "SUBAGENT_FINISHED", "subagentRunId": sid})
        else:
            self._emit({"type": "SUBAGENT_ERROR", "subagentRunId": sid, "message": "failed"})
        run.subagents.remove(sid)
        run.finished_subagents.append(sid)

    def _misc(self, run: Run) -> None:
        if self.rng.random() < 0.5:
            self._emit({"type": "CUSTOM", "name": "c", "value": self.values.value()})
        else:
            self._emit({"type": "RAW", "event": self.values.value()})

    # -- the posted input ----------------------------------------------------------------------

    def _input(self) -> dict[str, Any]:
        self.features.add("input")
        messages = self._messages()
        if self.rng.random() < 0.1:
            self.features.add("non-object-message")
            messages.insert(self.rng.randint(0, len(messages)), self.rng.choice([None, "hello", 5]))
        return {
            "threadId": "thread",
            "runId": "r0",
            "messages": messages,
            "state": self._document(),
        }


_PASSING_CHUNK_STREAMS = {
    "TEXT_MESSAGE_CHUNK",
    "TOOL_CALL_CHUNK",
    "REASONING_MESSAGE_CHUNK",
    "RAW",
    "ACTIVITY_SNAPSHOT",
    "ACTIVITY_DELTA",
    "REASONING_ENCRYPTED_VALUE",
    "SUBAGENT_STARTED",
}


def _tagged(event: Event, tag: str | None) -> Event:
    if tag is not None:
        event["subagentRunId"] = tag
    return event
