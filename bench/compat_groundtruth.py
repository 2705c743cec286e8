"""Ground truth for the compatibility matrix's CPU column: ONNX's own backend node tests.

The full sweep (about 1,900 cases, a few minutes); tests/backend/compat/test_groundtruth.py
runs a sample. For every node test case shipped in the installed `onnx` package, compare the
prediction (from ONNX Runtime's kernel registry) with whether ONNX Runtime really loads and runs
the model on the case's inputs. Prints the confusion counts, the accuracy (agreement), the
disagreements grouped by op and the seconds taken.

    .venv/bin/python bench/compat_groundtruth.py [--limit N] [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backend.compat.groundtruth import collect_cases, run_cases  # noqa: E402
from backend.compat.registry import load_registry  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="only the first N cases")
    parser.add_argument("--jobs", type=int, default=2, help="child processes in parallel")
    parser.add_argument("--goal", type=float, default=0.98)
    args = parser.parse_args()

    started = time.perf_counter()
    cases = collect_cases()
    if args.limit:
        cases = cases[: args.limit]
    registry = load_registry()
    if registry.error:
        print(f"kernel registry unreadable: {registry.error}")
        return 2
    confusion = run_cases(cases, registry, jobs=args.jobs)
    counts = confusion.counts
    print(f"runtime: {registry.runtime}; {len(cases)} ONNX node test cases")
    print(
        "confusion (positive = runs on CPUExecutionProvider): "
        + "  ".join(f"{k}={v}" for k, v in counts.items())
    )
    print(f"accuracy (agreement): {confusion.agreement:.2%} (goal {args.goal:.0%})")
    for line in confusion.disagreement_lines():
        print(line)
    print(f"elapsed: {time.perf_counter() - started:.1f} s (collecting, predicting, running)")
    return 0 if confusion.agreement >= args.goal else 1


if __name__ == "__main__":
    raise SystemExit(main())
