"""Copies as JavaScript makes them, and what they throw on.

The reference copies values two ways, and each refuses something JSON-like values in a
JavaScript program can hold, which the state patches (``recorder.reference.patch``) can put
there:

- ``JSON.parse(JSON.stringify(value))``, fast-json-patch's ``_deepClone``: functions and
  undefined are dropped (``null`` in arrays), Infinity becomes null, and a cycle throws
  ("Converting circular structure to JSON");
- ``structuredClone``, with which the reducer copies every state: a function throws
  ("function toString() { [native code] } could not be cloned."), a cycle is copied.
"""

from __future__ import annotations

import math
from typing import Any, Final

from recorder.reference.jsprototypes import JSFunction
from recorder.reference.jsvalues import UNDEFINED, JSTypeError, js_keys

CIRCULAR: Final = "Converting circular structure to JSON"


def deep_clone(value: Any) -> Any:
    """fast-json-patch's ``_deepClone``: ``JSON.parse(JSON.stringify(value))`` for objects
    and arrays (functions and undefined dropped, Infinity null), other values as they are."""
    if type(value) in (dict, list):
        return _json_copy(value)
    return None if value is UNDEFINED else value


def _json_copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {
            k: _json_copy(v)
            for k, v in value.items()
            if v is not UNDEFINED and type(v) is not JSFunction
        }
    if kind is list:
        return [_json_copy(v) for v in value]
    if value is UNDEFINED or type(value) is JSFunction:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_copy_checked(value: Any, cycles: bool) -> Any:
    """``deep_clone``, which throws (JSTypeError) where JSON.stringify meets a cycle; only
    a value that may hold one (``cycles``) is searched for it."""
    if cycles and holds_cycle(value):
        raise JSTypeError(CIRCULAR)
    return deep_clone(value)


def first_function(value: Any) -> JSFunction | None:
    """The function a structured clone of ``value`` meets first (it throws there)."""
    return _first_function(value, set())


def _first_function(value: Any, seen: set[int]) -> JSFunction | None:
    # Own keys in order, depth first.
    if type(value) is JSFunction:
        return value
    if type(value) not in (dict, list) or id(value) in seen:
        return None
    seen.add(id(value))
    children = [value[k] for k in js_keys(value)] if type(value) is dict else value
    return next((f for f in (_first_function(c, seen) for c in children) if f), None)


def holds_function(value: Any) -> bool:
    return _walk(value, functions=True)


def holds_cycle(value: Any) -> bool:
    """Whether an object in ``value`` holds itself (shared, acyclic parts are no cycle)."""
    return _walk(value, functions=False)


def _walk(value: Any, *, functions: bool) -> bool:
    """Whether ``value`` holds a function (``functions``) or an object inside itself."""
    if type(value) is JSFunction:
        return functions
    ancestors: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, True)]
    while stack:
        item, entering = stack.pop()
        if not entering:
            ancestors.discard(id(item))
            continue
        if type(item) not in (dict, list):
            if functions and type(item) is JSFunction:
                return True
            continue
        if id(item) in ancestors:
            if not functions:
                return True
            continue
        ancestors.add(id(item))
        stack.append((item, False))
        children = item.values() if type(item) is dict else item
        stack.extend((child, True) for child in children)
    return False
