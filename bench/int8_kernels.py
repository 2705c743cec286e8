"""U8S8 vs U8U8 int8 kernels (session.x64quantprecision) on the same static INT8 files, ORT CPU.

Run: .venv/bin/python bench/int8_kernels.py [--threads 1] [--rounds 10] [--runs 100]

Each model (the test MLP, the ResNet-style CNN) is quantized once by
backend.engine.variants.build_variant; two sessions open the same file, one with ONNX Runtime's
default U8S8 kernels and one with session.x64quantprecision=1 (U8U8), and are timed interleaved
in rounds (the order alternates) so drift hits both alike. Accuracy is cosine against FP32 on 64
seeded inputs. Without VNNI the U8S8 column shows the saturation OrtOptions.int8_matmul=auto
avoids, and the ratio what exactness costs; with VNNI both are exact.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.engine.accuracy import compare_outputs  # noqa: E402
from backend.engine.inputs import input_specs_of, random_inputs  # noqa: E402
from backend.engine.variants import build_variant  # noqa: E402
from backend.hardware import cpu_features  # noqa: E402
from backend.runtimes.ort_int8 import X64_QUANT_PRECISION  # noqa: E402
from backend.specs import Configuration, Precision  # noqa: E402
from tests import models  # noqa: E402


def _session(path: Path, threads: int, exact: bool) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    if exact:
        options.add_session_config_entry(X64_QUANT_PRECISION, "1")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _bench(name: str, source: Path, args: argparse.Namespace, workdir: Path) -> None:
    config = Configuration(precision=Precision.INT8_STATIC, calibration_samples=32)
    variant = build_variant(source, config, workdir / name)
    fp32 = _session(source, args.threads, exact=False)
    sessions = {
        kernels: _session(variant.path, args.threads, kernels == "U8U8")
        for kernels in ("U8S8", "U8U8")
    }
    specs = input_specs_of(source)
    feed = random_inputs(specs, 1, {}, count=1, seed=123)[0]
    for session in sessions.values():  # warm-up: first calls allocate and pack weights
        for _ in range(20):
            session.run(None, feed)
    samples: dict[str, list[float]] = {k: [] for k in sessions}
    for round_index in range(args.rounds):
        order = list(sessions) if round_index % 2 == 0 else list(sessions)[::-1]
        for kernels in order:
            for _ in range(args.runs):
                started = time.perf_counter()
                sessions[kernels].run(None, feed)
                samples[kernels].append((time.perf_counter() - started) * 1e3)
    feeds = random_inputs(specs, 1, {}, count=64, seed=7)
    reference = [fp32.run(None, f) for f in feeds]
    p50 = {k: float(np.median(v)) for k, v in samples.items()}
    for kernels, session in sessions.items():
        cosine = compare_outputs(reference, [session.run(None, f) for f in feeds]).cosine_similarity
        print(f"{name:12s} {kernels}  p50 {p50[kernels]:8.4f} ms  cosine vs FP32 {cosine:.5f}")
    print(f"{name:12s} U8U8 / U8S8 p50 time: {p50['U8U8'] / p50['U8S8']:.3f}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (machine: 2)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=100, help="timed calls per kernel per round")
    args = parser.parse_args()
    cpu = cpu_features()
    print(
        f"ORT {ort.__version__} CPU, batch 1, intra_op_num_threads={args.threads} "
        f"(machine has {os.cpu_count()} cores); cpu flags: "
        + (", ".join(k for k, v in cpu.items() if v) or "no avx2/avx512/vnni/amx")
        + f"; {args.rounds} rounds x {args.runs} runs per kernel, interleaved\n"
    )
    workdir = Path(tempfile.mkdtemp(prefix="int8-kernels-"))
    built = {
        "mlp": models.make_mlp(),
        "cnn": models.make_cnn(channels=64, blocks=4, image=32, classes=100),
    }
    for name, model in built.items():
        _bench(name, models.save(model, workdir / f"{name}.onnx"), args, workdir)


if __name__ == "__main__":
    main()
