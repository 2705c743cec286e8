"""The same 12-configuration CPU sweep on a 1-node and on a 3-node local Ray cluster.

Run: .venv/bin/python bench/cluster_sweep.py [--threads 1] [--out bench/results/cluster_sweep.txt]
     .venv/bin/python bench/cluster_sweep.py --pin-cores 5 --threads 4 --repeat-one  (>= 16 CPUs)

Both runs go through the worker's own JobRunner with OPTIBOARD_RAY_ADDRESS set (so through
backend/cluster/dispatch.py), on a fresh SQLite data folder each. Prints the wall time of each run
(claim to conclusion, cluster start-up excluded), their ratio, and per configuration the p50 on
3 nodes divided by the p50 on 1 node: scheduling must not change the numbers beyond noise. The
simulated nodes share this machine's cores, so on a small machine the wall ratio is small and
the p50s of concurrent measurements are disturbed by each other; a real cluster has a machine
per node.

--pin-cores N gives each simulated node N CPUs of its own: the node's raylet is started with
this process's CPU affinity set to them, so its workers and their measurement children inherit
it (Linux affinity is inherited across fork and exec). The head then measures nothing (no
measure_slot, num_cpus 0) and lives with this driver on the CPUs left over. Siblings of one
physical core are kept in one node. --repeat-one runs the 1-node sweep a second time, so the
3-node / 1-node ratios can be read against the 1-node run's own repeat noise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import settings  # noqa: E402
from backend.cluster import auth  # noqa: E402
from backend.cluster.targets import MEASURE_SLOT  # noqa: E402
from backend.specs import MeasureSettings, SweepSpec  # noqa: E402
from tests import models  # noqa: E402

auth.one_machine_tokens()  # the cluster started below asks for Ray's tokens, as the product's

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


def core_sets(per_node: int, nodes: int) -> tuple[list[set[int]], set[int]]:
    """`nodes` disjoint sets of `per_node` CPUs (whole physical cores first), and the rest."""
    allowed = sorted(os.sched_getaffinity(0))

    def physical(cpu: int) -> tuple[int, int, int]:
        base = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = int((base / "physical_package_id").read_text())
            return package, int((base / "core_id").read_text()), cpu
        except OSError:
            return 0, cpu, cpu

    ordered = sorted(allowed, key=physical)  # SMT siblings next to each other
    if per_node * nodes >= len(ordered):
        raise SystemExit(f"{nodes} nodes x {per_node} CPUs leave none of {len(ordered)} spare")
    sets = [set(ordered[i * per_node : (i + 1) * per_node]) for i in range(nodes)]
    return sets, set(ordered[per_node * nodes :])


@contextmanager
def pinned(cpus: set[int]) -> Iterator[None]:
    """This thread's CPU affinity set to `cpus` for the block (processes started inherit it)."""
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, saved)


def start_cluster(nodes: int, layout: tuple[list[set[int]], set[int]] | None):  # noqa: ANN201
    """A local cluster: `nodes` measuring nodes; pinned ones beside a head that measures nothing."""
    from ray.cluster_utils import Cluster

    args = {"num_cpus": 1, "resources": {MEASURE_SLOT: 1.0}, "object_store_memory": STORE}
    if layout is None:
        cluster = Cluster(initialize_head=True, head_node_args={**args, "include_dashboard": False})
        for _ in range(nodes - 1):
            cluster.add_node(**args)
        return cluster
    sets, spare = layout
    head = {"num_cpus": 0, "object_store_memory": STORE, "include_dashboard": False}
    with pinned(spare):
        cluster = Cluster(initialize_head=True, head_node_args=head)
    for cpus in sets[:nodes]:
        with pinned(cpus):
            cluster.add_node(**args)
    return cluster


