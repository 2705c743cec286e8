"""Run TensorFlow test helpers in a child process kept for the run, never in the pytest process.

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
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from backend.launch.childmain import skip_unused_imports  # as the product's children do
from tests.spawning import plain_main  # after a page test, __main__ is app.py: not re-run

T = TypeVar("T")

MODULES = ("tensorflow", "keras", "tf_keras")  # any of these in sys.modules makes Streamlit pay


def loaded() -> list[str]:
    """The TensorFlow-family packages this process has imported (empty when none)."""
    return sorted({name.split(".", 1)[0] for name in list(sys.modules)} & set(MODULES))


def in_child(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in this process's TensorFlow child (a module-level function, picklable
    arguments and result); its exception is raised here. One child per pytest process, started
    on first use and kept: importing TensorFlow costs a child about 5 s of CPU, and the suite
    builds and reads a dozen SavedModels. A child that died is replaced on the next call."""
    global _POOL
    if _POOL is None:
        context = multiprocessing.get_context("spawn")
        _POOL = ProcessPoolExecutor(
            max_workers=1, mp_context=context, initializer=skip_unused_imports
        )
    with plain_main():  # the child starts at the first submit
        future = _POOL.submit(function, *args)
    try:
        return future.result()
    except BrokenProcessPool:
        shutdown()
        raise


def shutdown() -> None:
    """End the child (before the run's leak check counts what is still running)."""
    global _POOL
    if _POOL is not None:
        _POOL.shutdown(wait=True, cancel_futures=True)
        _POOL = None


_POOL: ProcessPoolExecutor | None = None
