"""How JavaScript treats JSON values, for the ports of the reference client (``@ag-ui/client``).

The reference reads events as plain JavaScript values, so part of what a frontend sees
follows from the language rather than the protocol. The ports share these answers:

- ``undefined``, which JSON cannot spell: ``UNDEFINED`` stands for an absent field (and for
  a document a patch left undefined);
- truthiness and ``===``, which the compatibility boundary and fast-json-patch branch on;
- Map and Set keys: 1 and 1.0 are one key; 1, "1" and true are three; every object is its
  own key (``MapKeys``), which is how the lifecycle verifier tells ids apart;
- printing: ``String(value)``, template literals, ``Array.prototype.join`` and
  ``Number.prototype.toString``, which the reference's error texts are made of.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Final


class Sentinel:
    """A named stand-in for a JavaScript value that JSON cannot hold."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


# Typed Any: it stands wherever a JSON value can (`event.get(field, UNDEFINED)`).
UNDEFINED: Final[Any] = Sentinel("UNDEFINED")
"""JavaScript's ``undefined``: a missing value, or a document a patch left undefined."""


def js_truthy(value: Any) -> bool:
    """``Boolean(value)`` for a JSON value or ``UNDEFINED``; any other stand-in is truthy."""
    if value is None or value is UNDEFINED or value is False:
        return False
    return bool(value) if type(value) in (int, float, str) else True


def js_strict_equal(a: Any, b: Any) -> bool:
    """JavaScript ``===`` on JSON values: containers are equal only to themselves."""
    numbers = (int, float)
    if type(a) in (dict, list) or type(b) in (dict, list):
        return a is b
    if type(a) in numbers and type(b) in numbers:
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


# -- Map and Set keys -----------------------------------------------------------------------

# A string stands for itself; anything else is (kind, text): the kind keeps 1, "1" and true
# apart, and the text is what a JavaScript template literal prints for the value. Objects get
# a kind numbered per occurrence, because a JS Map compares objects by identity.
Key = str | tuple[str, str]
UNDEFINED_KEY: Final[Key] = ("u", "undefined")
NULL_KEY: Final[Key] = ("z", "null")


class MapKeys:
    """Files values under the `Key` a JavaScript Map would; numbers the objects it meets."""

    __slots__ = ("objects",)

    def __init__(self, objects: int = 0) -> None:
        self.objects = objects  # objects keyed so far, so a checkpoint can carry on numbering

    def of(self, value: Any) -> Key:
        if type(value) is str:
            return value
        if value is UNDEFINED:
            return UNDEFINED_KEY
        if value is None:
            return NULL_KEY
        if isinstance(value, bool):
            return ("b", "true" if value else "false")
        if isinstance(value, int | float):
            return ("n", js_number(value))
        if isinstance(value, str):
            return str(value)
        self.objects += 1
        return (f"o{self.objects}", js_string(value))


def key_from_json(value: Any) -> Key:
    """A `Key` back from its JSON form (a string, or a two-item list)."""
    if isinstance(value, str):
        return value
    kind, text = value
    return (str(kind), str(text))


def show(key: Key) -> str:
    """`${value}` in a template literal."""
    return key if type(key) is str else key[1]


def show_joined(key: Key) -> str:
    """The value as Array.prototype.join prints it: null and undefined become ""."""
    if type(key) is str:
        return key
    return "" if key[0] in ("u", "z") else key[1]


# -- printing values ------------------------------------------------------------------------


def js_string(value: Any) -> str:
    """String(value) for a JSON value (or ``UNDEFINED``)."""
    if not isinstance(value, list | tuple):
        return _js_scalar(value)
    # Array.prototype.join(",") all the way down, where null items print as "". A stack, not
    # recursion: an id from untrusted JSON may nest deeper than Python's recursion limit.
    parts: list[str] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        items, at = stack.pop()
        if at == len(items):
            continue
        if at:
            parts.append(",")
        stack.append((items, at + 1))
        item = items[at]
        if isinstance(item, list | tuple):
            stack.append((item, 0))
        elif item is not None:
            parts.append(_js_scalar(item))
    return "".join(parts)


def _js_scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number(value)
    return "[object Object]"


def js_typed(value: Any) -> str:
    """How V8 names a non-iterable value in its TypeError: "number 5", "boolean true", "object"."""
    if isinstance(value, bool):
        return f"boolean {_js_scalar(value)}"
    if isinstance(value, int | float):
        return f"number {js_number(value)}"
    return "object"


def js_number(value: int | float) -> str:
    """Number.prototype.toString(): the shortest round-trip digits, JavaScript's layout."""
    try:
        number = float(value)
    except OverflowError:  # an integer past the double range is Infinity to JavaScript
        return "Infinity" if value > 0 else "-Infinity"
    if number != number:
        return "NaN"
    if number in (float("inf"), float("-inf")):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr() gives the same shortest round-trip digits as JavaScript; only the layout differs.
    _, digit_tuple, exponent = Decimal(repr(abs(number))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exponent, int)
    point = exponent + len(digit_tuple)  # the decimal point sits after `point` digits
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    shift = point - 1
    mantissa = digits if count == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}e{'+' if shift >= 0 else '-'}{abs(shift)}"
