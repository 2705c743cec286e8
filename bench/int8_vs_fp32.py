"""FP32 vs FP16 vs INT8 (dynamic, static QDQ) on a ResNet-style CNN, ORT CPU, batch 1.

Run: .venv/bin/python bench/int8_vs_fp32.py [--threads 1] [--rounds 10] [--runs 100]

All variants are built with backend.engine.variants.build_variant, opened side by side and timed
interleaved in rounds (the order rotates each round) so drift on a shared machine hits all of
them alike. Each timed call is session.run on host arrays; warm-up calls are not timed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.engine.accuracy import compare_outputs  # noqa: E402
from backend.engine.explain import explain  # noqa: E402
from backend.engine.inputs import input_specs_of, random_inputs  # noqa: E402
from backend.engine.variants import build_variant, op_histogram  # noqa: E402
from backend.hardware import cpu_features  # noqa: E402
from backend.specs import Configuration, Precision  # noqa: E402
from tests import models  # noqa: E402


def _session(path: Path, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (machine: 2)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=100, help="timed calls per variant per round")
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--image", type=int, default=32)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="int8-bench-"))
    source = models.save(
        models.make_cnn(channels=args.channels, blocks=args.blocks, image=args.image, classes=100),
        workdir / "cnn.onnx",
    )
    print(
        f"model: ResNet-style CNN, {args.channels} channels, {args.blocks} residual blocks, "
        f"{args.image}x{args.image} input, 100 classes; batch 1; ORT {ort.__version__} CPU, "
        f"intra_op_num_threads={args.threads} (machine has {os.cpu_count()} cores)"
    )
    cpu = cpu_features()
    print("cpu:", ", ".join(k for k, v in cpu.items() if v) or "no avx2/avx512/vnni/amx")

    variants = {}
    for precision in Precision:
        if precision == Precision.BF16:  # an OpenVINO precision; bench/openvino_vs_ort.py has it
            continue
        config = Configuration(precision=precision, batch_size=1, calibration_samples=32)
        started = time.perf_counter()
        variants[precision] = build_variant(source, config, workdir / "variants")
        took = time.perf_counter() - started
        print(
            f"built {precision.label:18s} in {took:5.2f}s: {'; '.join(variants[precision].steps)}"
        )

    sessions = {p: _session(v.path, args.threads) for p, v in variants.items()}
    specs = input_specs_of(source)
    feed = random_inputs(specs, 1, {}, count=1, seed=123)[0]
    for session in sessions.values():  # warm-up: first calls allocate and pick kernels
        for _ in range(20):
            session.run(None, feed)

    samples: dict[Precision, list[float]] = {p: [] for p in sessions}
    order = list(sessions)
    for round_index in range(args.rounds):
        rotated = order[round_index % len(order) :] + order[: round_index % len(order)]
        for precision in rotated:
            session = sessions[precision]
            for _ in range(args.runs):
                started = time.perf_counter()
                session.run(None, feed)
                samples[precision].append((time.perf_counter() - started) * 1e3)

    accuracy_feeds = random_inputs(specs, 1, {}, count=64, seed=7)
    reference = [sessions[Precision.FP32].run(None, f) for f in accuracy_feeds]
    fp32_p50 = float(np.median(samples[Precision.FP32]))
    print(f"\n{args.rounds} rounds x {args.runs} runs per variant, interleaved\n")
    header = ("p50 ms", "p90 ms", "vs FP32", "top-1", "cosine")
    print(f"{'variant':18s} " + " ".join(f"{h:>8s}" for h in header))
    lines: dict[Precision, list[str]] = {}
    for precision, session in sessions.items():
        p50 = float(np.median(samples[precision]))
        p90 = float(np.percentile(samples[precision], 90))
        speedup = fp32_p50 / p50
        report = compare_outputs(reference, [session.run(None, f) for f in accuracy_feeds])
        top1 = f"{report.top1_agreement:.1%}" if report.top1_agreement is not None else "-"
        print(
            f"{precision.label:18s} {p50:8.3f} {p90:8.3f} {speedup:7.2f}x {top1:>8s} "
            f"{report.cosine_similarity:8.5f}"
        )
        ops = op_histogram(onnx.load(str(variants[precision].path)))
        lines[precision] = explain(precision, "cpu", speedup, ops, cpu, report)
    print()
    for precision, why in lines.items():
        for line in why:
            print(f"{precision.label}: {line}")
    static = fp32_p50 / float(np.median(samples[Precision.INT8_STATIC]))
    verdict = "meets" if static >= 2.5 else "misses"
    print(f"\nstatic INT8 is {static:.2f}x faster than FP32 at batch 1: {verdict} the 2.5x goal")


if __name__ == "__main__":
    main()
