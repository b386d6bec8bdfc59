"""JSON Patch as fast-json-patch 3.1.1 applies it (``applyPatch(doc, ops, true, false)``).

Each row was worked out from the reference's source (``commonjs/core.js``) and checked
against it; the interop suite checks the same behaviour end to end through the client.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recorder.reference.patch import (
    UNDEFINED,
    PatchError,
    UnclonableResult,
    apply_patch,
    js_equal,
)
from recorder.wire.jsontext import Infinite


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def remove(path: str) -> dict[str, Any]:
    return {"op": "remove", "path": path}


def replace(path: str, value: Any) -> dict[str, Any]:
    return {"op": "replace", "path": path, "value": value}


def move(source: str, path: str) -> dict[str, Any]:
    return {"op": "move", "from": source, "path": path}


def copy_op(source: str, path: str) -> dict[str, Any]:
    return {"op": "copy", "from": source, "path": path}


def probe(path: str, value: Any) -> dict[str, Any]:
    """A ``test`` operation (named so pytest does not collect it)."""
    return {"op": "test", "path": path, "value": value}


# (name, document, patch, the resulting document or the fast-json-patch error name)
ROWS: list[tuple[str, Any, Any, Any]] = [
    # RFC 6902 basics
    ("add a key", {"a": 1}, [add("/b", 2)], {"a": 1, "b": 2}),
    ("add replaces an existing key", {"a": 1}, [add("/a", 2)], {"a": 2}),
    ("add into an array", {"l": [1, 3]}, [add("/l/1", 2)], {"l": [1, 2, 3]}),
    ("add appends with -", {"l": [1]}, [add("/l/-", 2)], {"l": [1, 2]}),
    ("add at the array's length", {"l": [1]}, [add("/l/1", 2)], {"l": [1, 2]}),
    ("add past the end", {"l": [1]}, [add("/l/2", 2)], "OPERATION_VALUE_OUT_OF_BOUNDS"),
    ("add under a missing parent", {}, [add("/a/b", 1)], "OPERATION_PATH_CANNOT_ADD"),
    ("remove a key", {"a": 1, "b": 2}, [remove("/a")], {"b": 2}),
    ("remove an element", {"l": [1, 2, 3]}, [remove("/l/1")], {"l": [1, 3]}),
    ("remove a missing key", {}, [remove("/a")], "OPERATION_PATH_UNRESOLVABLE"),
    ("replace a key", {"a": 1}, [replace("/a", [2])], {"a": [2]}),
    ("replace a missing key", {}, [replace("/a", 1)], "OPERATION_PATH_UNRESOLVABLE"),
    ("move a key", {"a": {"x": 1}}, [move("/a/x", "/b")], {"a": {}, "b": 1}),
    ("move within an array", {"l": [1, 2, 3]}, [move("/l/0", "/l/2")], {"l": [2, 3, 1]}),
    ("move from a missing path", {}, [move("/a", "/b")], "OPERATION_FROM_UNRESOLVABLE"),
    ("move into its own child", {"a": {}}, [move("/a", "/a/b")], "TypeError"),
    (
        "copy is by value",
        {"a": {"x": 1}},
        [copy_op("/a", "/b"), replace("/b/x", 2)],
        {"a": {"x": 1}, "b": {"x": 2}},
    ),
    (
        "test passes",
        {"a": [1, {"b": None}]},
        [probe("/a", [1, {"b": None}])],
        {"a": [1, {"b": None}]},
    ),
    ("test fails", {"a": 1}, [probe("/a", 2)], "TEST_OPERATION_FAILED"),
    ("escaped keys", {"a/b": 1, "c~d": 2}, [replace("/a~1b", 3), remove("/c~0d")], {"a/b": 3}),
    # test is typed
    ("test: true is not 1", {"a": True}, [probe("/a", 1)], "TEST_OPERATION_FAILED"),
    ("test: 0 is not false", {"a": 0}, [probe("/a", False)], "TEST_OPERATION_FAILED"),
    ("test: 1 is 1.0", {"a": 1}, [probe("/a", 1.0)], {"a": 1}),
    ("test: null is not missing", {}, [probe("/a", None)], "TEST_OPERATION_FAILED"),
    (
        "test: key order is free",
        {"a": {"x": 1, "y": 2}},
        [probe("/a", {"y": 2, "x": 1})],
        {"a": {"x": 1, "y": 2}},
    ),
    ("test: object is not array", {"a": {}}, [probe("/a", [])], "TEST_OPERATION_FAILED"),
    # all or nothing
    (
        "a failure undoes the whole patch",
        {"a": 1},
        [add("/b", 2), remove("/zz")],
        "OPERATION_PATH_UNRESOLVABLE",
    ),
    # the root
    ("replace the root", {"a": 1}, [replace("", [1])], [1]),
    ("add to the root", {"a": 1}, [add("", "x")], "x"),
    ("remove the root", {"a": 1}, [remove("")], None),
    ("test the root", {"a": 1}, [probe("", {"a": 1})], {"a": 1}),
    ("move to the root takes the value", {"a": {"b": 1}}, [move("/a", "")], {"b": 1}),
    ("move from a missing path to the root", {}, [move("/nope", "")], UNDEFINED),
    ("ops on a null document", None, [add("/a", 1)], "TypeError"),
    ("writes to a primitive are ignored", 5, [add("/a", 1)], 5),
    # array indexes, as fast-json-patch reads them
    ("add accepts a leading zero", {"l": [0, 1]}, [add("/l/01", "x")], {"l": [0, "x", 1]}),
    (
        "replace needs the canonical index",
        {"l": [0, 1]},
        [replace("/l/01", "x")],
        "OPERATION_PATH_UNRESOLVABLE",
    ),
    (
        "remove needs the canonical index",
        {"l": [0, 1]},
        [remove("/l/01")],
        "OPERATION_PATH_UNRESOLVABLE",
    ),
    ("test reads a leading zero as a number", {"l": [0, 1]}, [probe("/l/01", 1)], {"l": [0, 1]}),
    ("an empty index is 0 for add", {"l": [1]}, [add("/l/", 0)], {"l": [0, 1]}),
    ("indexes wrap at 32 bits", {"l": [1]}, [add("/l/4294967296", 0)], {"l": [0, 1]}),
    (
        "a negative 32-bit index prepends",
        {"l": [1, 2]},
        [add("/l/2147483648", 0)],
        {"l": [0, 1, 2]},
    ),
    ("a word is no index", {"l": [1]}, [add("/l/x", 0)], "OPERATION_PATH_ILLEGAL_ARRAY_INDEX"),
    (
        "length is no index",
        {"l": [1]},
        [replace("/l/length", 0)],
        "OPERATION_PATH_ILLEGAL_ARRAY_INDEX",
    ),
    ("- is no element to replace", {"l": [1]}, [replace("/l/-", 0)], "OPERATION_PATH_UNRESOLVABLE"),
    (
        "copying length copies a number",
        {"l": [7, 8]},
        [copy_op("/l/length", "/n")],
        {"l": [7, 8], "n": 2},
    ),
    (
        "moving length takes the first element",
        {"l": [7, 8]},
        [move("/l/length", "/n")],
        {"l": [8], "n": 7},
    ),
    # JavaScript objects: prototype members exist, __proto__ is banned
    ("removing toString changes nothing", {}, [remove("/toString"), add("/x", 1)], {"x": 1}),
    ("replacing valueOf creates it", {}, [replace("/valueOf", 3)], {"valueOf": 3}),
    ("testing hasOwnProperty fails", {}, [probe("/hasOwnProperty", None)], "TEST_OPERATION_FAILED"),
    ("__proto__ is banned", {}, [add("/__proto__", {"x": 1})], "TypeError"),
    (
        "constructor/prototype is banned",
        {"constructor": {}},
        [add("/constructor/prototype", 1)],
        "TypeError",
    ),
    ("an own __proto__ key is still banned", {"__proto__": 1}, [remove("/__proto__")], "TypeError"),
    ("a function is no container", {}, [add("/toString/x", 1)], "OPERATION_PATH_UNRESOLVABLE"),
    # what counts as an invalid operation
    ("patch must be a list", {}, {"op": "add"}, "SEQUENCE_NOT_AN_ARRAY"),
    ("op must be an object", {}, [1], "OPERATION_NOT_AN_OBJECT"),
    ("unknown op", {}, [{"op": "merge", "path": "/a"}], "OPERATION_OP_INVALID"),
    ("missing op", {}, [{"path": "/a", "value": 1}], "OPERATION_OP_INVALID"),
    ("path must be a string", {}, [{"op": "add", "path": 1, "value": 1}], "OPERATION_PATH_INVALID"),
    ("path must start with /", {}, [add("a", 1)], "OPERATION_PATH_INVALID"),
    ("move needs from", {}, [{"op": "move", "path": "/a"}], "OPERATION_FROM_REQUIRED"),
    ("add needs a value", {}, [{"op": "add", "path": "/a"}], "OPERATION_VALUE_REQUIRED"),
    ("null is a value", {}, [add("/a", None)], {"a": None}),
    ("extra members are ignored", {}, [{**add("/a", 1), "note": "x"}], {"a": 1}),
    ("_get is a no-op op", {"a": 1}, [{"op": "_get", "path": "/a"}], {"a": 1}),
    ("_get needs its path", {}, [{"op": "_get", "path": "/a"}], "OPERATION_PATH_UNRESOLVABLE"),
    (
        "a prototype name as op undefines the document",
        {"a": 1},
        [{"op": "toString", "path": "/a"}],
        UNDEFINED,
    ),
    (
        "a prototype name is no root op",
        {},
        [{"op": "toString", "path": ""}],
        "OPERATION_OP_INVALID",
    ),
]


def _is_error(expected: Any) -> bool:
    return isinstance(expected, str) and (expected.isupper() or expected == "TypeError")


@pytest.mark.parametrize(("name", "document", "patch", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_outcome(name: str, document: Any, patch: Any, expected: Any) -> None:
    document, patch = copy.deepcopy(document), copy.deepcopy(patch)  # the rows are shared
    before = orjson.dumps(document)
    if _is_error(expected):
        with pytest.raises(PatchError) as failed:
            apply_patch(document, patch)
        assert failed.value.name == expected
    else:
        patched = apply_patch(document, patch)
        assert patched is expected if expected is UNDEFINED else patched == expected
    if _is_error(expected) or expected is UNDEFINED:
        assert orjson.dumps(document) == before  # the caller keeps its document, key order too


def test_patches_in_place_without_copying_untouched_parts() -> None:
    big = {"keep": [{"n": i} for i in range(100)], "x": 1}
    kept = big["keep"]
    assert apply_patch(big, [replace("/x", 2)]) is big
    assert big["keep"] is kept and big["x"] == 2


def test_rollback_restores_key_order() -> None:
    document = {"a": 1, "b": 2, "c": 3}
    with pytest.raises(PatchError):
        apply_patch(document, [remove("/a"), remove("/b"), add("/d", 4), probe("/c", 0)])
    assert list(document.items()) == [("a", 1), ("b", 2), ("c", 3)]


def test_added_values_are_placed_not_copied_but_copies_are_deep() -> None:
    value = {"x": [1]}
    document: dict[str, Any] = {}
    apply_patch(document, [add("/a", value), copy_op("/a", "/b")])
    assert document["a"] is value
    assert document["b"] == value and document["b"] is not value
    assert document["b"]["x"] is not value["x"]


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (True, 1, False),
        (False, 0, False),
        (1, 1.0, True),
        ("1", 1, False),
        (None, None, True),
        ([1, [2]], [1, [2]], True),
        ({"a": 1}, {"a": 1, "b": None}, False),
        ({}, [], False),
    ],
)
def test_js_equal(a: Any, b: Any, equal: bool) -> None:
    assert js_equal(a, b) is equal


# -- properties -------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "0", "1", "-", "01", "", "toString", "length", "x~1y"])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["", "s"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
POINTERS = st.lists(KEYS, max_size=3).map(lambda keys: "".join(f"/{k}" for k in keys))
OPS = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "nope"])},
    optional={"path": POINTERS, "from": POINTERS, "value": VALUES},
)


@settings(max_examples=400, deadline=None)
@given(VALUES, st.lists(OPS, max_size=4))
def test_all_or_nothing(document: Any, patch: list[dict[str, Any]]) -> None:
    before = orjson.dumps(document)
    try:
        patched = apply_patch(document, copy.deepcopy(patch))
    except (PatchError, UnclonableResult):
        assert orjson.dumps(document) == before
        return
    if patched is UNDEFINED:
        assert orjson.dumps(document) == before
        return
    # In place or on a copy, the outcome is the same.
    fresh = orjson.loads(before)
    assert orjson.dumps(apply_patch(fresh, copy.deepcopy(patch))) == orjson.dumps(patched)


# -- values JSON cannot hold: functions, cycles, numbers past a double ----------------------
# Rows checked against @ag-ui/client 1.0 (a STATE_DELTA applies them with fast-json-patch), as
# the differential fuzzer in tests/interop keeps doing.

EDGES: list[tuple[str, Any, Any, Any]] = [
    (
        "a root moved into a child, then the root replaced",
        {"a": 1},
        [move("", "/b"), replace("", {"z": 1})],
        {"z": 1},
    ),
    (
        "a copy of a cyclic document fails",
        {"a": 1},
        [move("", "/b"), copy_op("/a", "/d")],
        "TypeError",
    ),
    (
        "a failed test after the root moved: its error cannot write the document down",
        {"a": 1},
        [move("", "/b"), probe("/a", 2)],
        "TypeError",
    ),
    ("a prototype method copied, then removed", {}, [copy_op("/toString", "/f"), remove("/f")], {}),
    (
        "a prototype method copied, then replaced",
        {"a": 1},
        [copy_op("/valueOf", "/f"), replace("/f", 2)],
        {"a": 1, "f": 2},
    ),
    (
        "a function is no source for a copy: the check copies the document through JSON",
        {"a": 1},
        [copy_op("/toString", "/f"), copy_op("/f", "/g"), remove("/f")],
        "OPERATION_FROM_UNRESOLVABLE",
    ),
    (
        "nor for a move",
        {"a": 1},
        [copy_op("/toString", "/f"), move("/f", "/g"), remove("/g")],
        "OPERATION_FROM_UNRESOLVABLE",
    ),
    (
        "a copy of the root leaves the function out",
        {"a": 1},
        [copy_op("/toString", "/f"), copy_op("", "/g"), remove("/f")],
        {"a": 1, "g": {"a": 1}},
    ),
    (
        "a copy's source does not resolve through a function",
        {},
        [copy_op("/constructor/length", "/n")],
        "OPERATION_FROM_UNRESOLVABLE",
    ),
    (
        "an unchecked read goes through: a function's length",
        {},
        [copy_op("/constructor/length", "")],
        1,
    ),
    ("a function's name", [], [copy_op("/constructor/name", "")], "Array"),
    ("a number's constructor", {"x": 5}, [copy_op("/x/constructor/name", "")], "Number"),
    ("a static member", {}, [copy_op("/constructor/keys/length", "")], 1),
    ("a static number", {"x": 1}, [copy_op("/x/constructor/MAX_SAFE_INTEGER", "")], 2**53 - 1),
    ("caller throws", {}, [copy_op("/toString/caller", "")], "TypeError"),
    (
        "test: a value with its own hasOwnProperty throws",
        {"h": {"hasOwnProperty": 1}},
        [probe("/h", {"hasOwnProperty": 1})],
        "TypeError",
    ),
    (
        "test: the same, against another object",
        {"h": {"x": 1}},
        [probe("/h", {"hasOwnProperty": 1})],
        "TypeError",
    ),
    (
        "test: only the value's own key counts",
        {"h": {"hasOwnProperty": 1}},
        [probe("/h", {"x": 1})],
        "TEST_OPERATION_FAILED",
    ),
    (
        "test: key counts differ before anything is called",
        {"h": {"x": 1, "y": 2}},
        [probe("/h", {"hasOwnProperty": 1})],
        "TEST_OPERATION_FAILED",
    ),
    (
        "test: arrays compare from the back",
        {"l": [{"x": 1}, 1]},
        [probe("/l", [{"hasOwnProperty": 1}, 2])],
        "TEST_OPERATION_FAILED",
    ),
    ("test: numbers are doubles", {"n": 2**53}, [probe("/n", 2**53 + 1)], {"n": 2**53}),
    # A root made a built-in function takes properties like any object, for the patch's reads
    (
        "a property written into a function root is read back",
        {},
        [copy_op("/toString", ""), add("/written", 1), copy_op("/written", "")],
        1,
    ),
    (
        "a function's length is read-only",
        {},
        [copy_op("/valueOf", ""), add("/length", 5), copy_op("/length", "")],
        0,
    ),
    (
        "but it can be deleted, and the inherited one shows",
        {},
        [copy_op("/isPrototypeOf", ""), remove("/length"), copy_op("/length", "")],
        0,
    ),
    (
        "a written property is a container for the next write",
        {},
        [
            copy_op("/propertyIsEnumerable", ""),
            add("/box", {}),
            add("/box/x", 2),
            copy_op("/box", ""),
        ],
        {"x": 2},
    ),
]


@pytest.mark.parametrize(
    ("name", "document", "patch", "expected"), EDGES, ids=[r[0] for r in EDGES]
)
def test_edges_of_json(name: str, document: Any, patch: Any, expected: Any) -> None:
    test_outcome(name, document, patch, expected)


@pytest.mark.parametrize(
    ("patch", "function"),
    [
        ([copy_op("/toString", "/f")], "toString"),
        ([move("/hasOwnProperty", "/h")], "hasOwnProperty"),
        ([copy_op("/constructor", "/f")], "Object"),
        ([copy_op("/toString", "")], "toString"),
        ([add("/l", []), copy_op("/l/push", "/l/0")], "push"),
        ([copy_op("/toString", "/b"), copy_op("/valueOf", "/1")], "valueOf"),  # "1" comes first
        (
            [
                add("", [[True], [False]]),
                move("/toString/hasOwnProperty/hasOwnProperty", ""),
                add("/-", {}),
                move("", "/-/1"),
            ],
            "hasOwnProperty",
        ),
    ],
)
def test_a_function_left_in_the_result(patch: list[Any], function: str) -> None:
    document = {"a": 1}
    with pytest.raises(UnclonableResult) as found:
        apply_patch(document, patch)
    assert not found.value.cycle
    assert str(found.value) == f"function {function}() {{ [native code] }} could not be cloned."
    assert document == {"a": 1}


def test_a_root_moved_into_a_child_leaves_a_cycle() -> None:
    document = {"a": 1}
    with pytest.raises(UnclonableResult) as found:
        apply_patch(document, [move("", "/b"), add("/c", 2)])
    assert found.value.cycle and str(found.value) == "Converting circular structure to JSON"
    assert document == {"a": 1}


@pytest.mark.parametrize(
    ("patch", "cyclic"),
    [
        ([move("", "/b"), probe("/nope", 1)], False),
        # The added value is the patch's own object: the move winds it into the cycle, and the
        # reference's warning then cannot write the patch down.
        ([add("/x", {}), move("", "/x/y"), probe("/nope", 1)], True),
    ],
)
def test_a_failure_after_a_root_move_says_whether_the_patch_is_cyclic(
    patch: list[Any], cyclic: bool
) -> None:
    with pytest.raises(PatchError) as failed:
        apply_patch({"a": 1}, patch)
    assert failed.value.cyclic_patch is cyclic


def test_infinity_reads_as_null_in_the_copy_the_reference_patches() -> None:
    document = {"a": Infinite("inf"), "l": [Infinite("-inf")]}
    assert apply_patch(document, [add("/b", 1)], plain=False) == {"a": None, "l": [None], "b": 1}
    kept = {"a": Infinite("inf")}
    with pytest.raises(PatchError):
        apply_patch(kept, [add("/b", 1), probe("/b", 2)], plain=False)
    assert math.isinf(kept["a"])  # a failed patch leaves even that
