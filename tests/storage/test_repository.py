from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from storage.db import get_engine
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.repo import workers as worker_store
from storage.schema import Base
from storage.states import JobState, utcnow
from tests.storage.rows import model_row


def test_sqlite_runs_in_wal_mode_with_foreign_keys(data_dir: Path) -> None:
    engine = get_engine()
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000
    assert (data_dir / "optiboard.db").is_file()


def test_migrations_create_exactly_the_schema_the_models_declare(data_dir: Path) -> None:
    tables = set(inspect(get_engine()).get_table_names()) - {"alembic_version"}
    assert tables == set(Base.metadata.tables)
    for name, table in Base.metadata.tables.items():
        columns = {c["name"] for c in inspect(get_engine()).get_columns(name)}
        assert columns == {c.name for c in table.columns}, name


def test_two_claims_of_one_job_give_it_to_one_worker(data_dir: Path) -> None:
    job = job_store.create_job(model_row().id, {}, total=1, kind="sweep")
    first = job_store.claim_job("w1", 30)
    second = job_store.claim_job("w2", 30)
    assert first is not None and first.id == job.id and first.worker_id == "w1"
    assert first.state == JobState.RUNNING and first.attempts == 1
    assert second is None


def test_saving_a_result_twice_keeps_the_first_row_and_counts_progress(data_dir: Path) -> None:
    job = job_store.create_job(model_row().id, {}, total=2, kind="sweep")
    payload = {"config_key": "k1", "configuration": {}, "status": "ok", "latency": {"p50": 2.0}}
    assert result_store.save_result(job.id, payload, [1.0, 2.0, 3.0]) is not None
    assert result_store.save_result(job.id, {**payload, "latency": {"p50": 1.5}}, [1.5]) is None
    results = result_store.list_results(job_ids=[job.id])
    assert [r.payload["latency"]["p50"] for r in results] == [2.0]
    assert result_store.result_samples([results[0].id]) == {results[0].id: [1.0, 2.0, 3.0]}
    assert job_store.get_job(job.id).progress_done == 1


def test_deleting_a_model_whose_job_runs_is_refused_and_changes_nothing(data_dir: Path) -> None:
    model = model_row()
    job = job_store.create_job(model.id, {}, total=1, kind="sweep")
    job_store.claim_job("w1", 30)
    with pytest.raises(model_store.ModelInUse):
        model_store.delete_model(model.id)
    assert model_store.get_model(model.id) is not None
    assert job_store.get_job(job.id).state == JobState.RUNNING
    assert job_store.finish_job(job.id, JobState.SUCCEEDED, worker_id="w1")
    model_store.delete_model(model.id)
    assert model_store.get_model(model.id) is None


def test_linking_an_artifact_to_a_deleted_model_fails_once_without_recursion(
    data_dir: Path,
) -> None:
    model = model_row()
    model_store.delete_model(model.id)
    art = model_store.NewArtifact("optimized", "c" * 64, 1, "o.onnx")
    with pytest.raises(LookupError, match="no longer exists"):
        model_store.add_artifact(model.id, art)
    again = model_row("again")
    first = model_store.add_artifact(again.id, art)
    assert model_store.add_artifact(again.id, art) == first


def test_cancel_queued_is_immediate_and_running_is_a_request(data_dir: Path) -> None:
    model = model_row()
    queued = job_store.create_job(model.id, {}, total=1, kind="sweep")
    assert job_store.cancel_job(queued.id) == JobState.CANCELLED
    running = job_store.create_job(model.id, {}, total=1, kind="sweep")
    job_store.claim_job("w1", 30)
    assert job_store.cancel_job(running.id) == JobState.RUNNING
    assert job_store.is_cancel_requested(running.id)
    assert job_store.claim_job("w2", 30) is None


def test_finish_by_a_worker_that_lost_the_lease_is_refused(data_dir: Path) -> None:
    job = job_store.create_job(model_row().id, {}, total=1, kind="sweep")
    job_store.claim_job("w1", lease_seconds=-1)
    job_store.claim_job("w2", lease_seconds=30)
    assert not job_store.finish_job(job.id, JobState.SUCCEEDED, worker_id="w1")
    assert job_store.finish_job(job.id, JobState.SUCCEEDED, worker_id="w2")


def test_deleting_a_model_removes_jobs_results_and_unshared_blobs(data_dir: Path) -> None:
    from storage.artifacts import ArtifactStore

    store = ArtifactStore()
    blob = store.put_bytes(b"weights")
    model = model_store.create_model(
        name="m",
        sha256=blob.sha256,
        format="onnx",
        size_bytes=7,
        metadata={},
        artifacts=[model_store.NewArtifact("original", blob.sha256, 7, "m.onnx")],
    )
    job = job_store.create_job(model.id, {}, total=1, kind="sweep")
    result_store.save_result(job.id, {"config_key": "k", "configuration": {}, "status": "ok"}, [1])
    model_store.delete_model(model.id, store=store)
    assert model_store.list_models() == [] and job_store.list_jobs() == []
    assert result_store.list_results() == []
    assert not store.exists(blob.sha256)


def test_one_worker_is_read_by_its_id_and_an_unknown_id_is_none(data_dir: Path) -> None:
    worker_store.register_worker("w1", "host-a", 1, {"cpu": "x"}, {})
    worker_store.register_worker("w2", "host-b", 2, {"cpu": "y"}, {"cpu": True})
    found = worker_store.get_worker("w2")
    assert found is not None and (found.id, found.hostname, found.pid) == ("w2", "host-b", 2)
    assert found.hardware == {"cpu": "y"} and found.providers == {"cpu": True}
    assert found == next(w for w in worker_store.list_workers() if w.id == "w2")
    assert worker_store.get_worker("w3") is None


def test_workers_list_only_recent_heartbeats(data_dir: Path) -> None:
    worker_store.register_worker("w1", "host", 1, {"cpu": "x"}, {})
    assert [w.id for w in worker_store.list_workers(alive_within_seconds=30)] == ["w1"]
    from storage.db import session_scope
    from storage.schema import Worker

    with session_scope() as session:
        session.get(Worker, "w1").heartbeat_at = utcnow() - timedelta(minutes=5)
    assert worker_store.list_workers(alive_within_seconds=30) == []


def test_database_url_setting_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    monkeypatch.setenv("OPTIBOARD_DATABASE_URL", url)
    monkeypatch.setenv("OPTIBOARD_DATA_DIR", str(tmp_path / "data"))
    model_row("elsewhere")
    assert (tmp_path / "elsewhere.db").is_file()
    assert [m.name for m in model_store.list_models()] == ["elsewhere"]
