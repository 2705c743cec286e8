"""Runtime backends registered by name. A backend whose library is missing says why."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from backend.errors import UnavailableError
from backend.runtimes.base import MissingBackend, ProviderStatus, RuntimeBackend


def _onnxruntime() -> RuntimeBackend:
    from backend.runtimes.onnxruntime import OnnxRuntimeBackend

    return OnnxRuntimeBackend()


def _openvino() -> RuntimeBackend:
    if importlib.util.find_spec("openvino") is None:
        reason = "the 'openvino' Python package is not installed (pip install -r requirements.txt)"
        return MissingBackend("openvino", reason, ("cpu", "gpu", "npu"))
    from backend.runtimes.openvino import OpenVinoBackend

    return OpenVinoBackend()


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
    "openvino": _openvino,
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


__all__ = ["BACKENDS", "ProviderStatus", "RuntimeBackend", "get_backend", "all_provider_statuses"]
