"""The runtime a server runs on: what a start that fails halfway leaves behind."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

import pytest

from recorder.config import Settings
from recorder.errors import RecorderError
from recorder.runtime import Runtime


async def test_a_start_that_fails_closes_what_it_opened(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = Settings(
            db=f"sqlite+aiosqlite:///{tmp_path / 'r.db'}", metrics_address=f"127.0.0.1:{port}"
        )
        before = {t.ident for t in threading.enumerate()}
        with pytest.raises(RecorderError, match=f"127.0.0.1:{port}"):
            await Runtime.start(settings)
    await asyncio.sleep(0.2)  # (threads that were told to stop, ending)
    # Its store's writer threads, its journal, its tasks: gone with the failed start.
    left = [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in before]
    assert left == []
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
