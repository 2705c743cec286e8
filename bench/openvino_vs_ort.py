"""ONNX Runtime vs OpenVINO on a ResNet-style CNN, CPU, batch 1, in one run.

Run: .venv/bin/python bench/openvino_vs_ort.py [--threads 1] [--rounds 10] [--runs 100]

Five configurations, each built with backend.engine.variants.build_variant and opened through
backend.runtimes (the runners the worker uses): ORT FP32, ORT INT8 static (QDQ), OpenVINO FP32
(INFERENCE_PRECISION_HINT f32, read back), OpenVINO BF16 and OpenVINO INT8 (NNCF). Both INT8
variants calibrate on the same samples. They are timed interleaved in rounds (the order rotates
each round) so drift on a shared machine hits all of them alike; each timed call is runner.infer
on host arrays (output copies included); OpenVINO's per-layer counters are off while timing.
Accuracy: top-1 agreement and cosine against ORT FP32 on the same inputs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.engine.accuracy import compare_outputs  # noqa: E402
from backend.engine.inputs import input_specs_of, random_inputs  # noqa: E402
from backend.engine.variants import build_variant  # noqa: E402
from backend.runtimes import get_runtime  # noqa: E402
from backend.runtimes.base import Runner, SessionOptions  # noqa: E402
from backend.specs import Configuration, Precision  # noqa: E402
from tests import models  # noqa: E402

CONFIGS = (
    ("ORT FP32", "onnxruntime", Precision.FP32),
    ("ORT INT8 static", "onnxruntime", Precision.INT8_STATIC),
    ("OV FP32 (f32)", "openvino", Precision.FP32),
    ("OV BF16", "openvino", Precision.BF16),
    ("OV INT8 (NNCF)", "openvino", Precision.INT8_STATIC),
)


def _open(label: str, runtime: str, precision: Precision, path: Path, threads: int) -> Runner:
    config = Configuration(
        precision=precision, backend=runtime, provider="cpu", intra_op_threads=threads
    )
    options = SessionOptions(config, perf_counters=False)
    runner = get_runtime(runtime).open(path, options)
    runner.__enter__()
    ran = runner.facts.get("execution_precision", "ORT kernels")
    print(f"opened {label:16s} in {runner.session_create_ms:7.1f} ms; runs: {ran}", end="")
    if runner.facts:
        print(f", streams {runner.facts['streams']}, threads {runner.facts['threads']}", end="")
        print(f", layers {runner.facts['layer_precisions']}", end="")
    print()
    return runner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="inference threads (machine: 2)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=100, help="timed calls per config per round")
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--image", type=int, default=32)
    parser.add_argument("--calibration", type=int, default=32)
    args = parser.parse_args()

    openvino = get_runtime("openvino")
    workdir = Path(tempfile.mkdtemp(prefix="ov-bench-"))
    source = models.save(
        models.make_cnn(channels=args.channels, blocks=args.blocks, image=args.image, classes=100),
        workdir / "cnn.onnx",
    )
    print(
        f"model: ResNet-style CNN, {args.channels} channels, {args.blocks} residual blocks, "
        f"{args.image}x{args.image} input, 100 classes; batch 1; threads={args.threads} "
        f"(machine has {os.cpu_count()} cores); onnxruntime {get_runtime('onnxruntime').version()}"
        f", openvino {openvino.version()}"
    )
    specs = input_specs_of(source)
    one = [{**s, "shape": [None, *s["shape"][1:]]} for s in specs]
    calibration = random_inputs(one, 1, {}, count=args.calibration, seed=0)

    runners: dict[str, Runner] = {}
    for label, runtime, precision in CONFIGS:
        reason = get_runtime(runtime).precision_unavailable(precision, "cpu")
        if reason:
            print(f"skipped {label}: {reason}")
            continue
        config = Configuration(precision=precision, backend=runtime)
        started = time.perf_counter()
        variant = build_variant(source, config, workdir / runtime, calibration=calibration)
        took = time.perf_counter() - started
        print(f"built {label:16s} in {took:5.2f}s: {'; '.join(variant.steps)}")
        runners[label] = _open(label, runtime, precision, variant.path, args.threads)

    feed = random_inputs(specs, 1, {}, count=1, seed=123)[0]
    for runner in runners.values():  # warm-up: first calls allocate and pick kernels
        for _ in range(20):
            runner.infer(feed)
    samples: dict[str, list[float]] = {label: [] for label in runners}
    order = list(runners)
    for round_index in range(args.rounds):
        rotated = order[round_index % len(order) :] + order[: round_index % len(order)]
        for label in rotated:
            runner = runners[label]
            for _ in range(args.runs):
                started = time.perf_counter()
                runner.infer(feed)
                samples[label].append((time.perf_counter() - started) * 1e3)

    accuracy_feeds = random_inputs(specs, 1, {}, count=64, seed=7)
    reference = [runners["ORT FP32"].infer(f) for f in accuracy_feeds]
    base = float(np.median(samples["ORT FP32"]))
    print(f"\n{args.rounds} rounds x {args.runs} runs per configuration, interleaved\n")
    header = ("p50 ms", "p90 ms", "vs ORT FP32", "top-1", "cosine")
    print(f"{'configuration':16s} " + " ".join(f"{h:>11s}" for h in header))
    for label, runner in runners.items():
        p50 = float(np.median(samples[label]))
        p90 = float(np.percentile(samples[label], 90))
        report = compare_outputs(reference, [runner.infer(f) for f in accuracy_feeds])
        top1 = f"{report.top1_agreement:.1%}" if report.top1_agreement is not None else "-"
        print(
            f"{label:16s} {p50:11.3f} {p90:11.3f} {base / p50:10.2f}x {top1:>11s} "
            f"{report.cosine_similarity:11.5f}"
        )
    print(
        "\n'vs ORT FP32' is ORT FP32's median latency divided by the configuration's (>1: faster)"
    )
    for runner in runners.values():
        runner.__exit__(None, None, None)


if __name__ == "__main__":
    main()
