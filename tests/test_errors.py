"""The error tree drawn in recorder/errors.py's docstring is the tree its classes form."""

from __future__ import annotations

import inspect
import re

import recorder.errors
from recorder.errors import RecorderError
from recorder.wire.sse import FrameTooLarge

# "    RecorderError", "    ├── ConfigError   ...", "    │   │   └── ThreadNotFound", ...
NODE = re.compile(r"^    ((?:[│ ]   )*(?:[├└]── )?)([A-Z]\w*)")
ELSEWHERE = {"FrameTooLarge": FrameTooLarge}  # drawn in the tree, defined beside its use


def drawn() -> list[tuple[str, str | None]]:
    """(class, the class it is drawn under) for every node of the drawing."""
    nodes: list[tuple[str, str | None]] = []
    path: list[str] = []
    for line in (recorder.errors.__doc__ or "").splitlines():
        match = NODE.match(line)
        if match is None:
            continue
        depth = len(match.group(1)) // 4
        del path[depth:]
        nodes.append((match.group(2), path[-1] if path else None))
        path.append(match.group(2))
    return nodes


def defined() -> dict[str, type[BaseException]]:
    classes = {
        name: cls
        for name, cls in inspect.getmembers(recorder.errors, inspect.isclass)
        if issubclass(cls, RecorderError) and cls.__module__ == recorder.errors.__name__
    }
    return {**classes, **ELSEWHERE}


def test_every_error_is_drawn_once_under_its_base() -> None:
    nodes = drawn()
    classes = defined()
    assert nodes[0] == ("RecorderError", None)
    assert sorted(name for name, _parent in nodes) == sorted(classes)
    for name, parent in nodes[1:]:
        assert classes[name].__bases__[0].__name__ == parent, name
