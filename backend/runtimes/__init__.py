"""Runtimes registered by name. A runtime whose library is missing says why."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.errors import UnavailableError
from backend.runtimes.base import (
    GenAISession,
    GenAIStatus,
    MissingRuntime,
    ProviderStatus,
    Runtime,
    TokenTimes,
)
from backend.runtimes.genai_engine import ENGINE_MODES
from backend.specs import Precision


def _onnxruntime() -> Runtime:
    from backend.runtimes.onnxruntime import OnnxRuntime

    return OnnxRuntime()


def _openvino() -> Runtime:
    if importlib.util.find_spec("openvino") is None:
        reason = "the 'openvino' Python package is not installed (pip install -r requirements.txt)"
        return MissingRuntime("openvino", reason, ("cpu", "gpu", "npu"))
    from backend.runtimes.openvino import OpenVinoRuntime

    return OpenVinoRuntime()


def _not_yet(name: str, module: str, what: str) -> Callable[[], Runtime]:
    def factory() -> Runtime:
        if importlib.util.find_spec(module) is None:
            reason = f"the {module!r} Python package is not installed ({what})"
        else:
            reason = f"{module!r} is installed but Optiboard has no {name} runner yet"
        return MissingRuntime(name, reason)

    return factory


RUNTIMES: dict[str, Callable[[], Runtime]] = {
    "onnxruntime": _onnxruntime,
    "tensorrt": _not_yet("tensorrt", "tensorrt", "needs an NVIDIA GPU; see requirements-gpu.txt"),
    "openvino": _openvino,
}

_instances: dict[str, Runtime] = {}


def get_runtime(name: str) -> Runtime:
    if name not in RUNTIMES:
        raise UnavailableError(
            f"Unknown runtime {name!r}; registered runtimes: {', '.join(RUNTIMES)}."
        )
    if name not in _instances:
        _instances[name] = RUNTIMES[name]()
    return _instances[name]


def all_provider_statuses() -> dict[str, list[ProviderStatus]]:
    """Every runtime's providers with availability and reason, for pages and the worker row."""
    return {name: get_runtime(name).providers() for name in RUNTIMES}


@dataclass(frozen=True)
class PrecisionGap:
    """A precision one runtime cannot run on one provider here, and why."""

    runtime: str
    provider: str
    precision: Precision
    reason: str


def precision_gaps(
    runtimes: list[str], providers: list[str], precisions: list[Precision]
) -> list[PrecisionGap]:
    """Every picked (runtime, provider, precision) this machine cannot run, with the reason;
    providers a runtime lacks altogether are its provider status's business, not listed here."""
    gaps = []
    for runtime in runtimes:
        registered = get_runtime(runtime)
        for provider in providers:
            status = registered.provider_status(provider)
            if status is None or not status.available:
                continue
            for precision in precisions:
                reason = registered.precision_unavailable(precision, provider)
                if reason:
                    gaps.append(PrecisionGap(runtime, provider, precision, reason))
    return gaps


# ---- ONNX Runtime sessions the compatibility matrix needs --------------------------------------
# compat/ reaches ONNX Runtime only through these, so runtimes/ stays the one place that opens a
# session. Each is a plain module-level function so that it can be the target of a child process.


def onnxruntime_provider_name(short: str) -> str:
    """ORT's own provider name for a short one ("cuda" -> "CUDAExecutionProvider")."""
    from backend.runtimes.onnxruntime import NATIVE_PROVIDERS

    return NATIVE_PROVIDERS.get(short, short)


def exact_int8_matmul_setting() -> tuple[str, str] | None:
    """The ONNX Runtime session config entry a default sweep session sets on this CPU for int8
    matmuls (("session.x64quantprecision", "1") without VNNI), or None (runtimes/ort_int8.py)."""
    from backend.runtimes import ort_int8
    from backend.specs import Int8Matmul

    return (ort_int8.X64_QUANT_PRECISION, "1") if ort_int8.choose(Int8Matmul.AUTO).exact else None


def kernel_definitions() -> list[dict[str, Any]]:
    """The installed ONNX Runtime's kernels; run it in a child (it can segfault)."""
    from backend.runtimes.ort_compat import kernel_definitions as definitions

    return definitions()


def placement_session(model: str | bytes, native: str, weights_folder: str = "") -> dict[str, Any]:
    """A verbose ORT session on one provider: {providers, error, log}; run it in a sandboxed
    child (backend/compat/placement.py)."""
    from backend.runtimes.ort_compat import placement_session as session

    return session(model, native, weights_folder)


def run_on_cpu_once(model_bytes: bytes, inputs: list[Any]) -> str:
    """'' when ORT's CPU provider runs the model on the inputs, else the error's first line."""
    from backend.runtimes.ort_compat import run_on_cpu_once as run_once

    return run_once(model_bytes, inputs)


def run_on_openvino_once(model_bytes: bytes, inputs: list[Any]) -> str:
    """'' when OpenVINO's CPU plugin compiles and runs the model on the inputs, else its error."""
    from backend.runtimes.openvino import run_once

    return run_once(model_bytes, inputs)


