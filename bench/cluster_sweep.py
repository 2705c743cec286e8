"""The same 12-configuration CPU sweep on a 1-node and on a 3-node local Ray cluster.

Run: .venv/bin/python bench/cluster_sweep.py [--threads 1] [--out bench/results/cluster_sweep.txt]

Both runs go through the worker's own JobRunner with OPTIBOARD_RAY_ADDRESS set (so through
backend/cluster/dispatch.py), on a fresh SQLite data folder each. Prints the wall time of each run
(claim to conclusion, cluster start-up excluded), their ratio, and per configuration the p50 on
3 nodes divided by the p50 on 1 node: scheduling must not change the numbers beyond noise. The
simulated nodes share this machine's cores, so on a small machine the wall ratio is small and
the p50s of concurrent measurements are disturbed by each other; a real cluster has a machine
per node.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import settings  # noqa: E402
from backend.cluster.targets import MEASURE_SLOT  # noqa: E402
from backend.specs import MeasureSettings, SweepSpec  # noqa: E402
from tests import models  # noqa: E402

MEASURE = MeasureSettings(
    warmup_runs=10, window_runs=50, window_min_seconds=0.3, stable_windows=3, max_seconds=6
)
STORE = 80 * 1024 * 1024


def sweep(threads: int) -> SweepSpec:
    """12 CPU configurations: 3 precisions x 4 batch sizes."""
    return SweepSpec(
        precisions=("fp32", "fp16", "int8_dynamic"),
        batch_sizes=(1, 2, 4, 8),
        intra_op_threads=threads,
        measure=MEASURE,
    )


def run_on(nodes: int, model_path: Path, spec: SweepSpec) -> tuple[float, dict[str, float]]:
    """Wall seconds of the sweep on a fresh cluster of `nodes` nodes, and p50 per config key."""
    import ray
    from ray.cluster_utils import Cluster

    data = Path(tempfile.mkdtemp(prefix=f"optiboard-bench-{nodes}-"))
    settings.DATA_DIR.set(str(data))
    settings.DATABASE_URL.set(None)
    args = {"num_cpus": 1, "resources": {MEASURE_SLOT: 1.0}, "object_store_memory": STORE}
    cluster = Cluster(initialize_head=True, head_node_args={**args, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(**args)
    cluster.wait_for_nodes()
    settings.RAY_ADDRESS.set(cluster.address)
    try:
        from backend.cluster.dispatch import connect
        from backend.models.ingest import ingest_file
        from backend.queue import jobs
        from backend.queue.worker import JobRunner
        from storage.repo import jobs as job_store

        connect(cluster.address)
        model = ingest_file(model_path, model_path.name)
        job = jobs.submit_sweep(model.id, spec)
        claimed = job_store.claim_job("bench", 600, job_id=job.id)
        start = time.perf_counter()
        JobRunner("bench", 600).run(claimed)
        wall = time.perf_counter() - start
        results = jobs.stored_results(job.id)
        bad = [r for r in results if not r.ok]
        if bad:
            raise SystemExit(f"{len(bad)} configurations failed: {bad[0].error}")
        return wall, {r.config_key: r.latency.p50 for r in results}
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per session")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    model_path = models.save(models.make_cnn(), Path(tempfile.mkdtemp()) / "cnn.onnx")
    spec = sweep(args.threads)
    one_wall, one = run_on(1, model_path, spec)
    three_wall, three = run_on(3, model_path, spec)
    lines = [
        f"12-configuration CPU sweep (CNN, {args.threads} thread(s)/session), local Ray cluster",
        f"machine: {os.cpu_count()} logical CPUs shared by every simulated node",
        f"1 node : {one_wall:7.1f} s wall",
        f"3 nodes: {three_wall:7.1f} s wall",
        f"speed-up (1-node wall / 3-node wall): {one_wall / three_wall:.2f}x",
        "",
        f"{'configuration':58} {'p50 1 node':>11} {'p50 3 nodes':>12} {'ratio':>6}",
    ]
    for key in sorted(one):
        ratio = three[key] / one[key]
        lines.append(f"{key:58} {one[key]:9.3f}ms {three[key]:10.3f}ms {ratio:6.2f}")
    ratios = sorted(three[k] / one[k] for k in one)
    lines.append(f"median p50 ratio (3 nodes / 1 node): {ratios[len(ratios) // 2]:.2f}")
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
