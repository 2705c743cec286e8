"""What a TensorFlow conversion child pays for scikit-learn it never uses.

keras (under TensorFlow) imports scikit-learn, and SciPy with it, for its optional sklearn
wrappers; so does transformers under the GenAI model builder. backend/launch/childmain.py marks
it absent in every child (UNUSED_IN_CHILDREN). Each round starts two fresh interpreters in
alternation (so machine noise hits both alike), each converting the same SavedModel with
backend.models.tfconvert's child entry, as the sandboxed converter child runs it:
- now: `skip_unused_imports()` first, as childmain does;
- before: without it.
It prints each side's median wall and CPU time, the ratios, and checks both wrote the same ONNX
graph (node count), so the faster side is not doing less.
Run: .venv/bin/python bench/converter_child_startup.py [rounds]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import models  # noqa: E402

CHILD = """
import sys
if sys.argv[1] == "now":
    from backend.launch.childmain import skip_unused_imports
    skip_unused_imports()
from backend.models.tfconvert import main
code = main(sys.argv[2:])
print("sklearn imported:", sys.modules.get("sklearn") is not None, file=sys.stderr)
sys.exit(code)
"""


def run_child(saved: Path, out: Path, mode: str) -> tuple[float, float, int, bool]:
    """Wall s, CPU s (user + system of the child), the ONNX node count, sklearn imported."""
    import onnx

    before = os.times()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, "--saved-model", str(saved), "--output", str(out)]
        + ["--result", str(out.with_suffix(".json"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    answer = json.loads(out.with_suffix(".json").read_text())
    assert "error" not in answer, answer
    sklearn = "sklearn imported: True" in done.stderr
    return wall, cpu, len(onnx.load(out).graph.node), sklearn


def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        saved = models.save_dense_savedmodel(Path(tmp) / "dense")  # built in a TensorFlow child
        runs: dict[str, list[tuple[float, float, int, bool]]] = {"now": [], "before": []}
        for i in range(rounds):
            for mode in ("now", "before") if i % 2 == 0 else ("before", "now"):
                runs[mode].append(run_child(saved, Path(tmp) / f"{mode}{i}.onnx", mode))
    for mode in ("now", "before"):
        walls, cpus = [r[0] for r in runs[mode]], [r[1] for r in runs[mode]]
        print(
            f"{mode:6s} wall median {statistics.median(walls):.2f} s "
            f"(min {min(walls):.2f}, max {max(walls):.2f}), "
            f"CPU median {statistics.median(cpus):.2f} s, "
            f"sklearn imported: {sorted({r[3] for r in runs[mode]})}"
        )
    nodes = sorted({r[2] for side in runs.values() for r in side})
    print(f"ONNX nodes written: {nodes} (one value: the same work)")
    wall = statistics.median(r[0] for r in runs["before"]) / statistics.median(
        r[0] for r in runs["now"]
    )
    cpu = statistics.median(r[1] for r in runs["before"]) / statistics.median(
        r[1] for r in runs["now"]
    )
    print(f"before / now: wall {wall:.2f}x, CPU {cpu:.2f}x ({rounds} rounds)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
