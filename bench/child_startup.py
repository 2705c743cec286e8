"""What a configuration child pays before it measures: onnxruntime.tools with and without torch.

Each round starts two fresh interpreters side by side in alternation (so machine noise hits both
alike), each building the same static-INT8 variant of the test MLP (shapes fixed, ORT's
pre-processing, quantization) as a configuration child does:
- A: as the engine now does (backend/ort_tools.without_torch registers onnxruntime.tools without
  the package __init__ that imports torch whenever it is installed);
- B: as before, `import onnxruntime.tools` first, which runs that __init__.
It prints each side's median wall time and peak RSS, the ratios, and checks both built the same
graph (node count and QuantizeLinear count), so the faster side is not doing less.
Run: .venv/bin/python bench/child_startup.py [rounds]
"""

from __future__ import annotations

import json
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
import json, resource, sys
from pathlib import Path
if sys.argv[3] == "before":
    import onnxruntime.tools  # what fix_shapes and quant_pre_process imported before
import onnx
from backend.engine.variants import build_variant
from backend.specs import Configuration, Precision
variant = build_variant(Path(sys.argv[1]), Configuration(precision=Precision.INT8_STATIC,
                        batch_size=4), Path(sys.argv[2]))
built = onnx.load(variant.path)
print(json.dumps({
    "nodes": len(built.graph.node),
    "quantize": sum(n.op_type == "QuantizeLinear" for n in built.graph.node),
    "torch": "torch" in sys.modules,
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def run_child(source: Path, workdir: Path, mode: str) -> tuple[float, dict]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(source), str(workdir), mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return time.perf_counter() - started, json.loads(out.strip().splitlines()[-1])


def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        source = models.save(models.make_mlp(), Path(tmp) / "mlp.onnx")
        walls: dict[str, list[float]] = {"now": [], "before": []}
        facts: dict[str, list[dict]] = {"now": [], "before": []}
        for i in range(rounds):
            for mode in ("now", "before") if i % 2 == 0 else ("before", "now"):
                wall, fact = run_child(source, Path(tmp) / f"{mode}{i}", mode)
                walls[mode].append(wall)
                facts[mode].append(fact)
    for mode in ("now", "before"):
        rss = statistics.median(f["rss_mb"] for f in facts[mode])
        print(
            f"{mode:6s} median {statistics.median(walls[mode]):.2f} s "
            f"(min {min(walls[mode]):.2f}, max {max(walls[mode]):.2f}), peak RSS {rss:.0f} MB, "
            f"torch imported: {sorted({f['torch'] for f in facts[mode]})}"
        )
    same = {(f["nodes"], f["quantize"]) for f in facts["now"] + facts["before"]}
    print(f"built graphs (nodes, QuantizeLinear): {sorted(same)} (one pair: the same work)")
    wall_ratio = statistics.median(walls["before"]) / statistics.median(walls["now"])
    rss_ratio = statistics.median(f["rss_mb"] for f in facts["before"]) / statistics.median(
        f["rss_mb"] for f in facts["now"]
    )
    print(f"before / now: wall {wall_ratio:.2f}x, peak RSS {rss_ratio:.2f}x ({rounds} rounds)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
