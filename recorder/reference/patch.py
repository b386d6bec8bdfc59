"""JSON Patch (RFC 6902) with the outcomes of fast-json-patch 3.1.1, the reference's applier.

The reference client applies STATE_DELTA and ACTIVITY_DELTA with
``applyPatch(doc, patch, validateOperation=true, mutateDocument=false)``: the patch applies
whole or not at all. We apply in place and keep an undo log, rolling back on failure, so a
patch costs what its operations touch rather than a copy of the whole state
(``recorder.reference.edits``).

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

- The reference patches a JSON copy of the document (``JSON.parse(JSON.stringify(doc))``),
  so Infinity in it reads as ``null``; values the patch brings are placed as they are.
- Values JSON cannot hold are placed too: a prototype method (``copy`` from ``/toString``
  places a function, ``JSFunction``) and the document itself (``move`` from the root into one
  of its children leaves it cyclic). The patch goes on, and a later operation may remove
  them or replace the root. If the result still holds one, ``UnclonableResult`` says which:
  the reference's reducer then fails on a function and keeps a cycle. A patch that fails
  after such a move may have wound its own values into the cycle: ``PatchError`` says so
  (``cyclic_patch``), because the reference's warning then fails to write the patch down.
- ``test`` throws when the value it compares with has an own ``hasOwnProperty`` key
  (``_areEquals`` calls ``b.hasOwnProperty``), and compares numbers as doubles.

Non-string ``op`` values count as invalid operations. Not modelled: a patch whose root is
a built-in function (copied from ``/toString``) can write into that function, and in the
reference the write outlives the patch, for the life of the page; here it is not kept.
"""

from __future__ import annotations

import math
from typing import Any, Final

from recorder.reference import JSONObject
from recorder.reference.edits import Edits
from recorder.reference.jsclone import (
    CIRCULAR,
    deep_clone,
    first_function,
    holds_cycle,
    holds_function,
    json_copy_checked,
)
from recorder.reference.jsprototypes import PROTOTYPES, JSFunction
from recorder.reference.jsvalues import (
    OBJECT_PROTOTYPE,
    JSTypeError,
    js_equal,
    js_get,
    js_truthy,
)

# Re-exported: apply_patch may answer UNDEFINED, so its callers take the name from here.
from recorder.reference.jsvalues import UNDEFINED as UNDEFINED


class PatchError(Exception):
    """The patch did not apply; ``name`` is fast-json-patch's error name (or the JavaScript
    error's), ``cyclic_patch`` whether the patch's own values ended up in a cycle."""

    def __init__(
        self, name: str, message: str, index: int | None = None, *, cyclic_patch: bool = False
    ) -> None:
        where = "" if index is None else f" (operation {index})"
        super().__init__(f"{message}{where} [{name}]")
        self.name = name
        self.index = index
        self.cyclic_patch = cyclic_patch


class UnclonableResult(Exception):
    """The patch applied, but its result holds a function, or else a cycle (``cycle``); the
    text is the error a structured clone of it raises, or the one JSON.stringify does."""

    def __init__(self, function: JSFunction | None) -> None:
        super().__init__(CIRCULAR if function is None else f"{function!r} could not be cloned.")
        self.cycle = function is None


_RFC_OPS: Final = frozenset(("add", "remove", "replace", "move", "copy", "test"))
# fast-json-patch looks operations up on a plain object literal, so `_get` (its internal
# read) and every Object.prototype member pass as valid operation names.
_VALID_OPS: Final = _RFC_OPS | {"_get"} | OBJECT_PROTOTYPE
_UNCALLABLE_OPS: Final = frozenset(
    ("__proto__", "__defineGetter__", "__defineSetter__", "__lookupGetter__", "__lookupSetter__")
)

_UNRESOLVABLE: Final = "OPERATION_PATH_UNRESOLVABLE"
_DELETED: Final = object()


