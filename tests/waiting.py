"""Polling helpers shared by the tests that start real processes (workers, servers, clusters)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable


def wait_for(
    predicate: Callable[[], object], what: str = "condition", timeout: float = 120.0
) -> None:
    """Poll predicate every 0.2 s until it is true; fail naming `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def free_port() -> int:
    """A TCP port nothing listens on now, on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
