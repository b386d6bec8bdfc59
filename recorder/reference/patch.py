"""JSON Patch (RFC 6902) with the outcomes of fast-json-patch 3.1.1, the reference's applier.

The reference client applies STATE_DELTA and ACTIVITY_DELTA with
``applyPatch(doc, patch, validateOperation=true, mutateDocument=false)``: the patch applies
whole or not at all. We apply in place and keep an undo log, rolling back on failure, so a
patch costs what its operations touch rather than a copy of the whole state.

What a frontend sees is what fast-json-patch does, not what RFC 6902 says, so this is a port
of its algorithm, quirks included:

- ``test`` compares by JSON type (``true`` is not ``1``), deep for objects and arrays.
- Paths walk JavaScript objects: a key such as ``toString`` or ``hasOwnProperty`` *exists* on
  every object (``remove /toString`` succeeds and changes nothing, ``replace /toString``
  creates it), ``length`` exists on arrays; ``__proto__`` and ``constructor/prototype`` are
  banned (a TypeError in the reference).
- Array indexes are validated per operation: ``add`` and ``test`` accept ``01`` and ``""``
  (both read as numbers, ``""`` as 0) where ``replace`` and ``remove`` need the canonical
  index; indexes are truncated to 32 bits (``4294967296`` is 0).
- ``move`` and ``copy`` re-walk their pointers without validation, which is how moving from
  ``/array/length`` takes the array's first element.
- Root moves and copies from a missing path leave the document ``undefined`` (``UNDEFINED``).

Deviations, only where the reference ends in a value JSON cannot hold (its run then fails
later, when the state is cloned): a JavaScript function reached through a path cannot be
copied into the document, and moving the root into itself (a cycle) is refused; both raise
``PatchError``. Non-string ``op`` values count as invalid operations.
"""

from __future__ import annotations

import math
from typing import Any, Final

from recorder.reference import JSONObject
from recorder.reference.jsvalues import (
    FUNCTION,
    OBJECT_PROTOTYPE,
    JSTypeError,
    js_get,
    js_truthy,
)

# Re-exported: apply_patch may answer UNDEFINED, so its callers take the name from here.
from recorder.reference.jsvalues import UNDEFINED as UNDEFINED


class PatchError(Exception):
    """The patch did not apply; ``name`` is fast-json-patch's error name."""

    def __init__(self, name: str, message: str, index: int | None = None) -> None:
        where = "" if index is None else f" (operation {index})"
        super().__init__(f"{message}{where} [{name}]")
        self.name = name
        self.index = index


_RFC_OPS: Final = frozenset(("add", "remove", "replace", "move", "copy", "test"))
# fast-json-patch looks operations up on a plain object literal, so `_get` (its internal
# read) and every Object.prototype member pass as valid operation names.
_VALID_OPS: Final = _RFC_OPS | {"_get"} | OBJECT_PROTOTYPE
_UNCALLABLE_OPS: Final = frozenset(
    ("__proto__", "__defineGetter__", "__defineSetter__", "__lookupGetter__", "__lookupSetter__")
)

_UNRESOLVABLE: Final = "OPERATION_PATH_UNRESOLVABLE"
_UndoLog = list[tuple[Any, ...]]


def apply_patch(document: Any, patch: Any) -> Any:
    """Apply ``patch`` to ``document`` in place and return the resulting document.

    The root may be replaced, so use the return value. On failure the document is restored
    exactly (dict key order included) and PatchError is raised; when the patch leaves the
    document ``UNDEFINED``, it is restored too and UNDEFINED returned.
    """
    if type(patch) is not list:
        raise PatchError("SEQUENCE_NOT_AN_ARRAY", "Patch sequence must be an array")
    # The reference clones the document first; a clone of undefined is null.
    doc = None if document is UNDEFINED else document
    log: _UndoLog = []
    try:
        for index, operation in enumerate(patch):
            doc = _apply(doc, operation, index, True, log)[0]
    except JSTypeError as exc:
        _rollback(log)
        raise PatchError("TypeError", str(exc)) from None
    except BaseException:
        _rollback(log)
        raise
    if doc is UNDEFINED:
        # The caller keeps the document it had (the reference replaced only its own clone).
        _rollback(log)
    return doc


def deep_clone(value: Any) -> Any:
    """``JSON.parse(JSON.stringify(value))``, the clone fast-json-patch makes."""
    kind = type(value)
    if kind is dict:
        return {k: deep_clone(v) for k, v in value.items() if v is not UNDEFINED}
    if kind is list:
        return [None if v is UNDEFINED else deep_clone(v) for v in value]
    return None if value is UNDEFINED else value


