"""One door for the launch tests' sandboxed probes: a function of probes.py (or another module
under tests/) run in a real sandboxed call child, the tests folder bound read-only so the child
can import it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from backend.launch.children import run_call

TESTS = Path(__file__).resolve().parents[2]


def in_sandbox(
    target: str,
    *args: object,
    read_only: Sequence[Path] = (),
    module: str = "tests.backend.launch.probes",
) -> object:
    """What `module:target(*args)` returned in a sandboxed child."""
    return run_call(
        f"{module}:{target}",
        *args,
        timeout_s=60,
        what="The sandboxed child",
        sandboxed=True,
        read_only=[TESTS, *read_only],
    )
