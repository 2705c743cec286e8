"""One side of a regression check, in a dialog child (backend/launch/dialog.py) that runs under
one runtime environment's interpreter and keeps its session open between requests.

The parent (backend/jobs/regression.py) opens one side per environment and asks each, in turn,
for one timed window, so the two versions are timed interleaved (backend/engine/interleave.py)
with their sessions warm. Both sides build the same variant from the same upload and feed the
same seeded inputs, so their outputs can be compared value by value and their profiles node by
node. Everything crosses as JSON (the side's task through the one serializer,
backend.knobs.serialize); outputs and profiles are files in the side's output folder.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from backend.engine.measure import timed_window
from backend.engine.run import ACCURACY_SEED
from backend.host import own_cpu_s
from backend.knobs.serialize import from_json, to_json
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, MeasureSettings

TIMING_SEED = 0  # the timed feed: the same on both sides


@dataclass(frozen=True)
class SideTask:
    """What one side builds and how it measures, sent to its child as JSON."""

    source_path: str
    configuration: Configuration  # this side's (B's may have its own thread count)
    measure: MeasureSettings
    output_dir: str
    env: str  # the runtime environment asked for, said back in the side's facts

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SideTask:
        return from_json(cls, data)


class Side:
    """The built variant and its open session; each request is one method."""

    def __init__(self, task: SideTask) -> None:
        from backend.engine import inputs, variants

        self.config = task.configuration
        self.settings = task.measure
        self.source = Path(task.source_path)
        self.out = Path(task.output_dir)
        self.env = task.env
        self.runtime = get_runtime(self.config.backend)
        self.runtime.require(self.config.provider)
        self.workdir = Path(tempfile.mkdtemp(prefix="optiboard-side-"))
        self.variant = variants.build_variant(self.source, self.config, self.workdir)
        self.options = SessionOptions(self.config)
        self.runner = self.runtime.open(self.variant.path, self.options).__enter__()
        specs = self.runner.input_specs()
        self.ranges = inputs.value_ranges(self.source)
        dims = dict(self.config.symbolic_dims)
        size = self.config.batch_size
        self.feed = inputs.random_inputs(specs, size, dims, 1, TIMING_SEED, self.ranges)[0]
        count = max(self.settings.accuracy_samples, 1)
        self.accuracy_feeds = inputs.random_inputs(
            specs, size, dims, count, ACCURACY_SEED, self.ranges
        )
        self.call = partial(self.runner.infer, self.feed)

    def facts(self, _: dict[str, Any]) -> dict[str, Any]:
        """What really runs: the runtime's version and file, providers, the variant's steps."""
        import sys

        module = __import__(self.runtime.name)  # onnxruntime, openvino: where it was loaded from
        from backend.host import describe_environment
        from backend.runtimeenvs import current_env_name

        return {
            **describe_environment(),
            "runtime_env": current_env_name(),
            "runtime_env_asked": self.env,
            "backend": self.runtime.name,  # stored keys: the runtime under its first name
            "backend_version": self.runtime.version(),
            "runtime_file": str(getattr(module, "__file__", "")),
            "python": sys.executable,
            "providers_used": list(self.runner.providers_used),
            "runtime_facts": dict(self.runner.facts),
            "session_create_ms": self.runner.session_create_ms,
            "steps": list(self.variant.steps),
            "notes": list(self.variant.notes),
            "model_size_bytes": self.variant.size_bytes,
            "output_names": list(self.runner.output_names()),
        }

    def warm(self, _: dict[str, Any]) -> dict[str, Any]:
        """The first call timed apart, then the preset's warm-up calls."""
        start = time.perf_counter_ns()
        self.call()
        first_ms = (time.perf_counter_ns() - start) / 1e6
        for _i in range(self.settings.warmup_runs):
            self.call()
        return {"first_inference_ms": first_ms}

    def window(self, request: dict[str, Any]) -> dict[str, Any]:
        """One timed window before the parent's deadline (the host's monotonic clock)."""
        samples = timed_window(self.call, self.settings, float(request["deadline"]))
        return {"samples_ms": samples.tolist(), "cpu_s": own_cpu_s()}

    def outputs(self, _: dict[str, Any]) -> str:
        """The outputs on the seeded accuracy inputs, saved as one .npz for the parent."""
        path = self.out / "outputs.npz"
        arrays: dict[str, np.ndarray] = {}
        for i, feed in enumerate(self.accuracy_feeds):
            for j, value in enumerate(self.runner.infer(feed)):
                arrays[f"s{i}_o{j}"] = np.asarray(value)
        np.savez(path, **arrays)
        return str(path)

    def profile(self, _: dict[str, Any]) -> str:
        """The per-node profile of the same variant, on its own session (shares, not latency)."""
        from backend.engine.profile import write_profile

        profiler = None
        if self.config.backend == "openvino":
            from backend.engine.ovprofile import profile_openvino as profiler
        key = f"{self.env}-{self.config.key}"
        return str(
            write_profile(
                self.variant.path, self.source, self.options, self.feed, self.out, key, profiler
            )
        )


def open_side(task: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    """The dialog handler: the task read once, build and open, then answer {'op': name, ...}
    with Side.name."""
    side = Side(SideTask.from_dict(task))
    ops = {"facts": side.facts, "warm": side.warm, "window": side.window}
    ops |= {"outputs": side.outputs, "profile": side.profile}

    def answer(request: dict[str, Any]) -> Any:
        return ops[request["op"]](request)

    return answer


def read_outputs(path: Path) -> list[list[np.ndarray]]:
    """outputs[sample][output] from a side's .npz (the parent's end)."""
    with np.load(path) as data:
        names = list(data.files)
        samples = sorted({int(n.split("_")[0][1:]) for n in names})
        return [
            [data[f"s{i}_o{j}"] for j in range(sum(n.startswith(f"s{i}_") for n in names))]
            for i in samples
        ]