def js_equal(a: Any, b: Any) -> bool:
    """fast-json-patch's ``_areEquals``: deep, and strict about JSON types."""
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if ta in (int, float) and tb in (int, float):
        return bool(a == b)
    if ta is not tb:
        return False
    if ta is str:
        return bool(a == b)
    if ta is list:
        return len(a) == len(b) and all(js_equal(x, y) for x, y in zip(a, b, strict=True))
    if ta is dict:
        return len(a) == len(b) and all(k in b and js_equal(v, b[k]) for k, v in a.items())
    return False


# -- the walk ---------------------------------------------------------------------------------


def _apply(doc: Any, op: Any, index: int, validate: bool, log: _UndoLog) -> tuple[Any, Any]:
    """fast-json-patch's ``applyOperation``: (new document, removed or read value)."""
    if validate:
        _validate(op, index, None, None)
    path = op["path"]
    if path == "":
        return _apply_root(doc, op, index, validate)
    keys = path.split("/")
    count = len(keys)
    obj = doc
    t = 1
    fragment: str | None = None
    while True:
        key = _key_at(keys, t)
        if validate and fragment is None:
            if js_get(obj, key) is UNDEFINED:
                fragment = "/".join(keys[:t])
            elif t == count - 1:
                fragment = path
            if fragment is not None:
                _validate(op, index, doc, fragment)
        t += 1
        if type(obj) is list:
            key = len(obj) if key == "-" else _array_key(key, validate, index)
            if t >= count:
                if validate and op["op"] == "add" and type(key) is int and key > len(obj):
                    raise PatchError(
                        "OPERATION_VALUE_OUT_OF_BOUNDS",
                        "The specified index MUST NOT be greater than the number of elements "
                        "in the array",
                        index,
                    )
                return _operate(op, obj, key, doc, index, log)
        elif t >= count:
            return _operate(op, obj, key, doc, index, log)
        obj = js_get(obj, key)
        if validate and type(obj) not in (dict, list):
            raise PatchError(_UNRESOLVABLE, "Cannot perform operation at the desired path", index)


def _key_at(keys: list[str], t: int) -> Any:
    # A pointer without a leading slash (only reachable unvalidated, through `from`) runs past
    # the end of its keys, and JavaScript then indexes with `undefined`.
    if t >= len(keys):
        return UNDEFINED
    key = keys[t]
    if "~" in key:
        key = key.replace("~1", "/").replace("~0", "~")
    if key == "__proto__" or (key == "prototype" and keys[t - 1] == "constructor"):
        raise JSTypeError(
            "JSON-Patch: modifying `__proto__` or `constructor/prototype` prop is banned for "
            "security reasons"
        )
    return key


def _array_key(key: Any, validate: bool, index: int) -> Any:
    if key is UNDEFINED:
        raise JSTypeError("Cannot read properties of undefined (reading 'length')")
    if _is_digits(key):
        return _to_int32(key)
    if validate:
        raise PatchError(
            "OPERATION_PATH_ILLEGAL_ARRAY_INDEX",
            "Expected an unsigned base-10 integer value, making the new referenced value the "
            "array element with the zero-based index",
            index,
        )
    return key


def _is_digits(key: str) -> bool:
    # fast-json-patch's isInteger: every character a decimal digit, so "" and "007" pass.
    return key.isascii() and (key == "" or key.isdigit())


def _to_int32(key: str) -> int:
    """``~~key``: JavaScript's ToInt32 of the decimal string."""
    number = float(key) if key else 0.0
    if math.isinf(number):
        return 0
    value = int(number) & 0xFFFFFFFF
    return value - 0x100000000 if value >= 0x80000000 else value


# -- validation -------------------------------------------------------------------------------


