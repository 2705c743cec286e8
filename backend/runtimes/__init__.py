"""Runtime backends registered by name. A backend whose library is missing says why."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from backend.errors import UnavailableError
from backend.runtimes.base import MissingBackend, ProviderStatus, RuntimeBackend


def _onnxruntime() -> RuntimeBackend:
    from backend.runtimes.onnxruntime import OnnxRuntimeBackend

    return OnnxRuntimeBackend()


def _not_yet(name: str, module: str, what: str) -> Callable[[], RuntimeBackend]:
    def factory() -> RuntimeBackend:
        if importlib.util.find_spec(module) is None:
            reason = f"the {module!r} Python package is not installed ({what})"
        else:
            reason = f"{module!r} is installed but Optiboard has no {name} runner yet"
        return MissingBackend(name, reason)

    return factory


BACKENDS: dict[str, Callable[[], RuntimeBackend]] = {
    "onnxruntime": _onnxruntime,
    "tensorrt": _not_yet("tensorrt", "tensorrt", "needs an NVIDIA GPU; see requirements-gpu.txt"),
    "openvino": _not_yet("openvino", "openvino", "pip install openvino"),
}

_instances: dict[str, RuntimeBackend] = {}


def get_backend(name: str) -> RuntimeBackend:
    if name not in BACKENDS:
        raise UnavailableError(
            f"Unknown backend {name!r}; registered backends: {', '.join(BACKENDS)}."
        )
    if name not in _instances:
        _instances[name] = BACKENDS[name]()
    return _instances[name]


def all_provider_statuses() -> dict[str, list[ProviderStatus]]:
    """Every backend's providers with availability and reason, for pages and the worker row."""
    return {name: get_backend(name).providers() for name in BACKENDS}


# ---- ONNX Runtime sessions the compatibility matrix needs --------------------------------------
# compat/ reaches ONNX Runtime only through these, so runtimes/ stays the one place that opens a
# session. Each is a plain module-level function so that it can be the target of a child process.


def onnxruntime_provider_name(short: str) -> str:
    """ORT's own provider name for a short one ("cuda" -> "CUDAExecutionProvider")."""
    from backend.runtimes.onnxruntime import NATIVE_PROVIDERS

    return NATIVE_PROVIDERS.get(short, short)


def kernel_definitions() -> list[dict[str, Any]]:
    """The installed ONNX Runtime's kernels; run it in a child (it can segfault)."""
    from backend.runtimes.onnxruntime import kernel_definitions as definitions

    return definitions()


def placement_session(model_path: str, native: str) -> dict[str, Any]:
    """A verbose ORT session on one provider: {providers, error, log}; run it in a child."""
    from backend.runtimes.onnxruntime import placement_session as session

    return session(model_path, native)


def run_on_cpu_once(model_bytes: bytes, inputs: list[Any]) -> str:
    """'' when ORT's CPU provider runs the model on the inputs, else the error's first line."""
    from backend.runtimes.onnxruntime import run_on_cpu_once as run_once

    return run_once(model_bytes, inputs)


__all__ = [
    "BACKENDS",
    "ProviderStatus",
    "RuntimeBackend",
    "all_provider_statuses",
    "get_backend",
    "kernel_definitions",
    "onnxruntime_provider_name",
    "placement_session",
    "run_on_cpu_once",
]
