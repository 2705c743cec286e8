"""Runtime environments for tests, made as scripts/test makes them (backend/runtimeenvs.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def set_up(name: str) -> None:
    """.runtime-envs/NAME from backend/runtimes/envs/NAME.txt: seconds the first time, nothing
    when it is up to date (scripts/setup-runtime-env skips it)."""
    subprocess.run([str(ROOT / "scripts" / "setup-runtime-env"), name], check=True)