def _validate(op: Any, index: int, document: Any, fragment: str | None) -> None:
    """fast-json-patch's ``validator``; ``fragment`` is the part of the path that exists."""
    if type(op) is not dict:
        raise PatchError("OPERATION_NOT_AN_OBJECT", "Operation is not an object", index)
    name = op.get("op")
    if type(name) is not str or name not in _VALID_OPS:
        raise PatchError(
            "OPERATION_OP_INVALID",
            "Operation `op` property is not one of operations defined in RFC-6902",
            index,
        )
    path = op.get("path")
    if type(path) is not str:
        raise PatchError(
            "OPERATION_PATH_INVALID", "Operation `path` property is not a string", index
        )
    if path and not path.startswith("/"):
        raise PatchError(
            "OPERATION_PATH_INVALID", 'Operation `path` property must start with "/"', index
        )
    if name in ("move", "copy") and type(op.get("from")) is not str:
        raise PatchError(
            "OPERATION_FROM_REQUIRED",
            "Operation `from` property is not present (applicable in `move` and `copy` operations)",
            index,
        )
    if name in ("add", "replace", "test") and "value" not in op:
        raise PatchError(
            "OPERATION_VALUE_REQUIRED",
            "Operation `value` property is not present (applicable in `add`, `replace` and "
            "`test` operations)",
            index,
        )
    if fragment is not None and js_truthy(document):
        _validate_against(op, name, path, index, document, fragment)


def _validate_against(
    op: JSONObject, name: str, path: str, index: int, document: Any, fragment: str
) -> None:
    if name == "add":
        length, existing = len(path.split("/")), len(fragment.split("/"))
        if length not in (existing, existing + 1):
            raise PatchError(
                "OPERATION_PATH_CANNOT_ADD",
                "Cannot perform an `add` operation at the desired path",
                index,
            )
    elif name in ("replace", "remove", "_get"):
        if path != fragment:
            raise PatchError(
                _UNRESOLVABLE, "Cannot perform the operation at a path that does not exist", index
            )
    elif name in ("move", "copy"):
        # The reference validates `from` by trying a read, and ignores every failure of that
        # read except an unresolvable path (so `/array/length` passes).
        try:
            _apply(document, {"op": "_get", "path": op["from"]}, 0, True, [])
        except PatchError as exc:
            if exc.name == _UNRESOLVABLE:
                raise PatchError(
                    "OPERATION_FROM_UNRESOLVABLE",
                    "Cannot perform the operation from a path that does not exist",
                    index,
                ) from None


# -- the operations ---------------------------------------------------------------------------


def _apply_root(doc: Any, op: JSONObject, index: int, validate: bool) -> tuple[Any, Any]:
    name = op["op"]
    if name in ("add", "replace"):
        return _jsonable(op.get("value", UNDEFINED), index), doc
    if name in ("move", "copy"):
        return _jsonable(_pointer_value(doc, op["from"]), index), doc
    if name == "test":
        if not js_equal(doc, op.get("value", UNDEFINED)):
            raise PatchError("TEST_OPERATION_FAILED", "Test operation failed", index)
        return doc, None
    if name == "remove":
        return None, doc
    if name == "_get":
        return doc, doc
    if validate:
        raise PatchError(
            "OPERATION_OP_INVALID",
            "Operation `op` property is not one of operations defined in RFC-6902",
            index,
        )
    return doc, None


def _operate(
    op: JSONObject, obj: Any, key: Any, doc: Any, index: int, log: _UndoLog
) -> tuple[Any, Any]:
    name = op["op"]
    if name == "move":
        return _move(op, doc, index, log), None
    if name == "copy":
        value = deep_clone(_pointer_value(doc, op["from"]))
        _apply(doc, {"op": "add", "path": op["path"], "value": value}, index, False, log)
        return doc, None
    if name in OBJECT_PROTOTYPE:
        return _prototype_op(name, op, obj, index), None
    if obj is None or obj is UNDEFINED:
        raise JSTypeError(f"Cannot read properties of {'null' if obj is None else 'undefined'}")
    if name == "test":
        if not js_equal(js_get(obj, key), op.get("value", UNDEFINED)):
            raise PatchError("TEST_OPERATION_FAILED", "Test operation failed", index)
        return doc, None
    if name == "_get":
        return doc, js_get(obj, key)
    if type(obj) is dict:
        return doc, _operate_on_object(name, op, obj, key, index, log)
    if type(obj) is list:
        return doc, _operate_on_array(name, op, obj, key, index, log)
    # Writing to a primitive is silently ignored (the reference runs in sloppy mode).
    return doc, js_get(obj, key) if name == "remove" else None


def _operate_on_object(
    name: str, op: JSONObject, obj: JSONObject, key: Any, index: int, log: _UndoLog
) -> Any:
    if key is UNDEFINED:
        key = "undefined"
    removed = js_get(obj, key)
    if name == "remove":
        if key in obj:
            _delete_key(obj, key, log)
        return removed
    _set_key(obj, key, _jsonable(op.get("value", UNDEFINED), index), log)
    return removed


