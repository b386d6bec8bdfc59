"""The layer rule: imports inside ``recorder`` point one way, down.

    errors <- config, wire, models <- reference, store, client, telemetry, redaction
           <- proxy, timetravel <- runtime <- api <- cli, asgi

A module imports from its own part or from a lower layer; parts that share a layer
(config, wire and models; reference, store and client; proxy and timetravel) do not import
each other. ``models`` (the public shapes) and ``client`` (the client library) sit low so
that a program using the client never imports FastAPI or a database driver.
Every import counts, those inside functions too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "recorder"

LAYERS: dict[str, int] = {
    "errors": 0,
    "config": 1,
    "wire": 1,
    "models": 1,
    "reference": 2,
    "store": 2,
    "client": 2,
    "redaction": 2,
    "telemetry": 2,
    "proxy": 3,
    "timetravel": 3,
    "runtime": 4,
    "api": 5,
    "cli": 6,
    "asgi": 6,
}
# Parts that stand apart: they import nothing of the package but its version.
STANDALONE = {"demo_agent"}


def part_of(module: str) -> str | None:
    """The part a dotted module name belongs to (``recorder.store.sql`` -> ``store``)."""
    names = module.split(".")
    if names[0] != "recorder" or len(names) < 2:
        return None
    return names[1]


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """Every ``recorder`` module that ``source`` imports, at any depth, with its line."""
    found: list[tuple[int, str]] = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if part_of(target) is None and target == "recorder":
                # ``from recorder import x``: x may be a part of its own.
                found += [(node.lineno, f"recorder.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, target))
    return [(line, name) for line, name in found if name.split(".")[0] == "recorder"]


def violations(source: str, module: str) -> list[str]:
    here = part_of(module)
    if here is None:
        return []
    problems: list[str] = []
    for line, target in imported_modules(source, module):
        there = part_of(target)
        if there is None or there == here or there == "__version__":
            continue
        if here in STANDALONE:
            problems.append(f"{module}:{line} imports {target}: {here} stands apart")
        elif there in STANDALONE:
            continue
        elif there not in LAYERS or here not in LAYERS:
            problems.append(f"{module}:{line} imports {target}: a part with no layer")
        elif LAYERS[there] >= LAYERS[here]:
            problems.append(
                f"{module}:{line} imports {target}: {here} (layer {LAYERS[here]}) may not "
                f"import {there} (layer {LAYERS[there]})"
            )
    return problems


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        found.append((".".join(relative.parts), path))
    return found


def test_every_part_has_a_layer() -> None:
    parts = {part_of(name) for name, _ in modules()} - {"__init__", None}
    assert parts <= set(LAYERS) | STANDALONE, parts - set(LAYERS) - STANDALONE


def test_imports_point_down() -> None:
    problems = [p for name, path in modules() for p in violations(path.read_text(), name)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("recorder.wire.events", "from recorder.reference.projector import fold"),
        ("recorder.store.sql", "def f():\n    from recorder.proxy import proxy\n"),
        ("recorder.proxy.proxy", "import recorder.timetravel.fork"),
        ("recorder.reference.check", "from ..store import sql"),
        ("recorder.api.runs", "from recorder import cli"),
        ("recorder.demo_agent", "from recorder.wire.sse import encode_frame"),
        ("recorder.models.runs", "from recorder.wire.events import decode"),
        ("recorder.client", "from recorder.api.views import JSON"),
        ("recorder.client.asyncio", "from recorder.store import open_store"),
    ],
)
def test_an_upward_import_is_caught(module: str, source: str) -> None:
    assert violations(source, module), f"{source!r} in {module} was not caught"


def test_downward_and_sibling_imports_pass() -> None:
    source = (
        "from recorder.errors import InputError\n"
        "from recorder.store import EventStore\n"
        "from recorder.proxy.committer import GroupCommitter\n"
        "from . import upstream\n"
        "from recorder import __version__\n"
    )
    assert violations(source, "recorder.proxy.proxy") == []
