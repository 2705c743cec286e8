"""A Ray head that goes away mid-sweep and comes back: nothing lost, nothing measured twice.

The head is a real `ray start --head --block` in its own process group, killed as a whole (as a
machine losing power would) and started again on the same port; the worker's runner and its
driver children run against it with a real PostgreSQL. This test process never connects to Ray:
the worker does not either (only its driver child does), which is what lets it outlive the head.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from backend.cluster.targets import node_resources
from backend.jobs.supervise import port_reason
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.queue.worker import JobRunner
from backend.specs import MeasureSettings, SweepSpec
from storage.repo import jobs as job_store
from storage.repo import results as result_store
from storage.states import JobState
from tests.pages.seed import open_page
from tests.postgres import free_port
from tests.waiting import wait_for

RAY = str(Path(sys.executable).with_name("ray"))
# never stable, so each measurement runs to its 2 s cap: long enough to kill the head during one
CAPPED = MeasureSettings(
    warmup_runs=2,
    window_runs=10,
    window_min_seconds=0.5,
    stable_windows=50,
    stability_tolerance=0.01,
    max_seconds=2,
    accuracy_samples=1,
)


class Head:
    """One single-node Ray cluster of target `alpha` on a fixed port, startable again."""

    def __init__(self, port: int, root: Path) -> None:
        self.port, self.root = port, root
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [
            RAY,
            "start",
            "--head",
            f"--port={self.port}",
            "--num-cpus=1",
            "--include-dashboard=false",
            f"--resources={json.dumps(node_resources('alpha'))}",
            f"--temp-dir={self.root / 'ray'}",
            f"--object-store-memory={80 << 20}",
            "--block",
        ]
        env = {**os.environ, "OPTIBOARD_CLUSTER_CACHE_DIR": str(self.root / "cache")}
        self.process = subprocess.Popen(
            command, env=env, start_new_session=True, stdout=subprocess.DEVNULL
        )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _log(job_id: int) -> list[str]:
    return [e.message for e in reversed(jobs.job_events(job_id))]


def test_a_head_restarted_mid_sweep_ends_with_every_configuration_stored_once(
    postgres_url: str, mlp_path: Path, monkeypatch, ray_tokens: str
) -> None:
    root = Path(tempfile.mkdtemp(prefix="obh"))  # short: Ray's socket paths live under it
    head = Head(free_port(), root)
    address = f"127.0.0.1:{head.port}"
    monkeypatch.setenv("OPTIBOARD_RAY_ADDRESS", address)
    monkeypatch.setenv("OPTIBOARD_RAY_RETRY_MAX_S", "2")
    model = ingest_file(mlp_path, "mlp.onnx")
    spec = SweepSpec(precisions=("fp32", "int8_dynamic"), targets=("alpha",), measure=CAPPED)
    job_id = jobs.submit_sweep(model.id, spec).id
    head.start()
    outcome: list[JobState] = []

    def work() -> None:
        job = job_store.claim_job("test-worker", lease_seconds=120, job_id=job_id)
        outcome.append(JobRunner("test-worker", lease_seconds=120).run(job).state)

    runner = threading.Thread(target=work)
    try:
        wait_for(lambda: port_reason(address) is None, "the head's port")
        runner.start()
        wait_for(lambda: len(result_store.list_results(job_ids=[job_id])) == 1, "a result")
        time.sleep(1)  # the other configuration is on the node now
        head.kill()
        wait_for(
            lambda: any(
                line.startswith(f"Ray cluster at {address} is unreachable (")
                for line in _log(job_id)
            ),
            "the worker's sentence",
        )
        (before,) = result_store.list_results(job_ids=[job_id])
        page = open_page("jobs", job=job_id)  # what the Jobs page says meanwhile
        assert any(
            w.value.replace("\\", "").startswith(f"Ray cluster at {address} is unreachable")
            for w in page.warning
        )
        head.start()
        runner.join(timeout=120)
    finally:
        head.kill()
        shutil.rmtree(root, ignore_errors=True)  # the head's sessions and sockets, 0.4 MB a run

    assert outcome == [JobState.SUCCEEDED], jobs.get_job(job_id).error
    log = _log(job_id)
    (unreachable,) = [line for line in log if "is unreachable" in line]
    assert "the 1 configuration not yet stored is kept and sent again" in unreachable
    again = f"Ray cluster at {address} answers again; resuming the 1 configuration not yet stored."
    assert again in log
    assert "resuming: 1 configuration already stored" in log
    assert "1 configuration sent to the Ray cluster" in log  # the resumed driver's one
    rows = result_store.list_results(job_ids=[job_id])
    assert sorted(r.config_key for r in rows) == sorted(c.key for c in spec.configurations())
    assert all(r.status == "ok" for r in rows)
    (after,) = [r for r in rows if r.id != before.id]
    # the first result is the one stored before the outage; the other ran on the new head
    first_node = before.payload["environment"]["cluster"]["node_id"]
    assert after.payload["environment"]["cluster"]["node_id"] != first_node