# ---- generative runtimes (GenAISession), registered by name like RUNTIMES ----------------------


def _ort_genai(
    folder: Path, device: str, cuda_graph: bool, engine: str, torch_compile: bool
) -> GenAISession:
    from backend.runtimes.genai_ort import OrtGenAISession

    _no_torch_compile("ort-genai", torch_compile)
    return OrtGenAISession(folder, device, cuda_graph=cuda_graph, engine=engine)


def _openvino_genai(
    folder: Path, device: str, cuda_graph: bool, engine: str, torch_compile: bool
) -> GenAISession:
    from backend.runtimes.genai_openvino import OpenVinoGenAISession

    _no_torch_compile("openvino-genai", torch_compile)
    if engine == "on":
        raise UnavailableError(
            "--engine on asks for ONNX Runtime GenAI's Engine; openvino-genai runs its own "
            "pipeline, so leave --engine at auto for it."
        )
    if cuda_graph:
        raise UnavailableError(
            "CUDA graphs are an ONNX Runtime GenAI option on CUDA; openvino-genai has none, so "
            "leave --cuda-graph off for it."
        )
    return OpenVinoGenAISession(folder, device)


def _no_torch_compile(name: str, torch_compile: bool) -> None:
    if torch_compile:
        raise UnavailableError(
            f"--torch-compile compiles the torch runtime's decode step; {name} has no such "
            "option, so run it without --torch-compile or with --runtimes torch only."
        )


def _torch(
    folder: Path, device: str, cuda_graph: bool, engine: str, torch_compile: bool
) -> GenAISession:
    from backend.runtimes.genai_torch import TorchGenAISession

    if engine == "on":
        raise UnavailableError(
            "--engine on asks for ONNX Runtime GenAI's Engine; the torch runtime runs its own "
            "loop, so leave --engine at auto for it."
        )
    if cuda_graph:
        raise UnavailableError(
            "--cuda-graph is ONNX Runtime GenAI's option; the torch runtime replays CUDA graphs "
            "through --torch-compile (mode reduce-overhead) instead."
        )
    return TorchGenAISession(folder, device, compile=torch_compile)


GENAI_RUNTIMES: dict[str, tuple[str, Callable[[Path, str, bool, str, bool], GenAISession]]] = {
    # name -> (the Python module it needs, factory)
    "ort-genai": ("onnxruntime_genai", _ort_genai),
    "openvino-genai": ("openvino_genai", _openvino_genai),
    "torch": ("transformers", _torch),  # transformers + PyTorch on a Hugging Face folder
}


def genai_status(name: str) -> GenAIStatus:
    """Whether a generative runtime can open models here, and if not, why not."""
    if name not in GENAI_RUNTIMES:
        known = ", ".join(GENAI_RUNTIMES)
        return GenAIStatus(name, False, f"unknown generative runtime {name!r}; choose from {known}")
    module, _ = GENAI_RUNTIMES[name]
    if importlib.util.find_spec(module) is None:
        return GenAIStatus(
            name, False, f"the {module!r} Python package is not installed (requirements.txt)"
        )
    return GenAIStatus(name, True)


def open_genai(
    name: str,
    folder: Path,
    device: str = "cpu",
    cuda_graph: bool = False,
    engine: str = "auto",
    torch_compile: bool = False,
) -> GenAISession:
    """A session of a registered generative runtime on a model folder; UnavailableError (one
    sentence) when the runtime or the device is not there, or the folder is not its format.
    engine: ONNX Runtime GenAI's Engine for auto (above 32 sequences), on or off;
    torch_compile: the torch runtime's decode step through torch.compile (reduce-overhead)."""
    status = genai_status(name)
    if not status.available:
        raise UnavailableError(f"{name} cannot run here: {status.reason}.")
    return GENAI_RUNTIMES[name][1](Path(folder), device, cuda_graph, engine, torch_compile)


def open_torch_reference(folder: Path, device: str = "cpu") -> GenAISession:
    """The torch runtime's FP32 reference on a Hugging Face folder: the model as transformers
    loads it, in fp32, uncompiled, without the decode step's layer changes (greedy agreement's
    reference where no ONNX Runtime GenAI FP32 folder is given)."""
    status = genai_status("torch")
    if not status.available:
        raise UnavailableError(f"torch cannot run here: {status.reason}.")
    from backend.runtimes.genai_torch import TorchGenAISession

    return TorchGenAISession(Path(folder), device, reference=True)


__all__ = [
    "RUNTIMES",
    "ENGINE_MODES",
    "GENAI_RUNTIMES",
    "GenAISession",
    "GenAIStatus",
    "TokenTimes",
    "genai_status",
    "open_genai",
    "open_torch_reference",
    "PrecisionGap",
    "precision_gaps",
    "ProviderStatus",
    "Runtime",
    "all_provider_statuses",
    "get_runtime",
    "kernel_definitions",
    "onnxruntime_provider_name",
    "placement_session",
    "run_on_cpu_once",
    "run_on_openvino_once",
]
