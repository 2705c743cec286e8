"""Why INT8 is slower or less accurate, from evidence: FP32 / INT8 / mixed on two models.

Run: .venv/bin/python bench/explain_int8.py [--threads 1] [--quick]

For a transformer-style encoder (tests/models.make_transformer at sequence 128) and a
MobileNetV3-style network (tests/evidence_models: depthwise convs, HardSwish, squeeze-excite),
it runs the measured mixed-precision search (backend.engine.mixed; every step timed with the
clean loop and compared with FP32 on the same inputs; FP32 and the steps then timed again
interleaved, window by window), then profiles FP32, INT8 and the best mix in a separate pass
and prints the top three profile facts (backend.engine.evidence) behind each, and the verdict
against plain FP32.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.engine import evidence, mixed  # noqa: E402
from backend.engine.inputs import input_specs_of, random_inputs, value_ranges  # noqa: E402
from backend.engine.profile import profile_model  # noqa: E402
from backend.engine.variants import variant_name  # noqa: E402
from backend.runtimes.base import SessionOptions  # noqa: E402
from backend.specs import MEASURE_PRESETS, Configuration, MeasureSettings, Precision  # noqa: E402
from tests import models  # noqa: E402
from tests.evidence_models import make_mobilenet_v3_style  # noqa: E402


def _facts(source: Path, path: Path, config: Configuration, label: str, speedup: float | None):
    specs = input_specs_of(source)
    dims = dict(config.symbolic_dims)
    feed = random_inputs(specs, 1, dims, count=1, seed=7, ranges=value_ranges(source))[0]
    options = SessionOptions.plain(intra_op_threads=config.intra_op_threads)
    profile = profile_model(path, onnx.load(str(source)), options, feed)
    return evidence.facts(profile, label, speedup)[:3]


def bench(name: str, source: Path, base: Configuration, settings: MeasureSettings, work: Path):
    bound = mixed.AccuracyBound("cosine", 0.99)
    found = mixed.search(source, bound, work, settings, base)
    print(f"\n=== {name} ===")
    print("\n".join("  " + line for line in found.lines()))
    plain, best = found.steps[0], found.best
    rows = [
        ("FP32", replace(base, precision=Precision.FP32, fp32_nodes=()), found.fp32_p50_ms, None)
    ]
    rows.append(("INT8 static", base, plain.p50_ms, plain))
    if best is not None and best.fp32_nodes:
        rows.append(
            (
                f"mixed ({len(best.fp32_nodes)} in FP32)",
                replace(base, fp32_nodes=best.fp32_nodes),
                best.p50_ms,
                best,
            )
        )
    for label, config, p50, step in rows:
        speedup = found.fp32_p50_ms / p50
        acc = (
            "reference"
            if step is None
            else (
                f"cosine {step.accuracy.cosine_similarity:.4f}"
                + (
                    f", top-1 {step.accuracy.top1_agreement:.1%}"
                    if step.accuracy.top1_agreement is not None
                    else ""
                )
            )
        )
        print(f"\n{label}: p50 {p50:.3f} ms ({speedup:.2f}x FP32), {acc}")
        path = work / variant_name(source, config)
        facts = _facts(source, path, config, label, speedup if step is not None else None)
        print("\n".join(f"  - {fact}" for fact in facts))
    print(f"\n{found.verdict()}")  # against plain FP32, timed interleaved with the steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--quick", action="store_true", help="short timing windows")
    args = parser.parse_args()
    settings = MEASURE_PRESETS["quick"] if args.quick else MeasureSettings(
        warmup_runs=10, window_runs=30, window_min_seconds=0.3, stable_windows=3,
        stability_tolerance=0.15, max_seconds=10.0, accuracy_samples=8,
    )  # fmt: skip
    print(
        f"ORT {ort.__version__} CPU, intra_op_num_threads={args.threads} (machine has "
        f"{os.cpu_count()} cores); bound cosine >= 0.99 against FP32 on 8 random inputs; "
        "calibration is random (16 samples), so accuracy numbers are indicative"
    )
    with tempfile.TemporaryDirectory(prefix="explain-int8-") as tmp:
        work = Path(tmp)
        encoder = models.save(
            models.make_transformer(d_model=128, heads=4, vocab=1000), work / "enc.onnx"
        )
        base = Configuration(
            precision=Precision.INT8_STATIC,
            symbolic_dims=(("seq", 128),),
            intra_op_threads=args.threads,
        )
        bench(
            "transformer-style encoder (1 block, hidden 128, 4 heads, sequence 128)",
            encoder,
            base,
            settings,
            work,
        )
        mobilenet = models.save(make_mobilenet_v3_style(), work / "mnv3.onnx")
        base = Configuration(precision=Precision.INT8_STATIC, intra_op_threads=args.threads)
        bench(
            "MobileNetV3-style (4 inverted residual blocks, HardSwish, SE, 96x96)",
            mobilenet,
            base,
            settings,
            work,
        )


if __name__ == "__main__":
    main()
