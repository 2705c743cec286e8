"""Runtime environments registered by name: which interpreter a measurement child runs under.

`default` is the project's own interpreter (.venv) and always there. Every other one is a pinned
requirements file in backend/runtimes/envs/NAME.txt that scripts/setup-runtime-env NAME turns into
.runtime-envs/NAME: a venv whose own site-packages holds only the pinned runtime (for example
onnxruntime==1.31.1) and a .pth that appends .venv's site-packages after it, so the pinned runtime
shadows the project's and everything else (numpy, onnx, the project's code on PYTHONPATH) is
shared. An environment that is not set up, or set up from other pins, says why and how to fix it.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

import settings
from backend.errors import UserError
from backend.knobs import Cli

DEFAULT = "default"
PINS_DIR = Path(__file__).resolve().parent / "runtimes" / "envs"
ENVS_DIR = settings.PROJECT_ROOT / ".runtime-envs"
SETUP_SCRIPT = "scripts/setup-runtime-env"


@dataclass(frozen=True)
class RuntimeEnv:
    """One environment: its name, its pins (None for default) and where it lives."""

    name: str
    pins: Path | None = None
    root: Path | None = None

    @property
    def python(self) -> str:
        """The interpreter a measurement child of this environment runs under."""
        return sys.executable if self.root is None else str(self.root / "bin" / "python")

    @property
    def pinned(self) -> list[str]:
        """The pins, as written ('onnxruntime==1.31.1'); the project's own for default."""
        if self.pins is None:
            return []
        lines = (line.split("#")[0].strip() for line in self.pins.read_text().splitlines())
        return [line for line in lines if line]

    def unavailable(self) -> str | None:
        """Why a child cannot run under it yet (one sentence with the fix), or None."""
        if self.root is None:
            return None
        setup = f"run {SETUP_SCRIPT} {self.name} on the worker's host"
        if not Path(self.python).is_file():
            return f"Runtime environment {self.name!r} is not set up; {setup}."
        if not (self.root / ".installed").is_file():
            return f"Runtime environment {self.name!r} was not set up completely; {setup}."
        made_from = self.root / "pins.txt"
        if self.pins is not None and (
            not made_from.is_file() or made_from.read_text() != self.pins.read_text()
        ):
            return f"Runtime environment {self.name!r} was set up from other pins; {setup}."
        return None

    def read_only(self) -> tuple[Path, ...]:
        """What a sandboxed child of this environment must see besides .venv: the environment."""
        return () if self.root is None else (self.root,)


def env_knob(runs: str) -> dict:
    """The `runtime_env` knob's declaration, one for every job spec that takes an environment:
    `--env NAME` on the command line, `env=` in a link; `runs` says what runs under it."""
    words = f"the runtime environment {runs} (optiboard envs)"
    return {"url": "env", "cli": Cli("--env", help=words)}


def _registry() -> dict[str, RuntimeEnv]:
    """default, then one environment per pins file, by name (the file's stem)."""
    envs = {DEFAULT: RuntimeEnv(DEFAULT)}
    for pins in sorted(PINS_DIR.glob("*.txt")):
        envs[pins.stem] = RuntimeEnv(pins.stem, pins, ENVS_DIR / pins.stem)
    return envs


ENVIRONMENTS: dict[str, RuntimeEnv] = _registry()


def get_env(name: str) -> RuntimeEnv:
    """The environment of that name, or one sentence naming the known ones."""
    env = ENVIRONMENTS.get(name)
    if env is None:
        raise UserError(
            f"There is no runtime environment {name!r}; choose one of {', '.join(ENVIRONMENTS)} "
            f"(an environment is a pins file in backend/runtimes/envs/)."
        )
    return env


def ready_env(name: str) -> RuntimeEnv:
    """The environment, refused in one sentence when unknown or not set up."""
    env = get_env(name)
    reason = env.unavailable()
    if reason:
        raise UserError(reason)
    return env


def current_env_name() -> str:
    """The environment this interpreter is: the name of its folder under .runtime-envs, else
    default (a result records it beside the runtime version that really ran)."""
    prefix = Path(sys.prefix).absolute()
    return prefix.name if prefix.parent == ENVS_DIR.absolute() else DEFAULT


def pins_digest(env: RuntimeEnv) -> str:
    """A short digest of the pins, stored with a result so a re-run can say they changed."""
    return hashlib.sha256("\n".join(env.pinned).encode()).hexdigest()[:12]


def describe() -> list[dict[str, str]]:
    """Every environment with its pins and state, for `optiboard envs` and the pages."""
    rows = []
    for env in ENVIRONMENTS.values():
        rows.append(
            {
                "name": env.name,
                "pins": ", ".join(env.pinned) or "the project's own (.venv)",
                "state": env.unavailable() or "ready",
            }
        )
    return rows
