"""A runtime environment's onnxruntime inside Triton's Python backend (backend/runtimeenvs.py).

The served model runs in Triton's Python-backend stub, an interpreter of .triton-venv (Debian's
python3.11, numpy<2), never under the environment's own interpreter. So the environment reaches
it as an overlay: a folder in the server's workdir holding only symlinks to the environment's own
onnxruntime package and its dist-info (nothing else: the stub keeps .triton-venv's numpy), with
the environment's site-packages bound read-only into the sandbox. PYTHONPATH cannot carry it:
the stub's embedded interpreter runs isolated (sys.flags.isolated 1, PYTHON* variables ignored;
its sys.path is the stdlib, .triton-venv's site-packages, then the model's folders). So the
model's config names the overlay (parameter onnxruntime_path) and triton_model.py.txt puts it
first on sys.path before it imports onnxruntime, which then shadows .triton-venv's; the model
prints the version it loaded and where from (its RUNTIME_LINE), and a server whose version is not
the pinned one is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import settings
from backend.errors import UnavailableError, UserError
from backend.runtimeenvs import RuntimeEnv, ready_env

OVERLAY = "runtime-overlay"  # the folder in the server's workdir
# onnxruntime's import package, its bundled libraries and its dist-info (onnxruntime-gpu's too)
_ORT_ENTRY = re.compile(r"onnxruntime(\.libs|(_gpu)?-[^-]+\.dist-info)?")
_PIN = re.compile(r"onnxruntime(-gpu)?==(\S+)")
# triton_model.py.txt prints it once per instance
_RUNTIME = re.compile(r"optiboard onnxruntime: (\S+) from (.+?) \(instance ")


@dataclass(frozen=True)
class Loaded:
    """The onnxruntime the served model really ran on, as the model printed it."""

    version: str = ""  # "" when no instance said (a model that failed before it printed)
    where: str = ""  # its package folder, symlinks resolved


def pinned_version(env: RuntimeEnv) -> str:
    """The onnxruntime version the environment pins; refused in one sentence when it pins none
    (the served model runs ONNX Runtime only)."""
    for line in env.pinned:
        match = _PIN.fullmatch(line.replace(" ", ""))
        if match:
            return match.group(2)
    raise UserError(
        f"Runtime environment {env.name!r} pins no onnxruntime, which is all Triton's Python "
        "backend runs; serve on an environment that pins onnxruntime==VERSION, or on default."
    )


def site_packages(env: RuntimeEnv) -> Path:
    """The environment's own site-packages (where setup-runtime-env installed the pins)."""
    assert env.root is not None
    found = sorted(env.root.glob("lib/python3*/site-packages"))
    if not found:
        raise UserError(
            f"Runtime environment {env.name!r} has no site-packages; run "
            f"scripts/setup-runtime-env {env.name} on the worker's host."
        )
    return found[0].resolve()


def make_overlay(env: RuntimeEnv, workdir: Path) -> Path:
    """workdir/runtime-overlay with a symlink to each onnxruntime entry of the environment's
    site-packages (which the sandbox binds read-only where they point)."""
    site = site_packages(env)
    overlay = workdir / OVERLAY
    overlay.mkdir()
    for entry in sorted(site.iterdir()):
        if _ORT_ENTRY.fullmatch(entry.name):
            (overlay / entry.name).symlink_to(entry)
    if not (overlay / "onnxruntime").exists():
        raise UserError(
            f"Runtime environment {env.name!r} has no onnxruntime package in {site}; run "
            f"scripts/setup-runtime-env {env.name} on the worker's host."
        )
    return overlay


def loaded(log: str) -> Loaded:
    """The version and folder the first instance printed (every instance loads the same)."""
    match = _RUNTIME.search(log)
    return Loaded(match.group(1), match.group(2)) if match else Loaded()


def check_loaded(env: RuntimeEnv, found: Loaded) -> None:
    """The server ran the environment's pinned onnxruntime, else one sentence (UnavailableError)."""
    pinned = pinned_version(env)
    if found.version != pinned:
        where = Path(found.where)  # the project's own folders named from its root
        if where.is_relative_to(settings.PROJECT_ROOT):
            where = where.relative_to(settings.PROJECT_ROOT)
        seen = f"onnxruntime {found.version} from {where}" if found.version else "nothing"
        raise UnavailableError(
            f"Triton's Python backend loaded {seen}, not the onnxruntime {pinned} that runtime "
            f"environment {env.name!r} pins; run scripts/setup-runtime-env {env.name} again."
        )


def prepare(runtime_env: str) -> RuntimeEnv:
    """The environment a server is asked to run, checked before anything starts: unknown, not
    set up, stale or pinning no onnxruntime is one sentence."""
    runtime = ready_env(runtime_env)
    if runtime.root is not None:
        pinned_version(runtime)
    return runtime


def overlay_path(runtime: RuntimeEnv, workdir: Path) -> str:
    """The overlay folder a served model puts first on sys.path; "" for the default (the
    serving venv's own onnxruntime)."""
    return str(make_overlay(runtime, workdir)) if runtime.root is not None else ""


def verify(runtime: RuntimeEnv, found: Loaded) -> None:
    """check_loaded where an environment was asked for; the default is whatever .triton-venv has."""
    if runtime.root is not None:
        check_loaded(runtime, found)
