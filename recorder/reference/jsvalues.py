"""How JavaScript treats JSON values, for the ports of the reference client (``@ag-ui/client``).

The reference reads events as plain JavaScript values, so part of what a frontend sees
follows from the language rather than the protocol. The ports share these answers:

- ``undefined``, which JSON cannot spell: ``UNDEFINED`` stands for an absent field (and for
  a document a patch left undefined);
- truthiness, ``===`` and fast-json-patch's deep equality, which the compatibility boundary
  and the patches branch on;
- Map and Set keys: 1 and 1.0 are one key; 1, "1" and true are three; every object is its
  own key (``MapKeys``), which is how the lifecycle verifier tells ids apart;
- printing: ``String(value)``, template literals, ``Array.prototype.join`` and
  ``Number.prototype.toString``, which the reference's error texts are made of;
- property reads (``obj[key]``), where prototype members such as ``toString`` answer with
  a function (``JSFunction``, ``recorder.reference.jsprototypes``) that JSON cannot hold,
  and the order of an object's own keys;
- numbers, which are doubles: an integer past 2**53 is the nearest double to a frontend,
  while Python (and the log) keep it exact.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Final

from recorder.reference.jsprototypes import ACCESSOR, PROTOTYPES, JSFunction
from recorder.wire.jsontext import Infinite


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

    def __init__(self) -> None:
        self.objects = 0  # objects keyed so far

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


# -- property reads ---------------------------------------------------------------------------


class JSTypeError(Exception):
    """A TypeError the reference would throw (reading a property of null, a banned key)."""


_OBJECT: Final = PROTOTYPES["object"]
_ARRAY: Final = PROTOTYPES["array"]
_STRING: Final = PROTOTYPES["string"]
_NUMBER: Final = PROTOTYPES["number"]
_BOOLEAN: Final = PROTOTYPES["boolean"]
_FUNCTION: Final = PROTOTYPES["function"]
OBJECT_PROTOTYPE: Final = frozenset(_OBJECT)
"""The names every object answers to through its prototype (``Object.prototype``)."""


def js_get(obj: Any, key: Any) -> Any:
    """``obj[key]`` over JSON values (UNDEFINED when absent); JSTypeError on null/undefined."""
    if key is UNDEFINED:
        key = "undefined"
    kind = type(obj)
    if kind is dict:
        if key in obj:
            return obj[key]
        return _OBJECT.get(key, UNDEFINED)
    if kind is list:
        return _get_from_array(obj, key)
    if obj is None or obj is UNDEFINED:
        raise JSTypeError(f"Cannot read properties of {'null' if obj is None else 'undefined'}")
    if kind is str:
        return _get_from_string(obj, key)
    if kind is bool:
        return _BOOLEAN.get(key, UNDEFINED)
    if kind is JSFunction:
        return _get_from_function(obj, key)
    if isinstance(obj, int | float):
        return _NUMBER.get(key, UNDEFINED)
    return UNDEFINED


def _get_from_function(function: JSFunction, key: Any) -> Any:
    if key == "length":
        return function.length
    if key == "name":
        return function.name
    if key in function.members:
        return function.members[key]
    found = _FUNCTION.get(key, UNDEFINED)
    if found is ACCESSOR:
        raise JSTypeError(
            "'caller', 'callee', and 'arguments' properties may not be accessed on strict mode "
            "functions or the arguments objects for calls to them"
        )
    return found


def _get_from_array(array: list[Any], key: Any) -> Any:
    if type(key) is int:
        return array[key] if 0 <= key < len(array) else UNDEFINED
    if is_array_index(key):
        position = int(key)
        return array[position] if position < len(array) else UNDEFINED
    if key == "length":
        return len(array)
    return _ARRAY.get(key, UNDEFINED)


def _get_from_string(text: str, key: Any) -> Any:
    units = text.encode("utf-16-le", "surrogatepass")
    if key == "length":
        return len(units) // 2
    if type(key) is str and is_array_index(key) and int(key) < len(units) // 2:
        # One UTF-16 code unit: half of a surrogate pair reads as a lone surrogate.
        unit = units[int(key) * 2 : int(key) * 2 + 2]
        return unit.decode("utf-16-le", "surrogatepass")
    return _STRING.get(key, UNDEFINED)


def is_array_index(key: Any) -> bool:
    """A canonical array index: what ``array["1"]`` reads as an element (``"01"`` is not)."""
    return (
        type(key) is str
        and key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and int(key) < 0xFFFFFFFF
    )


def js_keys(obj: dict[str, Any]) -> list[str]:
    """``Object.keys(obj)``: array-index keys first, ascending, then the rest as inserted."""
    indexes = [key for key in obj if is_array_index(key)]
    if not indexes:
        return list(obj)
    indexes.sort(key=int)
    return indexes + [key for key in obj if not is_array_index(key)]


# -- numbers ----------------------------------------------------------------------------------

_EXACT: Final = 2**53  # past this an integer is no longer its own double
_LONG_RUN: Final = b"0" * 16  # 2**53 has 16 digits
_DIGITS_AS_ZERO: Final = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))


def as_double(number: int | float) -> int | float:
    """``number`` as JavaScript holds it: an integer past 2**53 becomes the nearest double,
    kept an int while it fits 64 bits (so that it is written as digits, as JavaScript does)."""
    if type(number) is not int or -_EXACT <= number <= _EXACT:
        return number
    try:
        rounded = float(number)
    except OverflowError:
        return Infinite("inf" if number > 0 else "-inf")
    return int(rounded) if -(2**63) <= rounded < 2**63 else rounded


def doubles(value: Any) -> Any:
    """``value`` with every integer past 2**53 made a double (``as_double``), in place."""
    if type(value) is int:
        return as_double(value)
    stack = [value] if type(value) in (dict, list) else []
    while stack:
        container = stack.pop()
        items = container.items() if type(container) is dict else enumerate(container)
        for key, item in items:
            kind = type(item)
            if kind is int and not -_EXACT <= item <= _EXACT:
                container[key] = as_double(item)
            elif kind is dict or kind is list:
                stack.append(item)
    return value


def may_hold_long_integers(text: bytes) -> bool:
    """Whether JSON ``text`` may hold an integer past 2**53 (16 digits in a row, at least)."""
    return _LONG_RUN in text.translate(_DIGITS_AS_ZERO)


def js_equal(a: Any, b: Any) -> bool:
    """fast-json-patch's ``_areEquals``: deep, strict about JSON types, numbers as doubles.

    It compares arrays and keys from the back, and calls ``b.hasOwnProperty``, which throws
    (JSTypeError) when ``b`` has an own ``hasOwnProperty`` key.
    """
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if _is_number(a) and _is_number(b):
        x, y = as_double(a), as_double(b)
        return bool(x == y or (x != x and y != y))  # NaN equals NaN here (`a !== a && ...`)
    if ta is str or tb is str:
        return ta is tb and a == b
    if ta is list and tb is list:
        return len(a) == len(b) and all(js_equal(a[i], b[i]) for i in range(len(a) - 1, -1, -1))
    if ta is not dict or tb is not dict:
        return False
    keys = js_keys(a)
    if len(keys) != len(b):
        return False
    if keys and "hasOwnProperty" in b and type(b["hasOwnProperty"]) is not JSFunction:
        raise JSTypeError("b.hasOwnProperty is not a function")
    keys.reverse()
    return all(k in b for k in keys) and all(js_equal(a[k], b[k]) for k in keys)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and type(value) is not bool
