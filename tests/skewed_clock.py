"""Run Python code in a child whose clock faketime has moved (the database's clock stays put)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_skewed(skew: str, code: str, *args: str) -> str:
    """stdout of `python -c code args` under `faketime -f skew`, e.g. skew "+1d"."""
    faketime = shutil.which("faketime")
    assert faketime, "faketime is not installed (scripts/test installs it)"
    done = subprocess.run(
        [faketime, "-f", skew, sys.executable, "-c", code, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
