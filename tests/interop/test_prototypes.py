"""recorder.reference.jsprototypes' table is what the suite's Node answers (prototypes.mjs)."""

from __future__ import annotations

import subprocess

import pytest

from recorder.reference.jsprototypes import MEMBERS
from tests.conftest import INTEROP, node_available, require

pytestmark = pytest.mark.node


def test_the_table_of_prototype_members_is_nodes() -> None:
    require(node_available(), "Node and @ag-ui/client")
    done = subprocess.run(
        ["node", "prototypes.mjs"], cwd=INTEROP, capture_output=True, timeout=60, check=True
    )
    assert MEMBERS.split() == done.stdout.decode().split()
