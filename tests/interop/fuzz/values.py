"""JSON values with the edges in them, for generated streams: numbers past a double and past
2**53, halves of surrogate pairs, keys named like prototype members, and JSON Patches that
go after the document's root and its prototype members."""

from __future__ import annotations

import random
from typing import Any


class Raw:
    """JSON text written as it stands: a number Python's json cannot write (``1e400``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Raw) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


BEYOND_DOUBLE = [Raw("1e400"), Raw("-1e400"), Raw("1E999"), Raw("9" * 400)]
BIG_INTEGERS = [2**53 + 1, 2**53, -(2**53) - 3, 9007199254740993, 2**64 + 7, 10**21, 2**53 - 1]
HALVES = ["\ud83d", "\ude00", "a\ud83e", "\udd16b"]  # halves of 😀 and 🤖, split as streams do
PROTOTYPE_KEYS = ["toString", "valueOf", "hasOwnProperty", "constructor", "__proto__", "length"]
KEYS = ["a", "b", "c", "0", "1", "hasOwnProperty", "toString", "x~y", "s/t"]
POINTER_KEYS = ["a", "b", "c", "0", "1", "2", "-", "01", "x~0y", "s~1t", ""]
STRINGS = ["", "x", "yz", "é", "😀", '{"k":', "thinking-1", *HALVES]
IDS = ["m1", "m2", "m3", "thinking-1", "thinking-2"]
TOOL_IDS = ["t1", "t2", "t3"]


class Values:
    """JSON values with the edges in them; ``features`` notes which edges were used."""

    def __init__(self, rng: random.Random, features: set[str]) -> None:
        self.rng = rng
        self.features = features

    def number(self) -> Any:
        roll = self.rng.random()
        if roll < 0.08:
            self.features.add("beyond-double")
            return self.rng.choice(BEYOND_DOUBLE)
        if roll < 0.18:
            self.features.add("big-integer")
            return self.rng.choice(BIG_INTEGERS)
        return self.rng.choice([0, 1, 2, -1, 1.5, 0.0, 1e21, 3])

    def string(self) -> str:
        text = self.rng.choice(STRINGS)
        if text in HALVES:
            self.features.add("lone-surrogate")
        return text

    def key(self) -> str:
        key = self.rng.choice(KEYS)
        if key in PROTOTYPE_KEYS:
            self.features.add("prototype-key")
        return key

    def value(self, depth: int = 0) -> Any:
        roll = self.rng.random()
        if depth >= 2 or roll < 0.45:
            return self.rng.choice([None, True, False, self.number(), self.string()])
        if roll < 0.7:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 3))]
        return {self.key(): self.value(depth + 1) for _ in range(self.rng.randint(0, 3))}

    def record(self) -> dict[str, Any]:
        return {self.key(): self.value(1) for _ in range(self.rng.randint(0, 3))}

    def pointer(self) -> str:
        keys = [self.rng.choice([*POINTER_KEYS, *PROTOTYPE_KEYS]) for _ in range(3)]
        return "".join(f"/{k}" for k in keys[: self.rng.randint(0, 3)])

    def patch(self) -> list[dict[str, Any]]:
        roll = self.rng.random()
        if roll < 0.04:
            # Two integers a double cannot tell apart: equal to a frontend, not to Python.
            self.features.add("big-integer-test")
            near = self.rng.choice([2**53, 2**53 + 2, 10**17])
            return [
                {"op": "add", "path": "/n", "value": near},
                {"op": "test", "path": "/n", "value": near + 1},
                {"op": "add", "path": "/tested", "value": True},
            ]
        if roll < 0.08:
            self.features.add("test-own-hasOwnProperty")
            value = {"hasOwnProperty": self.value(2)}
            return [
                {"op": "add", "path": "/h", "value": dict(value)},
                {"op": "test", "path": "/h", "value": value},
                {"op": "add", "path": "/tested", "value": True},
            ]
        ops = []
        for _ in range(self.rng.randint(1, 4)):
            op = self.rng.choice(["add", "remove", "replace", "move", "copy", "test", "test"])
            entry: dict[str, Any] = {"op": op, "path": self.pointer()}
            if op in ("add", "replace", "test"):
                entry["value"] = self.value()
                if op == "test" and self.rng.random() < 0.15:
                    self.features.add("test-own-hasOwnProperty")
                    entry["value"] = {"hasOwnProperty": self.value(2), **self.record()}
            if op in ("move", "copy"):
                entry["from"] = self._from(op)
            ops.append(entry)
        return ops

    def _from(self, op: str) -> str:
        roll = self.rng.random()
        if roll < 0.12:
            self.features.add("root-move" if op == "move" else "root-copy")
            return ""
        if roll < 0.3:
            self.features.add("prototype-value")
            prefix = self.rng.choice(["", "/a", "/b/0"])
            return f"{prefix}/{self.rng.choice([*PROTOTYPE_KEYS[:4], 'push', 'at'])}"
        return self.pointer()
