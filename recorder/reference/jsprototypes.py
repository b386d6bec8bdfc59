"""The prototype members JSON values answer to in Node 20, for property reads (``js_get``).

A path such as ``/toString`` or ``/a/constructor/keys`` reads a member every value of its kind
inherits: a function (``JSFunction``, with its ``name`` and ``length``, and a constructor's
static members) or, for a few, a number (``Number.MAX_SAFE_INTEGER``). The table below is
Node's own answer, printed by ``tests/interop/prototypes.mjs``; ``tests/interop/
test_prototypes.py`` holds it to the Node the suite runs. A line per prototype and per
constructor; ``name:LENGTH[:FUNCTION NAME]`` is a function, ``name=VALUE`` a value,
``name!`` an accessor, ``name?object`` an object (a constructor's ``prototype``, which reads
here as absent).
"""

from __future__ import annotations

import math
from typing import Any, Final

from recorder.wire.jsontext import Infinite

MEMBERS: Final = """
object.prototype __defineGetter__:2 __defineSetter__:2 __lookupGetter__:1 __lookupSetter__:1
    __proto__! constructor:1:Object hasOwnProperty:1 isPrototypeOf:1 propertyIsEnumerable:1
    toLocaleString:0 toString:0 valueOf:0
object assign:2 create:2 defineProperties:2 defineProperty:3 entries:1 freeze:1 fromEntries:1
    getOwnPropertyDescriptor:2 getOwnPropertyDescriptors:1 getOwnPropertyNames:1
    getOwnPropertySymbols:1 getPrototypeOf:1 hasOwn:2 is:2 isExtensible:1 isFrozen:1
    isSealed:1 keys:1 length=1 name="Object" preventExtensions:1 prototype?object seal:1
    setPrototypeOf:2 values:1
array.prototype at:1 concat:1 constructor:1:Array copyWithin:2 entries:0 every:1 fill:1
    filter:1 find:1 findIndex:1 findLast:1 findLastIndex:1 flat:0 flatMap:1 forEach:1
    includes:1 indexOf:1 join:1 keys:0 lastIndexOf:1 length=0 map:1 pop:0 push:1 reduce:1
    reduceRight:1 reverse:0 shift:0 slice:2 some:1 sort:1 splice:2 toLocaleString:0
    toReversed:0 toSorted:1 toSpliced:2 toString:0 unshift:1 values:0 with:2
array from:1 isArray:1 length=1 name="Array" of:0 prototype?object
string.prototype anchor:1 at:1 big:0 blink:0 bold:0 charAt:1 charCodeAt:1 codePointAt:1
    concat:1 constructor:1:String endsWith:1 fixed:0 fontcolor:1 fontsize:1 includes:1
    indexOf:1 isWellFormed:0 italics:0 lastIndexOf:1 length=0 link:1 localeCompare:1 match:1
    matchAll:1 normalize:0 padEnd:1 padStart:1 repeat:1 replace:2 replaceAll:2 search:1
    slice:2 small:0 split:2 startsWith:1 strike:0 sub:0 substr:2 substring:2 sup:0
    toLocaleLowerCase:0 toLocaleUpperCase:0 toLowerCase:0 toString:0 toUpperCase:0
    toWellFormed:0 trim:0 trimEnd:0 trimLeft:0:trimStart trimRight:0:trimEnd trimStart:0
    valueOf:0
string fromCharCode:1 fromCodePoint:1 length=1 name="String" prototype?object raw:1
number.prototype constructor:1:Number toExponential:1 toFixed:1 toLocaleString:0 toPrecision:1
    toString:1 valueOf:0
number EPSILON=2.220446049250313e-16 MAX_SAFE_INTEGER=9007199254740991
    MAX_VALUE=1.7976931348623157e+308 MIN_SAFE_INTEGER=-9007199254740991 MIN_VALUE=5e-324
    NEGATIVE_INFINITY=-Infinity NaN=NaN POSITIVE_INFINITY=Infinity isFinite:1 isInteger:1
    isNaN:1 isSafeInteger:1 length=1 name="Number" parseFloat:1 parseInt:2 prototype?object
boolean.prototype constructor:1:Boolean toString:0 valueOf:0
boolean length=1 name="Boolean" prototype?object
function.prototype apply:2 arguments! bind:1 call:1 caller! constructor:1:Function length=0
    name="" toString:0
function length=1 name="Function" prototype:0:
"""


class JSFunction:
    """A built-in JavaScript function, read from a prototype: JSON cannot hold it."""

    __slots__ = ("length", "members", "name")

    def __init__(self, name: str, length: int) -> None:
        self.name = name
        self.length = length
        self.members: dict[str, Any] = {}  # a constructor's own (static) members

    def __repr__(self) -> str:
        return f"function {self.name}() {{ [native code] }}"


ACCESSOR: Final = object()
"""A member that is an accessor: ``__proto__``, or ``caller`` and ``arguments``, which throw."""

_KINDS: Final = {
    "object": "Object",
    "array": "Array",
    "string": "String",
    "number": "Number",
    "boolean": "Boolean",
    "function": "Function",
}


def _lines(text: str) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.strip().splitlines():
        if not line.startswith(" "):
            head, *rest = line.split()
            current = lines[head] = []
            line = " ".join(rest)
        current.extend(line.split())
    return lines


def _value(text: str) -> Any:
    if text.startswith('"'):
        return text[1:-1]
    if text in ("Infinity", "-Infinity"):
        return Infinite(text.replace("Infinity", "inf"))
    if text == "NaN":
        return math.nan
    return float(text) if any(c in text for c in ".e") else int(text)


def _members(tokens: list[str], constructors: dict[str, JSFunction]) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for token in tokens:
        if token.endswith("!"):
            members[token[:-1]] = ACCESSOR
        elif "=" in token:
            name, value = token.split("=", 1)
            members[name] = _value(value)
        elif ":" in token:
            name, length, *called = token.split(":")
            function_name = called[0] if called else name
            known = constructors.get(function_name) if name == "constructor" else None
            members[name] = known or JSFunction(function_name, int(length))
    return members


def _build() -> tuple[dict[str, dict[str, Any]], dict[str, JSFunction]]:
    lines = _lines(MEMBERS)
    constructors = {name: JSFunction(name, 1) for name in _KINDS.values()}
    for kind, name in _KINDS.items():
        statics = _members(lines[kind], {})
        statics.pop("length"), statics.pop("name")
        constructors[name].members = statics
    own = {kind: _members(lines[f"{kind}.prototype"], constructors) for kind in _KINDS}
    prototypes = {}
    for kind in _KINDS:
        members = {**own["object"], **own[kind]}
        members.pop("length", None), members.pop("name", None)  # a value's own, not these
        prototypes[kind] = members
    return prototypes, constructors


PROTOTYPES, CONSTRUCTORS = _build()
"""Members by the kind of value reading them (``object``, ``array``, ... ``function``), and
the six constructors by name."""
