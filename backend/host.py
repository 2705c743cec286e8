"""What a result was measured on: software versions, hardware, telemetry sampled during a run."""

from __future__ import annotations

import os
import platform
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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


# Other processes' load and the hypervisor's steal worth a sentence beside a number measured
# meanwhile: half a core of someone else's work, or a twentieth of the CPU time taken away.
OTHERS_NOTE_CORES = 0.5
STEAL_NOTE_FRACTION = 0.05


def _cpu_ticks() -> list[int]:
    """The machine's CPU time by kind (/proc/stat's first line: user, nice, system, idle,
    iowait, irq, softirq, steal, ...); empty where there is no /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            return [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return []


def own_cpu_s() -> float:
    """This process's CPU time (user + system, every thread), in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class HostShare:
    """How the machine's CPUs were spent while something was measured: by everything, by
    this process, and by the hypervisor (steal: time a virtual machine's CPUs did not run)."""

    seconds: float
    busy_cores: float  # every process's user + system time (this one's included), over wall time
    own_cores: float  # this process's (and its threads') CPU time over wall time
    steal_fraction: float  # of the machine's CPU time; 0 on bare metal

    @property
    def other_cores(self) -> float:
        return max(0.0, self.busy_cores - self.own_cores)

    def as_telemetry(self) -> dict[str, float]:
        return {
            "host_busy_cores": round(self.busy_cores, 3),
            "host_other_cores": round(self.other_cores, 3),
            "host_steal_fraction": round(self.steal_fraction, 4),
        }


class HostWatch:
    """Reads the machine's CPU time around a block: `share` is set when it ends."""

    def __init__(self, own_cpu: Callable[[], float] | None = None) -> None:
        self.share: HostShare | None = None
        self.own_cpu = own_cpu or own_cpu_s  # what counts as the measurement's own CPU time

    def __enter__(self) -> HostWatch:
        self._ticks, self._own, self._wall = _cpu_ticks(), self.own_cpu(), time.monotonic()
        return self

    def __exit__(self, *_exc: object) -> None:
        ticks, wall = _cpu_ticks(), time.monotonic() - self._wall
        if not ticks or not self._ticks or wall <= 0:
            return
        delta = [after - before for after, before in zip(ticks, self._ticks, strict=True)]
        total = sum(delta) or 1
        hertz = os.sysconf("SC_CLK_TCK")
        busy = delta[0] + delta[1] + delta[2] + delta[5] + delta[6]  # user nice system irq softirq
        own = (self.own_cpu() - self._own) / wall
        self.share = HostShare(wall, busy / hertz / wall, own, delta[7] / total)


def contention_note(telemetry: dict[str, Any]) -> str | None:
    """A sentence when other processes or the hypervisor took a visible share of the CPUs
    while the number was measured (why it may move on a rerun); None when they did not."""
    others = telemetry.get("host_other_cores", 0.0)
    steal = telemetry.get("host_steal_fraction", 0.0)
    parts = []
    if others >= OTHERS_NOTE_CORES:
        parts.append(f"other processes kept {others:.1f} of {os.cpu_count()} cores busy")
    if steal >= STEAL_NOTE_FRACTION:
        parts.append(f"the hypervisor took {steal:.0%} of the CPU time (steal)")
    if not parts:
        return None
    return "While this was measured " + " and ".join(parts) + "; a rerun may differ."


class TelemetrySampler:
    """Samples CPU load and, where NVML works, GPU load, memory, power and temperature."""

    def __init__(self, interval_s: float = 0.1, gpu_index: int | None = None) -> None:
        self.interval_s = interval_s
        self.gpu_index = gpu_index
        self.samples: list[dict[str, float]] = []
        self._host: HostWatch | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> TelemetrySampler:
        self._host = HostWatch().__enter__()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._host is not None:
            self._host.__exit__()

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
        share = self._host.share if self._host is not None else None
        host = share.as_telemetry() if share else {}
        if not self.samples:
            return host
        keys = [k for k in self.samples[0] if k != "t"]
        out: dict[str, Any] = {"sample_count": len(self.samples), **host}
        for key in keys:
            values = [s[key] for s in self.samples if key in s]
            out[f"{key}_mean"] = sum(values) / len(values)
            out[f"{key}_max"] = max(values)
        return out
