"""Spawned children in tests: keep them from re-running a Streamlit script as their __main__.

spawn re-runs the parent's __main__ in the child. After an AppTest run in the same pytest process
that is app.py (Streamlit installs the script as __main__), which a child must not run.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def plain_main() -> Iterator[None]:
    """While inside, __main__ has no file and no spec, so a spawned child has nothing to re-run."""
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = saved
