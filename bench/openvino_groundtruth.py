"""Ground truth for the compatibility matrix's OpenVINO column: ONNX's own backend node tests.

For every node test case shipped in the installed `onnx` package, compare the OpenVINO column's
prediction (OpenVINO's read_model, query_model per op and compile_model, as the matrix shows it)
with OpenVINO's CPU plugin really compiling the model and running it on the case's inputs.
Prints the confusion counts, the agreement, the disagreements grouped by op and the time taken.

    .venv/bin/python bench/openvino_groundtruth.py [--limit N] [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backend.compat.groundtruth import collect_cases  # noqa: E402
from backend.compat.groundtruth_openvino import run_cases_openvino  # noqa: E402
from backend.runtimes import get_runtime  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="only the first N cases")
    parser.add_argument("--stride", type=int, default=1, help="every Nth case")
    parser.add_argument("--jobs", type=int, default=2, help="child processes in parallel")
    parser.add_argument("--goal", type=float, default=0.98)
    args = parser.parse_args()

    runtime = get_runtime("openvino")
    if not runtime.provider_status("cpu") or not runtime.provider_status("cpu").available:
        print(f"OpenVINO CPU is unavailable here: {runtime.providers()[0].reason}")
        return 2
    started = time.perf_counter()
    cases = collect_cases()[:: args.stride]
    if args.limit:
        cases = cases[: args.limit]
    confusion = run_cases_openvino(cases, jobs=args.jobs)
    counts = confusion.counts
    print(f"runtime: openvino {runtime.version()} CPU; {len(cases)} ONNX node test cases")
    print(
        "confusion (positive = OpenVINO CPU compiles and runs it): "
        + "  ".join(f"{k}={v}" for k, v in counts.items())
    )
    print(f"agreement: {confusion.agreement:.2%} (goal {args.goal:.0%})")
    for line in confusion.disagreement_lines():
        print(line)
    print(f"elapsed: {time.perf_counter() - started:.1f} s (collecting, predicting, running)")
    return 0 if confusion.agreement >= args.goal else 1


if __name__ == "__main__":
    raise SystemExit(main())
