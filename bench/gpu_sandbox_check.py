"""CUDA configurations measured through the worker's own call (measure_in_child: a limited,
bubblewrap-sandboxed child with the GPU device nodes bound) on a real GPU host, with their
accuracy against FP32, the providers ONNX Runtime really used and the child's notes.

  python bench/gpu_sandbox_check.py OUT.json      (OPTIBOARD_BWRAP names bwrap when not on PATH)

Checks issue 21's GPU items end to end as a user's sweep runs them: CUDA-graph rows compute the
model (cosine against FP32), a GPU child gets a memory cgroup instead of RLIMIT_AS, the sandbox
works with the GPU, and a row whose outputs disagree is never "ok".
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.cudaoptions import CudaOptions  # noqa: E402
from backend.engine.run import ConfigurationTask  # noqa: E402
from backend.jobs.measuring import measure_in_child  # noqa: E402
from backend.launch import pids, sandbox  # noqa: E402
from backend.specs import Configuration, IoMode, MeasureSettings  # noqa: E402
from tests import models  # noqa: E402

MEASURE = MeasureSettings(
    warmup_runs=10,
    window_runs=20,
    window_min_seconds=0.25,
    stable_windows=3,
    stability_tolerance=0.1,
    max_seconds=4.0,
    accuracy_samples=4,
)
PLAN = [  # precision, io, batch, cuda options
    ("fp32", IoMode.END_TO_END, 1, {}),
    ("fp16", IoMode.DEVICE, 1, {}),
    ("fp16", IoMode.DEVICE, 1, {"enable_cuda_graph": True}),
    ("fp32", IoMode.DEVICE, 64, {"enable_cuda_graph": True}),
    ("fp16", IoMode.DEVICE, 64, {"enable_cuda_graph": True, "prefer_nhwc": True}),
    ("fp16", IoMode.DEVICE, 256, {}),
]


def main(out: Path) -> None:
    state = sandbox.available()
    report: dict = {"sandbox_ok": state.ok, "sandbox_reason": state.reason}
    report |= {"pids_cgroup": pids.available(), "memory_cgroup": pids.memory_available()}
    print(json.dumps(report), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        cnn = models.make_cnn(channels=64, blocks=4, image=64)
        model = models.save(cnn, Path(scratch) / "cnn.onnx")
        for precision, io, batch, cuda in PLAN:
            config = Configuration(
                precision=precision,
                provider="cuda",
                batch_size=batch,
                io_mode=io,
                cuda=CudaOptions(**cuda),
            )
            task = ConfigurationTask(str(model), config, MEASURE, scratch)
            result = measure_in_child(task, timeout_s=300)
            assert result is not None
            row = {
                "config": config.label,
                "status": result.status.value,
                "error": result.error,
                "throughput": result.throughput,
                "p50_ms": result.latency.p50 if result.latency else None,
                "cosine": result.accuracy.cosine_similarity if result.accuracy else None,
                "top1": result.accuracy.top1_agreement if result.accuracy else None,
                "providers": result.providers_used,
                "notes": result.notes,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    report["rows"] = rows
    out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
