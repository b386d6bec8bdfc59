"""The message list a frontend holds, with the indexes the reducer finds messages by.

The reference finds a message by scanning for the FIRST one with an id (duplicates exist),
and a tool call by scanning for the first message holding it. ``MessageList`` keeps the
same answers in two dicts, kept right as messages are pushed, inserted and replaced. Two
positions may hold the very same message object (a MESSAGES_SNAPSHOT that matches two local
messages with one id does that in the reference too): ``aliased`` says so, and positions are
then found by identity from the front.
"""

from __future__ import annotations

from typing import Any

from recorder.reference import JSONObject


class MessageList:
    """The messages, in order, and where to find each id (``by_id``) and tool call (``calls``)."""

    __slots__ = ("aliased", "by_id", "calls", "items")

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.by_id: dict[str, JSONObject] = {}  # id -> FIRST message with it
        self.calls: dict[str, tuple[JSONObject, JSONObject]] = {}  # id -> first holder, call
        self.aliased = False  # the same message object sits at two positions
        self.reindex()

    def reindex(self) -> None:
        items = self.items
        dicts = [m for m in items if type(m) is dict]
        # Each id's first message: the later ones are written first and overwritten.
        self.by_id = {m["id"]: m for m in reversed(dicts) if type(m.get("id")) is str}
        calls: dict[str, tuple[JSONObject, JSONObject]] = {}
        for message in [m for m in dicts if "toolCalls" in m]:
            held = message["toolCalls"]
            if type(held) is list:
                for call in held:
                    cid = call.get("id") if type(call) is dict else None
                    if type(cid) is str and cid not in calls:
                        calls[cid] = (message, call)
        self.calls = calls
        self.aliased = len(set(map(id, items))) != len(items)

    def _index_calls(self, message: JSONObject) -> None:
        calls = message.get("toolCalls")
        if type(calls) is list:
            for call in calls:
                cid = call.get("id") if type(call) is dict else None
                if type(cid) is str and cid not in self.calls:
                    self.calls[cid] = (message, call)

    def _index(self, message: JSONObject) -> None:
        """Index a message that comes after every message already indexed."""
        mid = message.get("id")
        if type(mid) is str and mid not in self.by_id:
            self.by_id[mid] = message
        if "toolCalls" in message:
            self._index_calls(message)

    def push(self, message: JSONObject) -> None:
        self.items.append(message)
        self._index(message)

    def insert(self, position: int, message: JSONObject) -> None:
        self.items.insert(position, message)
        mid = message["id"]
        if mid in self.by_id:  # a duplicate id: which one comes first now?
            self.by_id[mid] = next(m for m in self.items if type(m) is dict and m.get("id") == mid)
        else:
            self.by_id[mid] = message

    def position(self, message: JSONObject) -> int:
        """Where a message (found through the indexes) sits: its first position."""
        items = self.items
        if self.aliased:
            return next(i for i, m in enumerate(items) if m is message)
        # Without aliasing identity is unique, and the message sought is usually recent.
        return next(i for i in range(len(items) - 1, -1, -1) if items[i] is message)

    def replace(self, position: int, old: JSONObject, new: JSONObject) -> None:
        self.items[position] = new
        if type(new.get("id")) is str:
            self.by_id[new["id"]] = new  # `position` was the first with that id
        if "toolCalls" in old or "toolCalls" in new or self.aliased:
            self.reindex()

    def assistant_holding(self, call_id: str) -> JSONObject | None:
        """The first assistant message holding the tool call, as the reference looks for it."""
        found = self.calls.get(call_id)
        if found is None or found[0].get("role") == "assistant":
            return None if found is None else found[0]
        return next(
            (
                m
                for m in self.items
                if type(m) is dict and m.get("role") == "assistant" and _holds(m, call_id)
            ),
            None,
        )

    def alias_groups(self) -> list[list[int]]:
        """Positions that hold one object, for a checkpoint to restore the sharing."""
        if not self.aliased:
            return []
        groups: dict[int, list[int]] = {}
        for position, message in enumerate(self.items):
            groups.setdefault(id(message), []).append(position)
        return [group for group in groups.values() if len(group) > 1]


def _holds(message: JSONObject, call_id: str) -> bool:
    calls = message.get("toolCalls")
    return type(calls) is list and any(type(c) is dict and c.get("id") == call_id for c in calls)
