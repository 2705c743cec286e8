"""The mixed-precision search as a queued job: every step is a stored configuration of the job,
on a model with one layer that quantizes badly by construction (tests/evidence_models.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from backend.errors import UserError
from backend.jobs.context import JobContext
from backend.jobs.measuring import ordered_configurations
from backend.jobs.mixedsearch import search_plan
from backend.jobs.sweep import SweepRun, conclude, sweep_plan
from backend.models.ingest import ingest_file
from backend.queue import jobs, progress, uploads
from backend.queue.worker import JobRunner
from backend.specs import MEASURE_PRESETS, Precision, SweepSpec
from storage.artifacts import ArtifactStore
from storage.repo import jobs as job_store
from storage.states import JobState
from tests.evidence_models import BAD_LAYER, make_bad_layer_mlp, torch_names
from tests.models import save


def _search() -> SweepSpec:
    """FP32 and INT8 static, then the search for the FP32 nodes that keep the cosine >= 0.99."""
    return SweepSpec(
        precisions=(Precision.FP32, Precision.INT8_STATIC),
        search_bound="cosine=0.99",
        measure=MEASURE_PRESETS["quick"],
    )


def test_a_search_job_stores_each_step_keeps_the_bad_layer_and_meets_the_bound(
    data_dir: Path, tmp_path: Path
) -> None:
    model = ingest_file(save(make_bad_layer_mlp(), tmp_path / "bad.onnx"), "bad.onnx")
    path = tmp_path / "eval.npz"
    np.savez(path, x=np.random.default_rng(5).normal(size=(12, 32)).astype(np.float32))
    spec = _search()
    assert spec.profile  # the search reads each step's profile and layer-loss ranking
    spec = uploads.with_evaluation(spec, model.id, path.read_bytes(), "eval.npz")
    job = jobs.submit_sweep(model.id, spec)
    claimed = job_store.claim_job("inline", 300, job_id=job.id)
    assert JobRunner("inline").run(claimed).state == JobState.SUCCEEDED

    stored = jobs.stored_results(job.id)
    steps = [r for r in stored if r.configuration.fp32_nodes]
    assert steps, "the search stored no step"
    first = steps[0]
    assert [n.split("/")[0] for n in first.configuration.fp32_nodes] == [BAD_LAYER]
    assert "Mixed-precision search step" in first.result.notes[0]
    assert first.result.evaluation.cosine_similarity >= 0.99
    plain = next(r for r in stored if r.configuration.precision == Precision.INT8_STATIC).result
    assert plain.evaluation.cosine_similarity < 0.99  # why the search had to act
    events = [e.message for e in jobs.job_events(job.id)]
    # the bound is checked on the evaluation set (12 real samples), not the random inputs
    step0 = next(m for m in events if "step 0:" in m)
    assert f"cosine {plain.evaluation.cosine_similarity:.4f}" in step0
    verdict = next(m for m in events if m.startswith("search for ") and "FP32" in m)
    assert BAD_LAYER in verdict  # the best mix, named whether or not it beat FP32
    # FP32 and the steps timed again together, window by window, in one sandboxed child
    assert any(m.startswith("search: timed interleaved: ") for m in events), events
    finished = jobs.get_job(job.id)
    assert finished.progress_done == finished.progress_total == len(stored)
    _, rows = progress.configuration_progress(finished)
    assert [r.key for r in rows][-len(steps) :] == [s.config_key for s in steps]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"search_bound": "cosine"}, "Write the search bound as cosine=0.99"),
        ({"search_bound": "top1=0.9", "precisions": ("fp32",)}, "static INT8"),
    ],
)
def test_a_search_without_a_bound_or_int8_is_refused_in_one_sentence(
    values: dict, message: str
) -> None:
    with pytest.raises(UserError, match=message):
        SweepSpec(**values)


def test_the_search_bound_survives_the_optimize_link() -> None:
    spec = SweepSpec(precisions=("fp32", "int8_static"), search_bound="top1=0.98")
    assert jobs.spec_from_query(jobs.spec_to_query(spec)) == spec


LONG = "/encoder/" + "layer.0/attention/output/dense/" * 10  # a 300-character torch scope


def test_a_search_on_a_model_with_long_node_names_stores_its_steps(
    data_dir: Path, tmp_path: Path
) -> None:
    """Node names go into the configuration's key; the files the step leaves are named by a
    short hash of it, not by the key (OSError: [Errno 36] File name too long)."""
    named = torch_names(make_bad_layer_mlp(), LONG)
    model = ingest_file(save(named, tmp_path / "long.onnx"), "long.onnx")
    spec = _search()
    job = jobs.submit_sweep(model.id, spec)
    claimed = job_store.claim_job("inline", 300, job_id=job.id)
    assert JobRunner("inline").run(claimed).state == JobState.SUCCEEDED
    steps = [r for r in jobs.stored_results(job.id) if r.configuration.fp32_nodes]
    assert steps and all(r.result.ok for r in steps), [r.result.error for r in steps]
    assert len(steps[0].config_key) > 255  # the key itself is longer than any file name


def test_a_search_whose_every_step_fails_fails_the_job(data_dir: Path, tmp_path: Path) -> None:
    """The sweep's FP32 and INT8 run; the search's steps then cannot write their files (the
    output folder is a file: a real OSError in the child): the job fails, naming the error."""
    model = ingest_file(save(make_bad_layer_mlp(), tmp_path / "bad.onnx"), "bad.onnx")
    spec = _search()
    job = jobs.submit_sweep(model.id, spec)
    claimed = job_store.claim_job("inline", 300, job_id=job.id)
    context = JobContext(claimed, ArtifactStore())
    run = SweepRun(context)
    sweep_only = sweep_plan(replace(spec, search_bound=""), [], context)
    assert run.drive(sweep_only, run.setup(tmp_path / "out")) is None
    stored = jobs.stored_results(job.id)
    assert [r.measured for r in stored] == [True, True]  # INT8: measured, and wrong
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the steps' folder should be")
    search = search_plan(spec, ordered_configurations(spec), stored, context)
    error = run.drive(search, run.setup(blocked))
    assert error is not None and error.startswith("the mixed-precision search ran 1 step(s)")
    outcome = conclude(context, error)
    assert outcome.state == JobState.FAILED
    finished = jobs.get_job(job.id)
    assert finished.state == JobState.FAILED and "every one failed" in (finished.error or "")
