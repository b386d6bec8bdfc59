"""The benchmarks still run: ``python -m bench --quick`` exits 0 with a row per benchmark.

A benchmark is not a test: nothing here looks at a figure, only that every benchmark ran
and printed its row.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.__main__ import BENCHMARKS

ROOT = Path(__file__).resolve().parents[1]


def test_quick_benchmarks_run_and_print_every_row() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    for name in BENCHMARKS:
        assert any(row.startswith(f"| {name}: ") for row in rows), (name, done.stdout)
    assert not any(row.rstrip(" |").endswith("ERROR") for row in rows), done.stdout
