"""The benchmarks still run: ``python -m bench --quick`` exits 0 with a row per benchmark.

A benchmark is not a test: nothing here looks at a figure, only that every benchmark ran
and printed its row (and that its servers start).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bench import servers
from bench.__main__ import BENCHMARKS
from recorder.cli.serve import free_port

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


async def test_a_bench_server_whose_port_was_taken_starts_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between choosing a free port and binding it, a server process gives the rest of the
    machine about a second to take it: the pool then starts it again on another port."""
    taken = socket.create_server(("127.0.0.1", 0))
    ports = [taken.getsockname()[1]]
    monkeypatch.setattr(servers, "free_port", lambda: ports.pop() if ports else free_port())
    pool = servers.ServerPool(tmp_path)
    try:
        urls = await pool.start({"upstream": ["upstream", "--events", "3"]})
        assert not urls["upstream"].endswith(f":{taken.getsockname()[1]}")
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(urls["upstream"] + "/healthz")).status_code == 200
    finally:
        await pool.close()
        taken.close()


def test_the_what_if_recorder_leaves_out_what_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench.serve recorder --without chain --without check``: the hop's what-if row is
    only worth reading if the hashing and the check are really gone from the event's path
    (and the real ones are put back here after the test)."""
    from bench.serve import WITHOUT
    from recorder.proxy.segments import Segment, Summary
    from recorder.reference.check import StreamCheck
    from recorder.store import chain

    monkeypatch.setattr(chain, "sha256", chain.sha256)
    monkeypatch.setattr(StreamCheck, "feed", StreamCheck.feed)
    broken = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"no start"}'
    checked = Segment("r", "t")
    checked.observe(broken, Summary([]))
    assert checked.problems  # a content without its start breaks a lifecycle rule

    WITHOUT["chain"]()
    WITHOUT["check"]()
    assert chain.sha256(b"anything").digest() == bytes(32)
    unchecked = Segment("r", "t")
    unchecked.observe(broken, Summary([]))
    assert unchecked.problems == []
