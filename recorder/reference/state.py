"""The shared state as the reference's reducer keeps it: STATE_SNAPSHOT and STATE_DELTA.

A snapshot replaces the state; a delta applies with fast-json-patch's outcomes
(``recorder.reference.patch``), whole or not at all, or is discarded with a warning. The
reducer may come to hold a state the agent does not show, or cannot:

- a root ``move`` from a missing path leaves it ``undefined``: the agent goes on showing the
  last defined state, and later patches apply to the undefined one;
- a ``move`` from the root into one of its children leaves it cyclic: the agent holds the
  cycle (nothing can write it down, so ``value`` stays the last state JSON can hold), and
  the next delta fails the run, since the reference copies the state through JSON first;
- a delta whose result holds a prototype method fails the run at once: the reference clones
  every new state, and a function cannot be cloned.

``RunFails`` carries the reference's reason when its run fails. Fold and check share this.
"""

from __future__ import annotations

from recorder.reference import JSONValue
from recorder.reference.patch import UNDEFINED, PatchError, UnclonableResult, apply_patch

_CIRCULAR = "Converting circular structure to JSON"


class RunFails(Exception):
    """The reference client's run fails on this event, for this reason."""


class StateDocument:
    """``value`` is the state shown; ``undefined``/``cyclic`` say the reducer holds another."""

    __slots__ = ("cyclic", "undefined", "value")

    def __init__(self, value: JSONValue, *, undefined: bool = False, cyclic: bool = False) -> None:
        self.value = value
        self.undefined = undefined
        self.cyclic = cyclic

    def snapshot(self, value: JSONValue) -> None:
        self.value, self.undefined, self.cyclic = value, False, False

    def delta(self, patch: JSONValue, *, plain: bool = True) -> None:
        """Apply ``patch`` (``plain``: the state holds no Infinity). PatchError when the
        reference discards it, UnclonableResult when it leaves the state cyclic, RunFails
        when the run fails; the state shown is unchanged in all three."""
        if self.cyclic:
            raise RunFails(_CIRCULAR)
        try:
            patched = apply_patch(UNDEFINED if self.undefined else self.value, patch, plain=plain)
        except PatchError as exc:
            if exc.cyclic_patch:  # the warning that reports the failure cannot write the patch
                raise RunFails(_CIRCULAR) from exc
            raise
        except UnclonableResult as exc:
            if not exc.cycle:
                raise RunFails(str(exc)) from exc
            self.cyclic = True
            raise
        if patched is UNDEFINED:
            self.undefined = True  # the agent keeps showing the state it had
        else:
            self.value, self.undefined = patched, False
