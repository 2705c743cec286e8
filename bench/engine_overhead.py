"""Engine p50 against a bare `session.run` loop timed with perf_counter, same model and session.

Rounds alternate engine and bare loop so machine noise hits both alike. Goal: within 2%.
Run: .venv/bin/python bench/engine_overhead.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.engine.measure import measure  # noqa: E402
from backend.runtimes import get_runtime  # noqa: E402
from backend.runtimes.base import SessionOptions  # noqa: E402
from backend.specs import MeasureSettings  # noqa: E402
from tests import models  # noqa: E402

ROUNDS = 8
RUNS_PER_ROUND = 300


def bare_loop(session, feed: dict[str, np.ndarray], runs: int) -> list[float]:
    outputs = [o.name for o in session.get_outputs()]
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run(outputs, feed)
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def compare(name: str, model_path: Path, feed: dict[str, np.ndarray]) -> float:
    runtime = get_runtime("onnxruntime")
    settings = MeasureSettings(
        warmup_runs=20,
        window_runs=RUNS_PER_ROUND // 3,
        window_min_seconds=0.0,
        stable_windows=3,
        stability_tolerance=0.99,
        max_seconds=60,
    )
    engine_p50, bare_p50 = [], []
    with runtime.open(model_path, SessionOptions.plain(intra_op_threads=1)) as runner:
        bare_loop(runner.session, feed, 50)
        for round_index in range(ROUNDS):
            order = [0, 1] if round_index % 2 == 0 else [1, 0]
            for which in order:
                if which == 0:
                    m = measure(lambda: runner.infer(feed), settings)
                    engine_p50.append(float(np.median(m.samples_ms)))
                else:
                    bare_p50.append(
                        float(np.median(bare_loop(runner.session, feed, RUNS_PER_ROUND)))
                    )
    engine, bare = float(np.median(engine_p50)), float(np.median(bare_p50))
    ratio = engine / bare
    print(
        f"{name:<28} engine p50 {engine:8.4f} ms   bare loop p50 {bare:8.4f} ms   "
        f"engine/bare {ratio:.4f} ({(ratio - 1) * 100:+.2f}%)"
    )
    return ratio


def main() -> int:
    work = Path(tempfile.mkdtemp())
    cnn = models.save(models.make_cnn(channels=64, blocks=3, image=32), work / "cnn.onnx")
    mlp = models.save(models.make_mlp(), work / "mlp.onnx")
    rng = np.random.default_rng(0)
    print(f"{ROUNDS} alternating rounds of {RUNS_PER_ROUND} runs, 1 intra-op thread, CPU")
    ratios = [
        compare(
            "ResNet-style CNN, batch 1",
            cnn,
            {"input": rng.standard_normal((1, 3, 32, 32), dtype=np.float32)},
        ),
        compare("MLP, batch 1 (tiny)", mlp, {"x": rng.standard_normal((1, 16), dtype=np.float32)}),
    ]
    worst = max(abs(r - 1) for r in ratios)
    print(f"worst deviation {worst * 100:.2f}% (goal: within 2%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
