"""What a result was measured on: software versions, hardware, telemetry sampled during a run."""

from __future__ import annotations

import os
import platform
import threading
import time
from functools import lru_cache
from importlib import metadata
from typing import Any

from backend.hardware import gpu_inventory, gpu_reader

PACKAGES = ("onnxruntime", "onnxruntime-gpu", "onnx", "onnxconverter-common", "onnxslim", "numpy")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def describe_environment() -> dict[str, Any]:
    """Exact software versions and hardware of this process's machine."""
    import psutil

    return {
        "hostname": platform.node(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": {p: v for p in PACKAGES if (v := _version(p))},
        "cpu": _cpu_model(),
        "cpu_count_logical": os.cpu_count(),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "memory_total_mb": round(psutil.virtual_memory().total / 2**20),
        "gpus": gpu_inventory(),
    }


class TelemetrySampler:
    """Samples CPU load and, where NVML works, GPU load, memory, power and temperature."""

    def __init__(self, interval_s: float = 0.1, gpu_index: int | None = None) -> None:
        self.interval_s = interval_s
        self.gpu_index = gpu_index
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> TelemetrySampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _run(self) -> None:
        import psutil

        process = psutil.Process()
        process.cpu_percent(None)
        with gpu_reader(self.gpu_index) as read_gpu:
            while not self._stop.wait(self.interval_s):
                sample = {"t": time.monotonic(), "process_cpu_percent": process.cpu_percent(None)}
                if read_gpu is not None:
                    sample.update(read_gpu())
                self.samples.append(sample)

    def summary(self) -> dict[str, Any]:
        if not self.samples:
            return {}
        keys = [k for k in self.samples[0] if k != "t"]
        out: dict[str, Any] = {"sample_count": len(self.samples)}
        for key in keys:
            values = [s[key] for s in self.samples if key in s]
            out[f"{key}_mean"] = sum(values) / len(values)
            out[f"{key}_max"] = max(values)
        return out
