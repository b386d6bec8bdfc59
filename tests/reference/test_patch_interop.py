"""Every row of test_patch.py through the real fast-json-patch (``tests/interop/patch.mjs``).

The reference applies patches with ``applyPatch(doc, patch, true, false)`` and then clones
the result: a row's outcome there (a document, an error name, a result that cannot be
cloned or written down, or undefined) must be ours.
"""

from __future__ import annotations

import copy
import json
import subprocess
from typing import Any

import pytest

from recorder.reference.patch import UNDEFINED, PatchError, UnclonableResult, apply_patch
from tests.conftest import INTEROP, node_available, require
from tests.reference.test_patch import EDGES, ROWS

CASES = [row for row in [*ROWS, *EDGES] if isinstance(row[2], list)]


def ours(document: Any, patch: Any) -> dict[str, Any]:
    try:
        result = apply_patch(copy.deepcopy(document), copy.deepcopy(patch))
    except PatchError as exc:
        return {"error": exc.name}
    except UnclonableResult as exc:
        return {"cycle": True} if exc.cycle else {"unclonable": str(exc)}
    return {"undefined": True} if result is UNDEFINED else {"document": result}


@pytest.fixture(scope="module")
def theirs() -> dict[str, dict[str, Any]]:
    require(node_available(), "Node and @ag-ui/client")
    cases = [{"document": document, "patch": patch} for _, document, patch, _ in CASES]
    done = subprocess.run(
        ["node", "patch.mjs"],
        input=json.dumps(cases).encode(),
        cwd=INTEROP,
        capture_output=True,
        timeout=120,
        check=True,
    )
    outcomes: list[dict[str, Any]] = json.loads(done.stdout)
    return {name: outcome for (name, *_), outcome in zip(CASES, outcomes, strict=True)}


def test_every_row_is_judged() -> None:
    assert len(CASES) >= 80


@pytest.mark.parametrize(
    ("name", "document", "patch"), [c[:3] for c in CASES], ids=[c[0] for c in CASES]
)
def test_same_outcome_as_fast_json_patch(
    name: str, document: Any, patch: Any, theirs: dict[str, dict[str, Any]]
) -> None:
    assert ours(document, patch) == theirs[name]