def _operate_on_array(
    name: str, op: JSONObject, array: list[Any], key: Any, index: int, log: _UndoLog
) -> Any:
    if name == "add":
        if type(key) is int:
            _insert(array, key, _jsonable(op.get("value", UNDEFINED), index), log)
        return None
    if name == "remove":
        # splice(key, 1): a non-numeric key (only reachable unvalidated) reads as 0.
        start = key if type(key) is int else 0
        start = max(len(array) + start, 0) if start < 0 else start
        if start >= len(array):
            return UNDEFINED
        removed = array.pop(start)
        log.append((_undo_pop, array, start, removed))
        return removed
    if type(key) is int and 0 <= key < len(array):
        removed = array[key]
        array[key] = _jsonable(op.get("value", UNDEFINED), index)
        log.append((_undo_item, array, key, removed))
        return removed
    return UNDEFINED


def _move(op: JSONObject, doc: Any, index: int, log: _UndoLog) -> Any:
    if op["from"] == "":
        # The reference would nest the document inside itself; JSON cannot hold the cycle.
        raise PatchError("OPERATION_MOVE_CYCLE", "Cannot move the document into itself", index)
    _pointer_value(doc, op["path"])  # the reference reads the target first; it may throw
    removed = _apply(doc, {"op": "remove", "path": op["from"]}, index, False, log)[1]
    _apply(doc, {"op": "add", "path": op["path"], "value": removed}, index, False, log)
    return doc


def _prototype_op(name: str, op: JSONObject, obj: Any, index: int) -> Any:
    """An Object.prototype member called as an operation: what its return value amounts to."""
    if name in _UNCALLABLE_OPS:
        raise JSTypeError(f"objOps.{name} cannot be applied as an operation")
    carrier = obj if name == "constructor" else op if name == "valueOf" else None
    if type(carrier) is dict:
        if carrier.get("test", UNDEFINED) is False:
            raise PatchError("TEST_OPERATION_FAILED", "Test operation failed", index)
        return carrier.get("newDocument", UNDEFINED)
    return UNDEFINED


def _pointer_value(doc: Any, pointer: str) -> Any:
    """``getValueByPointer``: an unvalidated read."""
    if pointer == "":
        return doc
    return _apply(doc, {"op": "_get", "path": pointer}, 0, False, [])[1]


def _jsonable(value: Any, index: int) -> Any:
    if value is FUNCTION:
        raise PatchError(
            "OPERATION_VALUE_NOT_JSON", "A JavaScript function cannot be placed in JSON", index
        )
    return value


# -- in-place edits and their undo ------------------------------------------------------------


def _set_key(obj: JSONObject, key: str, value: Any, log: _UndoLog) -> None:
    if value is UNDEFINED:  # a property holding undefined serializes as absent
        if key in obj:
            _delete_key(obj, key, log)
        return
    if key in obj:
        log.append((_undo_item, obj, key, obj[key]))
    else:
        log.append((_undo_new_key, obj, key, None))
    obj[key] = value


def _delete_key(obj: JSONObject, key: str, log: _UndoLog) -> None:
    position = len(obj) - 1 if next(reversed(obj)) == key else list(obj).index(key)
    log.append((_undo_deleted_key, obj, key, (position, obj.pop(key))))


def _insert(array: list[Any], position: int, value: Any, log: _UndoLog) -> None:
    size = len(array)
    actual = min(max(size + position, 0) if position < 0 else position, size)
    array.insert(actual, None if value is UNDEFINED else value)
    log.append((_undo_insert, array, actual, None))


def _rollback(log: _UndoLog) -> None:
    for undo, container, key, value in reversed(log):
        undo(container, key, value)


def _undo_item(container: Any, key: Any, value: Any) -> None:
    container[key] = value


def _undo_new_key(container: JSONObject, key: str, _: Any) -> None:
    del container[key]


def _undo_deleted_key(container: JSONObject, key: str, saved: tuple[int, Any]) -> None:
    # Put the key back where it was, so a failed patch leaves even the key order untouched.
    position, value = saved
    items = list(container.items())
    items.insert(position, (key, value))
    container.clear()
    container.update(items)


def _undo_insert(container: list[Any], position: int, _: Any) -> None:
    del container[position]


def _undo_pop(container: list[Any], position: int, value: Any) -> None:
    container.insert(position, value)
