"""Two error bases: UserError is one clear sentence for the user; everything else propagates."""


class UserError(Exception):
    """Something the user can fix; the message says what is wrong and what to do."""


class UnavailableError(UserError):
    """A requested runtime or provider does not exist on this machine; the message says why."""


class ConversionFailed(UserError):
    """A converter in its child (tf2onnx, torch.onnx) failed; `log` holds the child's output."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


def last_line(text: str | None) -> str:
    """The last non-empty line of a traceback: the sentence that says what went wrong."""
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else ""


def runtime_error_line(exc: BaseException, limit: int = 400) -> str:
    """A runtime's exception as one line for a stored error: its type and message, without the
    C++ source positions and signatures ONNX Runtime puts inside ('reshape_helper.h:91 ns::F(..)')
    and never a traceback."""
    import re

    text = " ".join(str(exc).split())  # one line, single spaces
    text = re.sub(r"\S+\.(?:cc|h|cpp|cu|hpp):\d+ (?:[\w:~<>]+\([^)]*\)(?: const)? )?", "", text)
    return f"{type(exc).__name__}: {text}"[:limit]
