"""Edits made in place to JSON containers, undone in reverse on demand.

``recorder.reference.patch`` applies a patch to the document itself rather than to a copy
(a patch costs what its operations touch, not the size of the state) and, when the patch
fails, undoes every edit it made: ``Edits`` records each one with what undoes it. Undoing
restores even the order of an object's keys.
"""

from __future__ import annotations

from typing import Any

from recorder.reference import JSONObject
from recorder.reference.jsvalues import UNDEFINED


class Edits:
    """The edits made so far, each with its undo."""

    __slots__ = ("log",)

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    def set_key(self, obj: JSONObject, key: str, value: Any) -> None:
        if value is UNDEFINED:  # a property holding undefined serializes as absent
            if key in obj:
                self.delete_key(obj, key)
            return
        if key in obj:
            self.log.append((_undo_item, obj, key, obj[key]))
        else:
            self.log.append((_undo_new_key, obj, key, None))
        obj[key] = value

    def delete_key(self, obj: JSONObject, key: str) -> None:
        position = len(obj) - 1 if next(reversed(obj)) == key else list(obj).index(key)
        self.log.append((_undo_deleted_key, obj, key, (position, obj.pop(key))))

    def set_item(self, container: Any, key: Any, value: Any) -> None:
        """``container[key] = value`` where ``key`` is in ``container`` already."""
        self.log.append((_undo_item, container, key, container[key]))
        container[key] = value

    def insert(self, array: list[Any], position: int, value: Any) -> None:
        """``array.splice(position, 0, value)``."""
        size = len(array)
        actual = min(max(size + position, 0) if position < 0 else position, size)
        array.insert(actual, None if value is UNDEFINED else value)
        self.log.append((_undo_insert, array, actual, None))

    def pop(self, array: list[Any], position: int) -> Any:
        removed = array.pop(position)
        self.log.append((_undo_pop, array, position, removed))
        return removed

    def rollback(self) -> None:
        for undo, container, key, value in reversed(self.log):
            undo(container, key, value)
        self.log.clear()


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
