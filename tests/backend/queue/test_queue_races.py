"""The queue under races, on a real PostgreSQL server and on a real SQLite file.

Clock skew is tested on PostgreSQL only. Lease times now come from the database's clock; on SQLite
that "database" is the SQLite library inside each worker process, reading that process's clock, so
a process run under faketime would still disagree. It cannot happen for real: every process that
shares one SQLite file runs on one host with one kernel clock (SQLite over a network filesystem is
unsupported), whereas PostgreSQL workers on several hosts each bring their own clock.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from backend.errors import UserError
from backend.jobs.lease import LeaseKeeper
from backend.models import library
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.results import ResultStatus
from backend.specs import MeasureSettings, SweepSpec
from storage.repo import jobs as job_store
from storage.repo import results as result_store
from storage.states import JobState
from tests.postgres import PostgresServer
from tests.storage.rows import model_row
from tests.waiting import wait_for
from tests.workers import start_worker

ROOT = Path(__file__).resolve().parents[3]
TINY = MeasureSettings(
    warmup_runs=1, window_runs=5, window_min_seconds=0.01, max_seconds=1, accuracy_samples=1
)
FAKETIME = shutil.which("faketime")


def _payload(key: str) -> dict:
    return {"config_key": key, "configuration": {}, "status": "ok", "latency": {"p50": 1.0}}


def _claim_and_cancel_at_once(job_id: int) -> tuple[job_store.JobRow | None, JobState]:
    barrier = threading.Barrier(2)

    def claim() -> job_store.JobRow | None:
        barrier.wait()
        return job_store.claim_job("w1", 30, job_id=job_id)

    def cancel() -> JobState:
        barrier.wait()
        return job_store.cancel_job(job_id)

    with ThreadPoolExecutor(max_workers=2) as pool:
        claimed, cancelled = pool.submit(claim), pool.submit(cancel)
        return claimed.result(), cancelled.result()


def test_claim_and_cancel_racing_never_overwrite_each_other(database: str) -> None:
    model = model_row()
    for _ in range(12):
        job_id = job_store.create_job(model.id, {}, total=1, kind="sweep").id
        claimed, cancel_outcome = _claim_and_cancel_at_once(job_id)
        final = job_store.get_job(job_id)
        if claimed is not None:  # the claim won: the cancel became a request
            assert cancel_outcome == JobState.RUNNING
            assert final.state == JobState.RUNNING and final.cancel_requested
        else:  # the cancel won: nobody runs it
            assert cancel_outcome == JobState.CANCELLED
            assert final.state == JobState.CANCELLED and final.worker_id is None


def test_expired_job_with_a_cancel_request_ends_cancelled(database: str) -> None:
    job = job_store.create_job(model_row().id, {}, total=1, kind="sweep")
    claimed = job_store.claim_job("w1", lease_seconds=-1)  # its worker then stops answering
    assert job_store.cancel_job(job.id) == JobState.RUNNING
    assert job_store.claim_job("w2", 30) is None
    final = job_store.get_job(job.id)
    assert final.state == JobState.CANCELLED and final.finished_at is not None
    assert not job_store.finish_job(job.id, JobState.SUCCEEDED, worker_id="w1", attempt=1)
    assert not job_store.renew_lease(job.id, "w1", 30, attempt=claimed.attempts)


def test_expired_lease_requeues_then_fails_after_max_attempts(database: str) -> None:
    job = job_store.create_job(model_row().id, {}, total=1, max_attempts=2, kind="sweep")
    assert job_store.claim_job("w1", lease_seconds=-1).id == job.id  # lease already expired
    again = job_store.claim_job("w2", lease_seconds=-1)
    assert again.id == job.id and again.attempts == 2 and again.worker_id == "w2"
    assert job_store.claim_job("w3", 30) is None
    final = job_store.get_job(job.id)
    assert final.state == JobState.FAILED
    assert final.error == "worker w2 stopped answering; gave up after 2 attempts"


def test_worker_that_lost_its_lease_writes_nothing_and_no_result_is_replaced(
    database: str,
) -> None:
    job = job_store.create_job(model_row().id, {}, total=2, kind="sweep")
    old = job_store.lease_of(job_store.claim_job("w1", lease_seconds=-1))
    new = job_store.lease_of(job_store.claim_job("w1", lease_seconds=30))  # same worker, again
    assert (old.attempt, new.attempt) == (1, 2)
    assert result_store.save_result(job.id, _payload("a"), [9.0], lease=old) is None
    assert not job_store.renew_lease(job.id, "w1", 30, attempt=old.attempt)
    assert not job_store.finish_job(job.id, JobState.FAILED, worker_id="w1", attempt=1)
    assert result_store.save_result(job.id, _payload("a"), [1.0], lease=new) is not None
    assert result_store.save_result(job.id, _payload("a"), [2.0], lease=new) is None
    (row,) = result_store.list_results(job_ids=[job.id])
    assert result_store.result_samples([row.id]) == {row.id: [1.0]}
    assert job_store.renew_lease(job.id, "w1", 30, attempt=new.attempt)
    assert job_store.finish_job(job.id, JobState.SUCCEEDED, worker_id="w1", attempt=2)


def test_deleting_a_model_while_its_job_runs_is_refused_in_one_sentence(database: str) -> None:
    model = model_row("busy")
    job = job_store.create_job(model.id, {}, total=1, kind="sweep")
    job_store.claim_job("w1", 30)
    with pytest.raises(UserError, match=r"^Model busy has a running job; cancel it .*\.$"):
        library.delete_model(model.id)
    assert job_store.get_job(job.id).state == JobState.RUNNING
    assert [m.id for m in library.list_models()] == [model.id]


def test_lease_keeper_holds_a_lease_through_a_long_blocking_step(data_dir: Path) -> None:
    job_store.create_job(model_row().id, {}, total=1, kind="sweep")
    lease = job_store.lease_of(job_store.claim_job("w1", lease_seconds=1.0))
    with LeaseKeeper(lease, lease_seconds=1.0, every_s=0.2) as keeper:
        time.sleep(2.0)  # stands for a copy that blocks the worker longer than the lease
        assert job_store.claim_job("w2", 30) is None
    assert not keeper.lost
    time.sleep(1.5)  # no keeper any more: the lease runs out and the job goes to another
    again = job_store.claim_job("w2", 30)
    assert again is not None and again.attempts == 2


def _stop(*workers: subprocess.Popen) -> list[str]:
    for worker in workers:
        if worker.poll() is None and worker.args[0] == FAKETIME:
            # faketime's wrapper removes its /dev/shm segment once its child has exited; killed
            # itself, it leaves the segment behind until the host reboots
            for child in _children(worker.pid):
                os.kill(child, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=10)
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
    return [worker.communicate()[0] for worker in workers]


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


@pytest.mark.skipif(FAKETIME is None, reason="faketime is not installed (apt install faketime)")
def test_workers_with_one_clock_five_minutes_ahead_run_every_job_exactly_once(
    postgres_url: str, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    env = {"OPTIBOARD_LEASE_SECONDS": "20"}
    workers = [
        start_worker(env=env),
        start_worker(env=env),
        start_worker(env=env, wrapper=(FAKETIME, "-f", "+300")),  # its clock is 5 minutes ahead
    ]
    try:
        wait_for(lambda: len(jobs.list_workers(None)) == 3, what="three workers")
        submitted = [jobs.submit_sweep(model.id, SweepSpec(measure=TINY)).id for _ in range(6)]
        wait_for(lambda: all(jobs.get_job(j).state.finished for j in submitted), what="six jobs")
    finally:
        outputs = _stop(*workers)
    skewed_log = next(line for line in outputs[2].splitlines() if "ready" in line)
    skew = datetime.strptime(skewed_log[:19], "%Y-%m-%d %H:%M:%S") - datetime.now()
    assert skew.total_seconds() > 200, skewed_log  # the skew really applied

    claimers = Counter()
    for job_id in submitted:
        job = jobs.get_job(job_id)
        assert job.state == JobState.SUCCEEDED and job.attempts == 1, job
        messages = [e.message for e in jobs.job_events(job_id)]
        claims = [m for m in messages if m.startswith("claimed by")]
        assert len(claims) == 1, messages
        claimers[claims[0]] += 1
        assert not [m for m in messages if "lease expired" in m or "not stored" in m], messages
        (result,) = jobs.stored_results(job_id)
        assert result.status == ResultStatus.OK and result.latency.p50 > 0
        stored = [m for m in messages if m.startswith(f"{result.config_key}: ")]
        assert len(stored) == 1, messages  # written once, never replaced
    assert sum(claimers.values()) == 6


def test_worker_loop_survives_a_database_outage_in_the_middle_of_a_job(
    postgres_server: PostgresServer, postgres_url: str, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    job = jobs.submit_sweep(model.id, SweepSpec(measure=TINY))
    env = {"OPTIBOARD_DB_RETRY_MAX_S": "1", "OPTIBOARD_LEASE_SECONDS": "5"}
    worker = start_worker(env=env)
    try:
        wait_for(lambda: jobs.get_job(job.id).state == JobState.RUNNING, what="the job to run")
        postgres_server.stop()
        try:
            time.sleep(3.0)  # several failed tries, each followed by a wait of at most 1 s
            assert worker.poll() is None
        finally:
            postgres_server.start()
        wait_for(lambda: jobs.get_job(job.id).state.finished, what="the job after the outage")
        assert worker.poll() is None
    finally:
        (output,) = _stop(worker)
    assert "database unavailable, retrying in 1 s" in output, output
    final = jobs.get_job(job.id)
    assert final.state == JobState.SUCCEEDED, final
    (result,) = jobs.stored_results(job.id)  # stored once, whichever attempt ran it
    assert result.status == ResultStatus.OK
