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
STARTED = "Ray runtime started."
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
        self.output = root / "head.out"
        self.output.touch()
        self.starts = 0

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
        self.starts += 1
        with open(self.output, "a") as output:
            self.process = subprocess.Popen(
                command, env=env, start_new_session=True, stdout=output, stderr=output
            )

    def start_until_up(self, tries: int = 3) -> None:
        """Start it and wait until `ray start` says the node is up. Its port answers long before
        (18 s on the idle dev host), so the worker's driver meets a half-started head meanwhile.
        Ray's own start-up gives up when the raylet has not registered within 30 s (ray
        _private/node.py, not configurable), which a loaded CI host reaches: that head exits by
        itself, the host's failure and not the product's, and is started again."""
        for _ in range(tries):
            self.start()
            if self._started():
                return
            self.kill()
        raise AssertionError(self.said())

    def _started(self) -> bool:
        """True once this start printed STARTED; False if the head exited before it did."""
        deadline = time.monotonic() + 240
        while self.output.read_text().count(STARTED) < self.starts:
            assert self.process is not None
            if self.process.poll() is not None:
                return False
            assert time.monotonic() < deadline, "timed out waiting for the Ray head to start"
            time.sleep(0.2)
        return True

    def said(self) -> str:
        """What the head printed, for a failure: a head that exits by itself is the host's."""
        exits = sorted((self.root / "ray").glob("session_*/logs/ray_process_exit.log"))
        tail = "".join(p.read_text()[-2000:] for p in exits[-1:])
        code = None if self.process is None else self.process.poll()
        return f"the Ray head exited ({code}); it printed:\n{self.output.read_text()[-3000:]}{tail}"

    def kill(self) -> None:
        """The whole process group, also after `ray start` exited and left its children."""
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
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
    head.start_until_up()
    outcome: list[JobState] = []

    def work() -> None:
        job = job_store.claim_job("test-worker", lease_seconds=120, job_id=job_id)
        outcome.append(JobRunner("test-worker", lease_seconds=120).run(job).state)

    runner = threading.Thread(target=work)
    try:
        assert port_reason(address) is None
        runner.start()

        def one_result() -> bool:
            assert head.process is not None and head.process.poll() is None, head.said()
            return len(result_store.list_results(job_ids=[job_id])) == 1

        wait_for(one_result, "a result")
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
        head.start_until_up()
        runner.join(timeout=300)
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
