"""The quality gates run with the tests: ruff (lint and format) and mypy --strict."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = BIN / name
    if found.exists():
        return str(found)
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed (pip install -e '.[dev]')")
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy", "--strict", "recorder"],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_quality_gate(command: list[str]) -> None:
    done = subprocess.run(
        [_tool(command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
