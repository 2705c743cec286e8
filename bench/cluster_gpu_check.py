"""One CUDA configuration scheduled through Ray with a GPU resource, measured and recorded.

Run on an NVIDIA host (venv from requirements-gpu.txt):
    .venv/bin/python bench/cluster_gpu_check.py [--out bench/results/cluster_gpu_check.txt]

Starts a one-node local Ray cluster that offers one GPU (N with --replicas N) and the hardware
target `gpu`, submits a sweep of one CUDA FP32 configuration (small CNN, batch 8) for that
target, runs it through the worker's own JobRunner (so through backend/cluster/dispatch.py: a Ray
task with num_gpus=1 per replica), and prints what ran: the node, the GPU Ray handed the task,
the GPUs the measurement recorded, the providers ONNX Runtime really used, and the numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import settings  # noqa: E402
from backend.cluster import auth  # noqa: E402
from backend.cluster.targets import node_resources  # noqa: E402
from backend.specs import MeasureSettings, SweepSpec  # noqa: E402
from tests import models  # noqa: E402

auth.one_machine_tokens()  # the cluster started below asks for Ray's tokens, as the product's

MEASURE = MeasureSettings(warmup_runs=20, window_runs=100, window_min_seconds=0.5, max_seconds=10)


def _nvidia_smi() -> list[str]:
    """What the host itself says its GPUs are (name, driver, memory), for the report."""
    query = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    try:
        return subprocess.run(query, capture_output=True, text=True, check=True).stdout.split("\n")[
            :-1
        ]
    except (OSError, subprocess.CalledProcessError) as exc:
        return [f"nvidia-smi failed: {exc}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    parser.add_argument(
        "--replicas", type=int, default=1, help="data-parallel copies (needs as many GPUs)"
    )
    args = parser.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    settings.DATA_DIR.set(tempfile.mkdtemp(prefix="optiboard-gpu-check-"))
    settings.DATABASE_URL.set(None)
    head = {
        "num_cpus": 2,
        "num_gpus": args.replicas,
        "resources": node_resources("gpu"),
        "include_dashboard": False,
    }
    cluster = Cluster(initialize_head=True, head_node_args=head)
    cluster.wait_for_nodes()
    settings.RAY_ADDRESS.set(cluster.address)
    try:
        from backend.cluster.dispatch import connect
        from backend.models.ingest import ingest_file
        from backend.queue import jobs
        from backend.queue.worker import JobRunner
        from storage.repo import jobs as job_store

        connect(cluster.address)
        path = models.save(models.make_cnn(), Path(tempfile.mkdtemp()) / "cnn.onnx")
        model = ingest_file(path, "cnn.onnx")
        spec = SweepSpec(
            providers=("cuda",),
            batch_sizes=(8,),
            targets=("gpu",),
            replicas=args.replicas,
            measure=MEASURE,
        )
        job = jobs.submit_sweep(model.id, spec)
        outcome = JobRunner("gpu-check", 600).run(job_store.claim_job("gpu-check", 600, job.id))
        (stored,) = jobs.stored_results(job.id)
        r = stored.result
        where = r.environment.get("cluster", {})
        report = {
            "job_state": outcome.state.value,
            "configuration": stored.config_key,
            "status": r.status.value,
            "error": r.error,
            "ray_gpus_in_cluster": ray.cluster_resources().get("GPU"),
            "node_id": where.get("node_id"),
            "target": where.get("target"),
            "hostname": where.get("hostname"),
            "ray_gpu_ids_given_to_task": where.get("gpu_ids"),
            "gpus_recorded": [g.get("name") for g in r.environment.get("gpus", [])],
            "providers_requested": r.providers_requested,
            "providers_used": r.providers_used,
            "p50_ms": r.latency.p50 if r.latency else None,
            "throughput_per_s": r.throughput,
            "gpu_memory_mb": r.gpu_memory_mb,
            "gpu_util_percent_mean": r.telemetry.get("gpu_util_percent_mean"),
            "replicas": r.telemetry.get("replicas"),
            "onnxruntime": r.environment.get("packages", {}),
            "ray": ray.__version__,
            "measured_at_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            "gpus_on_host": _nvidia_smi(),
        }
    finally:
        ray.shutdown()
        cluster.shutdown()
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    ok = report["status"] == "ok" and "CUDAExecutionProvider" in report["providers_used"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
