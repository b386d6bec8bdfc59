"""The shared state as the reference's reducer keeps it: STATE_SNAPSHOT and STATE_DELTA.

A snapshot replaces the state; a delta applies with fast-json-patch's outcomes
(``recorder.reference.patch``), whole or not at all. The reducer may come to hold a state
the agent does not show: a root ``move`` from a missing path leaves it ``undefined``, and
the agent goes on showing the last defined state while later patches apply to the
undefined one. ``StateDocument`` keeps both.
"""

from __future__ import annotations

from recorder.reference import JSONValue
from recorder.reference.patch import UNDEFINED, apply_patch


class StateDocument:
    """``value`` is the state shown; ``undefined`` says the reducer holds undefined instead."""

    __slots__ = ("undefined", "value")

    def __init__(self, value: JSONValue, *, undefined: bool = False) -> None:
        self.value = value
        self.undefined = undefined

    def snapshot(self, value: JSONValue) -> None:
        self.value, self.undefined = value, False

    def delta(self, patch: JSONValue) -> None:
        """Apply ``patch``; PatchError (the reference warns and discards it) leaves all as is."""
        patched = apply_patch(UNDEFINED if self.undefined else self.value, patch)
        if patched is UNDEFINED:
            self.undefined = True  # the agent keeps showing the state it had
        else:
            self.value, self.undefined = patched, False
