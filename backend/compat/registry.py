"""ONNX Runtime's own kernel registry, read in a child process and cached per runtime version.

`get_all_opkernel_def()` segfaults in onnxruntime-gpu on a host without CUDA (after it fails to
load the CUDA provider), so it never runs in the dashboard's or the worker's process: a child
prints the kernels as JSON (`python -m backend.compat.registry`) and a crash there is reported.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import settings

ROOT = settings.PROJECT_ROOT
INT_MAX = 2147483647
ORT_DISTRIBUTIONS = (
    "onnxruntime-gpu",
    "onnxruntime",
    "onnxruntime-openvino",
    "onnxruntime-directml",
)


@dataclass(frozen=True)
class Kernel:
    op: str
    domain: str
    since: int
    until: int | None  # None: open-ended (ORT writes INT_MAX)
    provider: str
    types: dict[str, list[str]]

    def covers(self, version: int) -> bool:
        """ORT's rule: an open-ended kernel serves only its own since_version exactly; a closed
        range serves every version inside it (kernel_registry.cc VerifyKernelDef)."""
        if self.until is None:
            return version == self.since
        return self.since <= version <= self.until

    @property
    def range_label(self) -> str:
        if self.until is None:
            return f"{self.since}+"
        return str(self.since) if self.since == self.until else f"{self.since}-{self.until}"


@dataclass
class KernelRegistry:
    """Kernels of the installed ONNX Runtime, indexed by (provider, domain, op)."""

    runtime: str  # e.g. "onnxruntime 1.32.0"
    kernels: list[Kernel]
    error: str | None = None  # why the registry could not be read (then kernels is empty)
    _index: dict[tuple[str, str, str], list[Kernel]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for k in self.kernels:
            self._index.setdefault((k.provider, k.domain, k.op), []).append(k)

    @property
    def providers(self) -> set[str]:
        return {k.provider for k in self.kernels}

    @property
    def domains(self) -> set[str]:
        return {k.domain for k in self.kernels}

    def lookup(self, provider: str, domain: str, op: str) -> list[Kernel]:
        return self._index.get((provider, domain, op), [])


def installed_runtime() -> tuple[str, str] | None:
    """(distribution, version) of the installed ONNX Runtime, without importing it."""
    for dist in ORT_DISTRIBUTIONS:
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def cache_dir() -> Path:
    return settings.data_dir() / "cache"


def to_json(registry: KernelRegistry) -> dict[str, Any]:
    """The registry as the child wrote it (open-ended kernels as INT_MAX), plus its error:
    what the sandboxed matrix child gets instead of reading the data folder's cache."""
    kernels = [
        {
            "op": k.op,
            "domain": k.domain,
            "since": k.since,
            "until": INT_MAX if k.until is None else k.until,
            "provider": k.provider,
            "types": k.types,
        }
        for k in registry.kernels
    ]
    return {"runtime": registry.runtime, "kernels": kernels, "error": registry.error}


def from_json(payload: dict[str, Any]) -> KernelRegistry:
    kernels = [
        Kernel(
            op=k["op"],
            domain=k["domain"],
            since=k["since"],
            until=None if k["until"] >= INT_MAX else k["until"],
            provider=k["provider"],
            types=k["types"],
        )
        for k in payload["kernels"]
    ]
    return KernelRegistry(runtime=payload["runtime"], kernels=kernels, error=payload.get("error"))


def read_in_child(timeout: float = 180.0) -> dict[str, Any]:
    """Run the registry dump in a child; raise RuntimeError with the reason when it fails."""
    from backend.launch.children import run_module

    return json.loads(
        run_module("backend.compat.registry", timeout_s=timeout, what="the kernel-registry child")
    )


def load_registry(refresh: bool = False) -> KernelRegistry:
    """The installed runtime's kernels, from the on-disk cache keyed by runtime and version."""
    installed = installed_runtime()
    if installed is None:
        return KernelRegistry("onnxruntime not installed", [], error="onnxruntime is not installed")
    dist, version = installed
    path = cache_dir() / f"ort-kernels-{dist}-{version}.json"
    if path.is_file() and not refresh:
        return from_json(json.loads(path.read_text()))
    try:
        payload = read_in_child()
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        return KernelRegistry(f"{dist} {version}", [], error=str(exc))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, path)
    return from_json(payload)


def dump() -> dict[str, Any]:
    """What the child prints: every registered kernel with its version range and types."""
    from backend.runtimes import get_runtime, kernel_definitions

    installed = installed_runtime()
    label = (
        f"{installed[0]} {installed[1]}"
        if installed
        else f"onnxruntime {get_runtime('onnxruntime').version()}"
    )
    return {"runtime": label, "kernels": kernel_definitions()}


if __name__ == "__main__":
    json.dump(dump(), sys.stdout)