class _Patching(Edits):
    """One patch on its way: its edits, and whether anything JSON cannot hold was placed."""

    __slots__ = ("functions", "root_moved", "written")

    def __init__(self, written: dict[JSFunction, dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.root_moved = False  # the document was moved into itself
        self.functions = False  # a prototype method was placed
        # What the patch wrote into built-in functions (a root copied from `/toString` is
        # one): a built-in takes properties like any object, and the reads that follow see
        # them. The reference keeps them for the life of the page; here, for the patch.
        self.written = {} if written is None else written

    def read(self, obj: Any, key: Any) -> Any:
        """``obj[key]``, with what the patch wrote into functions."""
        if type(obj) is JSFunction and obj in self.written:
            own = self.written[obj]
            name = "undefined" if key is UNDEFINED else key
            if name in own:
                value = own[name]
                return _inherited(name) if value is _DELETED else value
        return js_get(obj, key)

    def reading(self) -> _Patching:
        """A context for a read made on the way (a pointer, a check): the same writes."""
        return _Patching(self.written)

    def exotic(self) -> bool:
        return self.root_moved or self.functions


def apply_patch(document: Any, patch: Any, *, plain: bool = True) -> Any:
    """Apply ``patch`` to ``document`` in place and return the resulting document.

    The root may be replaced, so use the return value. On failure the document is restored
    exactly (dict key order included) and PatchError raised; UnclonableResult likewise when
    the result holds what JSON cannot. When the patch leaves the document ``UNDEFINED``, it is
    restored too and UNDEFINED returned. ``plain=False`` says the document may hold Infinity,
    which the reference's copy of it turns into null.
    """
    if type(patch) is not list:
        raise PatchError("SEQUENCE_NOT_AN_ARRAY", "Patch sequence must be an array")
    # The reference clones the document first; a clone of undefined is null.
    doc = None if document is UNDEFINED else document
    ctx = _Patching()
    try:
        if not plain:
            _as_copied(doc, ctx)
        for index, operation in enumerate(patch):
            doc = _apply(doc, operation, index, True, ctx)[0]
        if ctx.exotic():
            _check_clonable(doc)
    except UnclonableResult:
        ctx.rollback()
        raise
    except (PatchError, JSTypeError, RecursionError) as exc:
        cyclic = ctx.root_moved and holds_cycle(patch)  # before the rollback unwinds the cycle
        # fast-json-patch's error writes its operation and document into its message, which
        # fails on a cycle: the TypeError is what gets thrown.
        unwritable = cyclic or (ctx.root_moved and holds_cycle(doc))
        ctx.rollback()
        if isinstance(exc, PatchError) and not unwritable:
            exc.cyclic_patch = cyclic
            raise
        if isinstance(exc, PatchError):
            raise PatchError("TypeError", CIRCULAR, cyclic_patch=cyclic) from None
        if isinstance(exc, RecursionError):
            message = "Maximum call stack size exceeded"
            raise PatchError("RangeError", message, cyclic_patch=cyclic) from None
        raise PatchError("TypeError", str(exc), cyclic_patch=cyclic) from None
    except BaseException:
        ctx.rollback()
        raise
    if doc is UNDEFINED:
        # The caller keeps the document it had (the reference replaced only its own clone).
        ctx.rollback()
    return doc


# -- the walk ---------------------------------------------------------------------------------


def _apply(doc: Any, op: Any, index: int, validate: bool, ctx: _Patching) -> tuple[Any, Any]:
    """fast-json-patch's ``applyOperation``: (new document, removed or read value)."""
    if validate:
        _validate(op, index, None, None, ctx)
    path = op["path"]
    if path == "":
        return _apply_root(doc, op, index, validate, ctx)
    keys = path.split("/")
    count = len(keys)
    obj = doc
    t = 1
    fragment: str | None = None
    while True:
        key = _key_at(keys, t)
        if validate and fragment is None:
            if ctx.read(obj, key) is UNDEFINED:
                fragment = "/".join(keys[:t])
            elif t == count - 1:
                fragment = path
            if fragment is not None:
                _validate(op, index, doc, fragment, ctx)
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
                return _operate(op, obj, key, doc, index, ctx)
        elif t >= count:
            return _operate(op, obj, key, doc, index, ctx)
        obj = ctx.read(obj, key)
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


def _validate(op: Any, index: int, document: Any, fragment: str | None, ctx: _Patching) -> None:
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
        _validate_against(op, name, path, index, document, fragment, ctx)


def _validate_against(
    op: JSONObject,
    name: str,
    path: str,
    index: int,
    document: Any,
    fragment: str,
    ctx: _Patching,
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
        # The reference validates `from` by trying a read on a JSON copy of the document, and
        # ignores every failure of that read except an unresolvable path (so `/array/length`
        # passes). The copy differs only once a function or a cycle was placed.
        copy = json_copy_checked(document, ctx.root_moved) if ctx.exotic() else document
        try:
            _apply(copy, {"op": "_get", "path": op["from"]}, 0, True, ctx.reading())
        except PatchError as exc:
            if exc.name == _UNRESOLVABLE:
                raise PatchError(
                    "OPERATION_FROM_UNRESOLVABLE",
                    "Cannot perform the operation from a path that does not exist",
                    index,
                ) from None


# -- the operations ---------------------------------------------------------------------------


def _apply_root(
    doc: Any, op: JSONObject, index: int, validate: bool, ctx: _Patching
) -> tuple[Any, Any]:
    name = op["op"]
    if name in ("add", "replace"):
        return op.get("value", UNDEFINED), doc
    if name in ("move", "copy"):
        return _placed(_pointer_value(doc, op["from"], ctx), ctx), doc
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
    op: JSONObject, obj: Any, key: Any, doc: Any, index: int, ctx: _Patching
) -> tuple[Any, Any]:
    name = op["op"]
    if name == "move":
        return _move(op, doc, index, ctx), None
    if name == "copy":
        value = _placed(deep_clone(_pointer_value(doc, op["from"], ctx)), ctx)
        _apply(doc, {"op": "add", "path": op["path"], "value": value}, index, False, ctx)
        return doc, None
    if name in OBJECT_PROTOTYPE:
        return _prototype_op(name, op, obj, index), None
    if obj is None or obj is UNDEFINED:
        raise JSTypeError(f"Cannot read properties of {'null' if obj is None else 'undefined'}")
    if name == "test":
        if not js_equal(ctx.read(obj, key), op.get("value", UNDEFINED)):
            raise PatchError("TEST_OPERATION_FAILED", "Test operation failed", index)
        return doc, None
    if name == "_get":
        return doc, ctx.read(obj, key)
    if type(obj) is dict:
        return doc, _operate_on_object(name, op, obj, key, index, ctx)
    if type(obj) is list:
        return doc, _operate_on_array(name, op, obj, key, index, ctx)
    if type(obj) is JSFunction:
        return doc, _operate_on_function(name, op, obj, key, ctx)
    # Writing to a primitive is silently ignored (the reference runs in sloppy mode).
    return doc, js_get(obj, key) if name == "remove" else None


def _operate_on_object(
    name: str, op: JSONObject, obj: JSONObject, key: Any, index: int, ctx: _Patching
) -> Any:
    if key is UNDEFINED:
        key = "undefined"
    removed = js_get(obj, key)
    if name == "remove":
        if key in obj:
            ctx.delete_key(obj, key)
        return removed
    ctx.set_key(obj, key, op.get("value", UNDEFINED))
    return removed


def _operate_on_function(
    name: str, op: JSONObject, function: JSFunction, key: Any, ctx: _Patching
) -> Any:
    key = "undefined" if key is UNDEFINED else key
    removed = ctx.read(function, key)
    own = ctx.written.setdefault(function, {})
    if key in own:
        fixed = False  # a property the patch gave it, or took from it
    elif key in ("length", "name"):
        fixed = name != "remove"  # read-only, but may be deleted
    else:
        fixed = key == "prototype" or (
            key in function.members and type(function.members[key]) is not JSFunction
        )
    if fixed:  # read-only: the write is ignored (sloppy mode)
        return removed
    if name == "remove":
        if key in own or key in ("length", "name") or key in function.members:
            own[key] = _DELETED
        return removed
    own[key] = op.get("value", UNDEFINED)
    return removed


def _inherited(key: str) -> Any:
    """What a function answers for ``key`` once its own property is deleted."""
    return {"length": 0, "name": ""}.get(key, PROTOTYPES["function"].get(key, UNDEFINED))


def _operate_on_array(
    name: str, op: JSONObject, array: list[Any], key: Any, index: int, ctx: _Patching
) -> Any:
    if name == "add":
        if type(key) is int:
            ctx.insert(array, key, op.get("value", UNDEFINED))
        return None
    if name == "remove":
        # splice(key, 1): a non-numeric key (only reachable unvalidated) reads as 0.
        start = key if type(key) is int else 0
        start = max(len(array) + start, 0) if start < 0 else start
        if start >= len(array):
            return UNDEFINED
        return ctx.pop(array, start)
    if type(key) is int and 0 <= key < len(array):
        removed = array[key]
        ctx.set_item(array, key, op.get("value", UNDEFINED))
        return removed
    return UNDEFINED


def _move(op: JSONObject, doc: Any, index: int, ctx: _Patching) -> Any:
    # The reference reads the target first (which may throw) and copies what is there.
    target = _pointer_value(doc, op["path"], ctx)
    if ctx.exotic() and js_truthy(target):
        json_copy_checked(target, ctx.root_moved)  # a cycle in it throws
    # From the root, the "removed" value is the document itself, added into one of its own
    # children: a cycle, which a later operation may still undo.
    ctx.root_moved = ctx.root_moved or op["from"] == ""
    removed = _placed(_apply(doc, {"op": "remove", "path": op["from"]}, index, False, ctx)[1], ctx)
    _apply(doc, {"op": "add", "path": op["path"], "value": removed}, index, False, ctx)
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


def _pointer_value(doc: Any, pointer: str, ctx: _Patching) -> Any:
    """``getValueByPointer``: an unvalidated read."""
    if pointer == "":
        return doc
    return _apply(doc, {"op": "_get", "path": pointer}, 0, False, ctx.reading())[1]


def _placed(value: Any, ctx: _Patching) -> Any:
    """A value about to be placed in the document; a function there is noted."""
    if type(value) is JSFunction:
        ctx.functions = True
    return value


# -- what the reference cannot clone or write -------------------------------------------------


def _as_copied(doc: Any, ctx: _Patching) -> None:
    """Infinity inside ``doc`` becomes null, as in the JSON copy the reference patches."""
    stack = [doc] if type(doc) in (dict, list) else []
    while stack:
        container = stack.pop()
        items = container.items() if type(container) is dict else enumerate(container)
        for key, value in list(items):
            if isinstance(value, float) and not math.isfinite(value):
                ctx.set_item(container, key, None)
            elif type(value) in (dict, list):
                stack.append(value)


def _check_clonable(doc: Any) -> None:
    """UnclonableResult if ``doc`` holds a function (the first a clone meets) or a cycle."""
    if holds_function(doc):
        raise UnclonableResult(first_function(doc))
    if holds_cycle(doc):
        raise UnclonableResult(None)
