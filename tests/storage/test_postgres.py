"""The same storage code on a real PostgreSQL server (tests/postgres.py starts it)."""

from __future__ import annotations

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
    job = job_store.create_job(model.id, {"precisions": ["fp32"]}, total=2)
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
