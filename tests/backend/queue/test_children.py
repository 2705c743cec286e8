import os
import signal
import time

from backend.errors import UserError
from backend.queue.children import run_in_child


def _square(x: int) -> int:
    return x * x


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def _sleep_forever() -> None:
    time.sleep(600)


def _user_error() -> None:
    raise UserError("The model needs a value for 'seq'.")


def _bug() -> None:
    raise KeyError("boom")


def test_child_returns_its_value() -> None:
    outcome = run_in_child(_square, 7, timeout_s=60)
    assert outcome.ok and outcome.value == 49


def test_segfault_in_the_child_is_reported_not_inherited() -> None:
    outcome = run_in_child(_crash, timeout_s=60)
    assert not outcome.ok and "SIGSEGV" in outcome.error and "crashed" in outcome.error


def test_time_limit_kills_the_child() -> None:
    started = time.monotonic()
    outcome = run_in_child(_sleep_forever, timeout_s=1, tick_s=0.1)
    assert outcome.timed_out and "time limit of 1 s" in outcome.error
    assert time.monotonic() - started < 30


def test_cancel_kills_the_child() -> None:
    outcome = run_in_child(_sleep_forever, timeout_s=60, should_cancel=lambda: True, tick_s=0.1)
    assert outcome.cancelled


def test_user_errors_keep_their_sentence_and_bugs_their_traceback() -> None:
    user = run_in_child(_user_error, timeout_s=60)
    assert user.error == "The model needs a value for 'seq'." and user.value == "user_error"
    bug = run_in_child(_bug, timeout_s=60)
    assert "Traceback" in bug.error and "KeyError: 'boom'" in bug.error
