"""Run TensorFlow test helpers in a fresh child process, never in the pytest process.

Importing TensorFlow puts "keras" in sys.modules; Streamlit's ScriptRunner then calls
keras.backend.clear_session() (a full garbage collection, about 0.2 s) after every AppTest run in
that process, which was 17% of the parallel test run's CPU. tests/conftest.py fails a test that
brings TensorFlow in anyway (see MODULES).
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from tests.spawning import plain_main  # after a page test, __main__ is app.py: not re-run

T = TypeVar("T")

MODULES = ("tensorflow", "keras", "tf_keras")  # any of these in sys.modules makes Streamlit pay


def loaded() -> list[str]:
    """The TensorFlow-family packages this process has imported (empty when none)."""
    return sorted({name.split(".", 1)[0] for name in list(sys.modules)} & set(MODULES))


def in_child(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a fresh spawned process (a module-level function, picklable
    arguments and result); its exception is raised here."""
    context = multiprocessing.get_context("spawn")
    with plain_main(), ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args).result()
