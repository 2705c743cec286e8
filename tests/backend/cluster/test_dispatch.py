"""A sweep on a real local Ray cluster, stored in a real PostgreSQL, through the worker's runner."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from backend.cluster import artifacts, auth, targets
from backend.launch import isolation
from backend.models.ingest import ingest_file
from backend.queue import jobs, progress
from backend.queue.worker import JobRunner
from backend.reporting import frames
from backend.reporting.side_by_side import targets_side_by_side
from backend.results import ResultStatus
from backend.specs import MeasureSettings, SweepSpec
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.states import JobState
from tests.backend.cluster.conftest import RayCluster
from tests.waiting import wait_for

QUICK = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.05, max_seconds=3, accuracy_samples=1
)
# never stable, so the timed loop runs to its cap: long enough to lose a node in the middle
SLOW = MeasureSettings(
    warmup_runs=2,
    window_runs=10,
    window_min_seconds=0.5,
    stable_windows=50,
    stability_tolerance=0.01,
    max_seconds=12,
    accuracy_samples=1,
)


def _run(job_id: int) -> JobState:
    """Claim the job as a worker does and run it (OPTIBOARD_RAY_ADDRESS: on the cluster)."""
    job = job_store.claim_job("test-head", lease_seconds=120, job_id=job_id)
    assert job is not None
    return JobRunner("test-head", lease_seconds=120).run(job).state


def _submit(mlp_path: Path, monkeypatch, spec: SweepSpec) -> tuple[int, str]:
    """Queue the sweep; the worker's driver child joins the fixture's cluster by its address."""
    import ray

    monkeypatch.setenv("OPTIBOARD_RAY_ADDRESS", ray.get_runtime_context().gcs_address)
    model = ingest_file(mlp_path, "mlp.onnx")
    return jobs.submit_sweep(model.id, spec).id, model_store.model_file(model.id).sha256


def test_each_configuration_runs_on_a_node_of_its_target_and_lands_in_postgres(
    ray_cluster: RayCluster, postgres_url: str, mlp_path: Path, monkeypatch
) -> None:
    spec = SweepSpec(
        precisions=("fp32", "int8_dynamic"),
        targets=("alpha", "beta", "gamma"),
        measure=QUICK,
        prices="alpha=1.0,beta=3.0",  # the targets compared by cost too
    )
    job_id, model_sha = _submit(mlp_path, monkeypatch, spec)

    assert _run(job_id) == JobState.SUCCEEDED
    assert postgres_url.startswith("postgresql")
    results = {r.configuration.key: r for r in jobs.stored_results(job_id)}
    assert len(results) == 6
    nodes = {"alpha": {ray_cluster.head.node_id}, "beta": {n.node_id for n in ray_cluster.betas}}
    for target in ("alpha", "beta"):
        ran = [r for r in results.values() if r.configuration.target == target]
        assert len(ran) == 2 and all(r.status == ResultStatus.OK for r in ran)
        for r in ran:
            where = r.result.environment["cluster"]
            assert where["target"] == target and where["node_id"] in nodes[target]
            assert r.latency.p50 > 0 and r.result.optimized_sha256  # variant came back
        # INT8 is explained against the FP32 result of its own target, whichever landed first
        (int8,) = [r for r in ran if r.configuration.precision.value == "int8_dynamic"]
        (fp32,) = [r for r in ran if r.configuration.precision.value == "fp32"]
        speedup = fp32.latency.p50 / int8.latency.p50
        assert int8.result.telemetry["speedup_vs_fp32"] == speedup
    gamma = [r for r in results.values() if r.configuration.target == "gamma"]
    assert {r.status for r in gamma} == {ResultStatus.UNAVAILABLE}
    assert "No node of target 'gamma'" in gamma[0].error
    with create_engine(postgres_url).connect() as conn:  # straight from the server's table
        stored = conn.execute(text("SELECT count(*) FROM results WHERE job_id = :j"), {"j": job_id})
        assert stored.scalar_one() == 6
    # what the pages show: targets to pick, the same configuration side by side, where it ran
    offered = {t.name: t for t in targets.available()}
    assert set(offered) == {"alpha", "beta"} and offered["beta"].nodes == 2
    assert "cpu" in offered["alpha"].providers["onnxruntime"]
    wide = targets_side_by_side(frames.results_frame(job_ids=[job_id]))
    assert sorted(wide["precision"]) == ["FP32", "INT8 dynamic"]
    for target in ("alpha", "beta"):
        p50 = {
            r.configuration.precision.label: r.latency.p50
            for r in results.values()
            if r.configuration.target == target
        }
        assert dict(zip(wide["precision"], wide[f"{target} · p50 ms"], strict=True)) == p50
    for precision, cheapest in zip(wide["precision"], wide["cheapest target"], strict=True):
        cost = {  # $ per million = price per hour / (samples/s x 3600) x 1e6, per target
            r.configuration.target: {"alpha": 1.0, "beta": 3.0}[r.configuration.target]
            / (r.result.throughput * 3600)
            * 1e6
            for r in results.values()
            if r.configuration.precision.label == precision and r.status == ResultStatus.OK
        }
        assert cheapest == min(cost, key=cost.get)
    _, rows = progress.configuration_progress(jobs.get_job(job_id))
    assert all(r.ran_on.startswith(("alpha · ", "beta · ")) for r in rows if r.status == "ok")
    # the model arrived by its hash, once, on the node that ran alpha's two configurations
    cached = [p for p in ray_cluster.cache_of(ray_cluster.head).rglob("*") if p.is_file()]
    assert [p.name for p in cached] == [model_sha]


def test_the_optimize_page_offers_the_announced_targets_and_submits_a_sweep_on_each(
    ray_cluster: RayCluster, postgres_url: str, mlp_path: Path, monkeypatch
) -> None:
    from storage.repo import cluster as cluster_store
    from tests.pages.seed import add_model, open_page, texts

    monkeypatch.setenv("OPTIBOARD_RAY_ADDRESS", "connected-by-the-fixture")
    announced = targets.survey()
    cluster_store.record_nodes(announced)  # what the worker does at each job
    guards = {a["hardware"]["isolation"]["summary"] for a in announced}  # what runs uploads
    assert len(announced) == 3 and guards == {isolation.this_host().summary()}
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    assert not at.exception
    picker = at.multiselect(key="url_targets")
    alpha, beta = picker.options  # each with its node count and what its machines are
    assert alpha.startswith("alpha · 1 node(s) · ") and beta.startswith("beta · 2 node(s) · ")
    picker.set_value(["alpha", "beta"])
    at.number_input(key="replicas").set_value(2)
    at.run()
    assert "Configurations in this sweep=4" in texts(at)  # FP32 and INT8 static on each
    at.button(key="submit_sweep").click().run()
    (job,) = jobs.list_jobs()
    spec = jobs.spec_of(job)
    assert spec.targets == ("alpha", "beta") and spec.replicas == 2


def test_a_model_that_arrives_changed_is_refused_and_not_cached(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    import ray

    data = b"an onnx model, in two chunks"
    right = artifacts.ShippedFile(
        sha256=hashlib.sha256(data).hexdigest(),
        size_bytes=len(data),
        chunks=(ray.put(data[:10]), ray.put(data[10:])),
    )
    assert artifacts.fetch(right, tmp_path).read_bytes() == data
    wrong = artifacts.ShippedFile("0" * 64, len(data), (ray.put(data[:10] + b"X"),))
    with pytest.raises(artifacts.HashMismatch, match="expected 0000"):
        artifacts.fetch(wrong, tmp_path)
    cached = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert cached == [right.sha256]  # nothing half-written, nothing under the wrong name


def test_replicas_run_together_on_one_node_and_report_aggregate_and_per_device_throughput(
    ray_cluster: RayCluster, postgres_url: str, mlp_path: Path, monkeypatch
) -> None:
    spec = SweepSpec(targets=("alpha",), replicas=2, measure=QUICK)
    job_id, _ = _submit(mlp_path, monkeypatch, spec)

    assert _run(job_id) == JobState.SUCCEEDED, jobs.get_job(job_id).error
    (stored,) = jobs.stored_results(job_id)
    assert stored.ok and stored.configuration.replicas == 2
    replicas = stored.result.telemetry["replicas"]
    per_device = replicas["per_device_throughput"]
    assert replicas["count"] == 2 and len(per_device) == 2 and min(per_device) > 0
    assert stored.result.throughput == replicas["aggregate_throughput"] == sum(per_device)
    assert 0 < replicas["window_overlap"] <= 1  # both measured in the same wall window
    samples = result_store.result_samples([stored.id])[stored.id]
    assert stored.latency.count == len(samples)  # both replicas' samples pooled
    assert stored.result.environment["cluster"]["node_id"] == ray_cluster.head.node_id


def test_cancel_reaches_the_running_task_and_frees_its_node(
    ray_cluster: RayCluster, postgres_url: str, mlp_path: Path, monkeypatch
) -> None:
    import ray

    spec = SweepSpec(targets=("alpha",), measure=SLOW)
    job_id, _ = _submit(mlp_path, monkeypatch, spec)
    outcome: list[JobState] = []
    runner = threading.Thread(target=lambda: outcome.append(_run(job_id)))
    runner.start()
    wait_for(lambda: _free_slots() < len(ray_cluster.caches), "the measurement to start")
    time.sleep(2)  # into the measurement
    jobs.cancel_job(job_id)
    runner.join(timeout=120)

    assert outcome == [JobState.CANCELLED]
    assert result_store.list_results(job_ids=[job_id]) == []
    # the task gave its slot back: it is not running on the node any more
    wait_for(lambda: _free_slots() == len(ray_cluster.caches), "the slot to come back")
    assert ray.available_resources().get("measure_slot") == len(ray_cluster.caches)


def _free_slots() -> float:
    import ray

    return ray.available_resources().get("measure_slot", 0.0)


def test_a_node_lost_mid_task_ends_with_the_configuration_done_once_on_another_node(
    ray_cluster: RayCluster, postgres_url: str, mlp_path: Path, monkeypatch
) -> None:
    for node in ray_cluster.betas:  # a model cached by an earlier test would point at any node
        shutil.rmtree(ray_cluster.cache_of(node), ignore_errors=True)
    spec = SweepSpec(targets=("beta",), measure=SLOW)
    job_id, _ = _submit(mlp_path, monkeypatch, spec)
    outcome: list[JobState] = []
    runner = threading.Thread(target=lambda: outcome.append(_run(job_id)))
    runner.start()
    # the node that fetched the model into its own cache is the one measuring
    deadline = time.monotonic() + 90
    busy = None
    while busy is None and time.monotonic() < deadline:
        busy = next(
            (
                n
                for n in ray_cluster.betas
                if any(p.is_file() for p in ray_cluster.cache_of(n).rglob("*"))
            ),
            None,
        )
        time.sleep(0.2)
    assert busy is not None, "no beta node fetched the model"
    time.sleep(3)  # into the measurement
    ray_cluster.cluster.remove_node(busy)
    ray_cluster.betas.remove(busy)
    runner.join(timeout=240)

    assert outcome == [JobState.SUCCEEDED], (
        jobs.get_job(job_id).error,
        [e.message for e in jobs.job_events(job_id)],
    )
    rows = result_store.list_results(job_ids=[job_id])
    assert len(rows) == 1 and rows[0].status == "ok"
    where = rows[0].payload["environment"]["cluster"]
    assert where["node_id"] == ray_cluster.betas[0].node_id != busy.node_id
    log = [e.message for e in jobs.job_events(job_id)]
    assert any("left the cluster" in line for line in log)


def test_a_worker_holding_another_token_fails_its_job_at_once_in_one_sentence(
    ray_cluster: RayCluster, postgres_url: str, mlp_path: Path, monkeypatch
) -> None:
    """The cluster runs with Ray's token authentication on; a worker whose driver holds another
    token fails the job with where to find the right one, not 'did not answer' and a wait for a
    head that did answer. (This process keeps its own token: Ray read it once.)"""
    job_id, _ = _submit(mlp_path, monkeypatch, SweepSpec(targets=("beta",), measure=QUICK))
    monkeypatch.setenv(auth.TOKEN, "0" * 32)  # what the worker's driver child starts with

    assert _run(job_id) == JobState.FAILED
    address = os.environ["OPTIBOARD_RAY_ADDRESS"]
    failed = jobs.get_job(job_id)
    assert failed.error == (
        f"The Ray cluster at {address} refused this machine's token; {auth.HOW_TO_GET_IT}."
    )
    assert [e for e in jobs.job_events(job_id) if e.level == "warning"] == []  # no waiting
    assert jobs.stored_results(job_id) == []
