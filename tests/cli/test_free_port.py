"""free_port: a port for a server about to bind it, never one a connection may take."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from recorder.cli import serve
from recorder.cli.serve import free_port

RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@pytest.mark.skipif(not RANGE.exists(), reason="the system does not say its range")
def test_a_free_port_is_below_the_connections_range_and_can_be_bound() -> None:
    """Connections take their local ports from the system's range, and one made between
    choosing a port and binding it could take a port chosen there."""
    start = int(RANGE.read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(start - 8192 <= port < start for port in ports)
    assert len(ports) > 1  # chosen at random: two callers rarely get the same one
    for port in ports:
        socket.create_server(("127.0.0.1", port)).close()


def test_a_port_taken_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    monkeypatch.setattr(serve, "_connections_start", lambda: port + 1)
    monkeypatch.setattr(serve, "_BELOW", 1)  # the only candidate is the taken port
    try:
        chosen = free_port()
        assert chosen != port
        socket.create_server(("127.0.0.1", chosen)).close()
    finally:
        taken.close()
