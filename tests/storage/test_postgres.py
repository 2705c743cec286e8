"""The same storage code on a real PostgreSQL server (tests/postgres.py starts it)."""

from __future__ import annotations

import threading

from sqlalchemy import text

from storage.db import get_engine
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.states import JobState


def test_schema_queue_and_results_work_on_postgresql(postgres_url: str) -> None:
    model = model_store.create_model(
        name="pg",
        sha256="b" * 64,
        format="onnx",
        size_bytes=1,
        metadata={"opset": 17},
        artifacts=[model_store.NewArtifact("original", "b" * 64, 1, "m.onnx")],
    )
    job = job_store.create_job(model.id, {"precisions": ["fp32"]}, total=2, kind="sweep")
    claimed = job_store.claim_job("w1", 30)
    assert claimed.id == job.id and claimed.state == JobState.RUNNING
    assert job_store.claim_job("w2", 30) is None
    payload = {"config_key": "k", "configuration": {}, "status": "ok", "latency": {"p50": 1.0}}
    lease = job_store.lease_of(claimed)
    assert result_store.save_result(job.id, payload, [1.0, 1.1], lease=lease) is not None
    assert result_store.save_result(job.id, payload, [0.9], lease=lease) is None
    (row,) = result_store.list_results(job_ids=[job.id])
    assert result_store.result_samples([row.id]) == {row.id: [1.0, 1.1]}
    assert job_store.finish_job(job.id, JobState.SUCCEEDED, worker_id="w1")
    model_store.delete_model(model.id)
    assert job_store.list_jobs() == []


def test_claim_skips_a_job_row_another_transaction_has_locked(postgres_url: str) -> None:
    """FOR UPDATE SKIP LOCKED: a claim takes the next job instead of waiting for the locked one."""
    model = model_store.create_model(
        name="pg", sha256="b" * 64, format="onnx", size_bytes=1, metadata={}, artifacts=[]
    )
    first = job_store.create_job(model.id, {}, total=1, kind="sweep")
    second = job_store.create_job(model.id, {}, total=1, kind="sweep")
    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        with get_engine().connect() as conn, conn.begin():
            conn.execute(text("SELECT id FROM jobs WHERE id = :id FOR UPDATE"), {"id": first.id})
            locked.set()
            release.wait(5)  # without SKIP LOCKED the claim would wait for this

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert locked.wait(10)
        claimed = job_store.claim_job("w1", 30)
    finally:
        release.set()
        holder.join()
    assert claimed is not None and claimed.id == second.id
    assert job_store.claim_job("w2", 30).id == first.id