def node_affinities() -> dict[str, list[int]]:
    """The CPUs a task sees on each measuring node, asked on the node itself."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def cpus() -> list[int]:
        return sorted(os.sched_getaffinity(0))

    remote = ray.remote(cpus)
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get(MEASURE_SLOT)]
    refs = [
        remote.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        ).remote()
        for node in nodes
    ]
    return dict(zip(nodes, ray.get(refs), strict=True))


def run_on(
    nodes: int,
    model_path: Path,
    spec: SweepSpec,
    layout: tuple[list[set[int]], set[int]] | None = None,
) -> tuple[float, dict[str, float], dict[str, object]]:
    """Wall seconds of the sweep on a fresh cluster, p50 per config key, and where things ran."""
    import ray

    data = Path(tempfile.mkdtemp(prefix=f"optiboard-bench-{nodes}-"))
    settings.DATA_DIR.set(str(data))
    settings.DATABASE_URL.set(None)
    cluster = start_cluster(nodes, layout)
    cluster.wait_for_nodes()
    settings.RAY_ADDRESS.set(cluster.address)
    try:
        from backend.cluster.dispatch import connect
        from backend.models.ingest import ingest_file
        from backend.queue import jobs
        from backend.queue.worker import JobRunner
        from storage.repo import jobs as job_store

        connect(cluster.address)
        where: dict[str, object] = {"affinity": node_affinities()}
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
        ran_on = Counter(
            str(r.result.environment.get("cluster", {}).get("node_id")) for r in results
        )
        where["configs_per_node"] = dict(ran_on)
        return wall, {r.config_key: r.latency.p50 for r in results}, where
    finally:
        ray.shutdown()
        cluster.shutdown()


def _ratios(base: dict[str, float], other: dict[str, float]) -> list[float]:
    return sorted(other[k] / base[k] for k in base)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per session")
    parser.add_argument("--pin-cores", type=int, default=0, help="CPUs of its own per node")
    parser.add_argument("--repeat-one", action="store_true", help="run the 1-node sweep twice")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    layout = core_sets(args.pin_cores, 3) if args.pin_cores else None
    if layout:
        os.sched_setaffinity(0, layout[1])  # this driver (and Ray's head) off the nodes' CPUs
    model_path = models.save(models.make_cnn(), Path(tempfile.mkdtemp()) / "cnn.onnx")
    spec = sweep(args.threads)
    one_wall, one, one_where = run_on(1, model_path, spec, layout)
    three_wall, three, three_where = run_on(3, model_path, spec, layout)
    again = run_on(1, model_path, spec, layout) if args.repeat_one else None
    if layout:
        placement = [
            f"pinning: each measuring node owns {args.pin_cores} CPUs "
            f"{[sorted(c) for c in layout[0]]}; head + driver on {sorted(layout[1])}",
            f"CPUs seen by a task on each node (1-node run): {one_where['affinity']}",
            f"CPUs seen by a task on each node (3-node run): {three_where['affinity']}",
        ]
    else:
        placement = [f"machine: {os.cpu_count()} logical CPUs shared by every simulated node"]
    lines = [
        f"12-configuration CPU sweep (CNN, {args.threads} thread(s)/session), local Ray cluster",
        *placement,
        f"configurations per node (3-node run): {three_where['configs_per_node']}",
        f"1 node : {one_wall:7.1f} s wall",
        f"3 nodes: {three_wall:7.1f} s wall",
        f"speed-up (1-node wall / 3-node wall): {one_wall / three_wall:.2f}x",
    ]
    if again:
        lines.append(f"1 node again: {again[0]:7.1f} s wall")
    head = f"{'configuration':58} {'p50 1 node':>11} {'p50 3 nodes':>12} {'ratio':>6}"
    lines += ["", head + (f" {'p50 1 again':>12} {'ratio':>6}" if again else "")]
    for key in sorted(one):
        row = f"{key:58} {one[key]:9.3f}ms {three[key]:10.3f}ms {three[key] / one[key]:6.2f}"
        if again:
            row += f" {again[1][key]:10.3f}ms {again[1][key] / one[key]:6.2f}"
        lines.append(row)
    ratios = _ratios(one, three)
    lines.append(f"median p50 ratio (3 nodes / 1 node): {ratios[len(ratios) // 2]:.2f}")
    lines.append(f"range of p50 ratios (3 nodes / 1 node): {ratios[0]:.2f} .. {ratios[-1]:.2f}")
    if again:
        noise = _ratios(one, again[1])
        lines.append(f"median p50 ratio (1 node again / 1 node): {noise[len(noise) // 2]:.2f}")
        lines.append(
            f"range of p50 ratios (1 node again / 1 node): {noise[0]:.2f} .. {noise[-1]:.2f}"
        )
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
